"""sfepy's complex problems assembled with our step (issue 22).

A frequency-domain Helmholtz problem set up with sfepy's own objects
(a complex field, a lossy medium, an absorbing boundary, a Dirichlet side),
its terms evaluated by sfepy into complex element matrices, and those
matrices assembled by sfepy (its ``Term.assemble_to``, through the
``assemble`` hook of ``Equations.evaluate``) and by us from the same
arrays. sfepy is not installed by ``python/run_tests.sh`` (from PyPI it
builds from source: about 7.5 minutes on a 2-core machine), so these
tests skip unless it is there: ``target/python-venv/bin/pip install sfepy``.
"""

import math

import numpy as np
import pytest

import coo_assembler as ca

pytest.importorskip("sfepy", reason="sfepy is not installed (pip install sfepy)")

# Wavenumber of the problem.
K = 6.0


def helmholtz_in_sfepy():
    """Solve nothing: build -Δu - k²(1 + 0.1i) u = f on the unit square
    (Q2 elements on an 8 x 6 grid), u = 0 on the left side, the absorbing
    condition ∂u/∂n = i k u on the right side, and evaluate the matrix the
    way sfepy's solvers do. Returns sfepy's assembled matrix and, per
    term, its element matrices with the (equation-numbered) row and column
    dofs sfepy assembled them to: -1 marks a dof the Dirichlet condition
    removed."""
    from sfepy.base.base import output
    from sfepy.discrete import Equation, Equations, FieldVariable, Integral, Material, Problem
    from sfepy.discrete.conditions import Conditions, EssentialBC
    from sfepy.discrete.fem import FEDomain, Field
    from sfepy.mesh.mesh_generators import gen_block_mesh
    from sfepy.terms import Term

    output.set_output(quiet=True)
    mesh = gen_block_mesh([1.0, 1.0], [9, 7], [0.5, 0.5], name="square", verbose=False)
    domain = FEDomain("domain", mesh)
    omega = domain.create_region("Omega", "all")
    left = domain.create_region("Left", "vertices in (x < 0.001)", "facet")
    right = domain.create_region("Right", "vertices in (x > 0.999)", "facet")
    field = Field.from_args("pressure", np.complex128, "scalar", omega, approx_order=2)
    u = FieldVariable("u", "unknown", field)
    v = FieldVariable("v", "test", field, primary_var_name="u")
    # The weak form: (grad u, grad v) - k²(1 + 0.1i)(u, v) - i k (u, v)_right.
    medium = Material("medium", kn2=-(K**2) * (1.0 + 0.1j))
    wall = Material("wall", ikn=-1j * K)
    i = Integral("i", order=4)
    eq = Equation(
        "helmholtz",
        Term.new("dw_laplace(v, u)", i, omega, v=v, u=u)
        + Term.new("dw_dot(medium.kn2, v, u)", i, omega, medium=medium, v=v, u=u)
        + Term.new("dw_dot(wall.ikn, v, u)", i, right, wall=wall, v=v, u=u),
    )
    eqs = Equations([eq])
    pb = Problem("helmholtz", equations=eqs)
    pb.time_update(ebcs=Conditions([EssentialBC("fixed", left, {"u.all": 0.0})]))
    pb.update_materials()

    contributions = []

    def record_and_assemble(equation, it, term, asm_obj, val, iels, mode=None, diff_var=None):
        # The connectivities Term.assemble_to reads for the same arrays.
        vvar = term.get_virtual_variable()
        rdc = vvar.get_dof_conn(term.region.name, term.get_dof_conn_type(vvar.name))
        cdc = diff_var.get_dof_conn(
            term.region.name,
            term.get_dof_conn_type(diff_var.name),
            term.arg_trace_regions[diff_var.name],
        )
        contributions.append((term.name, val[:, 0].copy(), rdc[iels].copy(), cdc[iels].copy()))
        return term.assemble_to(asm_obj, val, iels, mode=mode, diff_var=diff_var)

    mtx = pb.mtx_a.copy()
    mtx.data[:] = 0.0
    mtx = eqs.evaluate(mode="weak", dw_mode="matrix", asm_obj=mtx, assemble=record_and_assemble)
    return mtx, contributions


@pytest.fixture(scope="module")
def sfepy_helmholtz():
    return helmholtz_in_sfepy()


def triplets(contributions):
    """Every contribution sfepy assembled, ke[e, a, b] at (rows[e, a],
    cols[e, b]), removed dofs included."""
    r, c, v = [], [], []
    for _, ke, rows, cols in contributions:
        n_el, n_r, n_c = ke.shape
        r.append(np.repeat(rows, n_c, axis=1).ravel())
        c.append(np.tile(cols, (1, n_r)).ravel())
        v.append(ke.ravel())
    return np.concatenate(r), np.concatenate(c), np.concatenate(v)


