# The two commands of the README. Both install what is missing (scripts/deps.sh), configure and build.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build demo test torture torture-programs torture-deb deb fuzz bench install clean asan tsan

all: build

deps:
	@scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

demo: build
	@scripts/demo.sh $(BUILD)

# The real-program suite's bounded subset (script_realprograms_quick) runs from cached builds:
# made here first when missing (Debian sources, a few minutes the first time; see
# tests/realprograms/README.md). Without them that test fails and says what to run.
REALPROGRAMS_QUICK ?= fmtlib jq
test: build
	@scripts/realprograms-fetch.sh $(REALPROGRAMS_QUICK) || \
		echo "liveprobe: the real-program suite's builds could not be made (script_realprograms_quick will fail)" >&2
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The chaos suite on real servers (tests/chaos/chaos.sh): CHAOS_CYCLES cycles of sessions on
# nginx and memcached under load, then 1,000 attach/trace/detach cycles whose memory must stay
# flat. The environment is the one tests/CMakeLists.txt gives the script tests.
CHAOS_CYCLES ?= 100
torture: build
	@cd $(BUILD) && LIVEPROBE_SOURCE_DIR=$(CURDIR) LIVEPROBE_BINARY_DIR=$(abspath $(BUILD)) \
		bash $(CURDIR)/tests/chaos/chaos.sh --memory 1000 $(CHAOS_CYCLES)
	@$(MAKE) --no-print-directory torture-programs
	@$(MAKE) --no-print-directory torture-deb

# The real-program suite (tests/realprograms/): programs from Debian 12 source packages, fetched
# and built once into a cache (scripts/realprograms-fetch.sh; LIVEPROBE_REALPROGRAMS_CACHE), each
# running its own test suite untraced, under trace --count, --hist, -o FILE, attached and
# detached in cycles, and `make check` under one trace; every mode must give the baseline's
# results. REALPROGRAMS names some of them (default: all); RP_MODES some modes.
REALPROGRAMS ?=
torture-programs: build
	@scripts/realprograms-fetch.sh $(REALPROGRAMS)
	@LIVEPROBE_SOURCE_DIR=$(CURDIR) LIVEPROBE_BINARY_DIR=$(abspath $(BUILD)) \
		tests/realprograms/run.sh $(REALPROGRAMS)

# Fuzzing (issue 32): each harness of tests/fuzz/ built with clang's libFuzzer and run for
# FUZZ_SECONDS (60) on its corpus, which grows in tests/fuzz/corpus/ (commit it: `make test`
# replays it). scripts/fuzz.sh --help says more.
fuzz: deps
	@FUZZ_BUILD=$(abspath $(BUILD))/fuzz scripts/fuzz.sh

# The Debian packages (docs/packaging.md): liveprobe, liveprobe-dev and liveprobe-dbgsym, made
# by CPack from this build into $(BUILD)/deb/, the runtime's ELF files stripped and their debug
# information split into the dbgsym package. `apt install ./$(BUILD)/deb/liveprobe_*.deb`.
deb: build
	@scripts/make-deb.sh $(BUILD)

# The packages installed, used and purged in a scratch Debian 12 root (tests/packaging/deb_test.sh,
# as root; never on this machine itself). Its base is cached (LIVEPROBE_DEB_ROOT_CACHE).
torture-deb: deb
	@LIVEPROBE_SOURCE_DIR=$(CURDIR) LIVEPROBE_BINARY_DIR=$(abspath $(BUILD)) \
		tests/packaging/deb_test.sh $(BUILD)/deb

bench: build
	@$(BUILD)/bench/liveprobe-bench

install: build
	@cmake --install $(BUILD)

# Sanitizer builds of the whole suite, each in a directory of its own.
asan:
	@$(MAKE) test BUILD=build-asan CMAKE_FLAGS=-DLIVEPROBE_SANITIZE=address
tsan:
	@$(MAKE) test BUILD=build-tsan CMAKE_FLAGS=-DLIVEPROBE_SANITIZE=thread

clean:
	rm -rf $(BUILD) build-asan build-tsan
