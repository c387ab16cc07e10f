"""``skip_negative`` (issue 22): negative indices in signed index arrays
skipped and counted, as PETSc ignores them and sfepy marks removed
(Dirichlet) dofs with them; without it, a negative index stays an error."""

import numpy as np
import pytest

import coo_assembler as ca


def _mesh(seed=3, n_el=300, n=120, k=4):
    rng = np.random.default_rng(seed)
    dofs = rng.integers(0, n, size=(n_el, k)).astype(np.int32)
    # Removed dofs, as sfepy marks them.
    dofs[rng.random(dofs.shape) < 0.15] = -1
    ke = rng.standard_normal((n_el, k, k))
    return dofs, ke, n


def _kept_triplets(dofs, ke):
    rows = np.repeat(dofs, dofs.shape[1], axis=1).ravel()
    cols = np.tile(dofs, (1, dofs.shape[1])).ravel()
    vals = ke.ravel()
    keep = (rows >= 0) & (cols >= 0)
    return vals, rows, cols, keep


def test_push_elements_skips_negative_dofs(tmp_path):
    dofs, ke, n = _mesh()
    vals, rows, cols, keep = _kept_triplets(dofs, ke)
    with ca.Builder((n, n), skip_negative=True) as b:
        b.push_elements(dofs, ke)
        s = b.finish(tmp_path / "got.hrry")
    assert s.skipped_negative == int((~keep).sum()) > 0
    assert s.contributions == vals.size
    # The same bytes as the kept entries pushed without the option.
    with ca.Builder((n, n)) as b:
        for e in range(dofs.shape[0]):
            d = dofs[e][dofs[e] >= 0]
            if d.size == 0:
                continue
            m = ke[e][np.ix_(dofs[e] >= 0, dofs[e] >= 0)]
            b.push_elements(d[None, :].astype(np.int64), m[None, :, :].copy())
        w = b.finish(tmp_path / "want.hrry")
    assert w.skipped_negative == 0
    assert (tmp_path / "got.hrry").read_bytes() == (tmp_path / "want.hrry").read_bytes()


@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_push_and_assemble_skip_negative(tmp_path, itype):
    dofs, ke, n = _mesh(seed=5)
    vals, rows, cols, keep = _kept_triplets(dofs, ke)
    r, c = rows.astype(itype), cols.astype(itype)
    with ca.Builder((n, n), skip_negative=True) as b:
        b.push(vals, (r, c))
        b.push(vals, np.stack([r, c], axis=1))  # the (n, rank) form
        s = b.finish(tmp_path / "k.hrry")
    assert s.skipped_negative == 2 * int((~keep).sum())
    with ca.Builder((n, n)) as b:
        b.push(vals[keep], (rows[keep], cols[keep]))
        b.push(vals[keep], (rows[keep], cols[keep]))
        b.finish(tmp_path / "w.hrry")
    assert (tmp_path / "k.hrry").read_bytes() == (tmp_path / "w.hrry").read_bytes()

    # ca.assemble: the in-memory kernel skips them itself (no detour
    # through a Builder and a file); the result is the assembly of the
    # kept contributions, bit for bit, in every layout.
    for layout in ("csr", "csc", "coo"):
        got = ca.assemble(vals, (r, c), (n, n), skip_negative=True, layout=layout)
        want = ca.assemble(vals[keep], (rows[keep], cols[keep]), (n, n), layout=layout)
        if layout == "coo":
            assert np.array_equal(got.coords, want.coords)
        else:
            assert np.array_equal(got.indptr, want.indptr)
            assert np.array_equal(got.indices, want.indices)
        assert got.data.tobytes() == want.data.tobytes()
    served = ca._native.assemble_arrays(
        vals, [r, c], [n, n], "float64", "int32", ca._common._options(skip_negative=True)
    )
    assert served is not None, "the in-memory kernel declined skip_negative"


