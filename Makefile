# agentkit - durable, streaming LLM agents for the Unix shell.
#
#   make                  build libcore.a (the store in it) and the binaries into build/
#   make test             run the suite (bats files, C unit programs) on build/
#   make check            lint, then the suite twice: plain, then ASan+UBSan (CI)
#   make SANITIZE=1 ...   build into build-san/ with ASan+UBSan
#   make bench            benchmarks against the named peers (bench/)
#   make install PREFIX=/usr/local DESTDIR=   (binaries, man pages, completions)
#   make lint             banned calls, printing/exiting library code, floors, circles
#   make help             every target, one line each (the "## " notes below)

VERSION   := 0.1.0
CC        ?= cc
PREFIX    ?= /usr/local
BINDIR    ?= $(PREFIX)/bin
MANDIR    ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d

CSTD      := -std=c11 -D_GNU_SOURCE
WARN      := -Wall -Wextra -Wshadow -Wno-unused-parameter
OPT       ?= -O2 -g
CFLAGS    ?=
CPPFLAGS  += -DAGENTKIT_VERSION='"$(VERSION)"'
LDFLAGS   += -Wl,--as-needed
# The five small libraries are linked statically when their archives are
# there (Debian's -dev packages ship them): each shared object costs every
# process its loading and symbol binding, and together they were a third
# of a whole echo turn (docs/store.md "What a process costs").  Libraries
# that update separately for security (libc; libcurl and libpq, loaded on
# demand) stay shared.  STATIC_DEPS=0 links all five shared.
DEP_LIBS  := -ljansson -lyaml -luuid -llmdb -lmd
STATIC_DEPS ?= $(if $(strip $(foreach l,jansson yaml uuid lmdb md,$(if $(filter /%,$(shell $(CC) -print-file-name=lib$(l).a)),,$(l)))),0,1)
ifeq ($(STATIC_DEPS),1)
LDLIBS    := -Wl,-Bstatic $(DEP_LIBS) -Wl,-Bdynamic -lpthread -ldl -lm
else
LDLIBS    := $(DEP_LIBS) -lpthread -ldl -lm
endif

ifeq ($(SANITIZE),1)
BUILD     ?= build-san
OPT       := -O1 -g -fno-omit-frame-pointer
SANFLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=all
else
BUILD     ?= build
endif
ifeq ($(DEVELOPER),1)
WARN      += -Werror
endif

ALL_CFLAGS = $(CSTD) $(WARN) $(OPT) $(SANFLAGS) $(CFLAGS) -MMD -MP

