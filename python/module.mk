# The kvsd Python package (python/kvsd, pure Python over libkvs with ctypes).
# `make install` also puts it in $(PREFIX)/lib/python3/site-packages/kvsd,
# where it finds $(LIBDIR)/libkvs.so by itself (_installed.py names LIBDIR).

PY_SITE := lib/python3/site-packages
PY_SRC  := $(wildcard python/kvsd/*.py)
PYTHON3 ?= /usr/bin/python3

.PHONY: install-python demo-python
install: install-python
install-python:
	install -d $(DESTDIR)$(PREFIX)/$(PY_SITE)/kvsd
	install -m 644 $(PY_SRC) $(DESTDIR)$(PREFIX)/$(PY_SITE)/kvsd/
	$(PYTHON3) -c 'import sys; print("LIBDIR = %r" % sys.argv[1])' '$(LIBDIR)' \
	    > $(DESTDIR)$(PREFIX)/$(PY_SITE)/kvsd/_installed.py

# A small CNN trained data-parallel by 2 workers through kvsd (a few epochs).
demo-python: deps bin
	@BUILD=$(BUILD) PYTHON3=$(PYTHON3) sh examples/demo-python.sh

.PHONY: uninstall-python
uninstall: uninstall-python
uninstall-python:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/$(PY_SITE)/kvsd/,$(notdir $(PY_SRC)) _installed.py)
	rm -rf $(DESTDIR)$(PREFIX)/$(PY_SITE)/kvsd/__pycache__
	-rmdir $(DESTDIR)$(PREFIX)/$(PY_SITE)/kvsd $(DESTDIR)$(PREFIX)/$(PY_SITE) \
	    $(DESTDIR)$(PREFIX)/lib/python3 2>/dev/null || true
# kvsd.torch vs PyTorch DDP (gloo): a 25 M-parameter MLP, samples/s on one
# host and on two namespace hosts at 10 and 1 Gbit/s (raw output in
# bench/results/); then time per epoch of examples/train_digits.py, W = 2
# and 4 (bench/RESULTS.md).
.PHONY: bench-python
bench-python: deps bin
	@BUILD=$(BUILD) PYTHON3=$(PYTHON3) \
	    OUT=bench/results/$$(date -u +%Y-%m-%dT%H%MZ)-bench-python-$$(git rev-parse --short HEAD 2>/dev/null || echo src).txt \
	    bash bench/torch-vs-gloo.sh
	@BUILD=$(BUILD) PYTHON3=$(PYTHON3) sh bench/train_digits.sh
