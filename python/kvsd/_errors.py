"""kvsd.Error and one subclass per libkvs error code.

The classes are made at import time from the library itself: every code for
which kvs_errname() knows a name gets a class, whose docstring is
kvs_strerror() of the code.  Nothing here repeats the C list, so a code added
to KVS_ERRNO_MAP in kvs.h appears in Python without a change here.  The only
Python-side table is _FRIENDLY: readable class names (and a built-in base
class where one fits) for codes a user would catch; a code it does not name
is still a class, called by its C name (kvsd.KVS_EXYZ).  Every class is also
reachable by its C name: kvsd.KVS_EPEERDEAD is kvsd.PeerDead.
"""
from . import _lib

# C name -> (Python class name, extra built-in bases)
_FRIENDLY = {
    "KVS_EINVAL": ("InvalidArgument", (ValueError,)),
    "KVS_ENOMEM": ("NoMemory", (MemoryError,)),
    "KVS_ECONFIG": ("ConfigError", ()),
    "KVS_ENOTSUP": ("NotSupported", ()),
    "KVS_ENOKEY": ("NoKey", (LookupError,)),
    "KVS_ESHAPE": ("ShapeError", (ValueError,)),
    "KVS_EPEERDEAD": ("PeerDead", ()),
    "KVS_ETIMEDOUT": ("Timeout", ()),
    "KVS_ECLOSED": ("Closed", ()),
    "KVS_EPROTO": ("ProtocolError", ()),
    "KVS_ENET": ("NetworkError", ()),
    "KVS_EDUP": ("DuplicatePush", ()),
    "KVS_ETOOBIG": ("TooBig", ()),
    "KVS_EDEVICE": ("DeviceError", ()),
    "KVS_EINTERNAL": ("InternalError", ()),
    "KVS_EAUTH": ("AuthError", ()),
    "KVS_EFULL": ("QueueFull", ()),
    "KVS_EMEMBERSHIP": ("MembershipChanged", ()),
}

_UNKNOWN = "KVS_E?"
_SCAN = 1024  # codes -1 .. -_SCAN are asked for a name


class Error(Exception):
    """A libkvs failure.

    code:    the KVS_E* value (negative int)
    name:    its C name, e.g. "KVS_EPEERDEAD"
    message: what happened, in words (kvs_last_error() of the failed call;
             kvs_strerror(code) when the library said nothing more)
    """

    code = None
    name = None

    def __init__(self, message=None, code=None):
        if code is None:
            code = type(self).code
        self.code = code
        self.name = _lib.text(_lib.lib.kvs_errname(code)) if code is not None else "KVS_E?"
        if not message:
            message = _lib.text(_lib.lib.kvs_strerror(code)) if code is not None else "error"
        self.message = message
        super().__init__("%s: %s" % (self.name, message))

    def __reduce__(self):
        return (type(self), (self.message, self.code))


def _make_classes():
    by_code = {}
    by_name = {}
    for code in range(-1, -_SCAN - 1, -1):
        cname = _lib.text(_lib.lib.kvs_errname(code))
        if cname == _UNKNOWN or not cname.startswith("KVS_E"):
            continue
        pyname, bases = _FRIENDLY.get(cname, (cname, ()))
        cls = type(pyname, (Error,) + bases, {
            "code": code,
            "name": cname,
            "__doc__": "%s (%d): %s." % (cname, code, _lib.text(_lib.lib.kvs_strerror(code))),
            "__module__": "kvsd",
        })
        by_code[code] = cls
        by_name[cname] = cls
    return by_code, by_name


by_code, by_name = _make_classes()


class KeyCollision(by_name.get("KVS_EINVAL", Error)):
    """Two different string keys (or a string and an integer key) map to the
    same 64-bit key.  Raised by init, and by any call that names a string
    whose 64-bit key another name already took in this store.  A subclass
    of InvalidArgument (code KVS_EINVAL)."""

    __module__ = "kvsd"


def from_code(code, message=None):
    """The exception for a code returned by the library; message defaults to
    the calling thread's kvs_last_error()."""
    if message is None:
        message = _lib.last_error()
    cls = by_code.get(code, Error)
    return cls(message, code)
