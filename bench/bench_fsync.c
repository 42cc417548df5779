/* bench_fsync.c -- the disk's durable-write latency, for `make bench`: appends
 * 4 KiB to a temporary file in DIR and calls fdatasync, N times (a WAL commit's
 * shape), and prints one JSON line: {"n":N,"medianUs":M,"p99Us":P,"maxUs":X}.
 * The file is removed at the end.
 *
 * Usage: build/bench_fsync DIR [N=1000] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	char path[4096], buf[4096];
	long n = 1000;
	double *lat;
	int fd, rc = 1;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s DIR [N]\n", argv[0]);
		return 2;
	}
	if (argc == 3 && ((n = strtol(argv[2], NULL, 10)) < 1 || n > 1000000)) {
		fprintf(stderr, "N: 1..1000000\n");
		return 2;
	}
	if (snprintf(path, sizeof path, "%s/bench-fsync-XXXXXX", argv[1]) >= (int)sizeof path) {
		fprintf(stderr, "DIR too long\n");
		return 2;
	}
	if ((fd = mkstemp(path)) < 0) {
		fprintf(stderr, "mkstemp %s: %s\n", path, strerror(errno));
		return 1;
	}
	if ((lat = calloc((size_t)n, sizeof *lat)) == NULL)
		goto out;
	memset(buf, 'w', sizeof buf);
	for (long i = -10; i < n; i++) {        /* 10 unmeasured first */
		double t0 = now_us();
		if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf || fdatasync(fd) != 0) {
			fprintf(stderr, "write/fdatasync: %s\n", strerror(errno));
			goto out;
		}
		if (i >= 0)
			lat[i] = now_us() - t0;
	}
	qsort(lat, (size_t)n, sizeof *lat, cmp_double);
	printf("{\"n\":%ld,\"medianUs\":%.1f,\"p99Us\":%.1f,\"maxUs\":%.1f}\n", n,
	    n % 2 ? lat[n / 2] : (lat[n / 2 - 1] + lat[n / 2]) / 2, lat[(n * 99 - 1) / 100], lat[n - 1]);
	rc = 0;
out:
	free(lat);
	close(fd);
	unlink(path);
	return rc;
}
