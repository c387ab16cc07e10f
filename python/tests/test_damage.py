"""Issue 22: never silently use bad data, never abort.

* The first whole pass over an open file (``to_scipy``, ``matvec``,
  ``export``, the CLI's ``convert``) checks the stored xxh3 checksums of
  the tensor's buffers once; a flipped bit in any buffer is an
  ``InvalidFileError`` naming the buffer, and later passes hash nothing.
* Shapes whose arrays cannot exist (a 2^40-row CSR needs 8 TiB of
  ``indptr``) raise ``MemoryError`` (``BudgetError``) instead of killing
  the interpreter, leaving nothing behind; a damaged row index in a file
  without checksums is an ``InvalidFileError``, never an 11 GB allocation.
"""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import coo_assembler as ca

REPO = Path(__file__).resolve().parents[2]
HUGE = 2**40


def cli():
    exe = os.environ.get("COO_ASSEMBLER") or str(REPO / "target" / "release" / "coo-assembler")
    if not Path(exe).exists():
        pytest.skip(f"{exe} is not built (cargo build --release)")
    return exe


def small(tmp_path, layout, rng):
    n, m = 40, 300
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    v = rng.standard_normal(m)
    path = tmp_path / f"{layout}.hrry"
    with ca.Builder((n, n), layout=layout) as b:
        b.push(v, (r, c))
        b.finish(path)
    return path, sp.coo_array((v, (r, c)), shape=(n, n)).tocsr()


def buffers(path):
    """(name, start, end) of each buffer of the file's tensor, found by
    their contents."""
    raw = Path(path).read_bytes()
    f = ca.open(path)
    u8 = lambda a: np.ascontiguousarray(a, dtype="<u8").tobytes()  # noqa: E731
    if f.layout == "coo":
        parts = [("values", f.values().tobytes()), ("indices", u8(f.coords().T))]
    else:
        a = f.to_scipy()
        minor = "col_indices" if f.layout == "csr" else "row_indices"
        ptr = "row_ptr" if f.layout == "csr" else "col_ptr"
        parts = [("values", a.data.tobytes()), (minor, u8(a.indices)), (ptr, u8(a.indptr))]
    out = []
    for name, b in parts:
        at = raw.find(b)
        assert at > 0 and raw.find(b, at + 1) < 0, name
        out.append((name, at, at + len(b)))
    return out


