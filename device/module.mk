# device/module.mk - the CUDA plugin (included by the top Makefile).
#   $(BUILD)/libkvs_cuda.so   reduce/'s CUDA sum kernels, dlopened at run time by
#                             device/cuda.c; built by `make` where nvcc is found.
# libkvs itself never links CUDA: one libkvs runs with or without GPUs.
ifneq ($(NVCC),)
CUDA_PLUGIN := $(BUILD)/libkvs_cuda.so
$(CUDA_PLUGIN): reduce/reduce_cuda.cu reduce/reduce_cuda.h include/kvs.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -shared -cudart shared -o $@ reduce/reduce_cuda.cu \
	    -Xlinker -rpath -Xlinker $(CUDA_HOME)/lib64
bin: $(CUDA_PLUGIN)
endif
ifneq ($(NVCC),)
install: install-cuda-plugin
install-cuda-plugin: $(CUDA_PLUGIN)
	install -D -m 755 $(CUDA_PLUGIN) $(DESTDIR)$(LIBDIR)/libkvs_cuda.so
uninstall: uninstall-cuda-plugin
uninstall-cuda-plugin:
	rm -f $(DESTDIR)$(LIBDIR)/libkvs_cuda.so
.PHONY: install-cuda-plugin uninstall-cuda-plugin
endif
