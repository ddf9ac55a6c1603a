# tools/module.mk - kvs-trace (reads KVS_TRACE timelines; included by the
# top-level Makefile).
TRACE_BIN := $(BUILD)/kvs-trace
BINS += $(TRACE_BIN)
bin: $(TRACE_BIN)

$(TRACE_BIN): $(call obj,tools/kvs-trace.c) $(LIBKVS_A)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

# kvs-keygen: CURVE key pairs for jobs with per-node key files.
KEYGEN_BIN := $(BUILD)/kvs-keygen
BINS += $(KEYGEN_BIN)
bin: $(KEYGEN_BIN)

$(KEYGEN_BIN): $(call obj,tools/kvs-keygen.c)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) -lzmq
