"""Plans and refills (issue 24): `ca.plan` / `ca.plan_elements` then
`P.assemble(values[, out=A])` give, bit for bit, what `ca.assemble` gives
for the same coordinates and values, in every layout and thread count;
`out=` refills in place; wrong values, foreign results and options that
would change the pattern are refused with what is wrong."""
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import coo_assembler as ca


def bits(a):
    # The raw bits, so that -0.0, NaNs and bools compare exactly.
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}.get(a.dtype.itemsize, np.uint64))


def same(a, b):
    assert a.format == b.format and a.shape == b.shape
    if a.format == "coo":
        assert all(np.array_equal(x, y) for x, y in zip(a.coords, b.coords))
    else:
        assert np.array_equal(a.indptr, b.indptr) and a.indptr.dtype == b.indptr.dtype
        assert np.array_equal(a.indices, b.indices) and a.indices.dtype == b.indices.dtype
    assert a.data.dtype == b.data.dtype
    assert np.array_equal(bits(a.data), bits(b.data))


def mesh(rng, n_el, nodes, index_dtype):
    # Overlapping element blocks of 6 dofs: every entry hit several times.
    k = 6
    base = rng.integers(0, nodes, n_el)
    dofs = (base[:, None] + np.arange(k)[None, :]) % nodes
    row = np.repeat(dofs, k, axis=1).reshape(-1).astype(index_dtype)
    col = np.tile(dofs, (1, k)).reshape(-1).astype(index_dtype)
    return row, col, dofs


@pytest.fixture
def fe(rng):
    # The tests give it values that cancel.
    return mesh(rng, 3000, 2000, np.int32)


@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_refills_are_assemble_bit_for_bit(rng, fe, layout, threads):
    row, col, _ = fe
    shape = (2000, 2000)
    P = ca.plan((row, col), shape, layout=layout, threads=threads)
    assert P.contributions == row.size
    for step in range(3):
        v = rng.standard_normal(row.size) * 10.0 ** rng.integers(-8, 8, row.size)
        want = ca.assemble(v, (row, col), shape, layout=layout)
        got = P.assemble(v)
        same(got, want)
        assert P.nnz == want.nnz
        # In place: the same data array, refilled.
        data = got.data
        v2 = -v[::-1].copy()
        assert P.assemble(v2, out=got) is got
        assert got.data is data
        same(got, ca.assemble(v2, (row, col), shape, layout=layout))


def test_element_plans_match_push_elements(rng, fe, tmp_path):
    _, _, dofs = fe
    ke = rng.standard_normal((dofs.shape[0], dofs.shape[1], dofs.shape[1]))
    P = ca.plan_elements(dofs, (2000, 2000))
    got = P.assemble_elements(ke)
    with ca.Builder((2000, 2000), "float64", temp_dir=tmp_path) as b:
        b.push_elements(dofs, ke)
        b.finish(tmp_path / "k.hrry")
    same(got, ca.File(tmp_path / "k.hrry").to_scipy("csr", index_dtype=got.indices.dtype))
    ke2 = ke * 3.0
    P.assemble_elements(ke2, out=got)
    assert np.allclose(got.toarray(), 3.0 * ca.File(tmp_path / "k.hrry").to_scipy().toarray())


def test_float32_and_integer_plans(rng, fe):
    row, col, _ = fe
    v32 = rng.standard_normal(row.size).astype(np.float32)
    P = ca.plan((row, col), (2000, 2000), dtype="float32")
    same(P.assemble(v32), ca.assemble(v32, (row, col), (2000, 2000)))
    vi = rng.integers(-1000, 1000, row.size).astype(np.int64)
    Q = ca.plan((row, col), (2000, 2000), dtype="int64", duplicates="max")
    same(Q.assemble(vi), ca.assemble(vi, (row, col), (2000, 2000), duplicates="max"))


@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_plans_refill_as_assemble_does(rng, fe, layout, dtype):
    row, col, _ = fe
    shape = (2000, 2000)
    P = ca.plan((row, col), shape, layout=layout, dtype=dtype)
    assert P.dtype == np.dtype(dtype)
    for step in range(2):
        mag = 10.0 ** rng.integers(-8, 8, row.size)
        v = ((rng.standard_normal(row.size) + 1j * rng.standard_normal(row.size)) * mag).astype(dtype)
        want = ca.assemble(v, (row, col), shape, layout=layout)
        got = P.assemble(v)
        same(got, want)
        data = got.data
        assert P.assemble(v[::-1].copy(), out=got) is got and got.data is data
        same(got, ca.assemble(v[::-1].copy(), (row, col), shape, layout=layout))
    # Real values go into a complex128 plan (imaginary parts zero).
    if dtype == "complex128":
        r = rng.standard_normal(row.size)
        same(P.assemble(r), ca.assemble(r.astype(complex), (row, col), shape, layout=layout))
    # Complex values have no order.
    with pytest.raises(ca.InputError, match="no order"):
        ca.plan((row, col), shape, dtype=dtype, duplicates="max")


