"""One vocabulary: Python parses names, sizes and errors with the library's
tables, and assembles input files exactly as the CLI does (issue 21)."""

import os
import shutil
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import coo_assembler as ca
from coo_assembler import _errors, _native


@pytest.mark.parametrize(
    "text, want",
    [
        ("256MiB", 256 << 20),
        ("256 MiB", 256 << 20),
        ("1.5GiB", 3 << 29),
        (".5GiB", 1 << 29),
        ("64M", 64 << 20),
        ("2g", 2 << 30),
        ("1e9", 10**9),
        ("100MB", 10**8),
        ("4096", 4096),
        ("18446744073709551615", 2**64 - 1),
    ],
)
def test_sizes_have_the_librarys_grammar(text, want):
    assert ca.parse_size(text) == want


@pytest.mark.parametrize("text", ["8 parsecs", "", "-1", "1e30", "18446744073709551616", "inf"])
def test_bad_sizes_get_the_librarys_message(text):
    with pytest.raises(ca.InputError, match="256MiB") as e:
        ca.parse_size(text)
    assert f"size {text!r}".replace("'", '"') in str(e.value)


def test_int_sizes_are_bounded():
    assert ca.parse_size(2**64 - 1) == 2**64 - 1
    with pytest.raises(ca.InputError, match="too large"):
        ca.parse_size(2**64)
    with pytest.raises(ca.InputError, match="negative"):
        ca.parse_size(-1)


@pytest.mark.parametrize(
    "spelling, want",
    [
        (np.float64, "float64"),
        ("float64", "float64"),
        ("<f8", "float64"),
        ("d", "float64"),
        ("f8", "float64"),
        ("f64", "float64"),  # the library's name, which NumPy does not claim
        ("bf16", "bfloat16"),
        ("bfloat16", "bfloat16"),
        ("i8", "int64"),  # NumPy's meaning: 8 bytes (the CLI's i8 is int8)
        ("u8", "uint64"),
        ("int8", "int8"),
        (np.float32, "float32"),
        ("f2", "float16"),
    ],
)
def test_dtypes_take_numpy_spellings_with_numpys_meaning(spelling, want):
    with ca.Builder((2, 2), dtype=spelling) as b:
        assert b.dtype == want
        b.close()


def test_f16_is_numpys_float128_and_the_error_says_so():
    with pytest.raises(ca.InputError, match="float128") as e:
        ca.Builder((2, 2), dtype="f16")
    assert "float16" in str(e.value)


def test_dtypes_come_from_the_librarys_table():
    names = [lib for lib, _ in _native.dtypes()]
    assert [r[0] for r in _native.vocabulary("dtype")] == names
    assert set(ca.DTYPES) == {numpy for _, numpy in _native.dtypes()}


@pytest.mark.parametrize("policy", ["reject_nan", "reject-nan", "Reject-NaN", "nan"])
def test_non_finite_policies_have_the_clis_names(policy):
    with ca.Builder((2, 2), non_finite=policy) as b:
        with pytest.raises(ca.InputError, match="non-finite policy refuses"):
            b.push(np.array([np.nan]), ([0], [0]))
        b.close()


def test_unknown_names_list_the_table():
    with pytest.raises(ca.InputError, match="use one of keep, reject-nan, reject-non-finite"):
        ca.Builder((2, 2), non_finite="sometimes")
    with pytest.raises(ca.InputError, match="use one of sum, min, max, last, error"):
        ca.Builder((2, 2), duplicates="mean")


def test_fractional_shapes_are_refused():
    with pytest.raises(TypeError, match="integers"):
        ca.Builder((2.7, 3))


def test_every_library_error_has_its_kinds_class():
    n = _native._raise_sample(-1)
    kinds = _native._sample_kinds()
    assert len(kinds) == n
    for i, (kind, cls) in enumerate(kinds):
        with pytest.raises(ca.CooAssemblerError) as e:
            _native._raise_sample(i)
        assert type(e.value) is getattr(_errors, cls), (i, kind)


MTX = b"""%%MatrixMarket matrix coordinate real general
% a comment
3 4 4
1 1 1.5
3 4 -2
1 1 0.25
2 3 7
"""


def test_assemble_file_takes_shape_and_dtype_from_the_header(tmp_path):
    p = tmp_path / "a.mtx"
    p.write_bytes(MTX)
    a = ca.assemble_file(p)
    assert isinstance(a, sp.csr_array) and a.shape == (3, 4)
    want = sp.coo_array(([1.5, -2, 0.25, 7], ([0, 2, 0, 1], [0, 3, 0, 2])), shape=(3, 4)).tocsr()
    assert (a != want).nnz == 0
    s = ca.assemble_file(p, output=tmp_path / "a.hrry", layout="csc")
    assert s.nnz == 3 and ca.open(tmp_path / "a.hrry").layout == "csc"


def test_assemble_file_gives_the_clis_bytes(tmp_path):
    cli = shutil.which("coo-assembler") or os.environ.get("COO_ASSEMBLER_CLI")
    if cli is None:
        here = os.path.dirname(__file__)
        cand = os.path.join(here, "..", "..", "target", "release", "coo-assembler")
        cli = cand if os.path.exists(cand) else None
    if cli is None:
        pytest.skip("the coo-assembler command is not built")
    p = tmp_path / "a.mtx"
    p.write_bytes(MTX)
    ca.assemble_file(p, output=tmp_path / "py.hrry")
    subprocess.run(
        [cli, "assemble", "--input", str(p), "--output", str(tmp_path / "cli.hrry"), "-q"],
        check=True,
    )
    assert (tmp_path / "py.hrry").read_bytes() == (tmp_path / "cli.hrry").read_bytes()


def test_push_file_errors_name_the_line(tmp_path):
    p = tmp_path / "bad.mtx"
    p.write_bytes(MTX.replace(b"3 4 -2", b"3 9 -2"))
    with ca.Builder((3, 4)) as b:
        with pytest.raises(ca.InputError, match="bad.mtx:line 5"):
            b.push_file(p)
        b.close()


def test_push_file_and_a_merge_time_duplicate_names_its_lines(tmp_path):
    p = tmp_path / "d.txt"
    p.write_bytes(b"0 1 1.0\n2 2 3.0\n0 1 4.0\n")
    with ca.Builder((3, 3), duplicates="error") as b:
        assert b.push_file(p, format="text") == 3
        with pytest.raises(ca.InputError, match=r"at \(0, 1\) \(0-based.*line 1, line 3"):
            b.finish(tmp_path / "d.hrry")


def test_push_file_refuses_a_shape_the_header_contradicts(tmp_path):
    p = tmp_path / "a.mtx"
    p.write_bytes(MTX)
    with ca.Builder((4, 4)) as b:
        with pytest.raises(ca.InputError, match=r"\[3, 4\]"):
            b.push_file(p)
        b.close()


def test_finish_refuses_writing_over_a_pushed_file(tmp_path):
    p = tmp_path / "k.bin"
    rec = np.zeros(1, dtype=[("r", "<u8"), ("c", "<u8"), ("v", "<f8")])
    rec.tofile(p)
    before = p.read_bytes()
    with ca.Builder((2, 2)) as b:
        b.push_file(p, format="bin")
        with pytest.raises(ca.InputError, match="destroy the input"):
            b.finish(p)
        # The refusal leaves the builder usable.
        b.finish(tmp_path / "k.hrry")
    assert p.read_bytes() == before
