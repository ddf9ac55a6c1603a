# reduce/module.mk - extra rules for reduce/ (included by the top Makefile).
# The kernel files are built at -O3 so that GCC's vectoriser uses its dynamic
# cost model (at -O2 GCC 12 only takes loops without a scalar epilogue).
$(BUILD)/obj/reduce/red_kern_%.o: KVS_CFLAGS += -O3
# the codecs' word loops are vectorised at -O3 too
$(BUILD)/obj/reduce/codec.o: KVS_CFLAGS += -O3
