# kvsd build.  Targets: all (default), test, demo, bench, asan, install, uninstall, clean.
# Project flags live in KVS_CFLAGS; the user's CFLAGS/LDFLAGS are appended.
# Components may add rules in <dir>/module.mk (included below if present).

BUILD    ?= build
PREFIX   ?= /usr/local
CC       ?= cc
NVCC     ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

KVS_CFLAGS  := -std=gnu11 -O2 -g -Wall -Wextra -fPIC -pthread -D_GNU_SOURCE \
               -Iinclude -I. -MMD -MP $(EXTRA_CFLAGS)
KVS_LDFLAGS := -pthread $(EXTRA_LDFLAGS)
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
CUDA_SRC   := $(if $(NVCC),$(wildcard reduce/*.cu tree/*.cu),)

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

.PHONY: all test unit integ demo bench asan install clean deps gpu-test
all: $(LIBKVS_A) $(LIBKVS_SO) $(BINS)

deps:
	@sh deploy/install-deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

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

$(UNIT_BIN): $(call obj,$(UNIT_SRC)) $(LIBKVS_A)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS) $(CHECK_LIBS)

# CUDA (only where nvcc is found): device objects and GPU tests.
ifneq ($(NVCC),)
CUDA_OBJ := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CUDA_SRC))
NVCC_FLAGS ?= -O3 -std=c++17 -Xcompiler -fPIC -Iinclude -I. -DKVS_HAVE_CUDA
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

unit: $(UNIT_BIN)
	$(UNIT_BIN)

# where nvcc exists the CUDA code is compiled too; its tests skip without a GPU
test: deps all $(UNIT_BIN) $(TEST_DEPS) $(if $(NVCC),gpu-test)
	@BUILD=$(BUILD) sh tests/run-all.sh

demo: deps all
	@BUILD=$(BUILD) sh bench/demo.sh

bench: deps all
	@BUILD=$(BUILD) sh bench/run.sh

asan:
	$(MAKE) BUILD=build-asan NVCC= EXTRA_CFLAGS="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	    EXTRA_LDFLAGS="-fsanitize=address,undefined" test

# install, uninstall: deploy/module.mk

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
