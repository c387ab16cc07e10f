"""Each failure raises the documented exception class with a useful message."""

import os
import subprocess
import sys
from pathlib import Path

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


def test_an_output_that_cannot_be_published_is_refused_and_the_builder_kept(tmp_path):
    # Issue 22: found only after the merge, these lost every contribution.
    (tmp_path / "out").mkdir()
    (tmp_path / "plain.txt").write_text("a file")
    with ca.Builder((3, 3)) as b:
        b.push(np.ones(1), ([0], [0]))
        with pytest.raises(ca.StorageError, match="a directory, not a file"):
            b.finish(tmp_path / "out")
        with pytest.raises(ca.InputError, match="names a directory, not a file"):
            b.finish(f"{tmp_path}/new/")
        with pytest.raises(ca.StorageError, match="not a directory"):
            b.finish(tmp_path / "plain.txt" / "k.hrry")
        assert b.is_open
        b.push(np.ones(1), ([0], [0]))
        s = b.finish(tmp_path / "out" / "k.hrry")
    assert s.contributions == 2
    assert sorted(os.listdir(tmp_path)) == ["out", "plain.txt"]
    assert ca.open(tmp_path / "out" / "k.hrry").to_scipy().toarray()[0, 0] == 2.0


def test_a_missing_temp_dir_is_refused_when_the_builder_is_made(tmp_path):
    with pytest.raises(ca.StorageError, match="no-such-spill"):
        ca.Builder((3, 3), temp_dir=tmp_path / "no-such-spill")


def check_read_only_folders(base):
    """A read-only temp_dir is refused by Builder(), a read-only output
    folder by finish, which keeps the builder. Run by a user permissions
    apply to (not root)."""
    base = Path(base)
    ro, spill = base / "read-only", base / "spill"
    ro.mkdir()
    spill.mkdir()
    ro.chmod(0o555)
    with pytest.raises(ca.StorageError, match="temp_dir .*read-only"):
        ca.Builder((3, 3), temp_dir=ro)
    with ca.Builder((3, 3), temp_dir=spill) as b:
        b.push(np.ones(1), ([1], [2]))
        with pytest.raises(ca.StorageError, match="output directory .*Permission denied"):
            b.finish(ro / "k.hrry")
        b.push(np.ones(1), ([1], [2]))
        s = b.finish(base / "k.hrry")
    assert s.contributions == 2
    assert os.listdir(ro) == [] and os.listdir(spill) == []
    ro.chmod(0o755)


NOBODY = 65534


def others_can_reach(path):
    """Whether a user with no rights of its own can reach `path` (every
    folder above it searchable, the file itself readable)."""
    p = Path(os.path.realpath(path))
    if not os.stat(p).st_mode & 0o004:
        return False
    return all(os.stat(d).st_mode & 0o001 for d in p.parents)


def test_read_only_folders_are_refused_and_the_builder_kept(tmp_path):
    if os.geteuid() != 0:
        check_read_only_folders(tmp_path)
        return
    # Root passes every permission check: run the check as nobody, in a
    # folder of its own, when nobody can run this interpreter.
    needed = [sys.executable, os.__file__, ca.__file__, np.__file__, __file__]
    unreachable = [str(p) for p in needed if not others_can_reach(p)]
    if unreachable:
        pytest.skip(
            f"running as root (every permission check passes) and uid {NOBODY} cannot "
            f"reach {unreachable[0]}; tests/assemble.rs and the C programs test run this "
            f"check as uid {NOBODY}"
        )
    code = (
        "import sys, tempfile; sys.path.insert(0, sys.argv[1]); "
        "import test_errors; test_errors.check_read_only_folders(tempfile.mkdtemp()); "
        "print('checked')"
    )
    try:
        r = subprocess.run(
            [sys.executable, "-c", code, str(Path(__file__).parent)],
            user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
            capture_output=True, text=True, timeout=300,
        )
    except PermissionError as e:
        pytest.skip(f"running as root without the right to switch to uid {NOBODY} ({e})")
    assert r.returncode == 0 and "checked" in r.stdout, r.stdout + r.stderr


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
