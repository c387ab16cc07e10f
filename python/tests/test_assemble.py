"""assemble() and File.to_scipy() against scipy's own conversions."""

import numpy as np
import pytest
import scipy.sparse as sp

import coo_assembler as ca
from conftest import expand, fe_problem


def same_csr(a, b):
    """Structurally identical arrays: same dtype of indices, same bytes."""
    assert type(a) is type(b)
    assert a.shape == b.shape
    assert a.indptr.dtype == b.indptr.dtype and a.indices.dtype == b.indices.dtype
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert a.data.dtype == b.data.dtype
    np.testing.assert_array_equal(a.data, b.data)


@pytest.mark.parametrize("layout", ["csr", "csc"])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_matches_scipy_exactly_on_dyadic_values(rng, layout, index_dtype):
    # Small integers: every partial sum is exact, so scipy's sequential sum
    # and our exact sum agree to the bit, and so must the whole structure.
    n, m = 300, 50_000
    r = rng.integers(0, n, m).astype(index_dtype)
    c = rng.integers(0, 2 * n, m).astype(index_dtype)
    v = rng.integers(-8, 9, m).astype(np.float64)
    ours = ca.assemble(v, (r, c), (n, 2 * n), layout=layout)
    ref = sp.coo_array((v, (r, c)), shape=(n, 2 * n)).asformat(layout)
    ref.sort_indices()
    same_csr(ours, ref)
    assert ours.has_sorted_indices
    assert ours.data.flags.writeable  # an ordinary array, no longer the file's


def test_random_floats_equal_to_rounding_and_exact(rng):
    n, m = 1000, 200_000
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    v = rng.standard_normal(m) * 10.0 ** rng.integers(-8, 8, m)
    ours = ca.assemble(v, (r, c), (n, n))
    ref = sp.coo_array((v, (r, c)), shape=(n, n)).tocsr()
    np.testing.assert_array_equal(ours.indptr, ref.indptr)
    np.testing.assert_array_equal(ours.indices, ref.indices)
    # scipy adds in arrival order; ours is the correctly rounded sum. Check
    # ours against a sum done in exact rational arithmetic for a few entries.
    np.testing.assert_allclose(ours.data, ref.data, rtol=1e-9, atol=1e-9 * np.abs(v).max())
    from fractions import Fraction
    order = np.lexsort((c, r))
    keys = r[order] * n + c[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], len(keys)]
    for s, e in list(zip(starts, ends))[:: max(1, len(starts) // 200)]:
        exact = float(sum(Fraction(float(x)) for x in v[order][s:e]))
        i, j = divmod(int(keys[s]), n)
        assert ours[i, j] == exact


def test_fe_input_and_coo_layout(rng):
    dofs, ke = fe_problem(rng)
    rows, cols, vals = expand(dofs, ke)
    ours = ca.assemble(vals, np.stack([rows, cols]), (500, 500), layout="coo")
    assert isinstance(ours, sp.coo_array) and ours.has_canonical_format
    ref = sp.coo_array((vals, (rows, cols)), shape=(500, 500)).tocsr()
    assert abs(ours.tocsr() - ref).max() < 1e-12


def test_drop_zeros_and_other_policies(rng):
    r = np.array([0, 0, 1, 1, 2])
    c = np.array([0, 0, 1, 1, 2])
    v = np.array([1.0, -1.0, 2.0, 5.0, 0.0])
    kept = ca.assemble(v, (r, c), (3, 3))
    assert kept.nnz == 3 and kept[0, 0] == 0.0  # explicit zeros, like tocsr
    dropped = ca.assemble(v, (r, c), (3, 3), drop_zeros=True)
    assert dropped.nnz == 1 and dropped[1, 1] == 7.0
    assert ca.assemble(v, (r, c), (3, 3), duplicates="max")[1, 1] == 5.0
    assert ca.assemble(v, (r, c), (3, 3), duplicates="min")[0, 0] == -1.0
    assert ca.assemble(v, (r, c), (3, 3), duplicates="last")[1, 1] == 5.0
    with pytest.raises(ca.InputError, match="duplicate"):
        ca.assemble(v, (r, c), (3, 3), duplicates="error")


def test_spilling_budget_gives_the_same_matrix(rng, tmp_path):
    n, m = 2000, 400_000
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    v = rng.standard_normal(m)
    big = ca.assemble(v, (r, c), (n, n))
    with ca.Builder((n, n), threads=1, memory_budget="6MiB", temp_dir=tmp_path) as b:
        b.push(v, (r, c))
        s = b.finish(tmp_path / "small.hrry")
    assert s.runs_spilled > 0 and s.bytes_spilled > 0
    small = ca.open(tmp_path / "small.hrry").to_scipy("csr")
    np.testing.assert_array_equal(small.indptr, big.indptr)
    np.testing.assert_array_equal(small.indices, big.indices)
    np.testing.assert_array_equal(small.data, big.data)  # bit for bit


def test_rank3_coo(rng, tmp_path):
    shape = (7, 8, 9)
    m = 5000
    idx = np.stack([rng.integers(0, e, m) for e in shape])
    v = rng.integers(-3, 4, m).astype(np.float64)
    a = ca.assemble(v, idx, shape, layout="coo")
    dense = np.zeros(shape)
    np.add.at(dense, tuple(idx), v)
    np.testing.assert_array_equal(a.toarray(), dense)
    with pytest.raises(ca.CooAssemblerError, match="matrices only .*use the coo layout"):
        ca.assemble(v, idx, shape, layout="csr")
