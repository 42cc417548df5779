# consentd -- build, run and test.  `make run` and `make check` are the two
# commands a person needs; both install what is missing first (scripts/deps.sh).
#
# Warnings: -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wconversion, except
# -Wno-sign-conversion (C's -Wconversion implies it; size_t/int mixing with
# library APIs would drown real findings) -- a documented subset.

CC       ?= cc
CLANG    ?= clang
PKGS      = libmicrohttpd openssl cjose libcurl sqlite3 libpq jansson inih
# The targets a person types (all, run, check, bench) first install what is
# missing and then build in a second make, so that these flags are read only
# after scripts/deps.sh has put pkg-config and the libraries there.  Any other
# target built by hand on a machine without them stops here with that advice.
ENTRY_GOALS := all run check bench bench-seeded deps deps-run clean lint
# The binary needs PKGS alone (debian/control's Build-Depends); Check is for the unit
# tests, whose targets say so when it is missing (CHECK_OK below).
PKG_CONFIG_OK := $(shell pkg-config --exists $(PKGS) 2>/dev/null && echo yes)
CHECK_OK := $(shell pkg-config --exists check 2>/dev/null && echo yes)
ifneq ($(PKG_CONFIG_OK),yes)
ifneq ($(filter-out $(ENTRY_GOALS),$(if $(MAKECMDGOALS),$(MAKECMDGOALS),all)),)
$(error pkg-config or a library is missing: run `make deps` (or `make run` / `make check`, which install them) first)
endif
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

WARN     = -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wconversion -Wno-sign-conversion \
           -Wstrict-prototypes -Wmissing-prototypes -Wvla
BASE     = -std=c17 -D_GNU_SOURCE -Iinclude -Ibuild $(PKG_CFLAGS) -pthread -g
HARDEN   = -O2 -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
SAN      = -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -fstack-protector-strong
CFLAGS  ?=
LDFLAGS_HARDEN = -pie -Wl,-z,relro,-z,now

