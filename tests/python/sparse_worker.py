"""The worker of tests/python/test_sparse.py: row-sparse keys from Python.

Every worker runs the same checks in the same order and prints "ok NAME" or
"FAIL NAME: ..." per check.  Tables: 300 rows of 4 float32 (split over the
servers with MXNET_KVSTORE_BIGARRAY_BOUND=1000), values multiples of 1/4,
so sums are exact."""
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
import kvsd  # noqa: E402

ROWS, L = 300, 4


def report(name, fn, *args):
    try:
        fn(*args)
        print("ok %s" % name, flush=True)
    except Exception as e:  # noqa: every failure is a line of the report
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
        traceback.print_exc()


def table():
    return (np.arange(ROWS * L, dtype=np.float32).reshape(ROWS, L) % 13) / 4


def ids_of(w, r):
    """Rows worker w pushes in round r (descending: any order is fine)."""
    return np.array([i for i in range(ROWS - 1, -1, -1) if (i * (w + 3) + r) % 5 == 0],
                    dtype=np.int64)


def rows_of(w, r, ids):
    return ((ids[:, None] * (w + 1) + np.arange(L) + r) % 9 - 4).astype(np.float32) / 4


def reference(t, W, r):
    """Plain sums: rows some worker pushed become their sums."""
    t = t.copy()
    acc = {}
    for w in range(W):
        ids = ids_of(w, r)
        for i, row in zip(ids, rows_of(w, r, ids)):
            acc[i] = acc.get(i, 0) + row
    for i, s in acc.items():
        t[i] = s
    return t


def check_pairs(kv, key):
    t = table()
    kv.init_row_sparse(key, t)
    assert kv.is_capable("row_sparse")
    W = kv.num_workers
    for r in range(3):
        ids = ids_of(kv.rank, r)
        kv.push(key, (ids, rows_of(kv.rank, r, ids)))
        kv.wait(key)
        t = reference(t, W, r)
        want = np.arange(ROWS)[::-1].copy()
        out = np.zeros((ROWS, L), np.float32)
        kv.row_sparse_pull(key, want, out)
        kv.wait(key)
        assert np.array_equal(out, t[want]), "round %d: %s" % (r, np.argwhere(out != t[want])[:3])
    return t


def check_pushpull(kv, key):
    t = table()
    kv.init_row_sparse(key, t.ravel(), row_len=L)
    ids = ids_of(kv.rank, 0)
    rows = rows_of(kv.rank, 0, ids)
    kv.pushpull(key, (list(ids), rows))  # in place, ids as a list
    kv.wait(key)
    want = reference(t, kv.num_workers, 0)
    assert np.array_equal(rows, want[ids]), np.argwhere(rows != want[ids])[:3]


def check_torch(kv, key):
    import torch
    t = table()
    kv.init_row_sparse(key, torch.from_numpy(t.copy()))
    ids = ids_of(kv.rank, 1)
    rows = rows_of(kv.rank, 1, ids)
    # sparse in its rows (the indices of an embedding's gradient)
    g = torch.sparse_coo_tensor(torch.from_numpy(ids)[None, :], torch.from_numpy(rows),
                                (ROWS, L))
    kv.push(key, g)
    kv.wait(key)
    want = reference(t, kv.num_workers, 1)
    out = torch.zeros((ROWS, L))
    kv.row_sparse_pull(key, torch.arange(ROWS), out)
    kv.wait(key)
    assert np.array_equal(out.numpy(), want)
    # sparse in both dimensions: the same rows, element by element
    ids = ids_of(kv.rank, 2)
    rows = rows_of(kv.rank, 2, ids)
    nz = np.argwhere(rows != 0)
    g2 = torch.sparse_coo_tensor(torch.from_numpy(np.stack([ids[nz[:, 0]], nz[:, 1]])),
                                 torch.from_numpy(rows[nz[:, 0], nz[:, 1]]), (ROWS, L))
    kv.push(key, g2)
    kv.wait(key)
    # rows a worker sent all zeros of are absent from its push: zero either way
    want = want.copy()
    acc = {}
    for w in range(kv.num_workers):
        i2 = ids_of(w, 2)
        r2 = rows_of(w, 2, i2)
        for i, row in zip(i2, r2):
            if row.any():
                acc[i] = acc.get(i, 0) + row
    for i, s in acc.items():
        want[i] = s
    kv.row_sparse_pull(key, torch.arange(ROWS), out)
    kv.wait(key)
    assert np.array_equal(out.numpy(), want), np.argwhere(out.numpy() != want)[:3]


def check_errors(kv, key):
    kv.init_row_sparse(key, table())
    rows = np.ones((3, L), np.float32)
    for bad, what in (([1, 2, 1], "appears twice"), ([0, 1, ROWS], "out of range"),
                      ([0, -1, 2], "out of range")):
        try:
            kv.push(key, (np.array(bad), rows))
        except kvsd.InvalidArgument as e:
            assert what in str(e), e
        else:
            raise AssertionError("push of ids %s did not raise" % bad)
    try:
        kv.push(key, (np.array([0, 1]), rows))
    except kvsd.ShapeError:
        pass
    else:
        raise AssertionError("2 ids with 3 rows did not raise")
    try:
        kv.row_sparse_pull(key, np.array([4, 4]), np.zeros((2, L), np.float32))
    except kvsd.InvalidArgument as e:
        assert "appears twice" in str(e)
    else:
        raise AssertionError("pull of duplicate ids did not raise")
    try:
        kv.push(key, np.zeros((ROWS, L), np.float32))
    except TypeError:
        pass
    else:
        raise AssertionError("a dense value for a row-sparse key did not raise")
    # nothing was sent: a round still sums right
    ids = np.array([5, 0], np.int64)
    out = np.zeros((2, L), np.float32)
    kv.pushpull(key, (ids, np.ones((2, L), np.float32)), out)
    kv.wait(key)
    assert np.array_equal(out, np.full((2, L), kv.num_workers, np.float32)), out


def main():
    with kvsd.create("dist_sync") as kv:
        report("pairs", check_pairs, kv, "emb")
        report("pushpull", check_pushpull, kv, 901)
        report("torch", check_torch, kv, 902)
        report("errors", check_errors, kv, 903)


if __name__ == "__main__":
    main()