def test_bad_values_and_foreign_results_are_refused(rng, fe):
    row, col, _ = fe
    P = ca.plan((row, col), (2000, 2000))
    with pytest.raises(ca.InputError, match="for a plan of"):
        P.assemble(np.ones(5))
    with pytest.raises(TypeError, match="not a safe cast"):
        P.assemble(np.ones(row.size, dtype=np.complex128))
    big = np.ones(row.size, dtype=np.int64)
    big[7] = 2**60
    with pytest.raises(ca.InputError, match="contribution 7"):
        P.assemble(big)
    # Exactly representable integers are taken.
    small = np.arange(row.size, dtype=np.int64) % 5
    same(P.assemble(small), ca.assemble(small.astype(float), (row, col), (2000, 2000)))
    # A result of another pattern, or another layout, is not this plan's.
    other = ca.assemble(np.ones(row.size), (row, (col + 1) % 2000), (2000, 2000))
    with pytest.raises(ca.InputError, match="structure"):
        P.assemble(np.ones(row.size), out=other)
    with pytest.raises(ca.InputError, match="csr array"):
        P.assemble(np.ones(row.size), out=other.tocsc())
    # An equal structure made elsewhere is recognised by its contents.
    A = ca.assemble(np.ones(row.size), (row, col), (2000, 2000))
    P.assemble(np.ones(row.size) * 2, out=A)
    assert np.allclose(A.toarray(), 2 * ca.assemble(np.ones(row.size), (row, col), (2000, 2000)).toarray())
    # NaN under reject_nan names its contribution.
    Q = ca.plan((row, col), (2000, 2000), non_finite="reject_nan")
    v = np.ones(row.size)
    v[11] = np.nan
    with pytest.raises(ca.InputError, match="contribution 11"):
        Q.assemble(v)


def test_options_that_change_the_pattern_are_refused(fe):
    row, col, _ = fe
    with pytest.raises(ca.InputError, match="drop_zeros changes the pattern"):
        ca.plan((row, col), (2000, 2000), drop_zeros=True)
    with pytest.raises(ca.InputError, match="duplicate"):
        ca.plan((row, col), (2000, 2000), duplicates="error")
    with pytest.raises(ca.InputError, match="out of range"):
        ca.plan((row, col), (1000, 2000))
    with pytest.raises(ca.BudgetError, match="too small"):
        ca.plan((row, col), (2000, 2000), memory_budget="1MiB")


def test_digests_tell_patterns_apart(fe):
    row, col, _ = fe
    a = ca.plan((row, col), (2000, 2000))
    b = ca.plan((row.astype(np.int64), col.astype(np.int64)), (2000, 2000))
    c = ca.plan((col, row), (2000, 2000))
    assert a.digest == b.digest != c.digest


def test_refills_from_several_threads(rng, fe):
    row, col, _ = fe
    P = ca.plan((row, col), (2000, 2000))
    vs = [rng.standard_normal(row.size) for _ in range(4)]
    out = [None] * 4

    def work(i):
        out[i] = P.assemble(vs[i])

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(4):
        same(out[i], ca.assemble(vs[i], (row, col), (2000, 2000)))


def test_plans_pickle_save_and_load(rng, fe, tmp_path):
    import pickle

    row, col, dofs = fe
    for layout in ("csr", "coo"):
        P = ca.plan((row, col), (2000, 2000), layout=layout)
        v = rng.standard_normal(row.size)
        want = P.assemble(v)
        Q = pickle.loads(pickle.dumps(P))
        assert (Q.digest, Q.nnz, Q.layout, Q.shape) == (P.digest, P.nnz, P.layout, P.shape)
        same(Q.assemble(v), want)
        P.save(tmp_path / f"{layout}.plan")
        R = ca.load_plan(tmp_path / f"{layout}.plan")
        same(R.assemble(v), want)
        # A result of the loaded plan refills in place through the original.
        A = R.assemble(v)
        P.assemble(2 * v, out=A)
        same(A, P.assemble(2 * v))
    # A damaged plan file and a file that is not a plan are refused.
    raw = bytearray((tmp_path / "csr.plan").read_bytes())
    raw[len(raw) // 2] ^= 0x04
    (tmp_path / "bad.plan").write_bytes(bytes(raw))
    with pytest.raises(ca.InvalidFileError):
        ca.load_plan(tmp_path / "bad.plan")
    with ca.Builder((2, 2), "float64", temp_dir=tmp_path) as b:
        b.push(np.ones(1), (np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32)))
        b.finish(tmp_path / "k.hrry")
    with pytest.raises(ca.InvalidFileError, match="not a plan file"):
        ca.load_plan(tmp_path / "k.hrry")
    # An element plan survives pickling with its element form.
    E = ca.plan_elements(dofs, (2000, 2000))
    ke = rng.standard_normal((dofs.shape[0], dofs.shape[1], dofs.shape[1]))
    same(pickle.loads(pickle.dumps(E)).assemble_elements(ke), E.assemble_elements(ke))

