"""Bool values: patterns and graphs, with scipy's reading of duplicates
(true if any contribution is), bit-packed in the file, read back as
NumPy's bool."""

import numpy as np
import pytest
import scipy.sparse as sp

import coo_assembler as ca


@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
def test_bool_arrays_match_scipy(rng, layout):
    n, m = 50, 5_000
    r = rng.integers(0, n, m).astype(np.int32)
    c = rng.integers(0, n, m).astype(np.int32)
    v = rng.random(m) < 0.3
    a = ca.assemble(v, (r, c), (n, n), layout=layout)
    assert a.dtype == np.bool_
    ref = sp.coo_array((v, (r, c)), shape=(n, n)).asformat(layout)
    assert ref.dtype == a.dtype
    np.testing.assert_array_equal(a.toarray(), ref.toarray())
    # A coordinate hit only by False stays stored, as False (as scipy keeps it).
    assert a.nnz == len(set(zip(r.tolist(), c.tolist())))


def test_builder_file_round_trip_and_exports(tmp_path):
    path = str(tmp_path / "g.hrry")
    with ca.Builder((3, 4), "bool") as b:
        b.push(np.array([True, False, False, True]), (np.array([0, 0, 2, 1]), np.array([1, 1, 3, 0])))
        s = b.finish(path)
    assert (s.nnz, s.contributions) == (3, 4)
    f = ca.open(path)
    assert f.dtype == "bool"
    assert f.get((0, 1)) is True
    assert f.get((2, 3)) is False
    assert f.get((2, 2)) is False
    vals = f.values()
    assert vals.dtype == np.bool_
    np.testing.assert_array_equal(vals, [True, True, False])
    a = f.to_scipy("csr")
    assert a.dtype == np.bool_
    np.testing.assert_array_equal(
        a.toarray(), [[False, True, False, False], [True, False, False, False], [False] * 4]
    )
    npz = str(tmp_path / "g.npz")
    f.export(npz, "npz")
    back = sp.load_npz(npz)
    assert back.dtype == np.bool_
    np.testing.assert_array_equal(back.toarray(), a.toarray())
    # A product counts the stored trues: the pattern times x.
    x = np.array([1.0, 2.0, 4.0, 8.0])
    np.testing.assert_array_equal(f.matvec(x), a.astype(np.float64) @ x)


def test_matrixmarket_pattern_goes_to_bool(tmp_path):
    p = tmp_path / "p.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 1\n2 3\n1 1\n")
    a = ca.assemble_file(str(p), dtype="bool")
    assert a.dtype == np.bool_
    np.testing.assert_array_equal(
        a.toarray(), [[True, False, False], [False, False, True], [False, False, False]]
    )


def test_values_that_are_not_bools_are_refused():
    with pytest.raises(ca.InputError, match="does not fit bool"):
        ca.assemble(np.array([2], dtype=np.int64), ([0], [0]), (1, 1), dtype="bool")
    with pytest.raises(ca.InputError, match="float"):
        ca.assemble(np.array([1.0]), ([0], [0]), (1, 1), dtype="bool")
    assert "bool" in ca.DTYPES


def test_bools_into_a_numeric_tensor_are_0_and_1():
    a = ca.assemble(np.array([True, True, False]), ([0, 0, 1], [0, 0, 1]), (2, 2), dtype="float64")
    assert a.dtype == np.float64
    np.testing.assert_array_equal(a.toarray(), [[2.0, 0.0], [0.0, 0.0]])


def test_push_elements_with_bool_element_matrices(tmp_path):
    path = str(tmp_path / "be.hrry")
    with ca.Builder((3, 3), "bool") as b:
        b.push_elements(np.array([[0, 2], [2, 1]]), np.array([[[True, False], [False, False]], [[False, True], [False, False]]]))
        b.finish(path)
    np.testing.assert_array_equal(
        ca.open(path).to_scipy().toarray(),
        [[True, False, False], [False, False, False], [False, True, False]],
    )
