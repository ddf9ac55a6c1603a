# tests/integ/module.mk - the multi-process integration tests (included by
# the top-level Makefile).
#   $(BUILD)/test-integ             the runner: table of tests, one forked child each
#   $(BUILD)/tests/kvs-testworker   the worker program the tests start (links libkvs)
# `make integ` builds everything they need and runs them.

INTEG_RUNNER_SRC := tests/integ/runner.c tests/integ/harness.c $(wildcard tests/integ/test_*.c)
INTEG_RUNNER     := $(BUILD)/test-integ
INTEG_WORKER     := $(BUILD)/tests/kvs-testworker

# The runner speaks ZeroMQ itself (garbage tests) but never links libkvs.
$(INTEG_RUNNER): $(call obj,$(INTEG_RUNNER_SRC))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) -lzmq

$(INTEG_WORKER): $(call obj,tests/integ/testworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

# The worker of the optimizer and checkpoint tests (test_optim.c).
INTEG_OPTWORKER  := $(BUILD)/tests/kvs-optworker
$(INTEG_OPTWORKER): $(call obj,tests/integ/optworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

# The worker of the row-sparse tests (test_sparse.c).
INTEG_SPARSEWORKER := $(BUILD)/tests/kvs-sparseworker
$(INTEG_SPARSEWORKER): $(call obj,tests/integ/sparseworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

# The worker of the worker memory tests (test_memory.c).
INTEG_MEMWORKER  := $(BUILD)/tests/kvs-memworker
$(INTEG_MEMWORKER): $(call obj,tests/integ/memworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

TEST_DEPS += $(INTEG_RUNNER) $(INTEG_WORKER) $(INTEG_OPTWORKER) $(INTEG_SPARSEWORKER) $(INTEG_MEMWORKER)

integ: $(INTEG_RUNNER) $(INTEG_WORKER) $(INTEG_OPTWORKER) $(INTEG_SPARSEWORKER) $(INTEG_MEMWORKER) $(SCHED_BIN) $(SERVER_BIN)
	BUILD=$(BUILD) $(INTEG_RUNNER) $(INTEG_ARGS)

# kvs-server with checkpoint fault injection (KVS_TEST_CKPT_CRASH, server/ctl.c):
# the crash tests of test_optim.c start it for the server that dies.
INTEG_FAULT_SERVER := $(BUILD)/tests/kvs-server-faults
$(BUILD)/obj/tests/faults/server/ctl.o: server/ctl.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DKVS_CKPT_FAULTS -c $< -o $@
$(INTEG_FAULT_SERVER): $(filter-out $(call obj,server/ctl.c),$(call obj,$(SERVER_SRC))) \
                       $(BUILD)/obj/tests/faults/server/ctl.o $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)
TEST_DEPS += $(INTEG_FAULT_SERVER)
integ: $(INTEG_FAULT_SERVER)

# The worker of the gradient compression tests (test_compress.c); it links
# reduce/codec.h from libkvs.a for its reference of the codecs.
INTEG_COMPWORKER := $(BUILD)/tests/kvs-compworker
$(INTEG_COMPWORKER): $(call obj,tests/integ/compworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)
TEST_DEPS += $(INTEG_COMPWORKER)
integ: $(INTEG_COMPWORKER)

# The worker of the elastic membership tests (test_elastic.c).
INTEG_ELASTICWORKER := $(BUILD)/tests/kvs-elasticworker
$(INTEG_ELASTICWORKER): $(call obj,tests/integ/elasticworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)
TEST_DEPS += $(INTEG_ELASTICWORKER)
integ: $(INTEG_ELASTICWORKER)

# The worker of the replicated server tests (test_replica.c).
INTEG_REPLWORKER := $(BUILD)/tests/kvs-replworker
$(INTEG_REPLWORKER): $(call obj,tests/integ/replworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)
TEST_DEPS += $(INTEG_REPLWORKER)
integ: $(INTEG_REPLWORKER)