@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
def test_bool_and_half_plans_refill_as_assemble_does(rng, fe, layout):
    # Every value type is planned: bool (any true contribution gives True),
    # float16 and bfloat16 (float32 values and results).
    row, col, _ = fe
    shape = (2000, 2000)
    B = ca.plan((row, col), shape, layout=layout, dtype=bool)
    assert B.dtype == np.dtype(bool)
    for step in range(2):
        v = rng.random(row.size) < 0.1
        want = ca.assemble(v, (row, col), shape, layout=layout)
        got = B.assemble(v)
        same(got, want)
        data = got.data
        v2 = ~v
        assert B.assemble(v2, out=got) is got and got.data is data
        same(got, ca.assemble(v2, (row, col), shape, layout=layout))
    # Half-width results are float32 arrays, as to_scipy gives them.
    H = ca.plan((row, col), shape, layout=layout, dtype="float16")
    assert H.dtype == np.dtype(np.float32)
    v16 = rng.standard_normal(row.size).astype(np.float16)
    got = H.assemble(v16)
    same(got, ca.assemble(v16, (row, col), shape, layout=layout))
    assert np.array_equal(got.data, got.data.astype(np.float16).astype(np.float32))
    G = ca.plan((row, col), shape, layout=layout, dtype="bf16")
    assert G.dtype == np.dtype(np.float32) and "bf16" in repr(G)
    v32 = (rng.standard_normal(row.size) * 10.0 ** rng.integers(-3, 3, row.size)).astype(np.float32)
    want = ca.assemble(v32, (row, col), shape, layout=layout, dtype="bf16")
    got = G.assemble(v32)
    same(got, want)
    # Every result value is a bfloat16 widened: its low 16 bits are 0.
    assert not np.any(got.data.view(np.uint32) & 0xFFFF)
    data = got.data
    assert G.assemble(-v32, out=got) is got and got.data is data
    same(got, ca.assemble(-v32, (row, col), shape, layout=layout, dtype="bf16"))
    # Values of another kind are refused, saying what to pass.
    with pytest.raises(TypeError, match="bool"):
        B.assemble(v32)


def test_bool_plan_files_refill_as_assemble_does(rng, big_fe, tmp_path):
    row, col, _ = big_fe
    shape = (30000, 30000)
    s = ca.plan_to_file((row, col), shape, tmp_path / "B.plan", dtype=bool, layout="csr",
                        memory_budget="8MiB", temp_dir=tmp_path)
    assert s.parts > 1
    v = rng.random(row.size) < 0.05
    np.save(tmp_path / "b.npy", v)
    v.tofile(tmp_path / "b.raw")
    want = ca.assemble(v, (row, col), shape, layout="csr")
    for values in ("b.npy", "b.raw"):
        with ca.refill_file(tmp_path / "B.plan", tmp_path / values, tmp_path / "B.hrry",
                            memory_budget="8MiB", temp_dir=tmp_path) as K:
            got = K.to_scipy("csr", index_dtype=index_dtype(want))
        assert got.dtype == np.dtype(bool)
        same(got, want)


def index_dtype(a):
    return a.coords[0].dtype if a.format == "coo" else a.indices.dtype


@pytest.fixture
def big_fe(rng):
    # Enough contributions (about 2.6e5) that an 8 MiB budget cuts the plan
    # file into several parts.
    return mesh(rng, 7200, 30000, np.int64)


