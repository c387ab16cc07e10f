"""File.matvec, File.export and File.spy against scipy and PETSc.

Every export is read back by its own ecosystem: ``scipy.io.mmread``,
``scipy.sparse.load_npz``, and PETSc's ``MatLoad`` through petsc4py (Debian's
``python3-petsc4py-real`` / ``-64-real``, run with the system Python in a
subprocess, since the venv cannot import them). Where petsc4py is missing
those tests skip; the PETSc file is then still checked by a reader written
from the format's documentation (``test_petsc_bytes_by_the_format_docs``).
"""

import functools
import glob
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import coo_assembler as ca
from conftest import expand, fe_problem


def build(path, rows, cols, vals, shape, dtype=None):
    with ca.Builder(shape, dtype or np.asarray(vals).dtype.name) as b:
        b.push(np.asarray(vals), (rows, cols))
        b.finish(path)
    return ca.open(path)


def laplace_2d(n):
    """5-point Laplacian on an n x n grid (a banded FE-like matrix)."""
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    i = sp.identity(n)
    return sp.coo_array(sp.kron(i, t) + sp.kron(t, i))


@pytest.fixture(params=["random", "fe", "laplace"])
def stored(request, rng, tmp_path):
    """(File, scipy csr of the same matrix)."""
    if request.param == "random":
        m, n, k = 700, 500, 20_000
        r, c = rng.integers(0, m, k), rng.integers(0, n, k)
        v = rng.standard_normal(k)
        shape = (m, n)
    elif request.param == "fe":
        dofs, ke = fe_problem(rng, n_nodes=2000, n_el=6000)
        r, c, v = expand(dofs, ke)
        shape = (2000, 2000)
    else:
        a = laplace_2d(60)
        r, c, v = a.row, a.col, a.data
        shape = a.shape
    f = build(tmp_path / "A.hrry", r, c, v, shape)
    return f, f.to_scipy("csr")


def rel_err(y, ref):
    scale = np.linalg.norm(ref)
    return np.linalg.norm(y - ref) / (scale if scale else 1.0)


@pytest.mark.parametrize("transpose", [False, True])
def test_matvec_matches_scipy(stored, rng, transpose):
    f, a = stored
    x = rng.standard_normal(a.shape[0] if transpose else a.shape[1])
    y = f.matvec(x, transpose=transpose)
    ref = (a.T if transpose else a) @ x
    assert y.dtype == np.float64 and y.shape == ref.shape
    assert rel_err(y, ref) <= 1e-12


def test_matvec_is_the_same_for_every_thread_count(stored, rng):
    f, a = stored
    x = rng.standard_normal(a.shape[0])
    ys = [f.matvec(x, transpose=True, threads=t).tobytes() for t in (1, 2, 3)]
    assert ys[0] == ys[1] == ys[2]


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "float16"])
def test_matvec_every_value_type_in_float64(rng, tmp_path, dtype):
    k = 3000
    r, c = rng.integers(0, 100, k), rng.integers(0, 80, k)
    v = rng.integers(1, 5, k).astype(dtype)
    f = build(tmp_path / "t.hrry", r, c, v, (100, 80), dtype)
    a = f.to_scipy("csr").astype(np.float64)
    x = rng.standard_normal(80)
    assert rel_err(f.matvec(x), a @ x) <= 1e-12
    xt = rng.standard_normal(100)
    assert rel_err(f.matvec(xt, transpose=True), a.T @ xt) <= 1e-12


def test_matvec_errors(stored, rng):
    f, a = stored
    with pytest.raises(ca.InputError, match="elements; the product needs"):
        f.matvec(np.ones(a.shape[1] + 1))
    x = np.ones(a.shape[1])
    x[7] = np.nan
    with pytest.raises(ca.InputError, match=r"x\[7\] = NaN is not finite"):
        f.matvec(x)
    y = f.matvec(x, allow_non_finite=True)
    assert np.isnan(y).any()
    with pytest.raises(ca.InputError, match="1-D"):
        f.matvec(np.ones((2, 2)))


def test_matvec_needs_a_matrix(tmp_path):
    p = tmp_path / "t3.hrry"
    with ca.Builder((3, 3, 3)) as b:
        b.push(np.ones(2), np.array([[0, 1, 2], [2, 1, 0]]))
        b.finish(p)
    with pytest.raises(ca.InputError, match="rank 3"):
        ca.open(p).matvec(np.ones(3))


