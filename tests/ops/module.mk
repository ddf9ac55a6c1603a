# tests/ops/module.mk - operations tests (metrics, timeline, install):
#   $(BUILD)/tests/kvs-opsworker   the worker program tests/ops/test-ops.sh starts
OPS_WORKER := $(BUILD)/tests/kvs-opsworker

$(OPS_WORKER): $(call obj,tests/ops/opsworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

TEST_DEPS += $(OPS_WORKER)
