# deploy/module.mk - kvs-guard, the exec wrapper through which kvs-launch
# starts every local process (they die with the launcher, even on SIGKILL).

GUARD_BIN := $(BUILD)/kvs-guard
bin: $(GUARD_BIN)
BINS += $(GUARD_BIN)

$(GUARD_BIN): $(call obj,deploy/kvs-guard.c)
	$(CC) -o $@ $^ $(ALL_LDFLAGS)

# deploy/module.mk - install and uninstall (included by the top Makefile).
#
#   make install   [PREFIX=/usr/local] [DESTDIR=] [BINDIR=] [LIBDIR=] [INCLUDEDIR=] [MANDIR=]
#   make uninstall (same variables: removes exactly what install put there)
#
# The version comes from include/kvs.h (KVS_VERSION_*), the one place it is
# written: the shared library's file name, the pkg-config file, kvs-launch
# --version and the man pages all take it from there.

BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
MANDIR       ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
KVS_VERSION  := $(shell awk '/^\#define KVS_VERSION_(MAJOR|MINOR|PATCH) / { v[$$2] = $$3 } \
                END { print v["KVS_VERSION_MAJOR"] "." v["KVS_VERSION_MINOR"] "." v["KVS_VERSION_PATCH"] }' include/kvs.h)
MAN1 := $(wildcard man/*.1)
MAN3 := $(wildcard man/*.3)
INSTALLED_BINS = $(notdir $(BINS)) kvs-launch

.PHONY: uninstall
install: bin
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	    $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3
	install -m 755 $(BINS) $(DESTDIR)$(BINDIR)/
	sed -e 's|@KVS_VERSION@|$(KVS_VERSION)|' deploy/kvs-launch > $(DESTDIR)$(BINDIR)/kvs-launch.tmp
	chmod 755 $(DESTDIR)$(BINDIR)/kvs-launch.tmp && mv $(DESTDIR)$(BINDIR)/kvs-launch.tmp $(DESTDIR)$(BINDIR)/kvs-launch
	install -m 644 $(LIBKVS_A) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(LIBKVS_SO) $(DESTDIR)$(LIBDIR)/libkvs.so.$(KVS_VERSION)
	ln -sf libkvs.so.$(KVS_VERSION) $(DESTDIR)$(LIBDIR)/libkvs.so.0
	ln -sf libkvs.so.0 $(DESTDIR)$(LIBDIR)/libkvs.so
	install -m 644 include/kvs.h $(DESTDIR)$(INCLUDEDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	    -e 's|@VERSION@|$(KVS_VERSION)|g' deploy/kvs.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/kvs.pc
	for f in $(MAN1); do sed 's|@VERSION@|$(KVS_VERSION)|g' $$f > $(DESTDIR)$(MANDIR)/man1/$${f##*/}; done
	for f in $(MAN3); do sed 's|@VERSION@|$(KVS_VERSION)|g' $$f > $(DESTDIR)$(MANDIR)/man3/$${f##*/}; done

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(INSTALLED_BINS))
	rm -f $(DESTDIR)$(LIBDIR)/libkvs.a $(DESTDIR)$(LIBDIR)/libkvs.so $(DESTDIR)$(LIBDIR)/libkvs.so.0 \
	    $(DESTDIR)$(LIBDIR)/libkvs.so.$(KVS_VERSION)
	rm -f $(DESTDIR)$(INCLUDEDIR)/kvs.h $(DESTDIR)$(PKGCONFIGDIR)/kvs.pc
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1))) \
	    $(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(MAN3)))
	-rmdir $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
	    $(DESTDIR)$(MANDIR) 2>/dev/null || true
