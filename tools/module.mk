# tools/module.mk - kvs-trace (reads KVS_TRACE timelines; included by the
# top-level Makefile).
TRACE_BIN := $(BUILD)/kvs-trace
BINS += $(TRACE_BIN)
all: $(TRACE_BIN)

$(TRACE_BIN): $(call obj,tools/kvs-trace.c) $(LIBKVS_A)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)
