"""`assemble` on arrays that fit: the in-memory path (issue 23).

It must give what the out-of-core Builder path gives, bit for bit, take the
forms FE codes hold (int32/int64/uint32/uint64 contiguous indices, float64,
float32, complex128 and complex64 values; bool values with int32/int64
indices), refuse bad indices as the Builder does, and stop on
Ctrl-C leaving nothing behind.
"""

import os
import signal
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import coo_assembler as ca


def _fe_like(n_el, n, seed, dtype=np.float64):
    """Element-order contributions with many duplicates and values whose
    sums cancel (where a naive sum is wrong in the last bits)."""
    rng = np.random.default_rng(seed)
    nodes = rng.integers(0, n, size=(n_el, 4))
    row = np.repeat(nodes, 4, axis=1).ravel()
    col = np.tile(nodes, (1, 4)).ravel()
    mag = 10.0 ** rng.integers(-8, 9, size=row.size)
    val = (rng.standard_normal(row.size) * mag).astype(dtype)
    return val, row.astype(np.int32), col.astype(np.int32)


def _builder_result(val, row, col, shape, layout, **kw):
    """The same assembly through the Builder and a file (the reference)."""
    # Strided values are a form the in-memory path does not read in
    # place, so this call takes the Builder's path.
    v2 = np.empty(2 * val.size, dtype=val.dtype)
    v2[::2] = val
    return ca.assemble(v2[::2], (row, col), shape, layout=layout, **kw)


def _same(a, b):
    assert type(a) is type(b)
    assert a.shape == b.shape
    assert a.data.dtype == b.data.dtype
    assert a.data.tobytes() == b.data.tobytes()
    if a.format == "coo":
        for x, y in zip(a.coords, b.coords):
            assert np.array_equal(x, y)
    else:
        assert a.indices.dtype == b.indices.dtype
        assert np.array_equal(a.indices, b.indices)
        assert np.array_equal(a.indptr, b.indptr)


def _no_builder(monkeypatch):
    """Make the Builder path fail loudly, to prove a call did not take it."""

    def refuse(*a, **k):
        raise AssertionError("the Builder path was taken")

    monkeypatch.setattr(ca, "Builder", refuse)


@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bit_identical_to_the_builder_path(layout, dtype, monkeypatch):
    val, row, col = _fe_like(20_000, 3_000, seed=7, dtype=dtype)
    shape = (3_000, 3_000)
    ref = _builder_result(val, row, col, shape, layout)
    with monkeypatch.context() as m:
        _no_builder(m)
        got = ca.assemble(val, (row, col), shape, layout=layout)
    _same(got, ref)
    # And scipy agrees on the pattern and (to rounding) on the values.
    s = sp.coo_array((val.astype(np.float64), (row, col)), shape=shape).tocsr()
    d = got.tocsr()
    assert np.array_equal(d.indptr, s.indptr) and np.array_equal(d.indices, s.indices)
    assert np.allclose(d.data, s.data, rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-3)


@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("duplicates", ["sum", "last"])
def test_complex_takes_the_kernel_bit_identical_to_the_builder(layout, dtype, duplicates, monkeypatch):
    re, row, col = _fe_like(20_000, 3_000, seed=11)
    im, _, _ = _fe_like(20_000, 3_000, seed=12)
    val = (re + 1j * im).astype(dtype)
    shape = (3_000, 3_000)
    ref = _builder_result(val, row, col, shape, layout, duplicates=duplicates)
    with monkeypatch.context() as m:
        _no_builder(m)
        got = ca.assemble(val, (row, col), shape, layout=layout, duplicates=duplicates)
    assert got.dtype == dtype
    _same(got, ref)
    if duplicates == "sum":
        s = sp.coo_array((val.astype(np.complex128), (row, col)), shape=shape).tocsr()
        d = got.tocsr()
        assert np.array_equal(d.indptr, s.indptr) and np.array_equal(d.indices, s.indices)
        tol = 1e-5 if dtype == np.complex64 else 1e-12
        assert np.allclose(d.data, s.data, rtol=tol, atol=1e-2)


@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
@pytest.mark.parametrize("duplicates", ["sum", "min", "last"])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_bool_takes_the_kernel_bit_identical_to_the_builder(layout, duplicates, index, monkeypatch):
    _, row, col = _fe_like(20_000, 3_000, seed=13)
    row, col = row.astype(index), col.astype(index)
    val = np.random.default_rng(5).random(row.size) < 0.2
    shape = (3_000, 3_000)
    ref = _builder_result(val, row, col, shape, layout, duplicates=duplicates)
    with monkeypatch.context() as m:
        _no_builder(m)
        got = ca.assemble(val, (row, col), shape, layout=layout, duplicates=duplicates)
    assert got.dtype == np.bool_
    _same(got, ref)
    if duplicates == "sum":
        s = sp.coo_array((val, (row, col)), shape=shape).asformat(layout)
        np.testing.assert_array_equal(got.toarray(), s.toarray())