def same_coo(b, a):
    """b and a hold the same entries, values bit for bit."""
    b = sp.coo_array(b)
    b.sum_duplicates()
    a = sp.coo_array(a)
    a.sum_duplicates()
    assert b.shape == a.shape
    assert np.array_equal(b.row, a.row) and np.array_equal(b.col, a.col)
    assert b.data.tobytes() == a.data.astype(b.data.dtype).tobytes()


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_mtx_reads_back_bit_for_bit(rng, tmp_path, dtype):
    k = 4000
    r, c = rng.integers(0, 300, k), rng.integers(0, 200, k)
    if dtype == "int64":
        v = rng.integers(-(2**40), 2**40, k)
    else:
        # Awkward values: tiny, huge, many digits.
        v = (rng.standard_normal(k) * 10.0 ** rng.integers(-30, 30, k)).astype(dtype)
    f = build(tmp_path / "m.hrry", r, c, v, (300, 200), dtype)
    out = tmp_path / "m.mtx"
    s = f.export(out, "mtx")
    assert s["entries"] == f.nnz and s["bytes"] == out.stat().st_size
    b = scipy.io.mmread(out)
    assert b.dtype == (np.int64 if dtype == "int64" else np.float64)
    same_coo(b, f.to_scipy("coo"))
    head = out.read_text().splitlines()[0]
    assert head == f"%%MatrixMarket matrix coordinate {'integer' if dtype == 'int64' else 'real'} general"


def test_mtx_symmetric(rng, tmp_path):
    a = laplace_2d(30)
    # Values with full mantissas, kept symmetric.
    w = rng.standard_normal(a.nnz)
    a = sp.coo_array((w, (a.row, a.col)), shape=a.shape)
    a = (a + a.T).tocoo()
    f = build(tmp_path / "s.hrry", a.row, a.col, a.data, a.shape)
    out = tmp_path / "s.mtx"
    s = f.export(out, "mtx", symmetric=True)
    lower = int((a.row >= a.col).sum())
    assert s["entries"] == lower
    assert "coordinate real symmetric" in out.read_text().splitlines()[0]
    same_coo(scipy.io.mmread(out), a)


def test_mtx_symmetric_refuses_and_leaves_nothing(rng, tmp_path):
    a = laplace_2d(10).tocsr()
    a[3, 4] = 5.0  # breaks symmetry of the value
    a = a.tocoo()
    f = build(tmp_path / "n.hrry", a.row, a.col, a.data, a.shape)
    out = tmp_path / "n.mtx"
    with pytest.raises(ca.InputError, match=r"not symmetric: A\[4, 3\] = -1\.0 but A\[3, 4\] = 5\.0"):
        f.export(out, "mtx", symmetric=True)
    b = sp.coo_array(([1.0, 2.0], ([0, 2], [1, 2])), shape=(3, 3))  # (0,1) without (1,0)
    g = build(tmp_path / "n2.hrry", b.row, b.col, b.data, b.shape)
    with pytest.raises(ca.InputError, match="no mirror"):
        g.export(out, "mtx", symmetric=True)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("layout", ["csr", "coo"])
def test_npz_loads_back(stored, tmp_path, layout):
    f, a = stored
    out = tmp_path / "a.npz"
    f.export(out, "npz", npz_layout=layout)
    b = sp.load_npz(out)
    assert type(b) is (sp.csr_array if layout == "csr" else sp.coo_array)
    if layout == "csr":
        assert np.array_equal(b.indptr, a.indptr) and np.array_equal(b.indices, a.indices)
        assert b.data.tobytes() == a.data.tobytes()
    same_coo(b, a)
    with zipfile.ZipFile(out) as z:
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
        assert z.testzip() is None  # every CRC-32 right


def test_npz_float16_and_ints(rng, tmp_path):
    k = 500
    r, c = rng.integers(0, 40, k), rng.integers(0, 30, k)
    for dtype, want in [("float16", np.float32), ("int16", np.int16), ("uint64", np.uint64)]:
        v = rng.integers(0, 50, k).astype(dtype)
        f = build(tmp_path / f"{dtype}.hrry", r, c, v, (40, 30), dtype)
        out = tmp_path / f"{dtype}.npz"
        f.export(out, "npz")
        b = sp.load_npz(out)
        assert b.dtype == want
        same_coo(b, f.to_scipy("coo").astype(want))


@functools.lru_cache(maxsize=None)
def petsc_dirs(scalar="real"):
    """PETSc installations with petsc4py for the system Python: {int bits: PETSC_DIR}.
    A PETSc without petsc4py and numpy for /usr/bin/python3 (the C
    library alone, libpetsc-complex-dev for capi's C test) is not one."""
    out = {}
    for d in glob.glob(f"/usr/lib/petscdir/petsc*/x86_64-linux-gnu-{scalar}"):
        if not os.path.exists("/usr/bin/python3"):
            break
        env = dict(os.environ, PETSC_DIR=d, PYTHONPATH="")
        probe = subprocess.run(["/usr/bin/python3", "-c", "import numpy, petsc4py"],
                               env=env, capture_output=True, timeout=60)
        if probe.returncode == 0:
            out[64 if "petsc64" in d else 32] = d
    return out


