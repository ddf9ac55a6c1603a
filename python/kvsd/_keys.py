"""Keys: 64-bit integers, or strings mapped to 64-bit integers.

A string key s becomes

    int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(),
                   "little") | (1 << 63)

that is, BLAKE2b with an 8-byte digest (RFC 7693, no key, no salt, no
personalisation) of the UTF-8 bytes, read as a little-endian unsigned
integer, with bit 63 set.  It is the same on every worker, every Python
version and every machine, and any program can compute it (C: the reference
BLAKE2b with outlen 8).  Bit 63 keeps string keys apart from integer keys
below 2**63; two strings (or a string and an integer >= 2**63) that land on
the same key are reported as kvsd.KeyCollision.
"""
import hashlib

TOP = 1 << 63
MAX = (1 << 64) - 1

_cache = {}


def of_str(s):
    """The 64-bit key of string s (see the module docstring)."""
    k = _cache.get(s)
    if k is None:
        k = int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(),
                           "little") | TOP
        if len(_cache) < 1 << 20:
            _cache[s] = k
    return k
