# mlx5direct: one GNU Makefile for the library, the emulator, the tools and the tests.
#
#   make            libmlx5direct.{a,so}, libmlx5direct-emu.so and the mlxd-* tools
#   make test       the Check suite (ends with Check's summary line)
#   make demo       the main job (see README.md)
#   make sanitize   the suite under ASan+UBSan;  make tsan: the threaded suites under TSan
#   make install PREFIX=/usr/local
#
# Every build output goes below $(BUILD) (default build/, ignored by git).  Several builds can
# live side by side: make BUILD=build-asan ...
#
# Layout (one concept per file; the directories are the layers):
#   abi/       hardware + kernel ABI: layouts, names, CQE decoding, CQE fixture format
#   uverbs/    the kernel's RDMA interface: sysfs, /dev/infiniband/uverbsN, RDMA_VERBS_IOCTL
#   mlx5/      the data path the process owns: CQ ring, WQEs, doorbells, poll loop
#   receiver/  the Holoscan-Sensor-Bridge-style frame receiver
#   emu/       the emulated kernel (emu/kernel/) + ConnectX NIC (emu/nic/), one header between
#              them (emu/emu.h); libmlx5direct-emu.so, LD_PRELOAD-able
#   tools/     mlxd-<verb>.c, one program each; tools/common/*.c is linked into all of them
#   tests/     Check suites: tests/test_<name>.c defines  Suite *<name>_suite(void)
#   hololink/  optional C++17 part, built when $(CXX) exists: Holoscan Sensor Bridge's
#              hololink::module::RoceReceiverInterfaceV1 on the receiver (docs/hololink.md),
#              libmlx5direct-hololink; its Check suite is tests/hololink/ (mlxd-hololink-tests)

BUILD    ?= build
CC       ?= gcc
PREFIX   ?= /usr/local
# Only make cuda-api-check reads the CUDA toolkit: no build needs it (docs/receiver.md).
CUDA_HOME ?= /usr/local/cuda
# 1: the test runner finds the emulated NVIDIA driver ($(BUILD)/tests/fakecuda/libcuda.so.1) by
# its DT_RPATH; 0: the real one (scripts/gpu-check.sh).  DT_RPATH, not DT_RUNPATH: under the
# sanitizers dlopen is called from their runtime's interceptor, and glibc applies a RUNPATH only
# to the object that calls, but the executable's RPATH to every caller.
FAKE_CUDA ?= 1

WARN     := -Wall -Wextra -Werror
OPT      ?= -O2 -g
SAN      ?=
CPPFLAGS += -D_GNU_SOURCE -Iabi -Iuverbs -Imlx5 -Ireceiver -Iemu -Itools/common
CFLAGS   += -std=gnu11 $(OPT) $(WARN) -fPIC -pthread $(SAN)
LDFLAGS  += -pthread $(SAN)

# Libraries every program may need.  libpcap for captures, zlib for CRC-32 (iCRC); rdma-core is
# used for its headers only, and tests/test_linkage.c proves nothing links libibverbs/libmlx5.
LIBS     := -lpcap -lz -ldl -lm
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)