def test_complex_in_memory_refusals_match_the_builder(monkeypatch):
    row = np.array([0, 1, 1], dtype=np.int32)
    col = np.array([0, 1, 1], dtype=np.int32)
    val = np.array([1 + 1j, 2 + np.nan * 1j, 3j])
    with monkeypatch.context() as m:
        _no_builder(m)
        with pytest.raises(ca.InputError, match="contribution 1"):
            ca.assemble(val, (row, col), (2, 2), non_finite="reject_nan")
        with pytest.raises(ca.InputError, match=r"\[1, 1\]"):
            ca.assemble(np.array([1 + 1j, 2j, 3j]), (row, col), (2, 2), duplicates="error")
    # Complex values have no order: min/max are refused by name.
    with pytest.raises(ValueError, match="no order"):
        ca.assemble(val, (row, col), (2, 2), duplicates="max")


@pytest.mark.parametrize("index", [np.int32, np.int64, np.uint32, np.uint64])
def test_index_types(index, monkeypatch):
    val, row, col = _fe_like(5_000, 800, seed=3)
    ref = ca.assemble(val, (row, col), (800, 900))
    with monkeypatch.context() as m:
        _no_builder(m)
        got = ca.assemble(val, (row.astype(index), col.astype(index)), (800, 900))
    # scipy's index type for the same inputs: int64 from 64-bit arrays.
    want = sp.coo_array((val, (row.astype(index), col.astype(index))), shape=(800, 900)).tocsr()
    assert got.indices.dtype == want.indices.dtype
    assert got.data.tobytes() == ref.data.tobytes()
    assert np.array_equal(got.indices, ref.indices) and np.array_equal(got.indptr, ref.indptr)


def test_rank3_and_policies(monkeypatch):
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 20, size=(3, 4_000)).astype(np.int64)
    val = rng.standard_normal(4_000)
    with monkeypatch.context() as m:
        _no_builder(m)
        got = ca.assemble(val, tuple(idx), (20, 20, 20), layout="coo")
    ref = _builder_result_rank(val, idx, (20, 20, 20))
    _same(got, ref)
    # duplicates="last" and "max" in memory match the Builder too.
    for policy in ("last", "max", "min"):
        a = ca.assemble(val, tuple(idx), (20, 20, 20), layout="coo", duplicates=policy)
        b = _builder_result_rank(val, idx, (20, 20, 20), duplicates=policy)
        _same(a, b)


def _builder_result_rank(val, idx, shape, **kw):
    v2 = np.empty(2 * val.size)
    v2[::2] = val
    return ca.assemble(v2[::2], tuple(np.array(c) for c in idx), shape, layout="coo", **kw)


def test_drop_zeros_and_duplicates_error():
    row = np.array([0, 0, 1, 2], dtype=np.int32)
    col = np.array([1, 1, 1, 2], dtype=np.int32)
    val = np.array([1.5, -1.5, 2.0, 0.0])
    a = ca.assemble(val, (row, col), (3, 3), drop_zeros=True)
    assert a.nnz == 1 and a[1, 1] == 2.0
    with pytest.raises(ca.InputError, match="duplicate"):
        ca.assemble(val, (row, col), (3, 3), duplicates="error")


@pytest.mark.parametrize("bad", [-1, 3])
def test_out_of_range_is_refused_like_the_builder(bad):
    row = np.array([0, bad, 1], dtype=np.int32)
    col = np.array([0, 0, 1], dtype=np.int32)
    val = np.ones(3)
    with pytest.raises(ca.InputError) as direct:
        ca.assemble(val, (row, col), (3, 3))
    with pytest.raises(ca.InputError) as builder:
        _builder_result(val, row, col, (3, 3), "csr")
    # The same message: the contribution's position, the index, the rule.
    assert str(direct.value) == str(builder.value)
    assert "contribution 1" in str(direct.value)


def test_non_finite_policy_in_memory():
    row = np.array([0, 1], dtype=np.int32)
    val = np.array([1.0, np.nan])
    with pytest.raises(ca.InputError, match="(?i)nan"):
        ca.assemble(val, (row, row), (2, 2), non_finite="reject-nan")
    a = ca.assemble(val, (row, row), (2, 2))
    assert np.isnan(a[1, 1])


