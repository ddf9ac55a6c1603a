# tests/fuzz/module.mk - fuzzing proto/ (included by the top-level Makefile).
#
#   make fuzz-corpus   build $(BUILD)/fuzz/run-corpus (replay.c) with $(CC) and replay
#                      tests/fuzz/corpus plus FUZZ_RUNS random inputs (CI-safe)
#   make fuzz          build every libFuzzer target (clang, ASan/UBSan: proto,
#                      http, sched, server) and fuzz each for FUZZ_SECONDS
#                      (default 60), one after the other; inputs that reach
#                      new coverage are added to the target's corpus under
#                      tests/fuzz/ (run-fuzz.sh), findings stay in
#                      $(BUILD)/fuzz/ (crash-*): fix, then add them by hand
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

$(FUZZ_RUNNER): $(call obj,tests/fuzz/replay.c tests/fuzz/fuzz_proto.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(FUZZ_BIN): $(FUZZ_TARGET_SRC) $(wildcard proto/*.h common/*.h include/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) -std=gnu11 -g -O1 -Iinclude -I. -D_GNU_SOURCE \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $@ $(FUZZ_TARGET_SRC)

.PHONY: fuzz fuzz-proto fuzz-corpus fuzz-seeds
fuzz-corpus: $(FUZZ_RUNNER)
	$(FUZZ_RUNNER) -n $(FUZZ_RUNS) $(FUZZ_CORPUS)

fuzz-proto: $(FUZZ_BIN)
	sh tests/fuzz/run-fuzz.sh $(FUZZ_BIN) $(FUZZ_CORPUS) $(FUZZ_SECONDS) $(FUZZ_DIR) -max_len=4096

fuzz-seeds: $(FUZZ_RUNNER)
	$(FUZZ_RUNNER) --write-seeds $(FUZZ_CORPUS)
TEST_DEPS += $(FUZZ_RUNNER)

# The metrics responder's HTTP parser (net/http.c): same two builds.
#   make fuzz-http          libFuzzer + ASan/UBSan for FUZZ_SECONDS
#   $(BUILD)/fuzz/run-http  replay tests/fuzz/http-corpus + random inputs (make test)
HTTP_RUNNER     := $(FUZZ_DIR)/run-http
HTTP_FUZZ_BIN   := $(FUZZ_DIR)/fuzz-http
HTTP_CORPUS     := tests/fuzz/http-corpus
HTTP_TARGET_SRC := tests/fuzz/fuzz_http.c net/http.c common/log.c common/config.c common/keyfile.c \
                   common/cfgsurvive.c common/metrics.c common/err.c

$(HTTP_RUNNER): $(call obj,tests/fuzz/run-http.c tests/fuzz/fuzz_http.c) $(LIBKVS_A)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(HTTP_FUZZ_BIN): $(HTTP_TARGET_SRC) $(wildcard net/*.h common/*.h include/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) -std=gnu11 -g -O1 -Iinclude -I. -D_GNU_SOURCE \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $@ $(HTTP_TARGET_SRC) -luv -lsodium -pthread -lm

.PHONY: fuzz-http
fuzz-http: $(HTTP_FUZZ_BIN)
	sh tests/fuzz/run-fuzz.sh $(HTTP_FUZZ_BIN) $(HTTP_CORPUS) $(FUZZ_SECONDS) $(FUZZ_DIR) -max_len=9000
TEST_DEPS += $(HTTP_RUNNER)

# The scheduler's and the server's dispatch, and a worker's handling of the
# servers' answers, in-process (fuzz_sched.c, fuzz_server.c, fuzz_worker.c;
# messages made by fuzz_msg.c): same two builds.
#   make fuzz-sched, fuzz-server, fuzz-worker   libFuzzer + ASan/UBSan for
#                                       FUZZ_SECONDS; new coverage goes to
#                                       tests/fuzz/{sched,server,worker}-corpus
#   $(BUILD)/fuzz/replay-sched, replay-server, replay-worker   replay the
#                                       corpora + random inputs with $(CC) (make test)
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
WORKER_FUZZ_LIB := $(WORKER_SRC) $(DEVICE_SRC) $(COMMON_SRC) $(PROTO_SRC) $(NET_SRC) \
                   $(TREE_SRC) $(OPTIM_SRC)
# reduce/'s SIMD kernels use GCC's target attributes: the fuzz binaries link
# the normal build's objects (not instrumented; they are not what is fuzzed)
SCHED_REPLAY    := $(FUZZ_DIR)/replay-sched
SERVER_REPLAY   := $(FUZZ_DIR)/replay-server
WORKER_REPLAY   := $(FUZZ_DIR)/replay-worker
SCHED_FUZZ_BIN  := $(FUZZ_DIR)/fuzz-sched
SERVER_FUZZ_BIN := $(FUZZ_DIR)/fuzz-server
WORKER_FUZZ_BIN := $(FUZZ_DIR)/fuzz-worker
SCHED_CORPUS    := tests/fuzz/sched-corpus
SERVER_CORPUS   := tests/fuzz/server-corpus
WORKER_CORPUS   := tests/fuzz/worker-corpus

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

$(WORKER_REPLAY): $(call obj,tests/fuzz/replay.c tests/fuzz/fuzz_msg.c tests/fuzz/fuzz_worker.c \
                  $(WORKER_FUZZ_LIB) $(REDUCE_SRC))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(ALL_LDFLAGS) $(LIBS)

$(SCHED_FUZZ_BIN): $(call fuzz_obj,tests/fuzz/fuzz_msg.c tests/fuzz/fuzz_sched.c $(SCHED_FUZZ_LIB))
	$(FUZZ_CLANG) $(FUZZ_LDFLAGS) -o $@ $^ $(LIBS)

$(SERVER_FUZZ_BIN): $(call fuzz_obj,tests/fuzz/fuzz_msg.c tests/fuzz/fuzz_server.c $(SERVER_FUZZ_LIB)) \
                    $(call obj,$(REDUCE_SRC))
	$(FUZZ_CLANG) $(FUZZ_LDFLAGS) -o $@ $^ $(LIBS)

$(WORKER_FUZZ_BIN): $(call fuzz_obj,tests/fuzz/fuzz_msg.c tests/fuzz/fuzz_worker.c $(WORKER_FUZZ_LIB)) \
                    $(call obj,$(REDUCE_SRC))
	$(FUZZ_CLANG) $(FUZZ_LDFLAGS) -o $@ $^ $(LIBS)

# -rss_limit_mb: a target that grows is a finding too
FUZZ_RUN_OPTS = -max_len=4096 -rss_limit_mb=2048 -timeout=20
.PHONY: fuzz-sched fuzz-server fuzz-worker
fuzz-sched: $(SCHED_FUZZ_BIN)
	sh tests/fuzz/run-fuzz.sh $(SCHED_FUZZ_BIN) $(SCHED_CORPUS) $(FUZZ_SECONDS) $(FUZZ_DIR) $(FUZZ_RUN_OPTS)
fuzz-server: $(SERVER_FUZZ_BIN)
	sh tests/fuzz/run-fuzz.sh $(SERVER_FUZZ_BIN) $(SERVER_CORPUS) $(FUZZ_SECONDS) $(FUZZ_DIR) $(FUZZ_RUN_OPTS)
fuzz-worker: $(WORKER_FUZZ_BIN)
	sh tests/fuzz/run-fuzz.sh $(WORKER_FUZZ_BIN) $(WORKER_CORPUS) $(FUZZ_SECONDS) $(FUZZ_DIR) $(FUZZ_RUN_OPTS)
# every target in turn (a recursive make: one at a time even under -j);
# one target's finding does not stop the others, but fails make fuzz
fuzz:
	@st=0; for t in proto http sched server worker; do $(MAKE) --no-print-directory fuzz-$$t || st=1; done; exit $$st
TEST_DEPS += $(SCHED_REPLAY) $(SERVER_REPLAY) $(WORKER_REPLAY)
-include $(shell find $(FUZZ_OBJ) -name '*.d' 2>/dev/null)
