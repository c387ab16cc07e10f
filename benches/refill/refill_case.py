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

`--data P` reads P_r32.npy, P_c32.npy, P_v.npy and P.shape (as
benches/inmem/run.sh writes them). The peak is VmHWM after resetting it
(`/proc/self/clear_refs` 5) just before each call.
"""
import argparse
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True, choices=["plan", "bincount", "assemble"])
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
