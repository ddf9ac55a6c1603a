# tests/netns/module.mk - the multi-host tests in network namespaces.
#   make test        runs tests/netns/test-netns.sh (from tests/run-all.sh)
#   make test-long   the long variants: bigger jobs and arrays (a few minutes)

.PHONY: test-long
test-long: deps all $(TEST_DEPS)
	@BUILD=$(BUILD) bash tests/netns/test-netns.sh --long
