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

# The scheduler's and the server's dispatch, in-process (fuzz_sched.c,
# fuzz_server.c; messages made by fuzz_msg.c): same two builds.
#   make fuzz-sched, make fuzz-server   libFuzzer + ASan/UBSan for FUZZ_SECONDS;
#                                       new inputs go to tests/fuzz/sched-corpus
#                                       and tests/fuzz/server-corpus (minimise
#                                       with make fuzz-merge before committing)
#   $(BUILD)/fuzz/replay-sched, replay-server   replay the corpora + random
#                                       inputs with $(CC) (make test)
# `make fuzz` runs every libFuzzer target in turn, FUZZ_SECONDS each.
FUZZ_OBJ      := $(FUZZ_DIR)/obj
FUZZ_CFLAGS   := -std=gnu11 -g -O1 -Iinclude -I. -D_GNU_SOURCE -pthread -MMD -MP \
                 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
                 -fno-sanitize-recover=undefined -Wno-ignored-attributes
FUZZ_LDFLAGS  := -fsanitize=fuzzer,address,undefined -pthread
fuzz_obj       = $(patsubst %.c,$(FUZZ_OBJ)/%.o,$(1))
SCHED_FUZZ_LIB  := $(filter-out scheduler/main.c scheduler/sched.c,$(SCHED_SRC)) \
                   $(COMMON_SRC) $(PROTO_SRC) $(NET_SRC)
SERVER_FUZZ_LIB := $(filter-out server/main.c server/server.c,$(SERVER_SRC)) \
                   $(COMMON_SRC) $(PROTO_SRC) $(NET_SRC) $(TREE_SRC) $(OPTIM_SRC)
# reduce/'s SIMD kernels use GCC's target attributes: the fuzz binary links
# the normal build's objects (not instrumented; they are not what is fuzzed)
SCHED_REPLAY    := $(FUZZ_DIR)/replay-sched
SERVER_REPLAY   := $(FUZZ_DIR)/replay-server
SCHED_FUZZ_BIN  := $(FUZZ_DIR)/fuzz-sched
SERVER_FUZZ_BIN := $(FUZZ_DIR)/fuzz-server
SCHED_CORPUS    := tests/fuzz/sched-corpus
SERVER_CORPUS   := tests/fuzz/server-corpus

$(FUZZ_OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) $(FUZZ_CFLAGS) -c $< -o $@

$(SCHED_REPLAY): $(call obj,tests/fuzz/replay.c tests/fuzz/fuzz_msg.c tests/fuzz/fuzz_sched.c \
                 $(SCHED_FUZZ_LIB))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(SERVER_REPLAY): $(call obj,tests/fuzz/replay.c tests/fuzz/fuzz_msg.c tests/fuzz/fuzz_server.c \
                  $(SERVER_FUZZ_LIB) $(REDUCE_SRC))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(SCHED_FUZZ_BIN): $(call fuzz_obj,tests/fuzz/fuzz_msg.c tests/fuzz/fuzz_sched.c $(SCHED_FUZZ_LIB))
	$(FUZZ_CLANG) $(FUZZ_LDFLAGS) -o $@ $^ $(LIBS)

$(SERVER_FUZZ_BIN): $(call fuzz_obj,tests/fuzz/fuzz_msg.c tests/fuzz/fuzz_server.c $(SERVER_FUZZ_LIB)) \
                    $(call obj,$(REDUCE_SRC))
	$(FUZZ_CLANG) $(FUZZ_LDFLAGS) -o $@ $^ $(LIBS)

# -rss_limit_mb: a target that grows is a finding too
FUZZ_RUN_OPTS = -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=2048 \
                -timeout=20 -artifact_prefix=$(FUZZ_DIR)/
.PHONY: fuzz-sched fuzz-server fuzz-merge
fuzz-sched: $(SCHED_FUZZ_BIN)
	@mkdir -p $(SCHED_CORPUS)
	$(SCHED_FUZZ_BIN) $(FUZZ_RUN_OPTS) $(SCHED_CORPUS)
fuzz-server: $(SERVER_FUZZ_BIN)
	@mkdir -p $(SERVER_CORPUS)
	$(SERVER_FUZZ_BIN) $(FUZZ_RUN_OPTS) $(SERVER_CORPUS)
# Minimise a corpus that grew: keep only inputs that add coverage.
fuzz-merge: $(SCHED_FUZZ_BIN) $(SERVER_FUZZ_BIN)
	for t in sched server; do \
	    rm -rf $(FUZZ_DIR)/min-$$t && mkdir -p $(FUZZ_DIR)/min-$$t && \
	    $(FUZZ_DIR)/fuzz-$$t -merge=1 $(FUZZ_DIR)/min-$$t tests/fuzz/$$t-corpus && \
	    rm -f tests/fuzz/$$t-corpus/* && cp $(FUZZ_DIR)/min-$$t/* tests/fuzz/$$t-corpus/ || exit 1; \
	done
fuzz: fuzz-http fuzz-sched fuzz-server
TEST_DEPS += $(SCHED_REPLAY) $(SERVER_REPLAY)
-include $(shell find $(FUZZ_OBJ) -name '*.d' 2>/dev/null)
