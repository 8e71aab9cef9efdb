# libengram: make [all] | check | python-check | demo | bench | fuzz | fuzz-merge | install | uninstall | clean
# Variables: CC, CPPFLAGS, CFLAGS, LDFLAGS, PREFIX (/usr/local), DESTDIR, LIBDIR, B (build directory),
# WERROR=1, SANITIZE=address,undefined, PYTHON (/usr/bin/python3), PYTHONDIR (its site directory for PREFIX),
# LDCONFIG (ldconfig: run by install and uninstall as root without DESTDIR, as libraries' installs do)

VERSION := $(shell sed -n 's/^\#define ENGRAM_VERSION_STRING "\(.*\)"/\1/p' include/engram.h)
SOVERSION := $(firstword $(subst ., ,$(VERSION)))

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
LDCONFIG ?= ldconfig

CC ?= cc
CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wvla
ifeq ($(WERROR),1)
WARN += -Werror
endif
ifneq ($(SANITIZE),)
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -Iinclude $(EXTRA_INC) $(WARN) $(SANFLAGS) \
	$(CPPFLAGS) $(CFLAGS)
ALL_LDFLAGS := $(SANFLAGS) $(LDFLAGS)
# libengram (serving) and libengram-pack (the packer; its own library so that serving loads none of it)
LIBS := -luring -ljansson -lzstd -lxxhash -lhiredis -lpthread -lm
PACK_LIBS := -ljansson -lzstd -lxxhash -lutf8proc -lpthread -lm