@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
def test_plan_files_refill_as_assemble_does(rng, big_fe, tmp_path, layout):
    row, col, _ = big_fe
    shape = (30000, 30000)
    s = ca.plan_to_file((row, col), shape, tmp_path / "K.plan", layout=layout,
                        memory_budget="8MiB", temp_dir=tmp_path)
    assert s.contributions == row.size and s.parts > 1
    assert s.bytes == (tmp_path / "K.plan").stat().st_size
    for step in range(2):
        v = rng.standard_normal(row.size) * 10.0 ** rng.integers(-8, 8, row.size)
        np.save(tmp_path / "v.npy", v)
        v.tofile(tmp_path / "v.f64")
        want = ca.assemble(v, (row, col), shape, layout=layout)
        for values in ("v.npy", "v.f64"):
            with ca.refill_file(tmp_path / "K.plan", tmp_path / values, tmp_path / "K.hrry",
                                memory_budget="8MiB", temp_dir=tmp_path) as K:
                got = K.to_scipy(layout, index_dtype=index_dtype(want))
            assert s.nnz == want.nnz
            same(got, want)
    # Spill files are gone; what is left is ours.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["K.hrry", "K.plan", "v.f64", "v.npy"]


@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_plan_files_refill_as_assemble_does(rng, big_fe, tmp_path, dtype):
    row, col, _ = big_fe
    shape = (30000, 30000)
    s = ca.plan_to_file((row, col), shape, tmp_path / "Z.plan", dtype=dtype, layout="csr",
                        memory_budget="8MiB", temp_dir=tmp_path)
    assert s.parts > 1
    v = (rng.standard_normal(row.size) * 10.0 ** rng.integers(-8, 8, row.size)
         + 1j * rng.standard_normal(row.size)).astype(dtype)
    np.save(tmp_path / "z.npy", v)
    v.tofile(tmp_path / "z.raw")
    want = ca.assemble(v, (row, col), shape, layout="csr", dtype=dtype)
    for values in ("z.npy", "z.raw"):
        with ca.refill_file(tmp_path / "Z.plan", tmp_path / values, tmp_path / "Z.hrry",
                            memory_budget="8MiB", temp_dir=tmp_path) as K:
            got = K.to_scipy("csr", index_dtype=index_dtype(want))
        assert got.dtype == np.dtype(dtype)
        same(got, want)


def test_plan_files_refusals(rng, big_fe, tmp_path):
    row, col, dofs = big_fe
    shape = (30000, 30000)
    s = ca.plan_to_file((row, col), shape, tmp_path / "K.plan", memory_budget="8MiB")
    v = rng.standard_normal(row.size)
    # Too few values: the message gives the count the plan takes.
    v[:-1].tofile(tmp_path / "short.f64")
    with pytest.raises(ca.InputError, match=str(row.size)):
        ca.refill_file(tmp_path / "K.plan", tmp_path / "short.f64", tmp_path / "K.hrry")
    assert not (tmp_path / "K.hrry").exists()
    # Values held in memory go through a Plan, and say so.
    with pytest.raises(ca.InputError, match="ca.plan"):
        ca.refill_file(tmp_path / "K.plan", v, tmp_path / "K.hrry")
    # The output may not be the plan or the values file.
    v.tofile(tmp_path / "v.f64")
    for target in ("K.plan", "v.f64"):
        with pytest.raises(ca.CooAssemblerError):
            ca.refill_file(tmp_path / "K.plan", tmp_path / "v.f64", tmp_path / target)
    assert ca.refill_file(tmp_path / "K.plan", tmp_path / "v.f64", tmp_path / "K.hrry").nnz == s.nnz
    # A budget below the largest part's need is refused with the minimum.
    with pytest.raises(ca.BudgetError, match="at least"):
        ca.refill_file(tmp_path / "K.plan", tmp_path / "v.f64", tmp_path / "K.hrry",
                       memory_budget="1MiB")
    # drop_zeros does not exist for plans; out-of-range coordinates are refused.
    with pytest.raises(TypeError):
        ca.plan_to_file((row, col), shape, tmp_path / "P.plan", drop_zeros=True)
    with pytest.raises(ca.InputError):
        ca.plan_to_file((row, col), (10, 10), tmp_path / "P.plan")
    assert not (tmp_path / "P.plan").exists()
    # An element plan file refills with the element matrices.
    E = ca.plan_elements_to_file(dofs, shape, tmp_path / "E.plan", memory_budget="8MiB")
    ke = rng.standard_normal((dofs.shape[0], 6, 6))
    ke.tofile(tmp_path / "ke.f64")
    want = ca.plan_elements(dofs, shape).assemble_elements(ke)
    with ca.refill_file(tmp_path / "E.plan", tmp_path / "ke.f64", tmp_path / "E.hrry") as K:
        same(K.to_scipy(index_dtype=index_dtype(want)), want)
    assert E.parts > 1
