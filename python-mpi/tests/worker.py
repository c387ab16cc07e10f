"""One rank of the distributed Python tests; run under mpirun by
test_mpi.py (``mpirun -n K python worker.py CASE DIR``). Prints
``worker CASE rank R OK`` when every check on this rank passed."""

import os
import sys

import numpy as np
from mpi4py import MPI

import coo_assembler as ca

SHAPE = (601, 401)
N = 60_000


def contributions():
    """A fixed, seeded set: clustered coordinates (many duplicates),
    values spanning 40 orders of magnitude (any inexact sum shows)."""
    g = np.random.default_rng(42)
    rows = g.integers(0, SHAPE[0], N) // 3 * 3
    cols = (rows + g.integers(-20, 21, N)) % SHAPE[1]
    vals = g.standard_normal(N) * 10.0 ** g.integers(-20, 21, N)
    return rows, cols, vals


def mine(rank, ranks):
    idx = np.arange(N)
    idx = idx[(idx * 2654435761) % 1009 % ranks == rank]
    return idx[::-1] if rank % 2 else idx


def single_csr(rows, cols, vals):
    """One process, the one-process package: the reference band source."""
    return ca.assemble(vals, (rows, cols), SHAPE, layout="csr")


def check_band(band, ref, what):
    lo, hi = band.rows
    a, b = ref.indptr[lo], ref.indptr[hi]
    assert np.array_equal(band.row_ptr, ref.indptr[lo : hi + 1] - a), what
    assert np.array_equal(band.cols, ref.indices[a:b]), what
    assert np.array_equal(band.values.view(np.uint64), ref.data[a:b].view(np.uint64)), what