PETSC_LOAD = r"""
import sys
import numpy as np
import petsc4py
petsc4py.init([])
from petsc4py import PETSc
v = PETSc.Viewer().createBinary(sys.argv[1], "r")
A = PETSc.Mat().load(v)
ai, aj, av = A.getValuesCSR()
np.save(sys.argv[2] + ".indptr.npy", np.asarray(ai, dtype=np.int64))
np.save(sys.argv[2] + ".indices.npy", np.asarray(aj, dtype=np.int64))
np.save(sys.argv[2] + ".data.npy", np.asarray(av))
np.save(sys.argv[2] + ".shape.npy", np.asarray(A.getSize(), dtype=np.int64))
print(PETSc.IntType.__name__)
"""


def petsc_load(path, petsc_dir, tmp_path):
    env = dict(os.environ, PETSC_DIR=petsc_dir, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PYTHONPATH="")
    stem = str(tmp_path / "petsc")
    p = subprocess.run(["/usr/bin/python3", "-c", PETSC_LOAD, str(path), stem],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    ld = lambda k: np.load(f"{stem}.{k}.npy")  # noqa: E731
    shape = tuple(int(s) for s in ld("shape"))
    return sp.csr_array((ld("data"), ld("indices"), ld("indptr")), shape=shape), p.stdout.strip()


@pytest.mark.parametrize("bits", [32, 64])
def test_petsc_matload_reads_it(stored, tmp_path, bits):
    dirs = petsc_dirs()
    if bits not in dirs or not os.path.exists("/usr/bin/python3"):
        pytest.skip(f"no {bits}-bit petsc4py (Debian: python3-petsc4py-{'64-' if bits == 64 else ''}real)")
    f, a = stored
    out = tmp_path / "a.petsc"
    f.export(out, "petsc", petsc_int64=bits == 64)
    b, inttype = petsc_load(out, dirs[bits], tmp_path)
    assert inttype == ("int32" if bits == 32 else "longlong")
    assert b.shape == a.shape
    assert np.array_equal(b.indptr, a.indptr) and np.array_equal(b.indices, a.indices)
    assert b.data.tobytes() == a.data.tobytes()


def test_petsc_complex_matload_reads_a_complex_matrix(tmp_path):
    """A complex PETSc build (Debian: python3-petsc4py-complex) loads our
    complex export: values as it stores its scalars."""
    dirs = petsc_dirs("complex")
    if 32 not in dirs or not os.path.exists("/usr/bin/python3"):
        pytest.skip("no complex petsc4py (Debian: python3-petsc4py-complex)")
    rng = np.random.default_rng(7)
    n, m = 50, 3000
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    v = rng.standard_normal(m) + 1j * rng.standard_normal(m)
    for layout in ["coo", "csc"]:
        path = tmp_path / f"z-{layout}.hrry"
        with ca.Builder((n, n), "complex128", layout=layout) as b:
            b.push(v, (r, c))
            b.finish(str(path))
        f = ca.open(str(path))
        out = tmp_path / f"z-{layout}.petsc"
        f.export(out, "petsc")
        b, _ = petsc_load(out, dirs[32], tmp_path)
        a = f.to_scipy("csr")
        assert b.dtype == np.complex128
        assert np.array_equal(b.indptr, a.indptr) and np.array_equal(b.indices, a.indices)
        assert b.data.tobytes() == a.data.tobytes()


def read_petsc_by_the_docs(path, int64):
    """PETSc binary matrix per the MatLoad manual page: big-endian PetscInt
    header [MAT_FILE_CLASSID=1211216, M, N, nz], M row lengths, nz column
    indices, nz PetscScalar (float64) values."""
    it = np.dtype(">i8" if int64 else ">i4")
    raw = open(path, "rb").read()
    head = np.frombuffer(raw, it, 4)
    assert head[0] == 1211216
    m, n, nz = (int(h) for h in head[1:])
    off = 4 * it.itemsize
    lens = np.frombuffer(raw, it, m, off)
    off += m * it.itemsize
    cols = np.frombuffer(raw, it, nz, off)
    off += nz * it.itemsize
    vals = np.frombuffer(raw, ">f8", nz, off)
    assert off + nz * 8 == len(raw)
    indptr = np.concatenate([[0], np.cumsum(lens)])
    return sp.csr_array((vals.astype(np.float64), cols.astype(np.int64), indptr), shape=(m, n))


@pytest.mark.parametrize("int64", [False, True])
def test_petsc_bytes_by_the_format_docs(stored, tmp_path, int64):
    f, a = stored
    out = tmp_path / "a.petsc"
    f.export(out, "petsc", petsc_int64=int64)
    b = read_petsc_by_the_docs(out, int64)
    assert np.array_equal(b.indptr, a.indptr) and np.array_equal(b.indices, a.indices)
    assert b.data.tobytes() == a.data.tobytes()


def test_spy_pixels(tmp_path):
    n = 64
    r = np.arange(n)
    f = build(tmp_path / "d.hrry", r, r, np.ones(n), (n, n))
    out = tmp_path / "d.png"
    g = f.spy(out, size=256)
    assert g["zoom"] == 4 and g["plot"] == (256, 256) and g["caption"] == "64 x 64, nnz 64"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
