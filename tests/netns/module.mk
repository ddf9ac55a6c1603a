# tests/netns/module.mk - the multi-host tests in network namespaces.
#   make test        runs tests/netns/test-netns.sh (from tests/run-all.sh)
#   make test-long   the long tests (tests/run-all.sh --long): these cases'
#                    long variants, bigger jobs and arrays, and the integration
#                    tests that skip without KVS_INTEG_LONG=1 (20-40 minutes)

.PHONY: test-long
test-long: deps all $(TEST_DEPS)
	@BUILD=$(BUILD) sh tests/run-all.sh --long
