# tests/device/module.mk - multi-process device tests (simulated devices).
#   $(BUILD)/tests/kvs-devworker   worker with device arrays (links libkvs)
DEVWORKER := $(BUILD)/tests/kvs-devworker
$(DEVWORKER): $(call obj,tests/device/devworker.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)
TEST_DEPS += $(DEVWORKER)
#   $(BUILD)/tests/libfakecuda.so  a stand-in for libcudart (tests/device/fakecuda.c):
#                                  the unit tests run device/cuda.c on it
FAKECUDA := $(BUILD)/tests/libfakecuda.so
$(FAKECUDA): $(call obj,tests/device/fakecuda.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,--exclude-libs,ALL -o $@ $^ $(ALL_LDFLAGS) -lm -pthread
$(UNIT_BIN): | $(FAKECUDA)
TEST_DEPS += $(FAKECUDA)