def flipped(src, dst, at, bit):
    b = bytearray(Path(src).read_bytes())
    b[at] ^= 1 << bit
    Path(dst).write_bytes(bytes(b))


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
def test_a_flipped_bit_in_any_buffer_is_caught_by_every_whole_pass(tmp_path, rng, layout):
    good, ref = small(tmp_path, layout, rng)
    out = tmp_path / "out"
    out.mkdir()
    for name, start, end in buffers(good):
        for k, at in enumerate([start, (start + end) // 2, end - 1]):
            bad = tmp_path / "bad.hrry"
            flipped(good, bad, at, k * 3)
            msg = f"{name} buffer of tensor"
            for target in [None, "coo", "csr", "csc"]:
                with pytest.raises(ca.InvalidFileError, match=msg):
                    ca.open(bad).to_scipy(target)
            f = ca.open(bad)
            with pytest.raises(ca.InvalidFileError, match=msg):
                f.matvec(np.ones(40))
            with pytest.raises(ca.InvalidFileError, match=msg):
                f.matvec(np.ones(40))  # the verdict is kept
            for to in ["npz", "mtx", "petsc"]:
                with pytest.raises(ca.InvalidFileError, match=msg):
                    f.export(out / f"x.{to}", to)
            assert os.listdir(out) == []
            f.get((0, 0))  # point lookups still answer
            assert any("checksum-mismatch" in p and name in p for p in f.verify())
            r = subprocess.run(
                [cli(), "convert", str(bad), str(out / "c.hrry"), "--to", "csr"],
                capture_output=True, text=True,
            )
            assert r.returncode == 1 and msg in r.stderr, r.stderr
            assert os.listdir(out) == []


def test_the_second_pass_does_not_hash_again(tmp_path, rng):
    path, ref = small(tmp_path, "coo", rng)
    f = ca.open(path)
    assert f._native.stored_checksums == 2
    f.get((1, 2))
    assert f._native._checksum_hashes() == 0
    a = f.to_scipy("csr")
    assert f._native._checksum_hashes() == 2
    b = f.to_scipy("csr")
    f.to_scipy("csc")
    f.to_scipy("coo")
    f.matvec(np.ones(40))
    assert f._native._checksum_hashes() == 2
    assert (a != ref).nnz == 0 and (b != ref).nnz == 0


def without_checksums(src, dst):
    """A copy whose KV keys no longer name checksums (what another
    writer's file looks like to the reader)."""
    raw = Path(src).read_bytes()
    assert raw.count(b"coo_assembler.xxh3.") >= 2
    Path(dst).write_bytes(raw.replace(b"coo_assembler.xxh3.", b"coo_assembler.xxhX."))


def no_checksums_note(tensor):
    """What verify says, from the library, of a tensor without checksums."""
    return (
        f'note: tensor "{tensor}" carries no stored checksums (written by another writer): '
        "its layout and content rules were checked, its bytes could not be"
    )


def test_a_file_without_checksums_reads_as_before(tmp_path, rng):
    path, ref = small(tmp_path, "coo", rng)
    plain = tmp_path / "plain.hrry"
    without_checksums(path, plain)
    f = ca.open(plain)
    assert f._native.stored_checksums == 0
    # verify says its bytes could not be checked; the file is sound.
    assert f.verify() == [no_checksums_note(f.tensor)]
    assert ca.open(path).verify() == []
    assert (f.to_scipy("csr") != ref).nnz == 0
    np.testing.assert_allclose(f.matvec(np.ones(40)), ref @ np.ones(40))
    assert f._native._checksum_hashes() == 0


def test_a_reference_written_file_still_reads(tmp_path):
    hurray = pytest.importorskip("hurray", reason="pyhurray is not installed")
    m = sp.random(30, 20, density=0.1, format="csr", random_state=4)
    c = m.copy()
    # pyhurray's from_scipy takes uint64 indices only.
    c.indices, c.indptr = c.indices.astype(np.uint64), c.indptr.astype(np.uint64)
    path = tmp_path / "ref.hrry"
    hurray.save(str(path), {"K": hurray.from_scipy(c)})
    f = ca.open(path)
    assert f.layout == "csr" and f._native.stored_checksums == 0
    for layout in ["csr", "csc", "coo"]:
        assert (f.to_scipy(layout) != m).nnz == 0
    np.testing.assert_allclose(f.matvec(np.ones(20)), m @ np.ones(20))
    assert f._native._checksum_hashes() == 0
    assert f.verify() == [no_checksums_note("K")]


def test_a_damaged_row_index_never_drives_an_allocation(tmp_path, rng):
    path, ref = small(tmp_path, "coo", rng)
    plain = tmp_path / "plain.hrry"
    without_checksums(path, plain)
    (_, start, end), = [b for b in buffers(plain) if b[0] == "indices"]
    entry = (end - start) // 16 // 2
    # Bit 33 of a row index: row ~ 2^33 (the 11 GB indptr of the issue).
    flipped(plain, tmp_path / "far.hrry", start + 16 * entry + 4, 1)
    # Bit 5 of a row index of a middle entry: a row inside the shape that
    # breaks the order.
    raw = Path(plain).read_bytes()
    row = int.from_bytes(raw[start + 16 * entry:start + 16 * entry + 8], "little")
    assert row < 32
    flipped(plain, tmp_path / "order.hrry", start + 16 * entry, 5)
    for bad in ["far.hrry", "order.hrry"]:
        for target in ["csr", "csc"]:
            with pytest.raises(ca.InvalidFileError, match="damaged"):
                ca.open(tmp_path / bad).to_scipy(target)


def huge_file(tmp_path):
    path = tmp_path / "huge.hrry"
    with ca.Builder((HUGE, HUGE)) as b:
        b.push(np.ones(1), (np.array([HUGE - 1]), np.array([3])))
        b.finish(path)
    return path


def test_assemble_of_a_2_40_square_raises_memory_error(tmp_path):
    tmp = tmp_path / "t"
    tmp.mkdir()
    with pytest.raises(MemoryError) as e:
        ca.assemble(np.ones(1), ([0], [0]), (HUGE, HUGE), temp_dir=tmp)
    assert isinstance(e.value, ca.BudgetError)
    assert "indptr" in str(e.value)
    assert os.listdir(tmp) == []
    # The COO result needs no pointers.
    a = ca.assemble(np.ones(1), ([0], [0]), (HUGE, HUGE), layout="coo", temp_dir=tmp)
    assert a.nnz == 1 and a.shape == (HUGE, HUGE)


def test_to_scipy_of_a_2_40_square_file(tmp_path):
    f = ca.open(huge_file(tmp_path))
    for layout in ["csr", "csc"]:
        with pytest.raises(ca.BudgetError, match="indptr"):
            f.to_scipy(layout)
    a = f.to_scipy("coo")
    assert a.nnz == 1 and a.row[0] == HUGE - 1


def test_export_to_npz_of_a_2_40_row_file(tmp_path):
    path = huge_file(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ca.StorageError, match="8.0 TiB"):
        ca.open(path).export(out / "K.npz", "npz")
    r = subprocess.run([cli(), "export", "--to", "npz", str(path), str(out / "K.npz")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "indptr" in r.stderr, r.stderr
    assert os.listdir(out) == []
