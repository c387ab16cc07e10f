"""Builder: input forms, dtypes, element matrices, threads, context manager."""

import os
import signal
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

import coo_assembler as ca
from conftest import expand, fe_problem

INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def build(tmp_path, shape, push, **kw):
    path = tmp_path / "t.hrry"
    with ca.Builder(shape, **kw) as b:
        push(b)
        summary = b.finish(path)
    return ca.open(path), summary


@pytest.mark.parametrize("idx_dtype", INT_DTYPES)
def test_index_dtypes(rng, tmp_path, idx_dtype):
    m = 3000
    r = rng.integers(0, 100, m).astype(idx_dtype)
    c = rng.integers(0, 120, m).astype(idx_dtype)
    v = rng.integers(-5, 6, m).astype(np.float64)
    f, s = build(tmp_path, (100, 120), lambda b: b.push(v, (r, c)))
    assert s.contributions == m
    ref = sp.coo_array((v, (r.astype(np.int64), c.astype(np.int64))), shape=(100, 120)).tocsr()
    assert (f.to_scipy("csr") != ref).nnz == 0


def test_coordinate_layouts(rng, tmp_path):
    m = 4000
    rc = np.stack([rng.integers(0, 50, m), rng.integers(0, 60, m)])  # (2, n)
    v = rng.integers(-5, 6, m).astype(np.float64)
    ref = sp.coo_array((v, (rc[0], rc[1])), shape=(50, 60)).tocsr()
    forms = {
        "tuple": (rc[0], rc[1]),
        "list": [rc[0].tolist(), rc[1].tolist()],
        "(rank, n)": rc,
        "(n, rank) C-order": np.ascontiguousarray(rc.T),
        "(n, rank) F-order view": rc.T,
        "strided views": (np.repeat(rc[0], 2)[::2], np.repeat(rc[1], 3)[::3]),
        "uint64 (n, rank)": np.ascontiguousarray(rc.T).astype(np.uint64),
        "int32 (n, rank)": np.ascontiguousarray(rc.T).astype(np.int32),
        "big-endian": (rc[0].astype(">i8"), rc[1].astype(">u4")),
    }
    for name, coords in forms.items():
        f, _ = build(tmp_path, (50, 60), lambda b: b.push(v, coords))
        assert (f.to_scipy("csr") != ref).nnz == 0, name
    # Values: strided, big-endian, a Python list.
    for vals in (np.repeat(v, 2)[::2], v.astype(">f8"), v.tolist()):
        f, _ = build(tmp_path, (50, 60), lambda b: b.push(vals, rc))
        assert (f.to_scipy("csr") != ref).nnz == 0


@pytest.mark.parametrize("dtype", [d for d in ca.DTYPES])
def test_every_dtype(rng, tmp_path, dtype):
    m = 2000
    r, c = rng.integers(0, 30, m), rng.integers(0, 30, m)
    if dtype.startswith(("float", "bfloat")):
        # Small integers: exact in every float type, sums included.
        v = rng.integers(-4, 5, m).astype(np.float16 if dtype == "float16" else np.float32)
    elif dtype.startswith("complex"):
        v = (rng.integers(-4, 5, m) + 1j * rng.integers(-4, 5, m)).astype(dtype)
    elif dtype == "bool":
        v = rng.random(m) < 0.4
    else:
        info = np.iinfo(dtype)
        v = rng.integers(max(info.min, -2), 3, m).astype(dtype)
    wide = np.complex128 if dtype.startswith("complex") else np.float64
    ref_vals = v.astype(wide)
    f, s = build(tmp_path, (30, 30), lambda b: b.push(v, (r, c)), dtype=dtype)
    assert f.dtype == dtype and f.nnz == s.nnz
    got = f.to_scipy("csr")
    # scipy sums bools as bools (true if any is), as we do.
    ref = sp.coo_array((v if dtype == "bool" else ref_vals, (r, c)), shape=(30, 30)).tocsr()
    assert np.array_equal(got.toarray().astype(wide), ref.toarray())
    vals = f.values()
    if dtype == "bfloat16":
        assert vals.dtype == np.float32  # NumPy has no bfloat16: widened copy
    else:
        assert vals.dtype == np.dtype(dtype) and not vals.flags.writeable
    i, j = int(r[0]), int(c[0])
    assert f.get([i, j]) == ref[i, j]


