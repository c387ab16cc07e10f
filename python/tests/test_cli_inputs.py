"""The command line's MatrixMarket (gzip'd, coordinate and array) and .npy
input, assembled and compared element by element with what scipy and numpy
read from the same files (issue 8). Reads the results through `coo-assembler
dump`, so any rank and element type is checked."""

import gzip
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import coo_assembler as ca

REPO = Path(__file__).resolve().parents[2]


def cli():
    exe = os.environ.get("COO_ASSEMBLER") or str(REPO / "target" / "release" / "coo-assembler")
    if not Path(exe).exists():
        pytest.skip(f"{exe} is not built (cargo build --release)")
    return exe


def assemble(path, out, *args):
    r = subprocess.run(
        [cli(), "assemble", "--input", str(path), "-o", str(out), "-q", *args],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    return r


def dump(out):
    r = subprocess.run([cli(), "dump", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    entries = {}
    for line in r.stdout.splitlines():
        *idx, v = line.split()
        entries[tuple(int(i) for i in idx)] = v
    return entries


def same_as_dense(entries, dense):
    """The stored entries are exactly the non-zeros of `dense`."""
    dense = np.asarray(dense)
    nz = {tuple(int(i) for i in ix): dense[ix] for ix in zip(*np.nonzero(dense))}
    assert set(entries) == set(nz)
    for ix, text in entries.items():
        want = nz[ix]
        got = np.array(float(text) if dense.dtype.kind == "f" else int(text)).astype(dense.dtype)
        assert got == want and got.tobytes() == np.array(want, dtype=dense.dtype).tobytes(), (ix, text, want)


def random_sparse(rng, n, m, density, symmetric=False, integer=False):
    a = sp.random(n, m, density=density, random_state=rng, format="coo")
    if integer:
        a.data = rng.integers(-50, 50, a.nnz).astype(np.float64)
        a.eliminate_zeros()
    if symmetric:
        a = sp.tril(a + a.T).tocoo()
    return a


@pytest.mark.parametrize(
    "symmetry,field",
    [("general", "real"), ("symmetric", "real"), ("general", "integer"), ("symmetric", "integer")],
)
def test_gzipped_coordinate_files(tmp_path, rng, symmetry, field):
    a = random_sparse(rng, 60, 60, 0.08, symmetric=symmetry != "general", integer=field == "integer")
    plain = tmp_path / "a.mtx"
    scipy.io.mmwrite(plain, a, field=field, symmetry=symmetry)
    gz = tmp_path / "a.mtx.gz"
    with open(plain, "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    want = scipy.io.mmread(gz)
    want = want.toarray()
    out = tmp_path / "a.hrry"
    assemble(gz, out, "--dtype", "i64" if field == "integer" else "f64")
    same_as_dense(dump(out), want.astype(np.int64) if field == "integer" else want)


def test_duplicates_in_a_coordinate_file_sum_as_scipy(tmp_path):
    # Dyadic values: every sum is exact, so scipy's and ours agree to the bit.
    text = "%%MatrixMarket matrix coordinate real general\n3 4 5\n1 1 0.5\n3 4 2.25\n1 1 0.25\n2 2 -1\n2 2 1\n"
    p = tmp_path / "d.mtx.gz"
    with gzip.open(p, "wt") as g:
        g.write(text)
    out = tmp_path / "d.hrry"
    assemble(p, out, "--drop-zeros")
    same_as_dense(dump(out), scipy.io.mmread(p).toarray())


@pytest.mark.parametrize("symmetry", ["general", "symmetric", "skew-symmetric"])
@pytest.mark.parametrize("field", ["real", "integer"])
def test_array_files(tmp_path, rng, symmetry, field):
    n = 7
    a = rng.integers(-3, 4, (n, n)) if field == "integer" else np.round(rng.standard_normal((n, n)), 3)
    a[rng.random((n, n)) < 0.4] = 0
    if symmetry == "symmetric":
        a = np.tril(a) + np.tril(a, -1).T
    elif symmetry == "skew-symmetric":
        a = np.tril(a, -1) - np.tril(a, -1).T
    if symmetry == "general":
        a = a[:, :5]  # not square
    p = tmp_path / "a.mtx"
    scipy.io.mmwrite(p, a, field=field, symmetry=symmetry)
    assert b"array" in p.read_bytes().splitlines()[0]
    want = scipy.io.mmread(p)
    out = tmp_path / "a.hrry"
    assemble(p, out, "--dtype", "i64" if field == "integer" else "f64")
    same_as_dense(dump(out), want.astype(np.int64) if field == "integer" else want)


@pytest.mark.parametrize(
    "dtype", ["bool", "int8", "uint16", ">i4", "int64", "uint64", "float16", "float32", ">f8", "float64"]
)
@pytest.mark.parametrize("shape,order", [((40,), "C"), ((9, 7), "C"), ((9, 7), "F"), ((3, 4, 5), "F"), ((2, 3, 2, 3), "C")])
def test_npy_files(tmp_path, rng, dtype, shape, order):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        a = rng.random(shape) < 0.3
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(max(info.min, -(2**62)), min(info.max, 2**62), shape, endpoint=True).astype(dt)
    else:
        a = (rng.standard_normal(shape) * 1e3).astype(dt)
    a[rng.random(shape) < 0.5] = 0
    a = np.asarray(a, order=order)
    p = tmp_path / "a.npy"
    np.save(p, a)
    want = np.load(p)
    out = tmp_path / "a.hrry"
    assemble(p, out)  # the array's own type, found by the .npy magic
    got = dump(out)
    same_as_dense(got, want.astype(np.uint8) if dt.kind == "b" else want)
    # Compressed, through stdin, with --format npy.
    gz = tmp_path / "a.npy.gz"
    with open(p, "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    out2 = tmp_path / "b.hrry"
    with open(gz, "rb") as f:
        r = subprocess.run([cli(), "assemble", "--input", "-", "--format", "npy", "-q", "-o", str(out2)], stdin=f, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert dump(out2) == got


@pytest.mark.parametrize("dtype", ["<c16", ">c16", "<c8"])
def test_complex_npy_assembles_to_a_complex_matrix(tmp_path, dtype):
    a = np.array([[0, 1 + 2j, 0], [-3.5j, 0, 2]], dtype=dtype)
    p = tmp_path / "c.npy"
    np.save(p, a)
    out = tmp_path / "c.hrry"
    r = subprocess.run([cli(), "assemble", "--input", str(p), "-q", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = ca.open(str(out)).to_scipy()
    assert m.dtype == (np.complex64 if dtype == "<c8" else np.complex128)
    np.testing.assert_array_equal(m.toarray(), a)