@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
def test_work_beyond_the_budget_is_the_librarys_choice(layout, tmp_path, monkeypatch):
    # Counts of 2e6 rows outgrow a 4 MiB budget: the library assembles out
    # of core itself (no Builder here), the same bytes as in memory, and
    # leaves nothing in temp_dir.
    m = 2_000_000
    rng = np.random.default_rng(11)
    row = rng.integers(0, m, size=300_000, dtype=np.int64)
    col = rng.integers(0, 1_000, size=300_000, dtype=np.int64)
    val = rng.standard_normal(300_000)
    big = ca.assemble(val, (row, col), (m, m), layout=layout)
    with monkeypatch.context() as mp:
        _no_builder(mp)
        small = ca.assemble(val, (row, col), (m, m), layout=layout,
                            memory_budget="4MiB", temp_dir=tmp_path)
    _same(small, big)
    assert os.listdir(tmp_path) == []


def test_other_forms_fall_back():
    # Lists, int16 indices, int values into float64: the Builder's path,
    # same answer.
    row = [0, 1, 1]
    col = [2, 0, 0]
    val = [1, 2, 3]
    a = ca.assemble(val, (row, col), (2, 3), dtype="float64")
    b = ca.assemble(
        np.array(val, dtype=np.float64),
        (np.array(row, dtype=np.int16), np.array(col, dtype=np.int16)),
        (2, 3),
    )
    assert a.toarray().tolist() == [[0, 0, 1], [5, 0, 0]]
    assert b.toarray().tolist() == a.toarray().tolist()


def test_empty_and_tiny():
    e = ca.assemble(np.zeros(0), (np.zeros(0, np.int32), np.zeros(0, np.int32)), (4, 5))
    assert e.shape == (4, 5) and e.nnz == 0 and e.indptr.tolist() == [0] * 5
    t = ca.assemble(np.array([2.5]), (np.array([3], np.int32), np.array([4], np.int32)), (4, 5))
    assert t[3, 4] == 2.5 and t.has_canonical_format


def test_result_owns_its_arrays():
    val, row, col = _fe_like(1_000, 100, seed=5)
    a = ca.assemble(val, (row, col), (100, 100))
    a.data[:] = 0  # writable, and the caller's arrays are untouched
    assert val.any()
    assert a.data.flags.owndata or a.data.base is not None


def test_ctrl_c_stops_a_long_assembly(tmp_path):
    # Large enough to outlast the timer; retried bigger if it did not.
    for n in (1 << 23, 1 << 24):
        rng = np.random.default_rng(0)
        row = rng.integers(0, 1 << 20, size=n, dtype=np.int32)
        col = rng.integers(0, 1 << 20, size=n, dtype=np.int32)
        val = np.ones(n)
        t = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT))
        t.start()
        try:
            ca.assemble(val, (row, col), (1 << 20, 1 << 20), temp_dir=tmp_path)
        except KeyboardInterrupt:
            break
        finally:
            t.join()
    else:
        pytest.skip("the assembly finished before Ctrl-C arrived")
    assert os.listdir(tmp_path) == []
    # The process and the package are fine afterwards.
    a = ca.assemble(np.ones(2), (np.array([0, 0], np.int32), np.array([1, 1], np.int32)), (2, 2))
    assert a[0, 1] == 2.0


def test_assemble_file_takes_the_kernel_for_a_bin_input_with_the_builders_bytes(tmp_path):
    # Rows, columns and values as 24-byte little-endian records, the CLI's
    # bin format: the kernel reads them in place (no run) and writes the
    # bytes the Builder writes for the same contributions.
    # Elements in mesh order: each one's nodes near its number.
    rng = np.random.default_rng(7)
    n_el, n = 20_000, 3_000
    nodes = (np.arange(n_el)[:, None] * n // n_el + rng.integers(0, 8, (n_el, 4))) % n
    row = np.repeat(nodes, 4, axis=1).ravel().astype(np.int32)
    col = np.tile(nodes, (1, 4)).ravel().astype(np.int32)
    val = rng.standard_normal(row.size) * 10.0 ** rng.integers(-8, 9, size=row.size)
    rec = np.empty(val.size, dtype=[("r", "<u8"), ("c", "<u8"), ("v", "<f8")])
    rec["r"], rec["c"], rec["v"] = row, col, val
    p = tmp_path / "fe.bin"
    rec.tofile(p)
    s = ca.assemble_file(p, shape=(3_000, 3_000), output=tmp_path / "k.hrry", layout="csr")
    assert s.runs == 0 and s.runs_spilled == 0
    assert s.contributions == val.size
    with ca.Builder((3_000, 3_000), layout="csr") as b:
        b.push(val, (row, col))
        b.finish(tmp_path / "b.hrry")
    assert (tmp_path / "k.hrry").read_bytes() == (tmp_path / "b.hrry").read_bytes()
    # Without an output, the scipy array is the one `assemble` gives.
    a = ca.assemble_file(p, shape=(3_000, 3_000))
    ref = ca.assemble(val, (row, col), (3_000, 3_000))
    assert (a != ref).nnz == 0
