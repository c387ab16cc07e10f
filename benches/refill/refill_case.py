#!/usr/bin/env python3
"""One refill tool on one input, in this (fresh) process (issue 24's
harness): load the arrays, make the tool's pattern once (timed: the
planning cost), then refill `--calls` times; per call the wall time, the
CPU seconds (user + system, every thread) and the peak RSS above what the
process held before the call. Prints one JSON line.

  python refill_case.py --tool plan|bincount|assemble --data DATA/fe [--calls 3]
      [--budget SIZE] [--threads N]

Tools:
- `plan`: `P = coo_assembler.plan((r, c), shape, memory_budget=...)` once,
  `A = P.assemble(v)` on the first call, `P.assemble(v, out=A)` after:
  exact sums, bit for bit `assemble`'s result.
- `bincount`: the scipy user's refill in its best form: a slot per
  contribution computed once (`np.unique(r * ncols + c,
  return_inverse=True)`, intp, which `bincount` takes without a
  conversion), then `A.data[:] = np.bincount(slot, weights=v,
  minlength=nnz)` as the data of a csr_array made once (not exactly summed: plain
  float additions in contribution order).
- `assemble`: today's full `coo_assembler.assemble(v, (r, c), shape)`.
- `petsc`: PETSc's COO refill, `MatSetPreallocationCOO(A, n, i, j)` once
  (the setup) on a sequential AIJ matrix, then `MatSetValuesCOO(A, v,
  INSERT_VALUES)` per call (duplicates summed, plain float additions; the
  result's row sums are checked against the values'), by
  ctypes on the library petsc4py loaded (Debian's `python3-petsc4py` does
  not wrap the COO calls); PetscInt copies of the indices (PETSc sorts
  them in place) made before the clock starts. Runs under the interpreter petsc4py belongs to (Debian's
  python3), which needs only NumPy.

`--data P` reads P_r32.npy, P_c32.npy, P_v.npy and P.shape (as
benches/inmem/run.sh writes them). The peak is VmHWM after resetting it
(`/proc/self/clear_refs` 5) just before each call.
"""
import argparse
import ctypes
import json
import os
import resource
import time

import numpy as np


def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def timed(fn):
    reset_peak()
    base = status("VmRSS")
    c0, t0 = cpu_seconds(), time.perf_counter()
    out = fn()
    t1, c1 = time.perf_counter(), cpu_seconds()
    return out, {
        "s": round(t1 - t0, 4),
        "cpu_s": round(c1 - c0, 4),
        "peak_mib": round((status("VmHWM") - base) / 2**20, 1),
    }


def petsc_matrix(shape):
    """A sequential AIJ matrix of `shape`, the PETSc library petsc4py
    loaded (for ctypes) and its PetscInt dtype."""
    from petsc4py import PETSc

    A = PETSc.Mat().create(comm=PETSc.COMM_SELF)
    A.setSizes(shape)
    A.setType(PETSc.Mat.Type.SEQAIJ)
    path = next(line.split()[-1] for line in open("/proc/self/maps") if "libpetsc" in line)
    lib = ctypes.CDLL(path)
    lib.MatSetPreallocationCOO.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                                           ctypes.c_void_p]
    lib.MatSetValuesCOO.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    return A, lib, np.dtype(PETSc.IntType)


def PETSc_version():
    from petsc4py import PETSc

    return PETSc.Sys.getVersion()


