"""CSR and CSC files assembled by coo-assembler, read by the reference
Python package (pyhurray, module `hurray`): its `to_scipy` gives the matrix
scipy's own conversion of the same contributions gives (duplicates summed),
index for index and value for value (issue 9)."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import expand, fe_problem

hurray = pytest.importorskip("hurray", reason="pyhurray is not installed")

REPO = Path(__file__).resolve().parents[2]


def cli():
    exe = os.environ.get("COO_ASSEMBLER") or str(REPO / "target" / "release" / "coo-assembler")
    if not Path(exe).exists():
        pytest.skip(f"{exe} is not built (cargo build --release)")
    return exe


def assemble(tmp_path, rows, cols, vals, shape, dtype, layout, *extra):
    """Assemble text contributions with the CLI into `layout`."""
    src = tmp_path / "c.txt"
    np.savetxt(src, np.column_stack([rows, cols, vals]), fmt=["%d", "%d", "%.17g"])
    out = tmp_path / f"m_{layout}_{dtype}.hrry"
    r = subprocess.run(
        [cli(), "assemble", "--input", str(src), "--format", "text", "--shape",
         f"{shape[0]},{shape[1]}", "--dtype", dtype, "--layout", layout,
         "--name", "K", "-q", "-o", str(out), *extra],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    return out


def reference(rows, cols, vals, shape, layout, dtype):
    """scipy's own conversion: duplicates summed, indices sorted."""
    m = sp.coo_matrix((vals.astype(dtype), (rows, cols)), shape=shape)
    m = m.tocsr() if layout == "csr" else m.tocsc()
    m.sum_duplicates()
    m.sort_indices()
    return m


def read_with_pyhurray(path, layout):
    tensors = hurray.load(str(path))
    t = tensors["K"]
    want = hurray.CsrLayout if layout == "csr" else hurray.CscLayout
    assert isinstance(t.layout, want), t.layout
    m = t.to_scipy()
    assert m.format == layout
    return m


def same(a, b):
    assert a.shape == b.shape
    assert a.nnz == b.nnz
    np.testing.assert_array_equal(np.asarray(a.indptr, dtype=np.int64), b.indptr)
    np.testing.assert_array_equal(np.asarray(a.indices, dtype=np.int64), b.indices)
    assert a.data.dtype == b.data.dtype
    np.testing.assert_array_equal(a.data, b.data)


@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_fe_matrix_through_pyhurray_equals_scipy(tmp_path, rng, layout):
    dofs, ke = fe_problem(rng, n_nodes=400, n_el=600, k=6)
    rows, cols, vals = expand(dofs, ke)
    # Multiples of 1/64: every sum is exact, whatever the order.
    vals = np.round(vals * 64) / 64
    # 450 x 450: the dofs 400.. never occur, so those rows/columns are empty.
    shape = (450, 450)
    out = assemble(tmp_path, rows, cols, vals, shape, "f64", layout,
                   "--memory-budget", "8MiB")
    same(read_with_pyhurray(out, layout), reference(rows, cols, vals, shape, layout, np.float64))


@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_float32_rectangular_with_an_empty_matrix_row(tmp_path, rng, layout):
    n = 3000
    rows = rng.integers(0, 20, n)
    cols = rng.integers(0, 35, n)
    vals = rng.integers(-8, 9, n) / 4.0
    rows[rows == 7] = 8  # row 7 empty
    shape = (20, 37)  # columns 35, 36 empty
    out = assemble(tmp_path, rows, cols, vals, shape, "f32", layout)
    same(read_with_pyhurray(out, layout), reference(rows, cols, vals, shape, layout, np.float32))


@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_empty_matrix(tmp_path, layout):
    src = tmp_path / "empty.txt"
    src.write_text("")
    out = tmp_path / "e.hrry"
    r = subprocess.run(
        [cli(), "assemble", "--input", str(src), "--format", "text", "--shape", "4,6",
         "--dtype", "f64", "--layout", layout, "--name", "K", "-q", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    m = read_with_pyhurray(out, layout)
    assert m.shape == (4, 6) and m.nnz == 0
