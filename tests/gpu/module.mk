# tests/gpu/module.mk - the device layer's GPU checks (tests/gpu/run.sh).
#   $(BUILD)/tests/kvs-gpucheck   links libkvs's objects, needs no nvcc: it runs
#                                 on the CUDA devices, or simulated ones (--sim)
GPUCHECK := $(BUILD)/tests/kvs-gpucheck
$(GPUCHECK): $(call obj,tests/gpu/gpucheck.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)
TEST_DEPS += $(GPUCHECK)