LIB_SRC  := $(wildcard abi/*.c uverbs/*.c mlx5/*.c receiver/*.c)
EMU_SRC  := $(wildcard emu/kernel/*.c emu/nic/*.c) $(wildcard abi/*.c)
TOOL_SRC := $(wildcard tools/mlxd-*.c)
TOOLCOMMON_SRC := $(wildcard tools/common/*.c)
TEST_SRC := $(wildcard tests/*.c)
SUITES   := $(patsubst tests/test_%.c,%,$(wildcard tests/test_*.c))
HELPER_SRC := $(wildcard tests/progs/*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
EMU_OBJ  := $(EMU_SRC:%.c=$(BUILD)/obj-emu/%.o)
TOOLCOMMON_OBJ := $(TOOLCOMMON_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)

STATIC   := $(BUILD)/lib/libmlx5direct.a
SHARED   := $(BUILD)/lib/libmlx5direct.so
EMU      := $(BUILD)/lib/libmlx5direct-emu.so
TOOLS    := $(patsubst tools/%.c,$(BUILD)/bin/%,$(TOOL_SRC))
HELPERS  := $(patsubst tests/progs/%.c,$(BUILD)/tests/progs/%,$(HELPER_SRC))
RUNNER   := $(BUILD)/tests/mlxd-tests
DEPS_OK  := $(BUILD)/.deps-ok

# The C++ part (hololink/), only when a C++ compiler is present.
HAVE_CXX := $(if $(shell command -v $(CXX) 2>/dev/null),1,0)
CXXFLAGS += -std=c++17 $(OPT) $(WARN) -fPIC -pthread $(SAN)
HL_SRC   := $(wildcard hololink/src/*.cpp)
HL_OBJ   := $(HL_SRC:%.cpp=$(BUILD)/obj/%.o)
HL_TEST_OBJ := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/hololink/test_*.cpp)) $(BUILD)/obj/tests/util.o
HL_STATIC := $(BUILD)/lib/libmlx5direct-hololink.a
HL_SHARED := $(BUILD)/lib/libmlx5direct-hololink.so
HL_RUNNER := $(BUILD)/tests/mlxd-hololink-tests
HL_ALL   := $(if $(filter 1,$(HAVE_CXX)),$(HL_STATIC) $(HL_SHARED) $(HL_SHARED).0)
HL_HEADERS := $(wildcard hololink/module/*.h hololink/module/*.hpp)

.PHONY: all test demo sanitize tsan install deps clean bench fuzz soak cross-aarch64 hololink-installed-test cuda-api-check fakecuda
all: $(STATIC) $(SHARED) $(SHARED).0 $(EMU) $(TOOLS) $(HL_ALL)

# --- dependencies: installs missing Debian packages itself (prints the command without root)
$(DEPS_OK): scripts/deps.sh
	@mkdir -p $(@D)
	@sh scripts/deps.sh build
	@touch $@
deps: ; @sh scripts/deps.sh all

# --- compilation ------------------------------------------------------------------------------
$(BUILD)/obj/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# The emulator is built from its own objects (and its own copy of abi/) so that nothing of the
# driver is inside it: the two sides only meet at the system-call boundary.
$(BUILD)/obj-emu/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DMLXD_EMU_BUILD -fvisibility=hidden -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libmlx5direct.so.0 -Wl,--no-undefined -o $@ $^ $(LDFLAGS) $(LIBS)

# the soname, so that a program linked against $(BUILD)/lib (with an rpath to it) starts
$(SHARED).0: $(SHARED)
	ln -sf $(notdir $(SHARED)) $@

$(EMU): $(EMU_OBJ)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libmlx5direct-emu.so -o $@ $^ $(LDFLAGS) -lz -ldl -lm

# --- C++ (hololink/): <hololink/module/...> resolves from the repository root
$(BUILD)/obj/%.o: %.cpp | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) -I. $(CXXFLAGS) -MMD -MP -c $< -o $@

$(HL_STATIC): $(HL_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(HL_SHARED): $(HL_OBJ) $(SHARED).0
	@mkdir -p $(@D)
	$(CXX) -shared -Wl,-soname,libmlx5direct-hololink.so.0 -Wl,--no-undefined -o $@ $(HL_OBJ) \
	    -L$(BUILD)/lib -lmlx5direct $(LDFLAGS)

$(HL_SHARED).0: $(HL_SHARED)
	ln -sf $(notdir $(HL_SHARED)) $@

$(BUILD)/obj/tests/hololink/%.o: CPPFLAGS += -Itests
$(HL_RUNNER): $(HL_TEST_OBJ) $(HL_STATIC) $(STATIC) $(EMU)
	@mkdir -p $(@D)
	$(CXX) -o $@ $(HL_TEST_OBJ) $(HL_STATIC) $(STATIC) -L$(BUILD)/lib -lmlx5direct-emu \
	    -Wl,-rpath,'$$ORIGIN/../lib' $(LDFLAGS) $(LIBS) $(CHECK_LIBS)

$(BUILD)/bin/%: tools/%.c $(TOOLCOMMON_OBJ) $(STATIC) | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(TOOLCOMMON_OBJ) $(STATIC) $(LDFLAGS) $(LIBS)

# --- tests ------------------------------------------------------------------------------------
# Suite list generated from file names, so adding tests/test_foo.c is all it takes.
$(BUILD)/tests/suites.h: $(wildcard tests/test_*.c) Makefile
	@mkdir -p $(@D)
	@{ for s in $(SUITES); do echo "MLXD_SUITE($$s)"; done; } > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/tests/main.o: $(BUILD)/tests/suites.h
$(BUILD)/obj/tests/%.o: CPPFLAGS += -I$(BUILD)/tests -Itests
# Test code passes handles through out-pointers checked by ck_assert (which does not return on
# failure); at -O1 under the sanitizers GCC then guesses "maybe uninitialized" for them.
$(BUILD)/obj/tests/%.o: CFLAGS += -Wno-maybe-uninitialized

FAKECUDA := $(BUILD)/tests/fakecuda/libcuda.so.1
# the same, as a driver before CUDA 11.7 (no cuMemGetHandleForAddressRange), for the tests
FAKECUDA_OLD := $(BUILD)/tests/fakecuda-11.6/libcuda.so.1
comma := ,
FAKECUDA_RPATH := $(if $(filter 1,$(FAKE_CUDA)),-Wl$(comma)-rpath$(comma)'$$ORIGIN/fakecuda' -Wl$(comma)--disable-new-dtags)
$(RUNNER): $(TEST_OBJ) $(STATIC) $(EMU) $(FAKECUDA) $(FAKECUDA_OLD)
	@mkdir -p $(@D)
	$(CC) -o $@ $(TEST_OBJ) $(STATIC) -L$(BUILD)/lib -lmlx5direct-emu -Wl,-rpath,'$$ORIGIN/../lib' \
	    $(FAKECUDA_RPATH) $(LDFLAGS) $(LIBS) $(CHECK_LIBS)

# The emulated NVIDIA driver (tests/fakecuda/libcuda.c): for the tests only, never installed.
# make fakecuda builds it alone (LD_LIBRARY_PATH=$(BUILD)/tests/fakecuda mlxd-capture --gpu).
fakecuda: $(FAKECUDA)
$(FAKECUDA) $(FAKECUDA_OLD): tests/fakecuda/libcuda.c receiver/cuda_api.h | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(if $(findstring 11.6,$@),-DFAKECUDA_BEFORE_11_7) $(CFLAGS) -shared \
	    -Wl,-soname,libcuda.so.1 -o $@ $< $(LDFLAGS)

# Our declarations of the CUDA driver API (receiver/cuda_api.h) against the toolkit's cuda.h,
# where one is installed (.ci/run): every value and entry-point name asserted equal.
cuda-api-check:
	$(CC) $(CPPFLAGS) -I$(CUDA_HOME)/include $(CFLAGS) -fsyntax-only tests/fakecuda/api_check.c

# Small stand-alone programs the tests run (e.g. the syscall-only "no project code" client).
$(BUILD)/tests/progs/%: tests/progs/%.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDFLAGS) $(LIBS)

# nic_unit compiles the NIC sources in (their hooks are hidden in the emulator library).
$(BUILD)/tests/progs/nic_unit: $(wildcard emu/nic/*.c emu/nic/*.h emu/emu.h abi/roce.c abi/mlxd_roce.h abi/error.c)
# no_libcuda links the library (and nothing that finds the emulated NVIDIA driver).
$(BUILD)/tests/progs/no_libcuda: $(STATIC)
$(BUILD)/tests/progs/no_libcuda: private LIBS := $(STATIC) $(LIBS)
# rdma_core_scatter is rdma-core's side of scatter-to-CQE (tests/test_rdma_core.c): libibverbs + libmlx5.
$(BUILD)/tests/progs/rdma_core_scatter: private LIBS += -libverbs -lmlx5
$(BUILD)/tests/progs/rdma_core_srq: private LIBS += -libverbs -ldl
$(BUILD)/tests/progs/rdma_core_mw: private LIBS += -libverbs -ldl
$(BUILD)/tests/progs/rdma_core_srq $(BUILD)/tests/progs/rdma_core_mw: tests/progs/rc_connect.h

# hsb_feed replays a capture with the library, as the sensor bridge of another process's
# receiver (tests/hololink/installed_test.sh).
$(BUILD)/tests/progs/hsb_feed: $(STATIC)
$(BUILD)/tests/progs/hsb_feed: private LIBS := $(STATIC) $(LIBS)

# make test: the suite (with the short soak), then the same suite under ASan+UBSan and the
# threaded suites under TSan (docs/reliability.md); MLXD_TEST_SANITIZERS=0 runs the suite only.
MLXD_TEST_SANITIZERS ?= 1
test: all $(RUNNER) $(HELPERS) $(if $(filter 1,$(HAVE_CXX)),$(HL_RUNNER))
	@sh scripts/deps.sh test
	MLXD_BUILD=$(BUILD) MLXD_SRC=$(CURDIR) $(RUNNER)
	$(if $(filter 1,$(HAVE_CXX)),MLXD_BUILD=$(BUILD) MLXD_SRC=$(CURDIR) $(HL_RUNNER))
	$(if $(filter 1,$(HAVE_CXX)),$(if $(SAN),,$(MAKE) hololink-installed-test))
	$(if $(filter 0,$(MLXD_TEST_SANITIZERS)),,$(MAKE) MLXD_TEST_SANITIZERS=0 sanitize tsan)

# Sanitizer builds: same sources, separate build directories.
sanitize:
	$(MAKE) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" OPT="-O1 -g" test
# The threaded suites (receiver monitor and close, the emulator's engine, replay feeders, soak,
# close races, the CUDA monitor) under TSan, one suite per run (CK_RUN_SUITE=<one> for a single one).
# die_after_fork=0: several suites fork a second emulated process (emu_shared, fork_mid_capture)
# from a parent whose emulator already runs threads; TSan would kill such a child at its first
# pthread_create.
TSAN_SUITES ?= races soak receiver receiver_live receiver_events receiver_replay receiver_fixture receiver_cuda record replay frameq emu_nic emu_shared driver ud verbs srq mw cqe_mini
tsan:
	$(MAKE) BUILD=build-tsan SAN="-fsanitize=thread" OPT="-O1 -g" all $(patsubst $(BUILD)/%,build-tsan/%,$(RUNNER) $(HELPERS))
	@fail=0; for s in $${CK_RUN_SUITE:-$(TSAN_SUITES)}; do \
	  CK_RUN_SUITE=$$s MLXD_BUILD=build-tsan MLXD_SRC=$(CURDIR) MLXD_TSAN=1 \
	  TSAN_OPTIONS=$${TSAN_OPTIONS:-second_deadlock_stack=1:die_after_fork=0} build-tsan/tests/mlxd-tests || fail=1; \
	done; \
	if [ $(HAVE_CXX) = 1 ] && [ -z "$$CK_RUN_SUITE" ]; then \
	  $(MAKE) BUILD=build-tsan SAN="-fsanitize=thread" OPT="-O1 -g" build-tsan/tests/mlxd-hololink-tests && \
	  MLXD_BUILD=build-tsan MLXD_SRC=$(CURDIR) MLXD_TSAN=1 \
	  TSAN_OPTIONS=$${TSAN_OPTIONS:-second_deadlock_stack=1:die_after_fork=0} build-tsan/tests/mlxd-hololink-tests || fail=1; \
	fi; exit $$fail

# The "Done when" of docs/hololink.md: install to a temporary PREFIX, build a program written
# against the seed's interface alone with `pkg-config --cflags --libs mlx5direct-hololink`, and
# replay a real capture into it on the emulator (tests/hololink/installed_test.sh).
hololink-installed-test: all $(BUILD)/tests/progs/hsb_feed
	sh tests/hololink/installed_test.sh $(BUILD)

# make soak: 10 million frames through receiver + emulator (event mode; busy-poll 1 million:
# its spinning monitor shares 2 cores with the engine), loss and stalls injected, the device
# allowed 12 frames ahead of the monitor on 8 pages (pages get overwritten; tests/test_soak.c).
soak: all $(RUNNER)
	MLXD_BUILD=$(BUILD) MLXD_SRC=$(CURDIR) CK_RUN_SUITE=soak CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-200} \
	  MLXD_SOAK_FRAMES=$${MLXD_SOAK_FRAMES:-10000000} MLXD_SOAK_BUSY_FRAMES=$${MLXD_SOAK_BUSY_FRAMES:-1000000} \
	  MLXD_SOAK_WINDOW=$${MLXD_SOAK_WINDOW:-12} $(RUNNER)

# --- fuzzing (tests/fuzz/fuzz_<name>.c, libFuzzer; clang + libclang-rt-14-dev: deps.sh all) ----
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="fuzz_roce ..."]   each target runs FUZZ_SECONDS s
FUZZ_BUILD   ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_EMU     := fuzz_ioctl fuzz_wire
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=gnu11 -O1 -g $(WARN) -Wno-gnu-variable-sized-type-not-at-end -Wno-unused-function -pthread $(FUZZ_SAN)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_EMU_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(wildcard emu/kernel/*.c emu/nic/*.c))
.SECONDARY: $(FUZZ_LIB_OBJ) $(FUZZ_EMU_OBJ)
$(FUZZ_BUILD)/obj/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
$(FUZZ_BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_OBJ) $(FUZZ_EMU_OBJ) | $(DEPS_OK)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) -Itests/fuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< \
	    $(FUZZ_LIB_OBJ) $(if $(filter $*,$(FUZZ_EMU)),$(FUZZ_EMU_OBJ)) $(LIBS)
fuzz:
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz: $(FUZZ_CC) missing: run sh scripts/deps.sh all" >&2; exit 1; }
	$(MAKE) $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/%)
	sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)

demo: all
	@sh scripts/demo.sh $(BUILD)

# mlxd-bench (docs/performance.md); mlxd-bench-verbs is the one program that links libibverbs
# (rdma-core's libmlx5 on the same emulated rings, for the ratios).
$(BUILD)/bin/mlxd-bench-verbs: private LIBS += -libverbs
# deps.sh installs what the benchmark needs (as root; else it prints the apt-get command); a
# part whose tool is still missing is reported unavailable by bench.sh, and the others run.
bench: all $(RUNNER)
	@sh scripts/deps.sh bench || echo "make bench: some packages are missing (above): the parts that need them will say unavailable" >&2
	@sh scripts/bench.sh $(BUILD)

# make cross-aarch64: compiles (-Werror) the library, the tools, the emulator and, with
# aarch64-linux-gnu-g++ (deps.sh all), the hololink C++ library for aarch64; objects only: linking
# would need the arm64 builds of libpcap and zlib.
AARCH64_CXX := $(if $(shell command -v aarch64-linux-gnu-g++ 2>/dev/null),aarch64-linux-gnu-g++)
cross-aarch64:
	$(MAKE) BUILD=build-aarch64 CC=aarch64-linux-gnu-gcc $(patsubst $(BUILD)/%,build-aarch64/%,\
	  $(LIB_OBJ) $(TOOLCOMMON_OBJ) $(TOOL_SRC:%.c=$(BUILD)/obj/%.o) $(EMU_OBJ))
	$(if $(AARCH64_CXX),$(MAKE) BUILD=build-aarch64 CXX=$(AARCH64_CXX) $(patsubst $(BUILD)/%,build-aarch64/%,$(HL_OBJ)),\
	  @echo "make cross-aarch64: aarch64-linux-gnu-g++ missing (sh scripts/deps.sh all): hololink/ not built" >&2)

# --- install ----------------------------------------------------------------------------------
PUBLIC_HEADERS := $(wildcard abi/mlxd_*.h uverbs/mlxd_*.h mlx5/mlxd_*.h receiver/mlxd_*.h emu/mlxd_*.h)
install: all
	install -d $(DESTDIR)$(PREFIX)/include/mlx5direct $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(PREFIX)/include/mlx5direct/
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED) $(DESTDIR)$(PREFIX)/lib/libmlx5direct.so.0
	ln -sf libmlx5direct.so.0 $(DESTDIR)$(PREFIX)/lib/libmlx5direct.so
	install -m 755 $(EMU) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/
	for pc in mlx5direct mlx5direct-emu; do sed -e 's|@PREFIX@|$(PREFIX)|g' scripts/$$pc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$$pc.pc; done
ifeq ($(HAVE_CXX),1)
	install -d $(DESTDIR)$(PREFIX)/include/mlx5direct/hololink/module
	install -m 644 $(HL_HEADERS) $(DESTDIR)$(PREFIX)/include/mlx5direct/hololink/module/
	install -m 644 $(HL_STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(HL_SHARED) $(DESTDIR)$(PREFIX)/lib/libmlx5direct-hololink.so.0
	ln -sf libmlx5direct-hololink.so.0 $(DESTDIR)$(PREFIX)/lib/libmlx5direct-hololink.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' scripts/mlx5direct-hololink.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/mlx5direct-hololink.pc
endif

clean:
	rm -rf $(BUILD) build-asan build-tsan build-aarch64

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
