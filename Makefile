# libengram: make [all] | check | demo | bench | install | uninstall | clean
# Variables: CC, CFLAGS, PREFIX (/usr/local), DESTDIR, LIBDIR, WERROR=1, SANITIZE=address,undefined

VERSION := $(shell sed -n 's/^\#define ENGRAM_VERSION_STRING "\(.*\)"/\1/p' include/engram.h)
SOVERSION := $(firstword $(subst ., ,$(VERSION)))

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig

CC ?= cc
CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wvla
ifeq ($(WERROR),1)
WARN += -Werror
endif
ifneq ($(SANITIZE),)
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -Iinclude -Ilib $(WARN) $(SANFLAGS) $(CFLAGS)
ALL_LDFLAGS := $(SANFLAGS) $(LDFLAGS)
LIBS := -luring -ljansson -lzstd -lxxhash -lpthread -lm

B := build
LIB_SRC := $(wildcard lib/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
STATIC := $(B)/libengram.a
SHARED := $(B)/libengram.so.$(VERSION)
SONAME := libengram.so.$(SOVERSION)
TOOLS := $(B)/engram-stat $(B)/engram-pack
STAT_SRC := tools/engram-stat.c $(wildcard tools/stat_*.c) $(wildcard tools/replay_*.c) tools/toolutil.c \
	tools/residency.c
PACK_SRC := tools/engram-pack.c tools/pack_progress.c tools/toolutil.c
TEST_SRC := $(wildcard tests/test_*.c)
TEST_UTIL := $(B)/tests/util.o
# helpers of the tools that tests and benches use too: an archive, so that each program takes what it calls
TOOL_HELP := $(B)/tools/toolhelp.a
TESTS := $(TEST_SRC:tests/%.c=$(B)/tests/%)
FUZZ_TARGETS := shard safetensors npy config
FUZZ_REPLAY := $(FUZZ_TARGETS:%=$(B)/tests/fuzz_replay_%)
BENCH_SRC := $(wildcard bench/*.c)
BENCHES := $(BENCH_SRC:bench/%.c=$(B)/bench/%)
MAN := $(wildcard man/*.[135])

.SECONDARY:
.PHONY: all lib tools tests benches check demo bench fuzz install uninstall clean
all: lib tools

lib: $(STATIC) $(B)/libengram.so
tools: $(TOOLS)
tests: $(TESTS) $(FUZZ_REPLAY)
benches: $(BENCHES)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(SHARED): $(LIB_OBJ) lib/libengram.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script,lib/libengram.map -Wl,--no-undefined \
		$(ALL_LDFLAGS) -o $@ $(LIB_OBJ) $(LIBS)

$(B)/libengram.so: $(SHARED)
	ln -sf libengram.so.$(VERSION) $(B)/$(SONAME)
	ln -sf $(SONAME) $@

# Generated at install time so that it carries the PREFIX and LIBDIR of that install.
PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		-e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES@|liburing libzstd libxxhash jansson|' \
		-e 's|@LIBS_PRIVATE@|-lpthread -lm|' engram.pc.in

$(B)/engram-stat: $(STAT_SRC:%.c=$(B)/%.o) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(B)/engram-pack: $(PACK_SRC:%.c=$(B)/%.o) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(TOOL_HELP): $(B)/tools/toolutil.o $(B)/tools/residency.o
	@rm -f $@
	$(AR) rcs $@ $^

$(B)/tests/%.o $(B)/bench/%.o: ALL_CFLAGS += -Itools

$(TESTS): $(B)/tests/%: $(B)/tests/%.o $(TEST_UTIL) $(TOOL_HELP) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) -lcmocka

# Fuzz targets: replayed over their corpus (fixtures/fuzz/NAME) by make check; fuzzed by make fuzz.
$(B)/tests/fuzz/replay_%.o: tests/fuzz/replay.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/fuzz -DFUZZ_CORPUS='"fixtures/fuzz/$*"' -MMD -MP -c $< -o $@

$(FUZZ_REPLAY): $(B)/tests/fuzz_replay_%: $(B)/tests/fuzz/fuzz_%.o $(B)/tests/fuzz/fuzz_file.o $(B)/tests/fuzz/replay_%.o $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

FUZZ_SECONDS ?= 60
FB := build-fuzz
fuzz:
	@scripts/install-deps build test
	$(MAKE) --no-print-directory B=$(FB) CC=clang SANITIZE=address,undefined \
		CFLAGS="-O1 -g -fsanitize=fuzzer-no-link" $(FB)/libengram.a
	@for t in $(FUZZ_TARGETS); do \
		clang -std=c11 -D_GNU_SOURCE -Iinclude -Ilib -Itests/fuzz -O1 -g \
			-fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_$$t.c tests/fuzz/fuzz_file.c \
			$(FB)/libengram.a $(LIBS) -o $(FB)/fuzz_$$t || exit 1; \
	done
	@FB=$(FB) FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz $(FUZZ_TARGETS)

$(BENCHES): $(B)/bench/%: $(B)/bench/%.o $(TOOL_HELP) $(STATIC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

check:
	@scripts/install-deps build test
	@$(MAKE) --no-print-directory all tests
	@ENGRAM_BUILD=$(B) scripts/run-tests $(TESTS) $(FUZZ_REPLAY)

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
	install -m 644 include/engram.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libengram.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libengram.so
	$(PC_SED) > $(DESTDIR)$(PKGCONFIGDIR)/engram.pc
	for m in $(MAN); do s=$${m##*.}; install -d $(DESTDIR)$(MANDIR)/man$$s; \
		install -m 644 $$m $(DESTDIR)$(MANDIR)/man$$s/; done

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(TOOLS)))
	rm -f $(DESTDIR)$(INCLUDEDIR)/engram.h $(DESTDIR)$(PKGCONFIGDIR)/engram.pc
	rm -f $(DESTDIR)$(LIBDIR)/libengram.a $(DESTDIR)$(LIBDIR)/libengram.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
		$(DESTDIR)$(LIBDIR)/libengram.so.$(VERSION)
	for m in $(MAN); do s=$${m##*.}; rm -f $(DESTDIR)$(MANDIR)/man$$s/$${m##*/}; done

clean:
	rm -rf $(B) $(FB)

-include $(wildcard $(B)/tests/fuzz/*.d)
-include $(LIB_OBJ:.o=.d) $(STAT_SRC:%.c=$(B)/%.d) $(PACK_SRC:%.c=$(B)/%.d) $(TEST_SRC:%.c=$(B)/%.d) \
	$(TEST_UTIL:.o=.d) $(BENCH_SRC:%.c=$(B)/%.d)
