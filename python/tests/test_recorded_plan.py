"""Plans a Builder records while it assembles (``record_plan=True``):
refilled by pushing the values alone, they give what the builder writes
for the same pushes, in memory and from a plan file."""

import threading

import numpy as np
import pytest

import coo_assembler as ca


def mesh(n_el=400, n=300, seed=3):
    rng = np.random.default_rng(seed)
    a = np.arange(n_el) % (n - 1)
    dofs = np.stack([a, a + 1, rng.integers(0, n, n_el)], axis=1).astype(np.int64)
    ke = rng.integers(-1000, 1000, (n_el, 3, 3)) / 64.0
    return dofs, ke


def entries(path):
    with ca.open(path) as f:
        m = f.to_scipy()
    return m


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
@pytest.mark.parametrize("duplicates", ["sum", "last"])
def test_recorded_plan_refills_to_the_builders_result(tmp_path, layout, duplicates):
    n = 300
    dofs, ke = mesh(n=n)
    chunks = [(dofs[i : i + 100], ke[i : i + 100]) for i in range(0, len(dofs), 100)]
    b = ca.Builder((n, n), layout=layout, duplicates=duplicates, record_plan=True)
    for d, k in chunks:
        b.push_elements(d, k)
    b.finish(tmp_path / "a.hrry")
    P = b.plan
    assert P.contributions == ke.size

    rng = np.random.default_rng(9)
    ke2 = rng.integers(0, 1 << 20, ke.shape) / 3.0
    with ca.Builder((n, n), layout=layout, duplicates=duplicates) as b2:
        for (d, _), i in zip(chunks, range(0, len(dofs), 100)):
            b2.push_elements(d, ke2[i : i + 100])
        b2.finish(tmp_path / "b.hrry")
    want = entries(tmp_path / "b.hrry")
    r = P.refill()
    for i in range(0, len(dofs), 100):
        r.push_elements(ke2[i : i + 100])
    got = r.assemble()
    assert len(r) == 0
    diff = (got.tocsr() - want.tocsr()).tocoo()
    assert got.nnz == want.nnz
    assert np.array_equal(got.tocsr().toarray(), want.tocsr().toarray())
    assert diff.nnz == 0 or np.all(diff.data == 0)


def test_push_calls_from_threads_are_the_plans_order(tmp_path):
    n = 200
    dofs, ke = mesh(n_el=600, n=n, seed=5)
    b = ca.Builder((n, n), duplicates="last", record_plan=True, threads=2)
    order = []
    lock = threading.Lock()

    def worker(j):
        for i in range(j, 600, 150 * 4):
            with lock:
                order.append(i)
                b.push_elements(dofs[i : i + 150], ke[i : i + 150])

    ts = [threading.Thread(target=worker, args=(j * 150,)) for j in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    b.finish(tmp_path / "a.hrry")
    want = entries(tmp_path / "a.hrry")
    r = b.plan.refill()
    for i in order:
        r.push_elements(ke[i : i + 150])
    got = r.assemble()
    assert np.array_equal(got.toarray(), want.toarray())


def test_a_recorded_plan_file_refills_from_a_values_file(tmp_path):
    n = 300
    dofs, ke = mesh(n=n)
    b = ca.Builder((n, n), layout="csr", skip_negative=True, record_plan=True)
    dofs = dofs.copy()
    dofs[::7, 1] = -1
    b.push_elements(dofs, ke)
    s = b.finish(tmp_path / "a.hrry", plan_file=tmp_path / "k.plan")
    assert s.skipped_negative > 0
    with pytest.raises(ca.CooAssemblerError):
        b.plan
    np.save(tmp_path / "v.npy", ke.reshape(-1))
    ca.refill_file(tmp_path / "k.plan", tmp_path / "v.npy", tmp_path / "r.hrry")
    assert (tmp_path / "r.hrry").read_bytes() == (tmp_path / "a.hrry").read_bytes()


def test_recording_refusals(tmp_path):
    with pytest.raises(ca.CooAssemblerError, match="drop_zeros"):
        ca.Builder((4, 4), drop_zeros=True, record_plan=True)
    b = ca.Builder((4, 4))
    b.push([1.0], (np.array([0]), np.array([1])))
    with pytest.raises(ca.InputError, match="record_plan"):
        b.finish(tmp_path / "x.hrry", plan_file=tmp_path / "x.plan")
    b.close()
    b = ca.Builder((4, 4), record_plan=True)
    b.push([1.0, 2.0], (np.array([0, 0]), np.array([1, 1])))
    b.finish(tmp_path / "y.hrry")
    r = b.plan.refill()
    r.push([1.0, 2.0])
    with pytest.raises(ca.InputError, match="values pushed"):
        r.push([3.0])
    assert b.plan.refill().push([5.0, 6.0]) is None