def test_without_the_option_a_negative_index_is_an_error(tmp_path):
    dofs, ke, n = _mesh()
    with pytest.raises(ca.InputError, match=r"dofs\[\d+, \d+\] = -1 is negative"):
        with ca.Builder((n, n)) as b:
            b.push_elements(dofs, ke)
    with pytest.raises(ca.CooAssemblerError, match="index -1 in dimension 0 is negative"):
        ca.assemble(np.ones(2), (np.array([0, -1]), np.array([0, 0])), (3, 3))


def test_skip_negative_keeps_the_upper_bound_check():
    with pytest.raises(ca.CooAssemblerError, match="out of range|outside"):
        ca.assemble(np.ones(2), (np.array([-1, 7]), np.array([0, 0])), (3, 3), skip_negative=True)


def test_summary_has_skipped_negative(tmp_path):
    with ca.Builder((2, 2), skip_negative=True) as b:
        b.push(np.ones(3), (np.array([0, -1, 1]), np.array([0, 0, -5])))
        s = b.finish(tmp_path / "s.hrry")
    assert (s.contributions, s.skipped_negative, s.nnz) == (3, 2, 1)


def test_a_negative_index_names_the_option_that_skips_it():
    with pytest.raises(ca.CooAssemblerError, match=r"is negative; .*skip_negative=True"):
        ca.assemble(np.ones(2), (np.array([0, -1]), np.array([0, 0])), (3, 3))
    dofs = np.array([[0, 1], [1, -1]])
    ke = np.ones((2, 2, 2))
    with pytest.raises(ca.InputError, match=r"dofs\[1, 1\] = -1 is negative; .*skip_negative=True"):
        with ca.Builder((3, 3)) as b:
            b.push_elements(dofs, ke)
    # plan_elements names the dof as push_elements does, not a flattened
    # contribution.
    with pytest.raises(ca.CooAssemblerError, match=r"dofs\[1, 1\] = -1 is negative"):
        ca.plan_elements(dofs, (3, 3))
    with pytest.raises(ca.CooAssemblerError, match=r"dofs\[1, 0\] = 7 is out of range \(extent 3\)"):
        ca.plan_elements(np.array([[0, 1], [7, 1]]), (3, 3))


def test_plans_skip_negative_as_assemble_does(tmp_path):
    """A plan with ``skip_negative`` takes one value per contribution and
    ignores those with a negative index: every refill, in memory (from
    triplets and from element matrices) and from a plan in parts on
    disk, equals ``assemble`` with the option."""
    dofs, ke, n = _mesh(n_el=3000, n=1200)
    vals, rows, cols, keep = _kept_triplets(dofs, ke)
    want = ca.assemble(vals, (rows, cols), (n, n), skip_negative=True)
    P = ca.plan((rows, cols), (n, n), skip_negative=True)
    assert P.contributions == vals.size
    got = P.assemble(vals)
    assert (got != want).nnz == 0 and got.nnz == want.nnz
    assert np.array_equal(got.data, want.data)
    PE = ca.plan_elements(dofs, (n, n), skip_negative=True)
    got = PE.assemble_elements(ke)
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.data, want.data)
    # A value count of the kept contributions only is refused.
    with pytest.raises(ca.InputError):
        P.assemble(vals[keep])
    # Out of core, several parts.
    s = ca.plan_to_file((rows, cols), (n, n), tmp_path / "K.plan", skip_negative=True,
                        memory_budget="8MiB", temp_dir=tmp_path)
    assert s.contributions == vals.size
    np.save(tmp_path / "v.npy", vals)
    K = ca.refill_file(tmp_path / "K.plan", tmp_path / "v.npy", tmp_path / "K.hrry",
                       memory_budget="8MiB", temp_dir=tmp_path)
    got = K.to_scipy()
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.data, want.data)
    # Without the option, the error of today.
    with pytest.raises(ca.InputError):
        ca.plan((rows, cols), (n, n))
