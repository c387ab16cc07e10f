"""A rank-1 tensor (a right-hand side) exported as a dense vector (issue
22): ``.npy`` read back by ``np.load``, a PETSc ``Vec`` by the format's
rules and, where Debian's petsc4py is installed, by PETSc's own
``VecLoad``."""

import os
import subprocess

import numpy as np
import pytest

import coo_assembler as ca
from test_matrix import petsc_dirs


def vector(path, idx, vals, n, dtype="float64"):
    with ca.Builder((n,), dtype) as b:
        b.push(np.asarray(vals, dtype=dtype), (np.asarray(idx),))
        b.finish(path)
    return ca.open(path)


def test_npy_reads_back_dense(tmp_path):
    f = vector(tmp_path / "b.hrry", [3, 0, 3], [1.5, -2.0, 0.25], 5)
    f.export(tmp_path / "b.npy", "npy")
    b = np.load(tmp_path / "b.npy")
    assert b.dtype == np.float64 and b.shape == (5,)
    assert b.tolist() == [-2.0, 0.0, 0.0, 1.75, 0.0]
    g = vector(tmp_path / "i.hrry", [1], [2**60 + 1], 3, "int64")
    g.export(tmp_path / "i.npy", "npy")
    assert np.load(tmp_path / "i.npy").tolist() == [0, 2**60 + 1, 0]


def test_petsc_refusals(tmp_path):
    g = vector(tmp_path / "i.hrry", [1], [2**53 + 1], 3, "int64")
    with pytest.raises(ca.InputError, match="2\\^53"):
        g.export(tmp_path / "i.petsc", "petsc")
    assert not (tmp_path / "i.petsc").exists()
    m = ca.open(_matrix(tmp_path))
    with pytest.raises(ca.InputError, match="npz"):
        m.export(tmp_path / "m.npy", "npy")


def _matrix(tmp_path):
    p = tmp_path / "m.hrry"
    with ca.Builder((2, 2), "float64") as b:
        b.push(np.ones(1), ([0], [1]))
        b.finish(p)
    return p


def read_vec_by_the_docs(path, int64=False):
    it = np.dtype(">i8" if int64 else ">i4")
    raw = open(path, "rb").read()
    head = np.frombuffer(raw, it, 2)
    assert head[0] == 1211214
    n = int(head[1])
    assert len(raw) == 2 * it.itemsize + 8 * n
    return np.frombuffer(raw, ">f8", n, 2 * it.itemsize).astype(np.float64)


VEC_LOAD = r"""
import sys
import numpy as np
import petsc4py
petsc4py.init([])
from petsc4py import PETSc
v = PETSc.Vec().load(PETSc.Viewer().createBinary(sys.argv[1], "r"))
np.save(sys.argv[2], np.asarray(v.getArray()))
"""


@pytest.mark.parametrize("bits", [32, 64])
def test_petsc_vec(tmp_path, bits):
    f = vector(tmp_path / "b.hrry", [0, 6], [3.0, -0.5], 7)
    out = tmp_path / "b.petsc"
    f.export(out, "petsc", petsc_int64=bits == 64)
    want = [3.0, 0, 0, 0, 0, 0, -0.5]
    assert read_vec_by_the_docs(out, bits == 64).tolist() == want
    dirs = petsc_dirs()
    if bits not in dirs or not os.path.exists("/usr/bin/python3"):
        pytest.skip(f"no {bits}-bit petsc4py (Debian: python3-petsc4py-{'64-' if bits == 64 else ''}real)")
    env = dict(os.environ, PETSC_DIR=dirs[bits], OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PYTHONPATH="")
    got = tmp_path / "got.npy"
    p = subprocess.run(["/usr/bin/python3", "-c", VEC_LOAD, str(out), str(got)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert np.load(got).tolist() == want
