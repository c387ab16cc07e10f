"""Complex values: assembled exactly (each part correctly rounded), read
back as scipy's complex arrays, through every layout and the Builder."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

import coo_assembler as ca


def exact_parts(v, r, c, shape):
    """Each part summed exactly (math.fsum per coordinate), as a dense array."""
    out = {}
    for k, (i, j) in enumerate(zip(r.tolist(), c.tolist())):
        out.setdefault((i, j), []).append(v[k])
    dense = np.zeros(shape, dtype=np.complex128)
    for (i, j), vs in out.items():
        dense[i, j] = complex(math.fsum(x.real for x in vs), math.fsum(x.imag for x in vs))
    return dense


@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
def test_complex128_matches_exact_sums_and_scipy_dtype(rng, layout):
    n, m = 60, 20_000
    r = rng.integers(0, n, m).astype(np.int32)
    c = rng.integers(0, n, m).astype(np.int32)
    v = rng.standard_normal(m) * 1e8 + 1j * rng.standard_normal(m)
    a = ca.assemble(v, (r, c), (n, n), layout=layout)
    assert a.dtype == np.complex128
    ref = sp.coo_array((v, (r, c)), shape=(n, n)).asformat(layout)
    assert ref.dtype == a.dtype
    got = a.toarray()
    np.testing.assert_array_equal(got, exact_parts(v, r, c, (n, n)))
    np.testing.assert_allclose(got, ref.toarray(), rtol=1e-12, atol=1e-6)


def test_cancellation_is_exact_in_each_part():
    v = np.array([1e16 + 0.5j, 1.0 + 1e16j, -1e16 - 1e16j])
    a = ca.assemble(v, ([0, 0, 0], [1, 1, 1]), (2, 2))
    assert a[0, 1] == complex(1.0, 0.5)


def test_complex64_and_real_values_into_complex():
    v = np.array([0.1 + 0.2j, 0.3 - 0.1j], dtype=np.complex64)
    a = ca.assemble(v, ([0, 0], [0, 0]), (1, 1))
    assert a.dtype == np.complex64
    want = complex(np.float32(np.float64(np.float32(0.1)) + np.float64(np.float32(0.3))),
                   np.float32(np.float64(np.float32(0.2)) - np.float64(np.float32(0.1))))
    assert complex(a[0, 0]) == want
    # Real values into a complex tensor: imaginary parts 0.
    b = ca.assemble(np.array([1.5, 2.0]), ([0, 1], [1, 0]), (2, 2), dtype="complex128")
    assert b.dtype == np.complex128
    np.testing.assert_array_equal(b.toarray(), [[0, 1.5], [2.0, 0]])


def test_builder_file_round_trip(tmp_path):
    path = str(tmp_path / "z.hrry")
    with ca.Builder((3, 3), "complex128") as b:
        b.push(np.array([1 + 1j, 2 - 1j, 3j]), (np.array([0, 1, 0]), np.array([0, 1, 0])))
        s = b.finish(path)
    assert s.nnz == 2 and s.contributions == 3
    f = ca.open(path)
    assert f.dtype == "complex128"
    assert f.get((0, 0)) == 1 + 4j
    assert f.get((2, 2)) == 0j
    a = f.to_scipy("csr")
    assert a.dtype == np.complex128
    np.testing.assert_array_equal(a.toarray(), [[1 + 4j, 0, 0], [0, 2 - 1j, 0], [0, 0, 0]])
    np.testing.assert_array_equal(f.values(), [1 + 4j, 2 - 1j])


def test_refusals_name_the_fix():
    with pytest.raises(ca.InputError, match="no order"):
        ca.assemble(np.array([1j]), ([0], [0]), (1, 1), duplicates="max")
    with pytest.raises(ca.InputError, match="complex value cannot go into a real tensor"):
        ca.assemble(np.array([1j]), ([0], [0]), (1, 1), dtype="float64")


def test_matvec_with_complex_x_and_complex_matrices(tmp_path, rng):
    n = 40
    r = rng.integers(0, n, 500)
    c = rng.integers(0, n, 500)
    v = rng.standard_normal(500)
    x = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    real = str(tmp_path / "real.hrry")
    with ca.Builder((n, n)) as b:
        b.push(v, (r, c))
        b.finish(real)
    f = ca.open(real)
    a = f.to_scipy("csr")
    y = f.matvec(x)
    assert y.dtype == np.complex128
    # Two real products: the very sums of the complex one, bit for bit.
    np.testing.assert_array_equal(y.real, f.matvec(x.real))
    np.testing.assert_array_equal(y.imag, f.matvec(x.imag))
    np.testing.assert_allclose(y, a @ x, rtol=1e-12)
    np.testing.assert_allclose(f.matvec(x, transpose=True), a.T @ x, rtol=1e-12)
    # A complex matrix, with a real or a complex x.
    z = str(tmp_path / "z.hrry")
    w = v + 1j * rng.standard_normal(500)
    with ca.Builder((n, n), "complex128") as b:
        b.push(w, (r, c))
        b.finish(z)
    g = ca.open(z)
    az = g.to_scipy("csr")
    np.testing.assert_allclose(g.matvec(x), az @ x, rtol=1e-12)
    np.testing.assert_allclose(g.matvec(x.real), az @ x.real, rtol=1e-12)
    np.testing.assert_allclose(g.matvec(x, transpose=True), az.T @ x, rtol=1e-12)
    with pytest.raises(ca.InputError, match="not finite"):
        g.matvec(np.full(n, np.nan + 0j))
    with pytest.raises(ca.InputError, match="the product needs"):
        g.matvec(np.ones(n + 1))


def test_exports_of_a_complex_matrix(tmp_path):
    path = str(tmp_path / "z.hrry")
    with ca.Builder((2, 3), "complex128") as b:
        b.push(np.array([1 + 2j, -0.5j]), (np.array([0, 1]), np.array([2, 0])))
        b.finish(path)
    f = ca.open(path)
    npz = str(tmp_path / "z.npz")
    f.export(npz, "npz")
    back = sp.load_npz(npz)
    assert back.dtype == np.complex128
    np.testing.assert_array_equal(back.toarray(), f.to_scipy().toarray())
    mtx = str(tmp_path / "z.mtx")
    f.export(mtx, "mtx")
    import scipy.io

    m = scipy.io.mmread(mtx)
    np.testing.assert_array_equal(m.toarray(), f.to_scipy().toarray())
    # PETSc: the scalars of a complex build, (real, imaginary) big-endian.
    pz = tmp_path / "z.petsc"
    f.export(str(pz), "petsc")
    raw = pz.read_bytes()
    head = np.frombuffer(raw, ">i4", 4)
    assert head.tolist() == [1211216, 2, 3, 2]
    lens = np.frombuffer(raw, ">i4", 2, 16)
    cols = np.frombuffer(raw, ">i4", 2, 24)
    vals = np.frombuffer(raw, ">c16", 2, 32)
    assert len(raw) == 32 + 2 * 16
    assert lens.tolist() == [1, 1] and cols.tolist() == [2, 0]
    assert vals.tolist() == [1 + 2j, -0.5j]
    # MatrixMarket complex hermitian in, through assemble_file.
    h = tmp_path / "h.mtx"
    h.write_text("%%MatrixMarket matrix coordinate complex hermitian\n2 2 2\n1 1 1 0\n2 1 2 3\n")
    a = ca.assemble_file(str(h))
    assert a.dtype == np.complex128
    np.testing.assert_array_equal(a.toarray(), [[1, 2 - 3j], [2 + 3j, 0]])


def test_push_elements_with_complex_element_matrices(tmp_path):
    path = str(tmp_path / "ze.hrry")
    with ca.Builder((3, 3), "complex128") as b:
        b.push_elements(np.array([[0, 2]]), np.array([[[1 + 1j, 2], [3j, 4]]]))
        b.push_elements(np.array([[0, 2]]), np.array([[[1, 0], [0, -4j]]], dtype=np.complex64))
        b.finish(path)
    np.testing.assert_array_equal(
        ca.open(path).to_scipy().toarray(), [[2 + 1j, 0, 2], [0, 0, 0], [3j, 0, 4 - 4j]]
    )


def test_skfem_complex_helmholtz_through_our_step(tmp_path):
    """A frequency-domain problem as scikit-fem users write it: Helmholtz
    with a complex (lossy) wavenumber, complex element matrices from
    scikit-fem, assembled by us, in one call and through push_elements."""
    pytest.importorskip("skfem")
    from skfem import Basis, BilinearForm, ElementTriP1, MeshTri
    from skfem.helpers import dot, grad

    k2 = (3.0 + 0.5j) ** 2

    @BilinearForm(dtype=np.complex128)
    def helmholtz(u, v, w):
        return dot(grad(u), grad(v)) - k2 * u * v

    basis = Basis(MeshTri().refined(4), ElementTriP1())
    coo = helmholtz.elemental(basis)
    assert coo.data.dtype == np.complex128
    ref = helmholtz.assemble(basis).tocsr()
    K = ca.assemble(coo.data, coo.indices, coo.shape)
    assert K.dtype == np.complex128 and K.shape == ref.shape
    np.testing.assert_allclose(K.toarray(), ref.toarray(), rtol=1e-13, atol=1e-13)
    # The element matrices pushed one block per element, into a file
    # (local[e, j, i] is scikit-fem's (test i, trial j) integral; ours goes
    # ke[e, a, b] to (dofs[a], dofs[b]), as examples/skfem_poisson.py does).
    ke = coo.tolocal().swapaxes(1, 2)
    dofs = basis.element_dofs.T
    path = str(tmp_path / "H.hrry")
    with ca.Builder(coo.shape, "complex128") as b:
        b.push_elements(dofs, ke)
        b.finish(path)
    np.testing.assert_array_equal(ca.open(path).to_scipy("csr").toarray(), K.toarray())
