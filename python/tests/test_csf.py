"""CSF (compressed sparse fibres, rank 3 and up) from Python: ``assemble``
into a :class:`CsfTensor` whose arrays are views of our buffers, the
tree's invariants and coordinates checked against pydata ``sparse``'s
duplicate summation, ``to_sparse`` from any file, a Builder's CSF in a
mode order, FROSTT ``.tns`` input, and the refusals."""

import numpy as np
import pytest
import sparse

import coo_assembler as ca


def contributions(shape, n, seed):
    rng = np.random.default_rng(seed)
    coords = tuple(rng.integers(0, e, n).astype(np.int64) for e in shape)
    # Multiples of 1/64: every sum is exact whatever the order.
    values = rng.integers(-1000, 1000, n) / 64.0
    return values, coords


def walk(t):
    """Every leaf's coordinate (dimension order) from the tree's arrays."""
    r = t.ndim
    out = np.zeros((r, t.nnz), dtype=np.int64)

    def visit(level, lo, hi, prefix):
        for k in range(lo, hi):
            here = prefix + [int(t.crd[level][k])]
            if level + 1 == r:
                for l, x in enumerate(here):
                    out[t.mode_order[l], k] = x
            else:
                visit(level + 1, int(t.pos[level + 1][k]), int(t.pos[level + 1][k + 1]), here)

    visit(0, int(t.pos[0][0]), int(t.pos[0][1]), [])
    return out


@pytest.mark.parametrize("mode_order", [None, (2, 0, 1), (1, 2, 0)])
def test_assemble_csf_holds_the_summed_entries_in_mode_order(mode_order):
    shape = (13, 7, 29)
    values, coords = contributions(shape, 4000, 1)
    t = ca.assemble(values, coords, shape, layout="csf", mode_order=mode_order)
    assert isinstance(t, ca.CsfTensor)
    order = mode_order or (0, 1, 2)
    assert t.mode_order == order and t.shape == shape
    # In memory (the identity order), 32-bit words as the extents fit
    # them; through a file (another order), the file's uint64 views.
    words = np.uint32 if mode_order is None else np.uint64
    assert [p.dtype for p in t.pos] == [words] * 3
    assert [c.dtype for c in t.crd] == [words] * 3
    # The reference: pydata sparse sums the duplicates.
    # (The constructor sums duplicates: has_duplicates defaults to True.)
    ref = sparse.COO(np.stack(coords), values, shape=shape)
    assert t.nnz == ref.nnz
    # The tree walked by hand gives the coordinates, in mode order.
    c = walk(t)
    keys = np.lexsort(tuple(c[d] for d in reversed(order)))
    assert (keys == np.arange(t.nnz)).all()
    got = sparse.COO(c, np.asarray(t.values), shape=shape)
    assert (got.todense() == ref.todense()).all()
    # to_sparse is the same tensor.
    s = t.to_sparse()
    assert (s.todense() == ref.todense()).all()
    i = (int(coords[0][5]), int(coords[1][5]), int(coords[2][5]))
    assert t.get(i) == ref[i]


def test_builder_csf_file_and_to_sparse_of_any_layout(tmp_path):
    shape = (5, 6, 7, 8)
    values, coords = contributions(shape, 3000, 2)
    path = tmp_path / "t.hrry"
    with ca.Builder(shape, layout="csf", mode_order=[3, 1, 0, 2], threads=2) as b:
        b.push(values, coords)
        b.finish(path)
    with ca.open(path) as f:
        assert f.layout == "csf"
        assert not f.is_sorted
        t = f.to_csf()
        assert t.mode_order == (3, 1, 0, 2)
        dense = f.to_sparse().todense()
    coo = tmp_path / "c.hrry"
    with ca.Builder(shape) as b:
        b.push(values, coords)
        b.finish(coo)
    with ca.open(coo) as f:
        assert (f.to_sparse().todense() == dense).all()
        with pytest.raises(ca.InvalidFileError, match="to_csf"):
            f.to_csf()


def test_arrays_and_file_views_answer_through_the_same_rule(tmp_path):
    shape = (9, 11, 13)
    values, coords = contributions(shape, 2500, 4)
    mem = ca.assemble(values, coords, shape, layout="csf")
    path = tmp_path / "t.hrry"
    with ca.Builder(shape, layout="csf") as b:
        b.push(values, coords)
        b.finish(path)
    with ca.open(path) as f:
        view = f.to_csf()
        assert view.pos[0].dtype == np.uint64 and mem.pos[0].dtype == np.uint32
        assert (view.coords() == mem.coords()).all()
        assert (view.coords() == walk(mem)).all()
        for p in range(0, mem.nnz, 17):
            idx = tuple(int(x) for x in mem.coords()[:, p])
            assert mem.get(idx) == view.get(idx) == f.get(idx) == mem.values[p]
        absent = next(
            (i, j, k)
            for i in range(9)
            for j in range(11)
            for k in range(13)
            if f.get((i, j, k)) == 0
        )
        assert mem.get(absent) == 0 and view.get(absent) == 0
    with pytest.raises(ca.InputError, match="outside"):
        mem.get((9, 0, 0))
    # Arrays changed so they are no tree: an error naming it, no crash.
    mem.pos[1][1] = mem.pos[1][2] + 5
    with pytest.raises(Exception, match="not a tree"):
        mem.coords()


def test_tns_input_into_csf(tmp_path):
    p = tmp_path / "t.tns"
    p.write_text("# FROSTT\n1 1 2 1.0\n1 3 4 2.0\n2 2 1 3.0\n2 2 3 4.0\n1 1 2 0.5\n")
    out = tmp_path / "t.hrry"
    s = ca.assemble_file(p, layout="csf", output=out)
    assert s.nnz == 4
    with ca.open(out) as f:
        t = f.to_csf()
        assert f.shape == (2, 3, 4)
        assert list(t.crd[2]) == [1, 3, 0, 2]
        assert list(t.pos[2]) == [0, 1, 2, 4]
        assert f.get((0, 0, 1)) == 1.5


def test_csf_refusals():
    values, coords = contributions((4, 4), 10, 3)
    with pytest.raises(ca.InputError, match="rank 3 and up"):
        ca.assemble(values, coords, (4, 4), layout="csf")
    values, coords = contributions((4, 4, 4), 10, 3)
    with pytest.raises(ca.InputError, match="not a permutation"):
        ca.assemble(values, coords, (4, 4, 4), layout="csf", mode_order=(0, 0, 1))
    with pytest.raises(ca.InputError, match="CSF option"):
        ca.Builder((4, 4, 4), mode_order=(0, 1, 2))


def test_ttv_streams_along_the_leaf_level_and_matches_numpy(tmp_path):
    shape = (6, 9, 7)
    values, coords = contributions(shape, 2000, 5)
    path = tmp_path / "t.hrry"
    with ca.Builder(shape, layout="csf", mode_order=(1, 0, 2)) as b:
        b.push(values, coords)
        b.finish(path)
    dense = sparse.COO(np.stack(coords), values, shape=shape).todense()
    with ca.open(path) as f:
        for mode in range(3):
            x = np.arange(shape[mode], dtype=np.float64) - 2.0
            y = f.ttv(x, mode, tmp_path / f"y{mode}.hrry")
            want = np.tensordot(dense, x, axes=([mode], [0]))
            got = y.to_sparse().todense()
            assert got.shape == want.shape
            assert np.array_equal(got, want)
        with pytest.raises(ca.InputError, match="extent 9"):
            f.ttv(np.ones(3), 1, tmp_path / "bad.hrry")
