# tests/device/module.mk - multi-process device tests (simulated devices).
#   $(BUILD)/tests/kvs-devworker   worker with device arrays (links libkvs)
DEVWORKER := $(BUILD)/tests/kvs-devworker
$(DEVWORKER): $(call obj,tests/device/devworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)
TEST_DEPS += $(DEVWORKER)
