"""open(): metadata, lookups, rows, zero-copy views, verify, to_scipy."""

import pydoc

import numpy as np
import pytest
import scipy.sparse as sp

import coo_assembler as ca


@pytest.fixture
def matrix(rng, tmp_path):
    n, m = 200, 20_000
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    v = rng.integers(-9, 10, m).astype(np.float64)
    path = tmp_path / "m.hrry"
    with ca.Builder((n, n)) as b:
        b.push(v, (r, c))
        b.finish(path)
    return path, sp.coo_array((v, (r, c)), shape=(n, n)).tocsr()


def test_metadata_and_lookups(matrix):
    path, ref = matrix
    f = ca.open(path)
    assert f.shape == (200, 200) and f.dtype == "float64" and f.nnz == ref.nnz
    assert f.layout == "coo" and f.is_sorted and f.tensor == "coo"
    st = f.statistics
    assert st.nnz == ref.nnz and st.value_max == max(ref.data.max(), 0.0)
    assert st.has_nan is False
    for i, j in [(0, 0), (5, 7), (199, 199), (17, 3)]:
        assert f.get((i, j)) == ref[i, j]
    assert f.verify() == []
    with pytest.raises(ca.InputError, match="out of range"):
        f.get((200, 0))
    with pytest.raises(ca.InputError, match="negative"):
        f.get((-1, 0))


def test_rows_and_views(matrix):
    path, ref = matrix
    f = ca.open(path)
    for i in (0, 57, 199):
        cols, vals = f.row(i)
        lo, hi = ref.indptr[i], ref.indptr[i + 1]
        np.testing.assert_array_equal(cols, ref.indices[lo:hi])
        np.testing.assert_array_equal(vals, ref.data[lo:hi])
        assert not vals.flags.writeable
    v = f.values()
    assert not v.flags.owndata and not v.flags.writeable
    del f  # the view keeps the mapping alive
    assert v.sum() == pytest.approx(ref.data.sum())
    with pytest.raises(ValueError):
        v[0] = 1.0


def test_to_scipy_layouts(matrix):
    path, ref = matrix
    f = ca.open(path)
    csr = f.to_scipy("csr")
    assert isinstance(csr, sp.csr_array) and not csr.data.flags.owndata  # a view of the file
    assert (csr != ref).nnz == 0 and csr.has_sorted_indices
    csc = f.to_scipy("csc")
    ref_csc = ref.tocsc()
    ref_csc.sort_indices()
    np.testing.assert_array_equal(csc.indptr, ref_csc.indptr)
    np.testing.assert_array_equal(csc.indices, ref_csc.indices)
    np.testing.assert_array_equal(csc.data, ref_csc.data)
    coo = f.to_scipy()
    assert isinstance(coo, sp.coo_array) and (coo.tocsr() != ref).nnz == 0
    assert f.to_scipy("csr", index_dtype=np.int64).indices.dtype == np.int64
    with pytest.raises(ca.InputError, match="unknown layout"):
        f.to_scipy("dia")


def test_in_memory_and_damage(matrix, tmp_path):
    path, ref = matrix
    assert (ca.open(path, in_memory=True).to_scipy("csr") != ref).nnz == 0
    raw = bytearray(path.read_bytes())
    # Flip a byte in the middle of the values buffer: open succeeds
    # (structure intact), verify reports the checksum mismatch.
    f = ca.open(path)
    off = raw.find(np.asarray(f.values()[:4]).tobytes())
    assert off > 0
    raw[off] ^= 0x40
    bad = tmp_path / "bad.hrry"
    bad.write_bytes(bytes(raw))
    problems = ca.open(bad).verify()
    assert any("checksum" in p for p in problems)


def test_docs_read_well():
    text = pydoc.render_doc(ca.Builder, renderer=pydoc.plaintext)
    for word in ("push_elements", "memory_budget", "context manager", "finish"):
        assert word in text
    assert "one-call replacement" in ca.assemble.__doc__ or "replacement" in ca.assemble.__doc__
