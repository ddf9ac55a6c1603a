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

TEST_DEPS += $(INTEG_RUNNER) $(INTEG_WORKER) $(INTEG_OPTWORKER)

integ: $(INTEG_RUNNER) $(INTEG_WORKER) $(INTEG_OPTWORKER) $(SCHED_BIN) $(SERVER_BIN)
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
