"""An output that is the file being read is refused (issue 21).

``File.export`` and ``File.spy`` onto the file itself (or a link to it)
raise ``InputError`` naming both paths, and leave the file byte for byte
as it was, with nothing else left in its directory.
"""

import os

import numpy as np
import pytest

import coo_assembler as ca


@pytest.fixture
def matrix(tmp_path):
    path = tmp_path / "K.hrry"
    rows = np.arange(20) % 10
    cols = (np.arange(20) * 3) % 10
    with ca.Builder((10, 10), "float64") as b:
        b.push(np.linspace(1.0, 2.0, 20), (rows, cols))
        b.finish(path)
    os.symlink(path, tmp_path / "L.hrry")
    os.link(path, tmp_path / "H.hrry")
    return path


def _outputs(matrix):
    return [matrix, matrix.parent / "L.hrry", matrix.parent / "H.hrry"]


def _refused(matrix, out, call):
    before = matrix.read_bytes()
    names = sorted(os.listdir(matrix.parent))
    with pytest.raises(ca.InputError) as e:
        call()
    assert str(out) in str(e.value)
    assert str(matrix) in str(e.value)
    assert matrix.read_bytes() == before
    assert sorted(os.listdir(matrix.parent)) == names


@pytest.mark.parametrize("to", ["mtx", "npz", "petsc"])
@pytest.mark.parametrize("in_memory", [False, True])
def test_export_onto_its_own_file_is_refused(matrix, to, in_memory):
    f = ca.open(matrix, in_memory=in_memory)
    for out in _outputs(matrix):
        _refused(matrix, out, lambda: f.export(out, to))
    # Another path is fine.
    f.export(matrix.parent / f"K.{to}", to)


@pytest.mark.parametrize("in_memory", [False, True])
def test_spy_onto_its_own_file_is_refused(matrix, in_memory):
    f = ca.open(matrix, in_memory=in_memory)
    for out in _outputs(matrix):
        _refused(matrix, out, lambda: f.spy(out, size=64))
    f.spy(matrix.parent / "K.png", size=64)