B := build
# libengram's build units (lib/README.md): common/ below all, hash/ and remote/ on it, the store and row cache,
# reader/ on those, the session, stats and cachesim on top; the packer (pack/) on common/ alone
LIB_UNITS := common hash remote reader
LIB_SRC := $(wildcard lib/*.c $(LIB_UNITS:%=lib/%/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
STATIC := $(B)/libengram.a
SHARED := $(B)/libengram.so.$(VERSION)
SONAME := libengram.so.$(SOVERSION)
PLIB_SRC := $(wildcard lib/pack/*.c)
PLIB_OBJ := $(PLIB_SRC:%.c=$(B)/%.o)
PSTATIC := $(B)/libengram-pack.a
PSHARED := $(B)/libengram-pack.so.$(VERSION)
PSONAME := libengram-pack.so.$(SOVERSION)
TOOLS := $(B)/engram-stat $(B)/engram-pack
STAT_SRC := tools/engram-stat.c $(wildcard tools/stat_*.c) $(wildcard tools/replay_*.c) tools/toolutil.c \
	tools/residency.c tools/keymap.c tools/stats_view.c tools/top_view.c tools/top_screen.c tools/metrics_prom.c \
	tools/metrics_http.c tools/textfile.c
PACK_SRC := tools/engram-pack.c tools/pack_progress.c tools/toolutil.c
TEST_SRC := $(wildcard tests/test_*.c)
TEST_UTIL := $(B)/tests/util.o $(B)/tests/faulty_io.o
# helpers of the tools that tests and benches use too: an archive, so that each program takes what it calls
TOOL_HELP := $(B)/tools/toolhelp.a
TESTS := $(TEST_SRC:tests/%.c=$(B)/tests/%)

FUZZ_TARGETS := shard shard_struct safetensors npy config tokenizer gguf rowcache statseg remote
FUZZ_REPLAY := $(FUZZ_TARGETS:%=$(B)/tests/fuzz_replay_%)
# a replay that make check does not run: test_fuzz_replay checks its time limit with a target that hangs
FUZZ_REPLAY_SLEEP := $(B)/tests/fuzz_replay_sleep
BENCH_SRC := $(wildcard bench/*.c)
BENCHES := $(BENCH_SRC:bench/%.c=$(B)/bench/%)
MAN := $(wildcard man/*.[135])
# the Python binding (python/): tested by make check against this build's library, installed for $(PYTHON)
PYTHON ?= /usr/bin/python3
PYTHONDIR ?= $(shell scripts/python-sitedir $(PYTHON) $(PREFIX))
PY_SRC := $(wildcard python/engram/*.py)

.SECONDARY:
.PHONY: all lib tools tests benches check python-check demo bench fuzz fuzz-merge install uninstall clean
all: lib tools

lib: $(STATIC) $(B)/libengram.so $(PSTATIC) $(B)/libengram-pack.so
tools: $(TOOLS)
tests: $(TESTS) $(FUZZ_REPLAY) $(FUZZ_REPLAY_SLEEP) $(B)/tests/stats_gatherer
benches: $(BENCHES) $(B)/bench/libbench_step.so

# A unit compiles with the include paths of what it may use and nothing else, so that the compiler keeps the
# fences: common/ sees itself; hash/ and remote/ see common/; the reader sees common/, remote/ and the store and
# row cache at lib/'s top; the files at the top see every serving unit; the packer sees common/ and itself.
# lib/'s headers are for the libraries and the tests and benchmarks that reach into them: the tools see only
# include/ (the public API); tests and benchmarks also use helpers of the tools (tools/residency.h, toolutil.h)
LIB_INC := -Ilib/common -Ilib/hash -Ilib/remote -Ilib
$(B)/lib/%.o: EXTRA_INC = $(LIB_INC)
$(B)/lib/common/%.o: EXTRA_INC = -Ilib/common
$(B)/lib/hash/%.o: EXTRA_INC = -Ilib/common
$(B)/lib/remote/%.o: EXTRA_INC = -Ilib/common
$(B)/lib/reader/%.o: EXTRA_INC = -Ilib/common -Ilib/remote -Ilib
$(B)/lib/pack/%.o: EXTRA_INC = -Ilib/common
$(B)/tests/%.o $(B)/bench/%.o: EXTRA_INC = $(LIB_INC) -Ilib/reader -Ilib/pack -Itools

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# the private node carries the version (lib/libengram.map says why): a version bump renames it
$(SHARED): $(LIB_OBJ) lib/libengram.map
	@grep -q '^ENGRAM_PRIVATE_$(VERSION) {' lib/libengram.map || { echo "lib/libengram.map: its private node" \
		"must be ENGRAM_PRIVATE_$(VERSION), the version of include/engram.h" >&2; exit 1; }
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script,lib/libengram.map -Wl,--no-undefined \
		$(ALL_LDFLAGS) -o $@ $(LIB_OBJ) $(LIBS)

$(B)/libengram.so: $(SHARED)
	ln -sf libengram.so.$(VERSION) $(B)/$(SONAME)
	ln -sf $(SONAME) $@

$(PSTATIC): $(PLIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(PSHARED): $(PLIB_OBJ) lib/pack/libengram-pack.map $(B)/libengram.so
	$(CC) -shared -Wl,-soname,$(PSONAME) -Wl,--version-script,lib/pack/libengram-pack.map -Wl,--no-undefined \
		$(ALL_LDFLAGS) -o $@ $(PLIB_OBJ) -L$(B) -lengram $(PACK_LIBS)

$(B)/libengram-pack.so: $(PSHARED)
	ln -sf libengram-pack.so.$(VERSION) $(B)/$(PSONAME)
	ln -sf $(PSONAME) $@

# Generated at install time so that it carries the PREFIX and LIBDIR of that install.
PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		-e 's|@VERSION@|$(VERSION)|'
PC_REQUIRES := liburing libzstd libxxhash jansson hiredis
PC_PACK_REQUIRES := libzstd libxxhash jansson libutf8proc

# engram-stat metrics --listen serves HTTP with an epoll server of its own (tools/metrics_http.c)
$(B)/engram-stat: $(STAT_SRC:%.c=$(B)/%.o) $(PSTATIC) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) $(PACK_LIBS)

$(B)/engram-pack: $(PACK_SRC:%.c=$(B)/%.o) $(PSTATIC) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) $(PACK_LIBS)

$(TOOL_HELP): $(B)/tools/toolutil.o $(B)/tools/residency.o $(B)/tools/replay_floor.o $(B)/tools/replay_stats.o $(B)/tools/keymap.o \
		$(B)/tools/stats_view.o $(B)/tools/top_view.o $(B)/tools/top_screen.o
	@rm -f $@
	$(AR) rcs $@ $^

$(TESTS): $(B)/tests/%: $(B)/tests/%.o $(TEST_UTIL) $(TOOL_HELP) $(PSTATIC) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) $(PACK_LIBS) -lcmocka

# a process gathering rows, for scripts/stats-tests (engram-stat top and metrics against a live engine)
$(B)/tests/stats_gatherer: $(B)/tests/stats_gatherer.o $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# Fuzz targets: replayed over their corpus (fixtures/fuzz/NAME) by make check; fuzzed by make fuzz.
$(B)/tests/fuzz/replay_%.o: tests/fuzz/replay.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/fuzz -DFUZZ_CORPUS='"fixtures/fuzz/$*"' -MMD -MP -c $< -o $@

$(FUZZ_REPLAY) $(FUZZ_REPLAY_SLEEP): $(B)/tests/fuzz_replay_%: $(B)/tests/fuzz/fuzz_%.o $(B)/tests/fuzz/fuzz_file.o \
		$(B)/tests/fuzz/replay_%.o $(PSTATIC) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) $(PACK_LIBS)

FUZZ_SECONDS ?= 60
FUZZ_TIMEOUT ?= 10
# the sanitizers of make fuzz; FUZZ_SANITIZE=undefined leaves AddressSanitizer out (about 2x the executions a second)
FUZZ_SANITIZE ?= address,undefined
FB := build-fuzz
fuzz:
	@scripts/install-deps build test fuzz
	$(MAKE) --no-print-directory B=$(FB) CC=clang SANITIZE=$(FUZZ_SANITIZE) \
		CFLAGS="-O1 -g -fsanitize=fuzzer-no-link -fsanitize-coverage-ignorelist=tests/fuzz/coverage-ignore.txt" \
		$(FB)/libengram.a $(FB)/libengram-pack.a
	@for t in $(FUZZ_TARGETS); do \
		clang -std=c11 -D_GNU_SOURCE -Iinclude $(LIB_INC) -Ilib/pack -Itests/fuzz -O1 -g \
			-fsanitize=fuzzer,$(FUZZ_SANITIZE) tests/fuzz/fuzz_$$t.c tests/fuzz/fuzz_file.c \
			$(FB)/libengram-pack.a $(FB)/libengram.a $(LIBS) $(PACK_LIBS) -o $(FB)/fuzz_$$t || exit 1; \
	done
	@FB=$(FB) FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TIMEOUT=$(FUZZ_TIMEOUT) scripts/fuzz $(FUZZ_TARGETS)

# after make fuzz: the inputs of $(FB)/corpus that add coverage, into fixtures/fuzz/NAME (review, then commit)
fuzz-merge:
	@FB=$(FB) scripts/fuzz-merge $(FUZZ_TARGETS)

$(BENCHES): $(B)/bench/%: $(B)/bench/%.o $(TOOL_HELP) $(PSTATIC) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) $(PACK_LIBS)

# bench_gather against an earlier commit's library (BASE_B: that tree's build directory, after its make benches):
# scripts/bench gather runs the two drivers, identical but for the library, on one page cache
$(B)/bench/bench_gather-base: bench/bench_gather.c FORCE
	@test -n "$(BASE_B)" || { echo "make: BASE_B (an earlier tree's build directory) is not set" >&2; exit 2; }
	@mkdir -p $(dir $@)
	$(CC) -I$(BASE_B)/../include $(LIB_INC:-Ilib%=-I$(BASE_B)/../lib%) -I$(BASE_B)/../tools $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< \
		$(BASE_B)/tools/toolhelp.a $(BASE_B)/libengram-pack.a $(BASE_B)/libengram.a $(LIBS) $(PACK_LIBS)
FORCE:

# bench_step's pass alone, against libengram.so: bench/step_python.py runs it in its own process
$(B)/bench/libbench_step.so: bench/bench_step.c $(B)/libengram.so
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DBENCH_STEP_LIBRARY -shared $(ALL_LDFLAGS) -o $@ $< -L$(B) -lengram

check:
	@scripts/install-deps build test
	@$(MAKE) --no-print-directory all tests
	@scripts/check-abi $(B)
	@scripts/check-functions
	@ENGRAM_BUILD=$(B) scripts/run-tests $(TESTS) $(FUZZ_REPLAY)
	@B=$(B) SANITIZE=$(SANITIZE) scripts/remote-tests
	@B=$(B) SANITIZE=$(SANITIZE) scripts/stats-tests
	@B=$(B) scripts/rules-tests
	@$(MAKE) --no-print-directory python-check

python-check: all
	@B=$(B) PYTHON=$(PYTHON) CC="$(CC)" SANITIZE=$(SANITIZE) scripts/python-check

demo:
	@scripts/install-deps build
	@$(MAKE) --no-print-directory all
	@scripts/demo

bench:
	@scripts/install-deps build bench
	@$(MAKE) --no-print-directory all benches
	@scripts/bench

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 $(TOOLS) $(DESTDIR)$(BINDIR)/
	install -m 644 include/engram.h include/engram_pack.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(STATIC) $(PSTATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(PSHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libengram.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libengram.so
	ln -sf libengram-pack.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(PSONAME)
	ln -sf $(PSONAME) $(DESTDIR)$(LIBDIR)/libengram-pack.so
	$(PC_SED) -e 's|@REQUIRES@|$(PC_REQUIRES)|' -e 's|@LIBS_PRIVATE@|-lpthread -lm|' engram.pc.in \
		> $(DESTDIR)$(PKGCONFIGDIR)/engram.pc
	$(PC_SED) -e 's|@REQUIRES@|$(PC_PACK_REQUIRES)|' -e 's|@LIBS_PRIVATE@|-lpthread -lm|' engram-pack.pc.in \
		> $(DESTDIR)$(PKGCONFIGDIR)/engram-pack.pc
	@$(LDCONFIG_RUN)
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && ! $(LDCONFIG) -p | grep -q " => $(LIBDIR)/$(SONAME)$$"; then \
		echo "install: $(LIBDIR) is not in the dynamic loader's search path: link with -Wl,-rpath,$(LIBDIR)," \
			"set LD_LIBRARY_PATH, or name it in /etc/ld.so.conf.d and run ldconfig"; fi
	for m in $(MAN); do s=$${m##*.}; install -d $(DESTDIR)$(MANDIR)/man$$s; \
		install -m 644 $$m $(DESTDIR)$(MANDIR)/man$$s/; done
	@if [ -z "$(PYTHONDIR)" ]; then echo "install: no $(PYTHON): the Python package is not installed"; else \
		echo "install: Python package engram in $(DESTDIR)$(PYTHONDIR), LIBDIR $(LIBDIR) recorded" && \
		install -d $(DESTDIR)$(PYTHONDIR)/engram && install -m 644 $(PY_SRC) python/engram/py.typed \
			$(DESTDIR)$(PYTHONDIR)/engram/ && \
		printf '# written by make install: where that install put libengram\nLIBDIR = %s\n' "'$(LIBDIR)'" \
			> $(DESTDIR)$(PYTHONDIR)/engram/_install.py && \
		if ! $(PYTHON) -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$(PYTHONDIR)"; then \
			echo "install: $(PYTHONDIR) is not on $(PYTHON)'s module path: to import engram there, run with" \
				"PYTHONPATH=$(PYTHONDIR)"; fi; fi

# The loader's cache learns (or forgets) the soname when installing to the system: as root, without DESTDIR (a
# staged install leaves that to its package's scripts, and an ordinary user cannot write the cache).
LDCONFIG_RUN = if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then echo "$(LDCONFIG)"; $(LDCONFIG); fi

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(TOOLS)))
	rm -f $(DESTDIR)$(INCLUDEDIR)/engram.h $(DESTDIR)$(INCLUDEDIR)/engram_pack.h
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/engram.pc $(DESTDIR)$(PKGCONFIGDIR)/engram-pack.pc
	for l in libengram libengram-pack; do rm -f $(DESTDIR)$(LIBDIR)/$$l.a $(DESTDIR)$(LIBDIR)/$$l.so \
		$(DESTDIR)$(LIBDIR)/$$l.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/$$l.so.$(VERSION); done
	for m in $(MAN); do s=$${m##*.}; rm -f $(DESTDIR)$(MANDIR)/man$$s/$${m##*/}; done
	@$(LDCONFIG_RUN)
	@if [ -n "$(PYTHONDIR)" ] && [ -d $(DESTDIR)$(PYTHONDIR)/engram ]; then cd $(DESTDIR)$(PYTHONDIR) && \
		echo "uninstall: Python package engram in $(DESTDIR)$(PYTHONDIR)" && \
		rm -f $(addprefix engram/,$(notdir $(PY_SRC)) _install.py py.typed) engram/__pycache__/*.pyc && \
		{ rmdir engram/__pycache__ 2>/dev/null; rmdir engram 2>/dev/null; true; }; fi

clean:
	rm -rf $(B) $(FB)

-include $(wildcard $(B)/tests/fuzz/*.d)
-include $(LIB_OBJ:.o=.d) $(PLIB_OBJ:.o=.d) $(STAT_SRC:%.c=$(B)/%.d) $(PACK_SRC:%.c=$(B)/%.d) $(TEST_SRC:%.c=$(B)/%.d) \
	$(TEST_UTIL:.o=.d) $(BENCH_SRC:%.c=$(B)/%.d)
