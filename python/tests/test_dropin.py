"""What a scipy user tries first (issue 22, "scipy drop-in" and "the first
ten minutes"): the same empty result, the same index dtype as the
installed scipy, and arguments that say what is wrong."""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy
import scipy.sparse as sp

import coo_assembler as ca

INDEX_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def test_empty_lists_give_an_empty_matrix_like_scipy():
    a = ca.assemble([], ([], []), (3, 3))
    s = sp.coo_array(([], ([], [])), shape=(3, 3)).tocsr()
    assert a.shape == (3, 3) and a.nnz == 0
    assert a.dtype == s.dtype
    assert a.indices.dtype == s.indices.dtype and a.indptr.dtype == s.indptr.dtype
    assert a.indptr.tolist() == [0, 0, 0, 0]
    # And through a Builder.
    with ca.Builder((3, 3)) as b:
        b.push([], ([], []))
        b.close()


@pytest.mark.parametrize("layout", ["csr", "csc"])
@pytest.mark.parametrize("n", [0, 5])
@pytest.mark.parametrize("dt", INDEX_DTYPES)
def test_index_dtype_is_the_installed_scipys(dt, n, layout):
    # Checked with the scipy the tests run against (printed on failure).
    row = np.arange(n, dtype=dt) % 4
    col = (np.arange(n, dtype=dt) * 3) % 7
    val = np.arange(1.0, n + 1)
    want = getattr(sp.coo_array((val, (row, col)), shape=(4, 7)), "to" + layout)()
    got = ca.assemble(val, (row, col), (4, 7), layout=layout)
    assert got.indices.dtype == want.indices.dtype, f"scipy {scipy.__version__}"
    assert got.indptr.dtype == want.indptr.dtype, f"scipy {scipy.__version__}"
    assert np.array_equal(got.toarray(), want.toarray())


def test_index_dtype_of_lists_and_2d_arrays():
    want = sp.coo_array(([1.0, 2.0], ([0, 1], [1, 1])), shape=(2, 2)).tocsr()
    got = ca.assemble([1.0, 2.0], ([0, 1], [1, 1]), (2, 2))
    assert got.indices.dtype == want.indices.dtype
    ij = np.array([[0, 1], [1, 1]], dtype=np.int32)
    assert ca.assemble([1.0, 2.0], ij, (2, 2)).indices.dtype == np.int32


def test_fractional_shape_is_a_type_error():
    with pytest.raises(TypeError):
        ca.assemble([1.0], ([0], [0]), (2.7, 3))


@pytest.mark.parametrize("threads", [-1, 0, 5000])
def test_bad_thread_counts_say_the_range(threads):
    with pytest.raises(ca.InputError, match=r"threads must be in 1\.\.=1024, got " + str(threads)):
        ca.assemble([1.0], ([0], [0]), (2, 2), threads=threads)
    with pytest.raises(ca.InputError, match="threads"):
        ca.assemble([1.0], ([0], [0]), (2, 2), threads="two")


def test_bytes_paths_work(tmp_path):
    out = os.fsencode(tmp_path / "K.hrry")
    with ca.Builder((2, 2), temp_dir=os.fsencode(tmp_path)) as b:
        b.push([1.0], ([0], [1]))
        b.finish(out)
    f = ca.open(out)
    assert f.to_scipy().toarray()[0, 1] == 1.0
    with pytest.raises(TypeError, match="path"):
        ca.open(12)


def test_a_directory_is_named_as_one(tmp_path):
    with pytest.raises(ca.StorageError, match="a directory, not a Hurray file"):
        ca.open(tmp_path)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe.hrry"
    os.mkfifo(fifo)
    # In a child process with a timeout: a regression would hang.
    code = (
        "import coo_assembler as ca, sys\n"
        "try:\n"
        f"    ca.open({str(fifo)!r})\n"
        "except ca.StorageError as e:\n"
        "    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "a FIFO (named pipe), not a Hurray file" in r.stdout, r.stdout + r.stderr


def test_text_input_is_recognised_without_a_format(tmp_path):
    p = tmp_path / "k.txt"
    p.write_text("# row col value\n0 0 1.5\n2 1 -2\n0 0 0.5\n")
    a = ca.assemble_file(p, shape=(3, 3))
    assert a.toarray().tolist() == [[2.0, 0, 0], [0, 0, 0], [0, -2.0, 0]]
