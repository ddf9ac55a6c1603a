# deploy/module.mk - kvs-guard, the exec wrapper through which kvs-launch
# starts every local process (they die with the launcher, even on SIGKILL).

GUARD_BIN := $(BUILD)/kvs-guard
all: $(GUARD_BIN)
BINS += $(GUARD_BIN)

$(GUARD_BIN): $(call obj,deploy/kvs-guard.c)
	$(CC) -o $@ $^ $(ALL_LDFLAGS)