# libcore's floors, lowest first: base (errors, buffers, JSON, JSON Patch,
# processes, HTTP), the store on base, models and providers on base, agents
# on all of them.  A lower floor never includes a higher one (scripts/lint).
CORE_SRC  := $(sort $(wildcard libcore/base/*.c)) \
             $(sort $(wildcard libcore/model/*.c)) $(sort $(wildcard libcore/agent/*.c))
# The store and its backends: every folder store/NAME/ is one backend
# (store/backend.h), built from its *.c into libcore.a.  A backend that
# needs more than the common flags says so in its own store/NAME/build.mk,
# included here: OBJ_CFLAGS for its objects (a pattern-specific value on
# $(BUILD)/store/NAME/%.o), libraries for the programs that link it.
STORE_BACKENDS := $(sort $(patsubst store/%/,%,$(dir $(wildcard store/*/*.c))))
-include $(wildcard $(addsuffix /build.mk,$(addprefix store/,$(STORE_BACKENDS))))
STORE_SRC := $(sort $(wildcard store/*.c $(addsuffix /*.c,$(addprefix store/,$(STORE_BACKENDS)))))
CMD_SRC   := $(filter-out cmd/cli%.c,$(sort $(wildcard cmd/*.c)))
PROGS     := $(patsubst cmd/%.c,%,$(CMD_SRC))
BINS      := $(addprefix $(BUILD)/bin/,$(PROGS))

CORE_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(CORE_SRC))
STORE_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(STORE_SRC))
CLI_OBJ   := $(BUILD)/cmd/cli.o $(BUILD)/cmd/cli_doc.o $(BUILD)/cmd/cli_parse.o
# One static core library, the store in it: the store stands on libcore's
# base and the agent floor on the store, and the linker resolves members of
# one archive among themselves, so no link order or group is needed.
LIBCORE   := $(BUILD)/libcore.a
LIBS       = $(LIBCORE)

# Test programs: tests/helpers/*.c are tools the bats suites drive (a fake
# detached worker, ...); tests/unit/*.c are C unit programs scripts/runtests runs (TAP).
HELPER_SRC := $(sort $(wildcard tests/helpers/*.c))
UNIT_SRC  := $(sort $(wildcard tests/unit/*.c))
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(HELPER_SRC) $(UNIT_SRC))

all: $(BINS) completions $(TEST_BINS) ## build libcore.a, the binaries, completions, test programs

# OBJ_CFLAGS: an object's own flags, set per folder (store/NAME/build.mk).
$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(OBJ_CFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(LIBCORE): $(CORE_OBJ) $(STORE_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/bin/%: $(BUILD)/cmd/%.o $(CLI_OBJ) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(CLI_OBJ) $(LIBS) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

# Benchmark programs: bench/store/*.c -> $(BUILD)/bench/store/NAME (bench/store.sh),
# bench/pg/*.c -> $(BUILD)/bench/pg/NAME (bench/pg.sh).
BENCH_STORE_SRC := $(sort $(wildcard bench/store/*.c bench/pg/*.c))
BENCH_STORE := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_STORE_SRC))
# The PostgreSQL benchmark's baseline links libpq itself (store/pg/build.mk).
$(BUILD)/bench/pg/%.o: OBJ_CFLAGS = $(PQ_CFLAGS)
bench-progs: $(BENCH_STORE) ## build the benchmark programs (bench/store, bench/pg)
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS) $(if $(findstring /pg/,$@),$(PQ_LIBS))
.PHONY: bench-progs

# Completions are generated from each command's option table.
COMPLETIONS := $(foreach p,$(PROGS),completions/bash/$(p) completions/zsh/_$(p) completions/fish/$(p).fish)
completions: $(COMPLETIONS) ## generate completions/ from each command's option table
completions/bash/%: $(BUILD)/bin/%
	@mkdir -p $(dir $@)
	$< --completion bash >$@
completions/zsh/_%: $(BUILD)/bin/%
	@mkdir -p $(dir $@)
	$< --completion zsh >$@
completions/fish/%.fish: $(BUILD)/bin/%
	@mkdir -p $(dir $@)
	$< --completion fish >$@

# Section 5 and 7 pages generated from docs/ (scripts/md2man, POSIX awk).
DOC_MAN_STAMP := $(BUILD)/man/.stamp
$(DOC_MAN_STAMP): scripts/md2man $(wildcard docs/*.md)
	@rm -rf $(BUILD)/man
	scripts/md2man --all $(BUILD)/man $(VERSION)
	@touch $@
man: $(DOC_MAN_STAMP) ## section 5 and 7 man pages from docs/ into build/man

test: all ## the suite (bats files and C unit programs) against build/
	@scripts/runtests $(BUILD)

# What CI runs: lint, then the suite on the plain build, then on ASan+UBSan.
check: ## what CI runs: lint, the suite plain and under ASan+UBSan
	@$(MAKE) --no-print-directory -j2 all
	@scripts/lint build
	@$(MAKE) --no-print-directory -j2 SANITIZE=1 all
	@scripts/runtests build build-san

bench: all ## benchmarks against the named peers (bench/)
	@bench/run $(BUILD)

lint: $(BINS) ## the style rules: banned calls, floors, include and call circles (scripts/lint)
	@scripts/lint $(BUILD)

install: all man ## binaries, man pages and completions into DESTDIR+PREFIX
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
	  $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7 \
	  $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 644 $(BUILD)/man/man5/*.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 644 $(BUILD)/man/man7/*.7 $(DESTDIR)$(MANDIR)/man7/
	for p in $(PROGS); do \
	  install -m 755 $(BUILD)/bin/$$p $(DESTDIR)$(BINDIR)/$$p && \
	  $(BUILD)/bin/$$p --man >$(DESTDIR)$(MANDIR)/man1/$$p.1 && \
	  install -m 644 completions/bash/$$p $(DESTDIR)$(BASHCOMPDIR)/$$p && \
	  install -m 644 completions/zsh/_$$p $(DESTDIR)$(ZSHCOMPDIR)/_$$p && \
	  install -m 644 completions/fish/$$p.fish $(DESTDIR)$(FISHCOMPDIR)/$$p.fish \
	  || exit 1; \
	done

uninstall: ## remove what install put there
	for p in $(PROGS); do \
	  rm -f $(DESTDIR)$(BINDIR)/$$p $(DESTDIR)$(MANDIR)/man1/$$p.1 \
	    $(DESTDIR)$(BASHCOMPDIR)/$$p $(DESTDIR)$(ZSHCOMPDIR)/_$$p \
	    $(DESTDIR)$(FISHCOMPDIR)/$$p.fish; \
	done
	rm -f $(DESTDIR)$(MANDIR)/man5/agentkit-*.5 $(DESTDIR)$(MANDIR)/man7/agentkit-*.7

clean: ## remove build/, build-san/, build-fuzz/ and generated completions
	rm -rf build build-san completions/bash completions/zsh completions/fish

# help: the targets with their "## " notes, in the Makefile's order.
help: ## this list
	@awk -F ':.*## ' '/^[a-z][a-z-]*:.*## / { printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: all completions man test check bench lint install uninstall clean help
.SECONDARY:

# Fuzzing (docs/fuzzing.md): tests/fuzz/fuzz_NAME.c -> $(BUILD)/fuzz/fuzz_NAME.
# Every build links them with the deterministic driver (tests/fuzz/driver.c),
# which tests/fuzz.bats runs for a short seeded pass.  `make fuzz` runs each
# target for FUZZ_SECONDS: with libFuzzer (build-fuzz/) when clang has it,
# else with the driver under ASan+UBSan (build-san/).
FUZZ_SECONDS ?= 60
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
ifeq ($(FUZZ_ENGINE),libfuzzer)
FUZZ_MAIN :=
FUZZ_LINK := -fsanitize=fuzzer
else
FUZZ_MAIN := $(BUILD)/tests/fuzz/driver.o
FUZZ_LINK :=
endif
all: $(FUZZ_BINS)
fuzz-bins: $(FUZZ_BINS) ## build the fuzz targets into build/fuzz
$(FUZZ_BINS): $(BUILD)/fuzz/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/common.o $(FUZZ_MAIN) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(FUZZ_LINK) $(LDFLAGS) -o $@ $(filter %.o,$^) \
	  $(LIBS) $(LDLIBS)
fuzz: ## run each fuzz target for FUZZ_SECONDS (docs/fuzzing.md)
	@if tests/fuzz/run --have-libfuzzer; then \
	  $(MAKE) --no-print-directory -j2 BUILD=build-fuzz CC=clang FUZZ_ENGINE=libfuzzer \
	    OPT='-O1 -g -fno-omit-frame-pointer' \
	    SANFLAGS='-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all' \
	    fuzz-bins && tests/fuzz/run build-fuzz $(FUZZ_SECONDS); \
	else \
	  $(MAKE) --no-print-directory -j2 SANITIZE=1 fuzz-bins && \
	  tests/fuzz/run build-san $(FUZZ_SECONDS); \
	fi
fuzz-clean: ## remove build-fuzz/
	rm -rf build-fuzz
clean: fuzz-clean
.PHONY: fuzz fuzz-bins fuzz-clean
-include $(patsubst tests/%.c,$(BUILD)/tests/%.d,$(FUZZ_SRC) tests/fuzz/common.c tests/fuzz/driver.c)

-include $(patsubst tests/%.c,$(BUILD)/tests/%.d,$(HELPER_SRC) $(UNIT_SRC))
-include $(CORE_OBJ:.o=.d) $(STORE_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(patsubst cmd/%.c,$(BUILD)/cmd/%.d,$(CMD_SRC))