def check(code):
    if code != 0:
        raise RuntimeError(f"PETSc error {code}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True, choices=["plan", "bincount", "assemble", "petsc"])
    ap.add_argument("--data", required=True)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--budget", default="2GiB")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    r = np.load(a.data + "_r32.npy")
    c = np.load(a.data + "_c32.npy")
    v = np.load(a.data + "_v.npy")
    with open(a.data + ".shape") as f:
        shape = tuple(int(x) for x in f.read().replace(",", " ").split())
    # Values of another step: the same pattern, new numbers.
    v2 = v * 1.000001 + 1e-9
    rec = {"tool": a.tool, "n": int(v.shape[0]), "load_start": os.getloadavg()[0]}
    calls = []
    if a.tool == "plan":
        import coo_assembler as ca

        P, t = timed(lambda: ca.plan((r, c), shape, memory_budget=a.budget, threads=a.threads))
        rec["setup"] = t
        rec["plan_mib"] = round(P.memory_bytes / 2**20, 1)
        A = None
        for i in range(a.calls):
            vals = v if i % 2 == 0 else v2
            if A is None:
                A, t = timed(lambda: P.assemble(vals))
            else:
                _, t = timed(lambda: P.assemble(vals, out=A))
            calls.append(t)
        B = ca.assemble(v if (a.calls - 1) % 2 == 0 else v2, (r, c), shape)
        rec["identical_to_assemble"] = bool(
            np.array_equal(A.indptr, B.indptr)
            and np.array_equal(A.indices, B.indices)
            and np.array_equal(A.data.view(np.uint64), B.data.view(np.uint64))
        )
    elif a.tool == "bincount":
        import scipy.sparse as sp

        def setup():
            key = r.astype(np.int64) * shape[1] + c
            uniq, slot = np.unique(key, return_inverse=True)
            slot = slot.astype(np.intp, copy=False)
            rows = (uniq // shape[1]).astype(np.int32)
            cols = (uniq % shape[1]).astype(np.int32)
            indptr = np.zeros(shape[0] + 1, dtype=np.int32)
            np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
            A = sp.csr_array((np.zeros(uniq.size), cols, indptr), shape=shape)
            return slot, A

        (slot, A), t = timed(setup)
        rec["setup"] = t
        rec["plan_mib"] = round((slot.nbytes + A.indices.nbytes + A.indptr.nbytes) / 2**20, 1)
        nnz = A.data.shape[0]
        for i in range(a.calls):
            vals = v if i % 2 == 0 else v2

            def refill():  # its best form: the new array becomes A.data, no copy
                A.data = np.bincount(slot, weights=vals, minlength=nnz)

            _, t = timed(refill)
            calls.append(t)
    elif a.tool == "petsc":
        A, lib, pi = petsc_matrix(shape)
        # Copies: PETSc sorts the index arrays it is given in place.
        ri = np.array(r, dtype=pi, copy=True)
        ci = np.array(c, dtype=pi, copy=True)
        ptr = ctypes.c_void_p

        def setup():
            check(lib.MatSetPreallocationCOO(ptr(A.handle), ctypes.c_int64(r.shape[0]),
                                             ri.ctypes.data_as(ptr), ci.ctypes.data_as(ptr)))

        _, t = timed(setup)
        rec["setup"] = t
        del ri, ci
        for i in range(a.calls):
            vals = v if i % 2 == 0 else v2

            def refill():
                check(lib.MatSetValuesCOO(ptr(A.handle), vals.ctypes.data_as(ptr), 1))  # INSERT_VALUES

            _, t = timed(refill)
            calls.append(t)
        info = A.getInfo()
        rec["nnz"] = int(info["nz_used"])
        # The result checked (untimed): its row sums against the last
        # values' (PETSc's sums are not exact: a relative tolerance).
        x, y = A.createVecs()
        x.set(1.0)
        A.mult(x, y)
        want = np.bincount(r, weights=vals, minlength=shape[0])
        scale = np.bincount(r, weights=np.abs(vals), minlength=shape[0])
        rec["row_sums_match"] = bool(np.all(np.abs(y.getArray() - want) <= 1e-9 * scale + 1e-300))
        rec["petsc"] = ".".join(str(x) for x in PETSc_version())
    else:
        import coo_assembler as ca

        for i in range(a.calls):
            vals = v if i % 2 == 0 else v2
            _, t = timed(lambda: ca.assemble(vals, (r, c), shape))
            calls.append(t)
    rec["calls"] = calls
    rec["load_end"] = os.getloadavg()[0]
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
