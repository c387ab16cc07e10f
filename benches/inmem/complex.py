#!/usr/bin/env python3
"""Complex and bool assembly in memory (issue 22 on the issue-23 kernel),
in one process, warm (best of --reps after one untimed call each),
interleaved:

- ``ca.assemble`` on contiguous int32 indices (the in-memory kernel);
- scipy ``coo_array(...).tocsr()`` on the same arrays (its fastest form);
- ``ca.assemble`` on strided values, which the kernel does not read in
  place, so it takes the out-of-core Builder path (what complex values got
  before the kernel carried them);
- ``P.assemble(v, out=A)`` of a plan of the same coordinates (not for
  bool: plans refill numbers).

The input is a 3D Q1 mesh of m^3 hexahedra in element order, 64
contributions per element, random values of ``--dtype`` (complex128,
complex64, or bool with a fifth true: a pattern). The results are checked
equal (ours bit for bit across paths; scipy to rounding, or exactly for
bool).

    python benches/inmem/complex.py --m 60 --reps 5
    python benches/inmem/complex.py --m 60 --reps 5 --dtype bool
"""
import argparse
import platform
import time

import numpy as np
import scipy.sparse as sp

import coo_assembler as ca


def q1_mesh(m):
    n1 = m + 1
    e = np.arange(m)
    ex, ey, ez = np.meshgrid(e, e, e, indexing="ij")
    base = ((ex * n1 + ey) * n1 + ez).reshape(-1, 1)
    off = np.array([0, 1, n1, n1 + 1, n1 * n1, n1 * n1 + 1, n1 * n1 + n1, n1 * n1 + n1 + 1])
    nodes = base + off
    row = np.repeat(nodes, 8, axis=1).ravel().astype(np.int32)
    col = np.tile(nodes, (1, 8)).ravel().astype(np.int32)
    return row, col, n1**3


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=60, help="hexahedra per side (60: 1.38e7 contributions)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dtype", default="complex128", choices=["complex128", "complex64", "bool"])
    a = ap.parse_args()
    row, col, n = q1_mesh(a.m)
    rng = np.random.default_rng(0)
    if a.dtype == "bool":
        val = rng.random(row.size) < 0.2
    else:
        val = (rng.standard_normal(row.size) + 1j * rng.standard_normal(row.size)).astype(a.dtype)
    strided = np.empty(2 * val.size, dtype=val.dtype)
    strided[::2] = val
    shape = (n, n)
    runs = {
        "ca.assemble (kernel)": lambda: ca.assemble(val, (row, col), shape),
        "scipy tocsr (int32)": lambda: sp.coo_array((val, (row, col)), shape=shape).tocsr(),
        "ca.assemble (Builder path)": lambda: ca.assemble(strided[::2], (row, col), shape),
    }
    plan = None
    if a.dtype != "bool":
        plan = ca.plan((row, col), shape, dtype=a.dtype, memory_budget="4GiB")
        out = plan.assemble(val)
        runs["P.assemble(v, out=A)"] = lambda: plan.assemble(val, out=out)
    results = {k: f() for k, f in runs.items()}  # warm-up, and the results to compare
    k, s, b = (results[x] for x in list(runs)[:3])
    assert k.data.tobytes() == b.data.tobytes() and np.array_equal(k.indices, b.indices)
    assert np.array_equal(k.indptr, s.indptr) and np.array_equal(k.indices, s.indices)
    if plan is not None:
        assert k.data.tobytes() == out.data.tobytes()
        assert abs(k - s).max() < (1e-3 if a.dtype == "complex64" else 1e-9)
    else:
        assert np.array_equal(k.data, s.data)
    times = {x: [] for x in runs}
    for _ in range(a.reps):
        for x, f in runs.items():
            t0 = time.perf_counter()
            f()
            times[x].append(time.perf_counter() - t0)
    held = f"plan {plan.memory_bytes / 2**20:.0f} MiB; " if plan is not None else ""
    print(f"{cpu_model()}; {row.size:,} {a.dtype} contributions, nnz {k.nnz:,}; "
          f"{held}best of {a.reps} (all runs)")
    ref = min(times["scipy tocsr (int32)"])
    for x, ts in times.items():
        print(f"  {x:28s} {min(ts):7.3f} s  ({ref / min(ts):4.2f}x scipy)  "
              + " ".join(f"{t:.3f}" for t in ts))


if __name__ == "__main__":
    main()
