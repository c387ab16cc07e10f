"""Issue 39: what a careless new user meets says what to do."""
import os

import numpy as np
import pytest

import coo_assembler as ca


def test_a_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        ca.open(tmp_path / "missing.hrry")
    with pytest.raises(ca.StorageError):
        ca.open(tmp_path / "missing.hrry")


@pytest.mark.parametrize("itype", [np.int16, np.int64])
def test_a_missing_temp_dir_is_a_file_not_found_error_whatever_the_index_type(tmp_path, itype):
    r = np.array([0, 1], dtype=itype)
    with pytest.raises(FileNotFoundError):
        ca.assemble(np.ones(2), (r, r), (2, 2), temp_dir=tmp_path / "missing", memory_budget="16MiB",
                    threads=1, layout="csr", exact_sums=False)


def test_longdouble_values_say_how_to_convert():
    v = np.ones(2, dtype=np.longdouble)
    if v.dtype == np.float64:
        pytest.skip("longdouble is float64 here")
    r = np.array([0, 1])
    with pytest.raises(ca.InputError, match=r"astype\(np.float64\)"):
        ca.assemble(v, (r, r), (2, 2))


def test_a_missing_output_folder_names_the_role(tmp_path):
    b = ca.Builder((2, 2))
    b.push(np.ones(1), (np.array([0]), np.array([1])))
    with pytest.raises(FileNotFoundError, match="output directory"):
        b.finish(tmp_path / "nowhere" / "K.hrry")
    # A refusal the caller can fix spends nothing: finish again elsewhere.
    b.finish(tmp_path / "K.hrry")