def test_sfepy_problem_is_complex(sfepy_helmholtz):
    mtx, contributions = sfepy_helmholtz
    assert mtx.dtype == np.complex128 and mtx.shape == (208, 208)
    assert [name for name, *_ in contributions] == ["dw_laplace", "dw_dot", "dw_dot"]
    # Q2 on 48 quadrilaterals (9 dofs each), 6 facets on the right (3 dofs).
    assert [ke.shape for _, ke, *_ in contributions] == [(48, 9, 9), (48, 9, 9), (6, 3, 3)]
    _, ke_medium, rows, _ = contributions[1]
    assert np.abs(ke_medium.imag).max() > 0 and (rows < 0).any()


def test_sfepy_helmholtz_assembled_by_us_matches_sfepy(sfepy_helmholtz):
    """Our sums are the exact sums of sfepy's element contributions,
    rounded once (each part); sfepy's CSR sums them one by one in element
    order, so its entries may differ from ours by that order's rounding
    only: at most (m - 1) u sum|terms| per part for an entry of m
    contributions (u = 2^-53), the classical bound of recursive summation."""
    mtx, contributions = sfepy_helmholtz
    rows, cols, vals = triplets(contributions)
    removed = (rows < 0) | (cols < 0)
    ours = ca.assemble(vals, (rows, cols), mtx.shape, skip_negative=True)
    assert ours.dtype == np.complex128 and ours.has_canonical_format

    # The same pattern: sfepy's graph (from its cell connectivities) and
    # the coordinates we were given.
    theirs = mtx.tocsr()
    theirs.sort_indices()
    assert np.array_equal(ours.indptr, theirs.indptr)
    assert np.array_equal(ours.indices, theirs.indices)

    # Ours: the correctly rounded exact sums (math.fsum per part).
    r, c, v = rows[~removed], cols[~removed], vals[~removed]
    order = np.lexsort((c, r))
    r, c, v = r[order], c[order], v[order]
    starts = np.flatnonzero(np.r_[True, (r[1:] != r[:-1]) | (c[1:] != c[:-1])])
    ends = np.r_[starts[1:], r.size]
    exact = np.array(
        [complex(math.fsum(v[s:e].real), math.fsum(v[s:e].imag)) for s, e in zip(starts, ends)]
    )
    assert exact.size == ours.nnz
    assert ours.data.tobytes() == exact.tobytes()

    # sfepy's: within the bound of its summation order.
    m = ends - starts
    u = 2.0**-53
    diff = theirs.data - ours.data
    for part in ("real", "imag"):
        mag = np.add.reduceat(np.abs(getattr(v, part)), starts)
        bound = (m - 1) * u * mag * (1 + 1e-12)
        d = np.abs(getattr(diff, part))
        assert (d <= bound).all(), (part, d.max(), (d - bound).max())
    scale = np.abs(ours.data).max()
    print(
        f"entries {ours.nnz}, contributions {vals.size} ({int(removed.sum())} removed), "
        f"max |sfepy - ours| {np.abs(diff).max():.3g} (relative to max |entry| "
        f"{np.abs(diff).max() / scale:.3g}), entries that differ {(diff != 0).sum()}"
    )


def test_sfepy_element_matrices_through_push_elements(sfepy_helmholtz, tmp_path):
    """The element matrices pushed term by term as blocks (rows and
    columns share sfepy's dofs here), the removed dofs skipped and counted:
    the same matrix as the one-call assembly, bit for bit."""
    mtx, contributions = sfepy_helmholtz
    rows, cols, vals = triplets(contributions)
    ours = ca.assemble(vals, (rows, cols), mtx.shape, skip_negative=True)
    path = tmp_path / "H.hrry"
    with ca.Builder(mtx.shape, "complex128", skip_negative=True) as b:
        for _, ke, dofs, cdofs in contributions:
            assert np.array_equal(dofs, cdofs)
            b.push_elements(dofs, ke)
        s = b.finish(path)
    assert s.contributions == vals.size
    assert s.skipped_negative == int(((rows < 0) | (cols < 0)).sum()) > 0
    got = ca.open(path).to_scipy("csr")
    assert got.dtype == np.complex128
    assert np.array_equal(got.indptr, ours.indptr) and np.array_equal(got.indices, ours.indices)
    assert got.data.tobytes() == ours.data.tobytes()
