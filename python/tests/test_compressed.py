"""CSR and CSC files through the Python reader (layout, get, row, verify,
matvec, to_scipy with a zero-copy value array) and the exports of every
layout (npz csr/csc/coo, PETSc, symmetric MatrixMarket, spy) read back by
scipy and by a reader written from PETSc's format documentation; a small
npz forced into zip64 records, read by zipfile and scipy."""

import zipfile

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import coo_assembler as ca
from conftest import expand, fe_problem
from test_matrix import petsc_dirs, petsc_load, read_petsc_by_the_docs, same_coo

LAYOUTS = ["coo", "csr", "csc"]


def build(path, rows, cols, vals, shape, layout, dtype="float64"):
    with ca.Builder(shape, dtype, layout=layout) as b:
        b.push(np.asarray(vals), (rows, cols))
        b.finish(path)
    return ca.open(path)


@pytest.fixture
def fe(rng, tmp_path):
    """The same FE matrix as COO, CSR and CSC files, and the COO file's csr
    (our sums are exact: scipy's own may differ in the last bit)."""
    dofs, ke = fe_problem(rng, n_nodes=900, n_el=2500, k=6)
    r, c, v = expand(dofs, ke)
    shape = (1000, 1000)  # nodes 900.. unused: empty rows and columns
    files = {lay: build(tmp_path / f"{lay}.hrry", r, c, v, shape, lay) for lay in LAYOUTS}
    ref = files["coo"].to_scipy("csr")
    theirs = sp.coo_array((v, (r, c)), shape=shape).tocsr()
    theirs.sum_duplicates()
    theirs.sort_indices()
    assert np.array_equal(theirs.indptr, ref.indptr) and np.array_equal(theirs.indices, ref.indices)
    assert np.allclose(theirs.data, ref.data, rtol=1e-13, atol=1e-13)
    return files, ref


def test_reader_on_csr_and_csc(fe, rng):
    files, ref = fe
    for lay, f in files.items():
        assert f.layout == lay
        assert f.nnz == ref.nnz and f.shape == ref.shape
        assert f.verify() == []
        assert f.is_sorted == (lay != "csc")
        a = f.to_scipy()
        assert a.format == lay
        same_coo(a, ref)
        assert a.has_canonical_format
        for i in [0, 17, 899, 950]:
            cols, vals = f.row(i)
            lo, hi = ref.indptr[i], ref.indptr[i + 1]
            assert np.array_equal(cols, ref.indices[lo:hi])
            assert vals.tobytes() == ref.data[lo:hi].tobytes()
            for j in cols[:3]:
                assert f.get([i, int(j)]) == ref[i, int(j)]
        assert f.get([950, 3]) == 0.0
        x = rng.standard_normal(1000)
        for t in [False, True]:
            want = (ref.T if t else ref) @ x
            got = f.matvec(x, transpose=t)
            assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))
        for other in LAYOUTS:
            b = f.to_scipy(other)
            assert b.format == other
            same_coo(b, ref)


@pytest.mark.parametrize("lay", ["csr", "csc"])
def test_to_scipy_values_are_a_view_of_the_file(fe, lay):
    files, _ = fe
    f = files[lay]
    a = f.to_scipy()
    # No copy: the data array is the file's value buffer, read-only.
    assert np.shares_memory(a.data, f.values())
    assert not a.data.flags.writeable
    a64 = f.to_scipy(index_dtype=np.int64)
    assert a64.indices.dtype == np.int64 and a64.indptr.dtype == np.int64
    assert np.shares_memory(a64.data, f.values())


def test_row_of_csc_and_errors(fe):
    files, _ = fe
    with pytest.raises(ca.InputError):
        files["csr"].row(1000)
    with pytest.raises(ca.InputError):
        files["csc"].row(1000)
    with pytest.raises(ca.InputError):
        files["csr"].row(-1)


@pytest.mark.parametrize("npz_layout", ["auto", "csr", "csc", "coo"])
def test_npz_of_every_layout(fe, tmp_path, npz_layout):
    files, ref = fe
    for lay, f in files.items():
        out = tmp_path / f"{lay}.npz"
        # A small band size: the reordering takes many passes.
        f.export(out, "npz", npz_layout=npz_layout, reorder_memory=4096)
        b = sp.load_npz(out)
        # auto: the stored layout, csr for a sorted COO file
        want = {"coo": "csr"}.get(lay, lay) if npz_layout == "auto" else npz_layout
        assert b.format == want and isinstance(b, sp.sparray)
        same_coo(b, ref)
        if want != "coo":
            r = ref if want == "csr" else ref.tocsc()
            r.sort_indices()
            assert np.array_equal(b.indptr, r.indptr) and np.array_equal(b.indices, r.indices)
            assert b.data.tobytes() == r.data.tobytes()


@pytest.mark.parametrize("int64", [False, True])
def test_petsc_of_every_layout(fe, tmp_path, int64):
    files, ref = fe
    dirs = petsc_dirs()
    bits = 64 if int64 else 32
    for lay, f in files.items():
        out = tmp_path / f"{lay}.petsc"
        f.export(out, "petsc", petsc_int64=int64, reorder_memory=4096)
        for b in [read_petsc_by_the_docs(out, int64)] + (
            [petsc_load(out, dirs[bits], tmp_path)[0]] if bits in dirs else []
        ):
            assert np.array_equal(b.indptr, ref.indptr) and np.array_equal(b.indices, ref.indices)
            assert b.data.tobytes() == ref.data.tobytes()


def test_symmetric_mtx_of_every_layout(fe, tmp_path):
    files, ref = fe  # element matrices are symmetric: so is the sum
    texts = []
    for lay, f in files.items():
        out = tmp_path / f"{lay}.mtx"
        s = f.export(out, "mtx", symmetric=True, reorder_memory=4096)
        b = scipy.io.mmread(out)
        same_coo(b, ref)
        assert s["entries"] == sp.tril(ref).nnz
        texts.append(out.read_text())
    assert texts[1] == texts[0] and texts[2] == texts[0]


def test_symmetric_refusal_on_csc(tmp_path):
    f = build(tmp_path / "n.hrry", [0, 1], [1, 0], [1.0, 2.0], (2, 2), "csc")
    out = tmp_path / "n.mtx"
    with pytest.raises(ca.InputError, match="not symmetric"):
        f.export(out, "mtx", symmetric=True)
    assert not out.exists()


def test_spy_of_every_layout(fe, tmp_path):
    files, _ = fe
    pngs = []
    for lay, f in files.items():
        out = tmp_path / f"{lay}.png"
        f.spy(out, size=128)
        pngs.append(out.read_bytes())
    assert pngs[1] == pngs[0] and pngs[2] == pngs[0]


def test_npz_forced_zip64_reads_back(fe, tmp_path):
    files, ref = fe
    for lay in ["coo", "csc"]:
        out = tmp_path / f"z-{lay}.npz"
        files[lay].export(out, "npz", _zip64_at=1)
        raw = out.read_bytes()
        assert b"PK\x06\x06" in raw and b"PK\x06\x07" in raw  # zip64 end records
        with zipfile.ZipFile(out) as z:
            assert z.testzip() is None
            names = sorted(i.filename for i in z.infolist())
            assert names == sorted(
                ["data.npy", "indices.npy", "indptr.npy", "format.npy", "shape.npy", "_is_array.npy"]
            )
        b = sp.load_npz(out)
        same_coo(b, ref)