def test_value_conversion_rules(tmp_path):
    with ca.Builder((4, 4), dtype="int16") as b:
        with pytest.raises(ca.InputError, match="float value cannot go into an integer"):
            b.push(np.array([1.5]), ([0], [0]))
        with pytest.raises(ca.InputError, match="does not fit"):
            b.push(np.array([70000]), ([0], [0]))
        b.close()
    with ca.Builder((4, 4), dtype="int8") as b:
        b.push(np.array([100, 100], dtype=np.int8), ([1, 1], [1, 1]))
        with pytest.raises(ca.InputError, match="overflow"):
            b.finish(tmp_path / "o.hrry")
    assert not (tmp_path / "o.hrry").exists()


@pytest.mark.parametrize("layout", ["element-first", "element-last view", "last policy"])
def test_push_elements_against_scipy(rng, tmp_path, layout):
    dofs, ke = fe_problem(rng)
    rows, cols, vals = expand(dofs, ke)
    ref = sp.coo_array((vals, (rows, cols)), shape=(500, 500)).tocsr()
    kw = {}
    if layout == "element-first":
        d, k = dofs, ke
    else:
        # scikit-fem's storage: data[a, b, e] and element_dofs[a, e], seen
        # through transposed views.
        data = np.ascontiguousarray(np.moveaxis(ke, 0, -1))
        d, k = np.ascontiguousarray(dofs.T).astype(np.int32).T, np.moveaxis(data, -1, 0)
        if layout == "last policy":
            kw = {"duplicates": "last"}
    f, s = build(tmp_path, (500, 500), lambda b: b.push_elements(d, k), **kw)
    assert s.contributions == vals.size
    got = f.to_scipy("csr")
    if layout == "last policy":
        # Last contribution in element order wins.
        last = {}
        for rr, cc, vv in zip(rows, cols, vals):
            last[(rr, cc)] = vv
        for (rr, cc), vv in list(last.items())[:500]:
            assert got[rr, cc] == vv
    else:
        np.testing.assert_array_equal(got.indptr, ref.indptr)
        np.testing.assert_array_equal(got.indices, ref.indices)
        np.testing.assert_allclose(got.data, ref.data, rtol=1e-12, atol=1e-12)


