# tests/fuzz/module.mk - fuzzing proto/ (included by the top-level Makefile).
#
#   make fuzz-corpus   build $(BUILD)/fuzz/run-corpus with $(CC) and replay
#                      tests/fuzz/corpus plus FUZZ_RUNS random inputs (CI-safe)
#   make fuzz          build $(BUILD)/fuzz/fuzz-proto with clang's libFuzzer +
#                      ASan/UBSan and fuzz for FUZZ_SECONDS, starting from the
#                      corpus (new finds go to $(BUILD)/fuzz/corpus)
#   make fuzz-seeds    rewrite the built-in seeds into tests/fuzz/corpus
#
# The target (fuzz_proto.c) needs only proto/ and common/err.c.

FUZZ_DIR      := $(BUILD)/fuzz
FUZZ_CORPUS   := tests/fuzz/corpus
FUZZ_RUNS     ?= 200000
FUZZ_SECONDS  ?= 60
FUZZ_CLANG    ?= clang
FUZZ_RUNNER   := $(FUZZ_DIR)/run-corpus
FUZZ_BIN      := $(FUZZ_DIR)/fuzz-proto
FUZZ_TARGET_SRC := tests/fuzz/fuzz_proto.c proto/proto.c common/err.c

$(FUZZ_RUNNER): $(call obj,tests/fuzz/run-corpus.c tests/fuzz/fuzz_proto.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(FUZZ_BIN): $(FUZZ_TARGET_SRC) $(wildcard proto/*.h common/*.h include/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) -std=gnu11 -g -O1 -Iinclude -I. -D_GNU_SOURCE \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $@ $(FUZZ_TARGET_SRC)

.PHONY: fuzz fuzz-corpus fuzz-seeds
fuzz-corpus: $(FUZZ_RUNNER)
	$(FUZZ_RUNNER) -n $(FUZZ_RUNS) $(FUZZ_CORPUS)

fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus $(FUZZ_CORPUS)

fuzz-seeds: $(FUZZ_RUNNER)
	$(FUZZ_RUNNER) --write-seeds $(FUZZ_CORPUS)
TEST_DEPS += $(FUZZ_RUNNER)

# The metrics responder's HTTP parser (net/http.c): same two builds.
#   make fuzz-http          libFuzzer + ASan/UBSan for FUZZ_SECONDS
#   $(BUILD)/fuzz/run-http  replay tests/fuzz/http-corpus + random inputs (make test)
HTTP_RUNNER     := $(FUZZ_DIR)/run-http
HTTP_FUZZ_BIN   := $(FUZZ_DIR)/fuzz-http
HTTP_CORPUS     := tests/fuzz/http-corpus
HTTP_TARGET_SRC := tests/fuzz/fuzz_http.c net/http.c common/log.c common/config.c common/metrics.c common/err.c

$(HTTP_RUNNER): $(call obj,tests/fuzz/run-http.c tests/fuzz/fuzz_http.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(HTTP_FUZZ_BIN): $(HTTP_TARGET_SRC) $(wildcard net/*.h common/*.h include/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) -std=gnu11 -g -O1 -Iinclude -I. -D_GNU_SOURCE \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $@ $(HTTP_TARGET_SRC) -luv -pthread -lm

.PHONY: fuzz-http
fuzz-http: $(HTTP_FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/http-corpus
	$(HTTP_FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=9000 -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/http-corpus $(HTTP_CORPUS)
TEST_DEPS += $(HTTP_RUNNER)
