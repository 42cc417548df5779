/* testutil.h -- small helpers shared by the Check unit tests: temporary
 * directories that clean up after themselves and fixed test keys. */
#ifndef CS_TESTUTIL_H
#define CS_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ftw.h>

/* A passed assertion costs no system call.  Check's own ck_assert_msg (which
 * every ck_assert_* expands to) calls _mark_point on success, and that writes
 * the file and line to the runner's message file: one write(2) per passed
 * assertion, 4.5 million for test_log's every-code-point loop alone, most of
 * the unit suites' system time.  The mark point serves only fork mode's report
 * of where a crashed test last passed (the suites run with CK_FORK=no,
 * scripts/run-unit.sh); a failed assertion is reported exactly as before. */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...) \
	((expr) ? (void)0 : \
	    _ck_assert_failed(__FILE__, __LINE__, "Assertion '"#expr"' failed" , ## __VA_ARGS__))

/* A fresh temporary directory; the caller removes it with tu_rmdir(). */
static inline char *tu_tmpdir(void)
{
	char tmpl[] = "/tmp/consentd-test-XXXXXX";
	char *d = mkdtemp(tmpl);
	ck_assert_ptr_nonnull(d);
	return strdup(d);
}

static inline int tu_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

static inline void tu_rmdir(char *d)
{
	if (d != NULL) {
		nftw(d, tu_rm_cb, 8, FTW_DEPTH | FTW_PHYS);
		free(d);
	}
}

/* Joins dir and name into a malloc'd path. */
static inline char *tu_path(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

/* Runs one suite, returns the process exit status. */
static inline int tu_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
