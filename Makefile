# kvsd build.  Targets: all (default), test, demo, bench, asan, install, uninstall, clean.
# `make` (all) builds the libraries, the programs and every test program (the
# unit tests need check: make deps-test); `make bin` only what install needs.
# Project flags live in KVS_CFLAGS; the user's CFLAGS/LDFLAGS are appended.
# Components may add rules in <dir>/module.mk (included below if present).

BUILD    ?= build
PREFIX   ?= /usr/local
CC       ?= cc
NVCC     ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

# Every function and object in a section of its own, and the linker drops the
# sections nothing reaches: each binary (and libkvs.so, from its exported API)
# carries only the code it calls (tests/symbols/check-linkmap.py checks it).
KVS_CFLAGS  := -std=gnu11 -O2 -g -Wall -Wextra -fPIC -pthread -D_GNU_SOURCE \
               -ffunction-sections -fdata-sections \
               -Iinclude -I. -MMD -MP $(EXTRA_CFLAGS)
KVS_LDFLAGS := -pthread -Wl,--gc-sections $(EXTRA_LDFLAGS)
LIBS        := -lzmq -luv -lsodium -lm
# evaluated when linking (after `make deps` has installed check)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck_pic -lsubunit -lrt -lm -pthread)

ALL_CFLAGS  = $(KVS_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(KVS_LDFLAGS) $(LDFLAGS)

COMMON_SRC := $(wildcard common/*.c)
PROTO_SRC  := $(wildcard proto/*.c)
NET_SRC    := $(wildcard net/*.c)
REDUCE_SRC := $(wildcard reduce/*.c)
TREE_SRC   := $(wildcard tree/*.c)
OPTIM_SRC  := $(wildcard optim/*.c)
DEVICE_SRC := $(wildcard device/*.c)
WORKER_SRC := $(wildcard worker/*.c)
SERVER_SRC := $(wildcard server/*.c)
SCHED_SRC  := $(wildcard scheduler/*.c)
BENCH_SRC  := $(wildcard tools/kvs-bench.c tools/bench_*.c)
TOPO_SRC   := $(wildcard tools/kvs-topo.c)
UNIT_SRC   := $(wildcard tests/unit/*.c)
CUDA_SRC   := $(if $(NVCC),$(wildcard reduce/*.cu tree/*.cu tests/gpu/backend/*.cu),)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

CORE_OBJ   := $(call obj,$(COMMON_SRC) $(PROTO_SRC) $(NET_SRC) $(REDUCE_SRC) $(TREE_SRC) $(OPTIM_SRC))
LIBKVS_OBJ := $(CORE_OBJ) $(call obj,$(DEVICE_SRC) $(WORKER_SRC))

LIBKVS_A   := $(BUILD)/libkvs.a
LIBKVS_SO  := $(BUILD)/libkvs.so
SCHED_BIN  := $(BUILD)/kvs-scheduler
SERVER_BIN := $(BUILD)/kvs-server
BENCH_BIN  := $(BUILD)/kvs-bench
TOPO_BIN   := $(BUILD)/kvs-topo
UNIT_BIN   := $(BUILD)/test-unit

BINS := $(SCHED_BIN) $(SERVER_BIN) $(BENCH_BIN) $(if $(TOPO_SRC),$(TOPO_BIN),)

.PHONY: all bin tests test unit integ demo bench asan install clean deps deps-run deps-test gpu-test
all: bin tests
bin: $(LIBKVS_A) $(LIBKVS_SO) $(BINS)

# Debian packages (deploy/install-deps.sh): deps-run what building and running
# need (make demo); deps (= deps-test) adds what the tests, benchmarks and the
# Python examples need (make test, make bench).
deps deps-test:
	@sh deploy/install-deps.sh run test
deps-run:
	@sh deploy/install-deps.sh run

# (the dependency file names the object both ways: a build given an absolute
# BUILD and a later relative one share it)
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MT $(abspath $@) -MT $(patsubst $(CURDIR)/%,%,$(abspath $@)) -c $< -o $@

$(LIBKVS_A): $(LIBKVS_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBKVS_SO): $(LIBKVS_OBJ) worker/libkvs.ver
	$(CC) -shared -Wl,-soname,libkvs.so.0 -Wl,--version-script=worker/libkvs.ver -o $@ \
	    $(LIBKVS_OBJ) $(ALL_LDFLAGS) $(LIBS)

$(SCHED_BIN): $(call obj,$(SCHED_SRC) $(COMMON_SRC) $(PROTO_SRC) $(NET_SRC))
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(SERVER_BIN): $(call obj,$(SERVER_SRC)) $(CORE_OBJ)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(BENCH_BIN): $(call obj,$(BENCH_SRC)) $(LIBKVS_A)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(TOPO_BIN): $(call obj,$(TOPO_SRC)) $(LIBKVS_A)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

# Unit tests: every tests/unit/*.c that defines `Suite *NAME_suite(void)` is
# collected into one runner (tests/unit/main.c includes the generated list).
$(BUILD)/gen/suites.h: $(UNIT_SRC)
	@mkdir -p $(dir $@)
	@grep -ho '^Suite \*[a-z0-9_]*_suite(void)' $(UNIT_SRC) | sed 's/^Suite \*\([a-z0-9_]*\)_suite(void)/SUITE(\1)/' | sort > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(BUILD)/obj/tests/unit/main.o: $(BUILD)/gen/suites.h
$(BUILD)/obj/tests/unit/%.o: KVS_CFLAGS += -I$(BUILD)/gen

$(UNIT_BIN): $(call obj,$(UNIT_SRC)) $(call obj,server/norms.c server/decomp.c server/buf.c server/push.c server/cma.c server/update.c scheduler/promote.c) $(LIBKVS_A)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS) $(CHECK_LIBS)

# CUDA (only where nvcc is found): device objects and GPU tests.
ifneq ($(NVCC),)
CUDA_OBJ := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CUDA_SRC))
# real code for A100 (sm_80) and H100/H200 (sm_90), PTX for newer GPUs to
# JIT-compile (docs/guide/gpus.md: supported GPUs, minimum driver)
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVCC_FLAGS ?= -O3 -std=c++17 -Xcompiler -fPIC -Iinclude -I. -DKVS_HAVE_CUDA $(NVCC_ARCH)
$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@
$(BUILD)/libkvs_cuda.a: $(CUDA_OBJ)
	rm -f $@ && ar rcs $@ $^
# GPU tests: each tests/gpu/NAME.cu is a program; exit 0 pass, 1 fail, 77 skip
# (no GPU).  tests/gpu/run.sh builds them (make gpu-test) and runs them all.
GPU_TEST_SRC := $(wildcard tests/gpu/*.cu)
GPU_TEST_BIN := $(patsubst tests/gpu/%.cu,$(BUILD)/gpu/%,$(GPU_TEST_SRC))
$(BUILD)/gpu/%: tests/gpu/%.cu $(BUILD)/libkvs_cuda.a $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -o $@ $< $(BUILD)/libkvs_cuda.a $(LIBKVS_A) -lcudart -Xlinker -rpath -Xlinker $(CUDA_HOME)/lib64 $(LIBS) -lpthread
gpu-test: $(GPU_TEST_BIN)
else
gpu-test:
	@echo "gpu-test: nvcc not found; CUDA code and GPU tests are not built"
endif

-include $(wildcard */module.mk tests/*/module.mk)

# every test program (the module.mk files add theirs to TEST_DEPS); without
# check (make deps) the unit tests are left out with a line saying so
HAVE_CHECK := $(shell pkg-config --exists check 2>/dev/null && echo yes)
tests: $(if $(HAVE_CHECK),$(UNIT_BIN),no-check) $(TEST_DEPS)
.PHONY: no-check
no-check:
	@echo "make: $(UNIT_BIN) not built: the check library is missing (make deps)" >&2

unit: $(UNIT_BIN)
	$(UNIT_BIN)

# where nvcc exists the CUDA code is compiled too; its tests skip without a GPU
test: deps all $(UNIT_BIN) $(TEST_DEPS) $(if $(NVCC),gpu-test)
	@BUILD=$(BUILD) sh tests/run-all.sh

demo: deps-run bin
	@BUILD=$(BUILD) sh bench/demo.sh

bench: deps bin
	@BUILD=$(BUILD) sh bench/run.sh

# AddressSanitizer + UndefinedBehaviorSanitizer: the C test programs
# (tests/run-all.sh, KVS_TEST_SANITIZED) on a build of their own
asan: deps
	$(MAKE) BUILD=build-asan NVCC= EXTRA_CFLAGS="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	    EXTRA_LDFLAGS="-fsanitize=address,undefined" all tests
	@BUILD=build-asan KVS_TEST_SANITIZED=1 sh tests/run-all.sh

# install, uninstall: deploy/module.mk

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
