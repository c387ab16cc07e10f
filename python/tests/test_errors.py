"""Each failure raises the documented exception class with a useful message."""

import numpy as np
import pytest

import coo_assembler as ca


def test_hierarchy():
    assert issubclass(ca.InputError, ValueError)
    assert issubclass(ca.BudgetError, MemoryError)
    assert issubclass(ca.StorageError, OSError)
    assert issubclass(ca.InvalidFileError, ValueError)
    for e in (ca.InputError, ca.BudgetError, ca.StorageError, ca.InvalidFileError):
        assert issubclass(e, ca.CooAssemblerError)


def test_bad_indices_are_refused_before_anything_is_pushed(tmp_path):
    with ca.Builder((10, 10)) as b:
        with pytest.raises(ca.InputError, match=r"contribution 1: index -3 in dimension 0 is negative"):
            b.push(np.ones(3), (np.array([1, -3, 2]), np.array([0, 0, 0])))
        with pytest.raises(ca.InputError, match=r"contribution 2: index 10 in dimension 1 is out of range \(extent 10\)"):
            b.push(np.ones(3), np.array([[1, 2, 3], [0, 0, 10]]))
        with pytest.raises(ca.InputError, match="negative"):
            b.push_elements(np.array([[0, -1]]), np.ones((1, 2, 2)))
        b.push(np.ones(1), ([4], [4]))
        s = b.finish(tmp_path / "k.hrry")
    assert s.contributions == 1  # nothing of the refused batches got in


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda b: b.push(np.ones(3), (np.arange(3), np.arange(2))), "entries"),
        (lambda b: b.push(np.ones(3), np.zeros((3, 3), dtype=int)), "match neither"),
        (lambda b: b.push(np.ones(3), (np.arange(3),)), "rank"),
        (lambda b: b.push(np.ones(2), (np.array([0.0, 1.0]), np.arange(2))), "integer array"),
        (lambda b: b.push(np.ones((2, 2)), (np.arange(2), np.arange(2))), "1-D"),
        (lambda b: b.push(np.ones(2, dtype=complex), (np.arange(2), np.arange(2))), "complex"),
        (lambda b: b.push_elements(np.zeros((2, 3), dtype=int), np.ones((2, 3, 2))), "shape"),
    ],
)
def test_bad_input(call, match):
    with ca.Builder((5, 5)) as b:
        with pytest.raises(ca.InputError, match=match):
            call(b)
        b.close()


def test_bad_options(tmp_path):
    with pytest.raises(ca.InputError, match="unknown duplicate policy"):
        ca.Builder((3, 3), duplicates="avg")
    with pytest.raises(ca.InputError, match="not supported"):
        ca.Builder((3, 3), dtype="complex256")
    with pytest.raises(ca.InputError, match="unknown unit"):
        ca.Builder((3, 3), memory_budget="8 parsecs")
    with pytest.raises(ca.InputError, match="threads"):
        ca.Builder((3, 3), threads=0)
    with pytest.raises(ca.InputError, match="rank"):
        ca.Builder(())
    with pytest.raises(ca.BudgetError, match="at least"):
        ca.Builder((3, 3), memory_budget="1KiB")


def test_storage_errors(tmp_path):
    with ca.Builder((3, 3)) as b:
        b.push(np.ones(1), ([0], [0]))
        with pytest.raises(ca.StorageError, match="missing"):
            b.finish(tmp_path / "missing" / "k.hrry")
        # A refused finish keeps the assembly: finish again elsewhere.
        b.finish(tmp_path / "k.hrry")
    assert ca.open(tmp_path / "k.hrry").to_scipy().toarray()[0, 0] == 1.0
    with pytest.raises(ca.StorageError):
        ca.open(tmp_path / "nope.hrry")


def test_invalid_files(tmp_path):
    p = tmp_path / "junk.hrry"
    p.write_bytes(b"not a hurray file" * 20)
    with pytest.raises(ca.InvalidFileError, match="invalid Hurray file"):
        ca.open(p)
    with ca.Builder((3, 3)) as b:
        b.push(np.ones(1), ([0], [0]))
        b.finish(tmp_path / "k.hrry")
    with pytest.raises(ca.InputError, match="no tensor named"):
        ca.open(tmp_path / "k.hrry", tensor="other")
