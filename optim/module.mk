# optim/module.mk - the update kernels vectorise at -O3; sqrt without errno
# so it stays a SIMD instruction; no fused multiply-add, so results do not
# depend on the vector width (see optim_kern.c).
$(BUILD)/obj/optim/optim_kern.o: KVS_CFLAGS += -O3 -fno-math-errno -ffp-contract=off
$(BUILD)/obj/optim/lamb.o: KVS_CFLAGS += -O3 -fno-math-errno -ffp-contract=off