def main(case, tmp):
    comm = MPI.COMM_WORLD
    rank, ranks = comm.rank, comm.size
    rows, cols, vals = contributions()
    my = mine(rank, ranks)
    ref = single_csr(rows, cols, vals)
    if case == "memory":
        for own in ({}, {"local_rows": SHAPE[0] // ranks + (SHAPE[0] % ranks if rank == ranks - 1 else 0)}):
            with ca.DistBuilder(comm, SHAPE, memory_budget="8MiB", temp_dir=tmp, **own) as b:
                b.push_arrays((rows[my], cols[my]), vals[my])
                band = b.finish_csr()
            assert band.row_ptr.dtype == np.int32 and band.cols.dtype == np.int32
            check_band(band, ref, f"finish_csr {own}")
            # A plan from arrays with the same bands refills the same band,
            # and a second refill is a fresh assembly of the new values.
            starts = comm.allgather(band.rows[0])
            plan = ca.DistPlan(comm, (rows[my], cols[my]), SHAPE, row_starts=starts)
            assert np.array_equal(plan.refill(vals[my]).view(np.uint64), band.values.view(np.uint64))
            new = vals * 3.0 - 1.0
            with ca.DistBuilder(comm, SHAPE, row_starts=starts) as b:
                b.push_arrays((rows[my], cols[my]), new[my])
                fresh = b.finish_csr(np.int64)
            assert np.array_equal(plan.refill(new[my]).view(np.uint64), fresh.values.view(np.uint64))
            # The plan recorded from pushes (element by element here).
            with ca.DistBuilder(comm, SHAPE, row_starts=starts) as b:
                for k in my[:100]:
                    b.push((rows[k], cols[k]), vals[k])
                b.push_arrays((rows[my[100:]], cols[my[100:]]), vals[my[100:]])
                first, recorded = b.finish_planned()
            check_band(first, ref, "finish_planned")
            assert np.array_equal(recorded.refill(new[my]).view(np.uint64), fresh.values.view(np.uint64))
            # A refill of the wrong length: every rank raises.
            try:
                recorded.refill(new[my][: len(my) - (rank == ranks - 1)])
                raise AssertionError("a short refill was taken")
            except ca.CooAssemblerError as e:
                if rank == ranks - 1:
                    assert f"rank {rank}" in str(e) and f"{len(my) - 1} values" in str(e), e
                else:
                    assert f"rank {ranks - 1}" in str(e), e
        # Element matrices: the Rust builder's push_element order.
        dofs = np.array([[0, 5, 9], [5, 9, 400]])
        ke = np.arange(18, dtype=float).reshape(2, 3, 3)
        with ca.DistBuilder(comm, SHAPE) as b:
            if rank == 0:
                b.push_elements(dofs, ke)
            band = b.finish_csr()
        e_rows = np.repeat(dofs, 3, axis=1).reshape(-1)
        e_cols = np.tile(dofs, (1, 3)).reshape(-1)
        check_band(band, ca.assemble(ke.reshape(-1), (e_rows, e_cols), SHAPE, layout="csr"), "elements")
        # int64 values beyond 2**53 stay exact, pushed (int32 indices too)
        # and refilled, where a float64 on the way would round them.
        def big(k, step):
            return (2**53 + 1 + step * k).astype(np.int64)

        def exact_band(pick, values, band, what):
            want = {}
            for k in pick:
                key = (int(rows[k]), int(cols[k]))
                want[key] = want.get(key, 0) + int(values[k])
            lo, hi = band.rows
            got = {}
            for r in range(hi - lo):
                for q in range(band.row_ptr[r], band.row_ptr[r + 1]):
                    got[(lo + r, int(band.cols[q]))] = int(band.values[q])
            assert band.values.dtype == np.int64, what
            assert got == {key: v for key, v in want.items() if lo <= key[0] < hi}, what

        pick = np.concatenate([mine(r, ranks)[:40] for r in range(ranks)])
        first, second = big(np.arange(N), 1), big(np.arange(N), 3)
        some = my[:40]
        with ca.DistBuilder(comm, SHAPE, "int64", row_starts=starts) as b:
            b.push_arrays((rows[some].astype(np.int32), cols[some].astype(np.int32)), first[some])
            band, recorded = b.finish_planned()
        exact_band(pick, first, band, "int64 pushes")
        refilled = recorded.refill(second[some])
        exact_band(pick, second, band._replace(values=refilled), "int64 recorded refill")
        plan = ca.DistPlan(comm, (rows[some], cols[some]), SHAPE, "int64", row_starts=starts)
        exact_band(pick, second, band._replace(values=plan.refill(second[some])), "int64 plan refill")
        # Values one rank cannot convert to int64: every rank's refill raises.
        bad = second[some].astype(np.uint64)
        if rank == ranks - 1:
            bad[0] = np.uint64(2**64 - 1)
        try:
            plan.refill(bad)
            raise AssertionError("a refill of values beyond int64 went through")
        except ca.CooAssemblerError as e:
            assert "do not fit" in str(e) and f"rank {ranks - 1}" in str(e), e
        exact_band(pick, second, band._replace(values=plan.refill(second[some])), "a refill after")
    elif case == "files":
        out = os.path.join(tmp, "K.hrry")
        with ca.DistBuilder(comm, SHAPE, layout="csr", name="K") as b:
            b.push_arrays((rows[my], cols[my]), vals[my])
            s = b.finish(out)
        assert s.total_nnz == ref.nnz, (s.total_nnz, ref.nnz)
        assert s.ranks == ranks and s.rank == rank
        lo, hi = s.rows
        assert s.nnz == ref.indptr[hi] - ref.indptr[lo]
        assert os.path.getsize(out) == s.file_bytes
    elif case == "abandon":
        # An exception on the last rank inside the with block: the others'
        # finish raises naming it; nothing is written; nobody hangs.
        out = os.path.join(tmp, "A.hrry")
        try:
            with ca.DistBuilder(comm, SHAPE) as b:
                b.push_arrays((rows[my], cols[my]), vals[my])
                if rank == ranks - 1:
                    raise KeyError("element 7 has no material")
                b.finish(out)
            raise AssertionError("finish went through")
        except KeyError:
            assert rank == ranks - 1
        except ca.CooAssemblerError as e:
            assert rank != ranks - 1
            assert f"rank {ranks - 1}" in str(e) and "element 7 has no material" in str(e), e
        comm.barrier()
        assert not os.path.exists(out)
        # A bad push on one rank: every rank's finish raises.
        with ca.DistBuilder(comm, SHAPE) as b:
            if rank == 0:
                try:
                    b.push((SHAPE[0], 0), 1.0)
                    raise AssertionError("an out-of-range push was taken")
                except ca.InputError:
                    pass
            try:
                b.finish_csr()
                raise AssertionError("finish went through")
            except ca.CooAssemblerError as e:
                assert "out of range" in str(e), e
        # A negative index, refused before it reaches the builder, is
        # reported to every rank as well.
        with ca.DistBuilder(comm, SHAPE) as b:
            if rank == ranks - 1:
                try:
                    b.push((-1, 0), 1.0)
                    raise AssertionError("a negative index was taken")
                except ca.InputError:
                    pass
            try:
                b.finish_csr()
                raise AssertionError("finish went through")
            except ca.CooAssemblerError as e:
                assert "negative" in str(e), e
    else:
        raise SystemExit(f"unknown case {case}")
    comm.barrier()
    print(f"worker {case} rank {rank} OK", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