def test_threads_push_at_once(rng, tmp_path):
    n, m, parts = 3000, 400_000, 6
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    v = rng.standard_normal(m)
    dofs, ke = fe_problem(rng, n_nodes=n, n_el=3000)
    er, ec, ev = expand(dofs, ke)
    errors = []
    with ca.Builder((n, n), threads=2, memory_budget="32MiB") as b:
        def work(i):
            try:
                sl = slice(i * m // parts, (i + 1) * m // parts)
                b.push(v[sl], (r[sl], c[sl]))
                b.push_elements(dofs[i::parts], ke[i::parts])
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)
        ts = [threading.Thread(target=work, args=(i,)) for i in range(parts)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        s = b.finish(tmp_path / "t.hrry")
    assert not errors
    assert s.contributions == m + ev.size
    got = ca.open(tmp_path / "t.hrry").to_scipy("csr")
    # Exact sums: the same bits as a single-threaded assembly.
    one = ca.assemble(np.concatenate([v, ev]), (np.concatenate([r, er]), np.concatenate([c, ec])),
                      (n, n), threads=1)
    np.testing.assert_array_equal(got.indices, one.indices)
    np.testing.assert_array_equal(got.data, one.data)


def test_more_pushing_threads_than_threads(rng, tmp_path):
    # Issue 22: the number of pushing threads is the caller's business. 8
    # threads push at once under threads=2 and a small budget, each call
    # through a pusher of its own; the buffers stay within the budget and
    # the file is byte for byte what one thread writes.
    n, m, parts = 2000, 1_600_000, 8
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    v = rng.standard_normal(m) * np.where(rng.random(m) < 0.5, 1e12, 1e-6)
    barrier = threading.Barrier(parts)
    errors = []
    many = tmp_path / "many.hrry"
    with ca.Builder((n, n), threads=2, memory_budget="8MiB") as b:
        def work(i):
            try:
                barrier.wait()
                for k in range(4):
                    sl = slice((4 * i + k) * m // (4 * parts), (4 * i + k + 1) * m // (4 * parts))
                    b.push(v[sl], (r[sl], c[sl]))
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)
        ts = [threading.Thread(target=work, args=(i,)) for i in range(parts)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        pushers = b._native._pushers
        s = b.finish(many)
    assert not errors
    assert pushers > 2, f"only {pushers} pushes ran at once"
    assert s.contributions == m
    assert s.runs_spilled > 0
    assert s.peak_buffer_bytes <= s.memory_budget
    assert sum(b for _, b in s.budget_parts) == s.memory_budget
    assert s.budget_parts[-1][0] == "in-memory runs"
    one = tmp_path / "one.hrry"
    with ca.Builder((n, n), threads=1) as b:
        b.push(v, (r, c))
        b.finish(one)
    assert many.read_bytes() == one.read_bytes()


def test_gil_is_released_while_pushing(rng):
    # While one thread is inside a large native push, the main thread must keep
    # running Python. Ticks are timestamped and only those in the middle half of
    # the push count: a held GIL would allow none there (the edges may see a
    # switch-interval slice before the native call starts or after it returns).
    m = 3_000_000
    r, c = rng.integers(0, 5000, m), rng.integers(0, 5000, m)
    v = rng.standard_normal(m)
    span = []
    ticks = []
    with ca.Builder((5000, 5000), threads=2) as b:
        def push():
            t0 = time.perf_counter()
            b.push(v, (r, c))
            span.extend([t0, time.perf_counter()])

        t = threading.Thread(target=push)
        t.start()
        while t.is_alive():
            ticks.append(time.perf_counter())
        t.join()
        b.close()
    t0, t1 = span
    lo, hi = t0 + 0.25 * (t1 - t0), t0 + 0.75 * (t1 - t0)
    inside = sum(lo <= x <= hi for x in ticks)
    assert t1 - t0 > 0.02, "the push was too short to tell"
    assert inside > 100, f"{inside} ticks during the push"


def test_exception_in_with_publishes_nothing_and_cleans_up(rng, tmp_path):
    spill = tmp_path / "spill"
    spill.mkdir()
    out = tmp_path / "K.hrry"
    m = 300_000
    r, c = rng.integers(0, 3000, m), rng.integers(0, 3000, m)
    with pytest.raises(RuntimeError, match="simulation diverged"):
        with ca.Builder((3000, 3000), threads=1, memory_budget="6MiB", temp_dir=spill) as b:
            b.push(rng.standard_normal(m), (r, c))
            assert os.listdir(spill), "a small budget must have spilled by now"
            raise RuntimeError("simulation diverged")
    assert not out.exists()
    assert os.listdir(spill) == []
    assert not b.is_open
    with pytest.raises(ca.CooAssemblerError, match="finished or closed"):
        b.push(np.ones(1), ([0], [0]))


def test_leaving_with_without_finish_raises_and_cleans_up(tmp_path):
    with pytest.raises(ca.CooAssemblerError, match="without finish"):
        with ca.Builder((3, 3), temp_dir=tmp_path) as b:
            b.push(np.ones(2), ([0, 1], [1, 2]))
    assert os.listdir(tmp_path) == []
    # close() is the way to abandon on purpose.
    with ca.Builder((3, 3), temp_dir=tmp_path) as b:
        b.close()


def test_summary_fields(tmp_path):
    with ca.Builder((3, 3), memory_budget=64 << 20) as b:
        b.push(np.array([1.0, 1.0, 0.0]), ([0, 0, 2], [0, 0, 2]))
        s = b.finish(tmp_path / "s.hrry")
    assert isinstance(s, ca.Summary)
    assert (s.contributions, s.nnz, s.memory_budget) == (3, 2, 64 << 20)
    assert s.path == str(tmp_path / "s.hrry") and s.file_bytes == os.path.getsize(s.path)
    assert s.time_write >= 0.0 and isinstance(s.stale_removed, list)
    # Everything fits the budget: the in-memory kernel assembled it from
    # the pushed chunks, no run and no merge.
    assert s.runs == 0 and s.merge_passes == 0 and s.runs_spilled == 0


def test_ctrl_c_in_finish_publishes_nothing(tmp_path):
    # Spilled runs to merge: long enough to outlast the timer; retried
    # bigger if it did not.
    spill = tmp_path / "spill"
    spill.mkdir()
    out = tmp_path / "K.hrry"
    for n in (1 << 22, 1 << 24):
        rng = np.random.default_rng(1)
        row = rng.integers(0, 1 << 20, size=n, dtype=np.int32)
        col = rng.integers(0, 1 << 20, size=n, dtype=np.int32)
        b = ca.Builder((1 << 20, 1 << 20), memory_budget="8MiB", temp_dir=spill)
        b.push(np.ones(n), (row, col))
        t = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT))
        t.start()
        try:
            b.finish(out)
        except KeyboardInterrupt:
            break
        finally:
            t.join()
        out.unlink()
    else:
        pytest.skip("finish ended before Ctrl-C arrived")
    # Nothing published, no temporary file, the builder closed.
    assert os.listdir(tmp_path) == ["spill"]
    assert os.listdir(spill) == []
    assert not b.is_open
    with pytest.raises(ca.CooAssemblerError, match="finished or closed"):
        b.finish(out)
