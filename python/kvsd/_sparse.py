"""Row-sparse keys for kvsd.Store (kvs.h "Row-sparse arrays").

A row-sparse key is a dense table of rows (init_row_sparse: a 2-D array,
rows x row_len); a push carries only some rows: an (ids, rows) pair (ids:
int64 row ids, distinct, any order; rows: len(ids) x row_len) or a
torch.sparse_coo tensor of the table's shape (sparse in its rows, or in
both dimensions).  row_sparse_pull(key, ids, out) pulls those rows.
"""
import ctypes

import numpy as np

from . import _arrays, _errors
from ._lib import KvsArray, lib


class KvsRsp(ctypes.Structure):
    """struct kvs_rsp."""

    _fields_ = [("row_ids", ctypes.c_void_p), ("nrows", ctypes.c_uint64), ("rows", KvsArray)]


_P = ctypes.POINTER
_store_p = ctypes.c_void_p
_PROTOTYPES = {
    "kvs_init_row_sparse": [_store_p, ctypes.c_size_t, _P(ctypes.c_uint64), _P(KvsArray),
                            _P(ctypes.c_uint64)],
    "kvs_push_rsp": [_store_p, ctypes.c_size_t, _P(ctypes.c_uint64), _P(KvsRsp), ctypes.c_int],
    "kvs_pushpull_rsp": [_store_p, ctypes.c_size_t, _P(ctypes.c_uint64), _P(KvsRsp),
                         _P(KvsArray), ctypes.c_int],
    "kvs_row_sparse_pull": [_store_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64,
                            _P(KvsArray)],
}
for _name, _args in _PROTOTYPES.items():
    _f = getattr(lib, _name, None)
    if _f is not None:
        _f.restype = ctypes.c_int
        _f.argtypes = _args


def _fn(name):
    f = getattr(lib, name, None)
    if f is None:
        raise _errors.by_name["KVS_ENOTSUP"]("this libkvs has no %s(): row-sparse keys need "
                                             "a newer library" % name)
    return f


def _shape(a):
    s = getattr(a, "shape", None)
    return tuple(s) if s is not None else None


def ids_of(ids, what):
    """ids as a C-contiguous int64 NumPy array (a copy when needed)."""
    if _arrays._is_torch(ids):
        ids = ids.detach().cpu().numpy()
    a = np.asarray(ids)
    if a.ndim != 1:
        raise ValueError("%s: row ids must be 1-D, got shape %s" % (what, a.shape))
    if a.size and a.dtype.kind not in "iu":
        raise TypeError("%s: row ids must be integers, got %s" % (what, a.dtype))
    return np.ascontiguousarray(a, dtype=np.int64)


def _from_coo(t, what):
    import torch
    t = t.coalesce()
    if t.dim() != 2:
        raise ValueError("%s: a sparse tensor of %d dimensions (a row-sparse key is 2-D)"
                         % (what, t.dim()))
    if t.sparse_dim() == 1:
        ids, rows = t.indices()[0], t.values()
    else:
        idx = t.indices()
        ids, inv = torch.unique(idx[0], return_inverse=True)
        rows = torch.zeros((ids.numel(), t.shape[1]), dtype=t.dtype, device=t.device)
        rows[inv, idx[1]] = t.values()
    return ids_of(ids, what), rows.contiguous()


def is_pair(v):
    return (isinstance(v, (tuple, list)) and len(v) == 2) or (
        _arrays._is_torch(v) and getattr(v, "is_sparse", False))


def split(v, what):
    """(ids, rows) of a push value: a pair or a torch.sparse_coo tensor."""
    if _arrays._is_torch(v) and getattr(v, "is_sparse", False):
        return _from_coo(v, what)
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return ids_of(v[0], what), v[1]
    raise TypeError("%s: a row-sparse value is an (ids, rows) pair or a torch.sparse_coo "
                    "tensor, not %s" % (what, type(v).__name__))


def _keys_values(key, value):
    if isinstance(key, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(key):
            raise ValueError("%d keys need a list of %d values" % (len(key), len(key)))
        return list(key), list(value)
    return [key], [value]


def init(kv, key, value, row_len=None):
    h = kv._handle()
    keys, values = _keys_values(key, value)
    lens = row_len if isinstance(row_len, (list, tuple)) else [row_len] * len(keys)
    ks, arrs, rls, keep = [], [], [], []
    for k, v, rl in zip(keys, values, lens):
        what = "init value for key %r" % (k,)
        if rl is None:
            s = _shape(v)
            if s is None or len(s) != 2:
                raise ValueError("%s: a 2-D table (rows x row_len), or give row_len" % what)
            rl = s[1]
        vw = _arrays.view(v, False, what)
        ks.append(kv._key(k))
        arrs.append(KvsArray(vw[0], vw[1], vw[2], vw[3]))
        rls.append(int(rl))
        keep.append(vw)
    n = len(ks)
    rc = _fn("kvs_init_row_sparse")(h, n, (ctypes.c_uint64 * n)(*ks), (KvsArray * n)(*arrs),
                                    (ctypes.c_uint64 * n)(*rls))
    if rc:
        raise kv._err(rc)
    for kk, k, rl in zip(ks, keys, rls):
        kv._rsp[kk] = rl
        kv._names.setdefault(kk, k)


def _rsp_args(kv, keys, values, what):
    ks, rsps, keep = [], [], []
    for k, v in zip(keys, values):
        w = "%s for key %r" % (what, k)
        ids, rows = split(v, w)
        rv = _arrays.view(rows, False, w)
        ks.append(kv._key(k))
        rsps.append(KvsRsp(ids.ctypes.data, ids.size, KvsArray(rv[0], rv[1], rv[2], rv[3])))
        keep.append((ids, rv, rows))
    return ks, rsps, keep


def push(kv, key, value, priority):
    h = kv._handle()
    keys, values = _keys_values(key, value)
    ks, rsps, keep = _rsp_args(kv, keys, values, "push value")
    n = len(ks)
    rc = _fn("kvs_push_rsp")(h, n, (ctypes.c_uint64 * n)(*ks), (KvsRsp * n)(*rsps), priority)
    if rc:
        raise kv._err(rc)
    kv._keep(ks, keep)


def pushpull(kv, key, value, out, priority):
    h = kv._handle()
    keys, values = _keys_values(key, value)
    ks, rsps, keep = _rsp_args(kv, keys, values, "pushpull value")
    if out is None:  # into the rows, in place
        outs = [k[2] for k in keep]
    else:
        _, outs = _keys_values(key, out)
    oarr = []
    for k, o in zip(keys, outs):
        ov = _arrays.view(o, True, "pushpull output for key %r" % (k,))
        oarr.append(KvsArray(ov[0], ov[1], ov[2], ov[3]))
        keep.append(ov)
    n = len(ks)
    rc = _fn("kvs_pushpull_rsp")(h, n, (ctypes.c_uint64 * n)(*ks), (KvsRsp * n)(*rsps),
                                 (KvsArray * n)(*oarr), priority)
    if rc:
        raise kv._err(rc)
    kv._keep(ks, keep)


def pull(kv, key, ids, out):
    h = kv._handle()
    kk = kv._key(key)
    ids = ids_of(ids, "row_sparse_pull ids for key %r" % (key,))
    ov = _arrays.view(out, True, "row_sparse_pull output for key %r" % (key,))
    rc = _fn("kvs_row_sparse_pull")(h, kk, ids.ctypes.data, ids.size,
                                    ctypes.byref(KvsArray(ov[0], ov[1], ov[2], ov[3])))
    if rc:
        raise kv._err(rc)
    kv._keep([kk], (ids, ov))