SRCS      := $(sort $(wildcard server/*.c))
LIB_SRCS  := $(filter-out server/main.c,$(SRCS))
GEN_SRCS  := build/gen/migrations.c build/gen/migrations_pg.c build/gen/templates.c
# server/*.h too: the private headers of a family (store_priv.h, store_backend.h, ...)
# change what their files compile to.
HDRS      := $(wildcard include/*.h server/*.h)
MIGRATIONS:= $(sort $(wildcard migrations/*.sql))
MIGRATIONS_PG:= $(sort $(wildcard migrations/pg/*.sql))
TEMPLATES := $(sort $(wildcard templates/*.html templates/*.css templates/*.js templates/*.svg))
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_NAMES:= $(patsubst tests/unit/%.c,%,$(UNIT_SRCS))
UNIT_HDRS := $(wildcard tests/unit/*.h)
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_NAMES:= $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRCS))

OBJ       := $(patsubst %.c,build/rel/%.o,$(LIB_SRCS) $(GEN_SRCS))
ASAN_OBJ  := $(patsubst %.c,build/asan/%.o,$(LIB_SRCS) $(GEN_SRCS))

.PHONY: deb-clean all deps deps-run run check test unit unit-asan unit-store-pg integration e2e fuzz fuzz-quick fuzz-long hostile-long crash-long systemd-test lint bench bench-ab bench-mallocs bench-seeded bench-nodes retention-steady pg-coverage clean install
.DEFAULT_GOAL := all

all: deps-run
	@$(MAKE) --no-print-directory build/consentd

# deps: what make check and make bench need; deps-run: what building and make run need
# (scripts/deps.sh says which packages, and keeps system services down while installing).
deps:
	@bash scripts/deps.sh check
deps-run:
	@bash scripts/deps.sh run

build/gen/migrations.c: $(MIGRATIONS) scripts/embed.sh
	@mkdir -p $(@D)
	bash scripts/embed.sh embedded_migrations $(MIGRATIONS) > $@.tmp && mv $@.tmp $@
build/gen/migrations_pg.c: $(MIGRATIONS_PG) scripts/embed.sh
	@mkdir -p $(@D)
	bash scripts/embed.sh embedded_migrations_pg $(MIGRATIONS_PG) > $@.tmp && mv $@.tmp $@
build/gen/templates.c: $(TEMPLATES) scripts/embed.sh
	@mkdir -p $(@D)
	bash scripts/embed.sh embedded_templates $(TEMPLATES) > $@.tmp && mv $@.tmp $@

build/rel/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(WARN) $(HARDEN) $(CFLAGS) -c $< -o $@
build/asan/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(WARN) $(SAN) $(CFLAGS) -c $< -o $@

# The archives are rebuilt whole, and also when a source file is added, renamed or
# removed (build/sources.list changes then), so that no stale member outlives its file.
# (Written as the Makefile is read, and only when the list differs, so that its time
# says when the list last changed.)
$(shell mkdir -p build && { echo '$(LIB_SRCS)' | cmp -s - build/sources.list || echo '$(LIB_SRCS)' > build/sources.list; })
build/rel/libconsentd.a: $(OBJ) build/sources.list
	rm -f $@ && ar rcs $@ $(OBJ)
build/asan/libconsentd.a: $(ASAN_OBJ) build/sources.list
	rm -f $@ && ar rcs $@ $(ASAN_OBJ)

build/consentd: build/rel/server/main.o build/rel/libconsentd.a
	$(CC) $(BASE) $(HARDEN) $(LDFLAGS_HARDEN) $^ $(PKG_LIBS) -o $@
build/consentd-asan: build/asan/server/main.o build/asan/libconsentd.a
	$(CC) $(BASE) $(SAN) $^ $(PKG_LIBS) -o $@

# Unit tests: one Check program per module, built twice (release flags, and ASan+UBSan).
build/rel/tests/%: tests/unit/%.c $(UNIT_HDRS) build/rel/libconsentd.a
	@mkdir -p $(@D)
	@test "$(CHECK_OK)" = yes || { echo "the unit tests need Check (pkg-config check): make deps installs it"; exit 1; }
	$(CC) $(BASE) $(WARN) $(HARDEN) -Itests/unit $< build/rel/libconsentd.a $(PKG_LIBS) $(CHECK_LIBS) -o $@
build/asan/tests/%: tests/unit/%.c $(UNIT_HDRS) build/asan/libconsentd.a
	@mkdir -p $(@D)
	@test "$(CHECK_OK)" = yes || { echo "the unit tests need Check (pkg-config check): make deps installs it"; exit 1; }
	$(CC) $(BASE) $(WARN) $(SAN) -Itests/unit $< build/asan/libconsentd.a $(PKG_LIBS) $(CHECK_LIBS) -o $@

UNIT_BINS      := $(addprefix build/rel/tests/,$(UNIT_NAMES))
UNIT_ASAN_BINS := $(addprefix build/asan/tests/,$(UNIT_NAMES))

# libFuzzer targets: clang, ASan+UBSan; the library is compiled once for all of them.
FUZZ_CFLAGS := -std=c17 -D_GNU_SOURCE -Iinclude -Ibuild $(PKG_CFLAGS) -g -O1 \
	-fsanitize=address,undefined -fno-sanitize-recover=undefined -pthread
FUZZ_OBJ := $(patsubst %.c,build/fuzzobj/%.o,$(LIB_SRCS) $(GEN_SRCS))
build/fuzzobj/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
build/fuzzobj/libconsentd.a: $(FUZZ_OBJ) build/sources.list
	rm -f $@ && ar rcs $@ $(FUZZ_OBJ)
build/fuzz/%: tests/fuzz/%.c build/fuzzobj/libconsentd.a
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< build/fuzzobj/libconsentd.a $(PKG_LIBS) -o $@
FUZZ_BINS := $(addprefix build/fuzz/,$(FUZZ_NAMES))

build-tests: $(UNIT_BINS) $(UNIT_ASAN_BINS) build/consentd build/consentd-asan
.PHONY: build-tests

lint:
	@bash scripts/lint.sh

unit: $(UNIT_BINS)
	@bash scripts/run-unit.sh build/rel/tests $(UNIT_NAMES)
unit-asan: $(UNIT_ASAN_BINS)
	@bash scripts/run-unit.sh build/asan/tests $(UNIT_NAMES)
# The store's unit tests on PostgreSQL (ASan+UBSan): a throw-away server, as the
# integration tests start one, for the store's suites, test_store*, alone
# (scripts/run-store-pg.sh).
unit-store-pg: build/asan/tests/test_store build/asan/tests/test_store_authz build/asan/tests/test_store_mcp build/asan/tests/test_store_standing build/asan/tests/test_store_approval build/asan/tests/test_store_audit_feed
	@bash scripts/run-store-pg.sh build/asan/tests

fuzz: $(FUZZ_BINS)
	@bash scripts/run-fuzz.sh 60 $(FUZZ_NAMES)
fuzz-quick: $(FUZZ_BINS)
	@bash scripts/run-fuzz.sh 10 $(FUZZ_NAMES)
# The long runs issue 16 asks for, outside `make check`: every fuzz target for 10
# minutes, 10,000 idle connections beside a well-behaved client, 100 SIGKILLs under load.
fuzz-long: $(FUZZ_BINS)
	@bash scripts/run-fuzz.sh 600 $(FUZZ_NAMES)
hostile-long: build/consentd-asan
	cd tests && HOSTILE_IDLE=10000 TEST_CONSENTD_BIN=$(CURDIR)/build/consentd-asan node --test --test-concurrency=1 integration/hostile.test.js
# make deb-clean: the Debian package built from debian/control's Build-Depends alone, in a
# new minimal Debian 12 root, as a clean builder does (scripts/test-deb-clean.sh; root, network).
deb-clean:
	@bash scripts/test-deb-clean.sh
systemd-test: build/consentd
	@bash scripts/test-systemd.sh
crash-long: build/consentd-asan
	cd tests && CRASH_KILLS=100 TEST_CONSENTD_BIN=$(CURDIR)/build/consentd-asan node --test --test-concurrency=1 integration/crash.test.js

# make pg-coverage: the functions of the store (server/store*.c) that no flow of make
# check's PostgreSQL pass runs -- consentd built with gcov (-O0 --coverage, build/cov),
# the files of scripts/pg-pass.list on two nodes, then gcov's list (scripts/pg-coverage.sh).
COV_OBJ := $(patsubst %.c,build/cov/%.o,$(LIB_SRCS) $(GEN_SRCS) server/main.c)
build/cov/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(WARN) -O0 --coverage $(CFLAGS) -c $< -o $@
build/consentd-cov: $(COV_OBJ)
	$(CC) $(BASE) --coverage $^ $(PKG_LIBS) -o $@
pg-coverage: build/consentd-cov
	@bash scripts/pg-coverage.sh

run: deps-run
	@$(MAKE) --no-print-directory build/consentd
	@bash scripts/run-dev.sh

check: deps
	@bash scripts/check.sh

build/bench_jwt: bench/bench_jwt.c build/rel/libconsentd.a
	$(CC) $(BASE) $(WARN) $(HARDEN) $< build/rel/libconsentd.a $(PKG_LIBS) -o $@

build/bench_seed: bench/bench_seed.c build/rel/libconsentd.a
	$(CC) $(BASE) $(WARN) $(HARDEN) $< build/rel/libconsentd.a $(PKG_LIBS) -o $@

# Issue #32: an approval check against 1,000 standing rules of one person, against none.
build/bench_standing: bench/bench_standing.c build/rel/libconsentd.a
	$(CC) $(BASE) $(WARN) $(HARDEN) $< build/rel/libconsentd.a $(PKG_LIBS) -o $@

build/bench_fsync: bench/bench_fsync.c
	@mkdir -p $(@D)
	$(CC) $(BASE) $(WARN) $(HARDEN) $< -o $@

# make retention-steady [RETENTION_SECONDS=180 SAMPLE=10 WORKERS=4]: the database's size
# and row counts under a constant flow with short [retention] values (docs/BENCHMARKS.md).
retention-steady: build/consentd
	cd tests && node ../bench/retention-steady.mjs

# make bench [RUNS=3 DURATION=10 CONNECTIONS=32 FSYNC_N=1000]: consentd beside oidc-provider
# in one run, the proxy and the MCP gateway beside their upstreams, medians of RUNS, a
# Markdown report (bench/all.js, docs/BENCHMARKS.md).  bench_standing exits 1 over its
# target (issue 32): the report is still made, and make bench then fails, naming it.
bench: deps
	@$(MAKE) --no-print-directory build/consentd build/bench_jwt build/bench_fsync build/bench_standing
	./build/bench_jwt
	@./build/bench_standing; st=$$?; bash bench/run.sh || exit $$?; \
	  if [ $$st -ne 0 ]; then echo "bench: bench_standing over its target (its line above the report)" >&2; exit $$st; fi

# make bench-mallocs [N=2000]: heap allocation calls per grant issuance by who made them
# (bench/mallocs.mjs: heaptrack attached to the release binary after a warm-up; issue 15).
bench-mallocs: deps
	@$(MAKE) --no-print-directory build/consentd
	cd tests && node ../bench/mallocs.mjs $(or $(N),2000)

# make bench-ab A=BINARY B=BINARY [R=5 D=5] [MCP=1] [THREADS=a,b] [ROUTES=jwks,introspect,token] [IDP=1] [CONNECTIONS=32]: two builds of consentd at once, wrk
# alternating between them round by round (bench/ab.mjs): a before/after that shares the same
# minutes; MCP=1: the MCP gateway's tools/call at 32 connections and at 1 instead;
# CONNECTIONS: wrk's connections (a server bound by its answers' latency, not its CPU, shows there).
bench-ab: deps
	@test -x "$(A)" && test -x "$(B)" || { echo "make bench-ab A=path/to/consentd B=path/to/consentd"; exit 2; }
	cd tests && node ../bench/ab.mjs "$(abspath $(A))" "$(abspath $(B))"

# make bench-nodes [RUNS=3 DURATION=10 CONNECTIONS=32]: the same wrk runs on one node on
# SQLite, one on PostgreSQL and two on one PostgreSQL (bench/nodes.js; docs/BENCHMARKS.md).
bench-nodes: deps
	@$(MAKE) --no-print-directory build/consentd
	node bench/nodes.js

# make bench-seeded [RUNS=3 DURATION=10 CONNECTIONS=32 SEED_CONSENTS=1000000 SEED_AUDIT=10000000]:
# the grant path with 1,000 consents beside 1,000,000 consents and 10,000,000 audit entries
# (bench/seeded.js, bench/bench_seed.c; several GB in $$TMPDIR while it runs).
bench-seeded: deps
	@$(MAKE) --no-print-directory build/consentd build/bench_seed
	cd tests && node ../bench/seeded.js

clean:
	rm -rf build

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary (migrations and
# templates are compiled into it), the man pages, the example config and the
# systemd unit (docs/deploy.md).  It installs build/consentd as `make` built it
# and never rebuilds it with other flags.  /etc/consentd/consentd.conf is
# written from the example only when there is none; the unit's ExecStart names
# $(SBINDIR)/consentd.  Directories that exist keep their owner and mode.
# SYSCONFDIR stays /etc whatever PREFIX is: the unit and
# the defaults ([keys] master_key_file) name /etc/consentd.
PREFIX         ?= /usr/local
SBINDIR        ?= $(PREFIX)/sbin
MANDIR         ?= $(PREFIX)/share/man
DOCDIR         ?= $(PREFIX)/share/doc/consentd
SYSCONFDIR     ?= /etc
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
INSTALL        ?= install

install: build/consentd
	for d in $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(DOCDIR) \
		$(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSCONFDIR)/consentd; do \
		test -d $$d || $(INSTALL) -d -m 0755 $$d || exit 1; done
	$(INSTALL) -m 0755 build/consentd $(DESTDIR)$(SBINDIR)/consentd
	$(INSTALL) -m 0644 man/consentd.8 $(DESTDIR)$(MANDIR)/man8/consentd.8
	$(INSTALL) -m 0644 man/consentd.conf.5 $(DESTDIR)$(MANDIR)/man5/consentd.conf.5
	$(INSTALL) -m 0644 config/consentd.conf.example $(DESTDIR)$(DOCDIR)/consentd.conf.example
	sed 's|/usr/local/sbin/consentd|$(SBINDIR)/consentd|' contrib/systemd/consentd.service \
		> $(DESTDIR)$(SYSTEMDUNITDIR)/consentd.service.tmp
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/consentd.service.tmp
	mv $(DESTDIR)$(SYSTEMDUNITDIR)/consentd.service.tmp $(DESTDIR)$(SYSTEMDUNITDIR)/consentd.service
	test -e $(DESTDIR)$(SYSCONFDIR)/consentd/consentd.conf || \
		$(INSTALL) -m 0640 config/consentd.conf.example $(DESTDIR)$(SYSCONFDIR)/consentd/consentd.conf
