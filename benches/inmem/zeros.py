#!/usr/bin/env python3
"""Issue 39's cases, one process per run: exact zeros and skip_negative.

  python zeros.py values [--n 8e6]     # ca.assemble and P.assemble(v, out=A)
  python zeros.py skip [--n 5e7]       # skip_negative vs the pre-masked arrays

`values`: a 3D Q1 Poisson pattern (element order, int32) with the values
`v`, all zeros, `v*(1+1j)`, `v + 0j` and `1j * v`; per variant the
median wall and CPU seconds of calls 2..8 of `ca.assemble` and of a
plan's `P.assemble(v, out=A)`. Every zero row is to stay within 1.2x of
its type's non-zero row. `skip`: 5 % of the dofs set to -1 (removed),
`ca.assemble(..., skip_negative=True)` against `ca.assemble` of the
triplets masked beforehand (the masking not timed); bit-identical.
Prints one JSON line per case.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np
import coo_assembler as ca


def q1_poisson():
    corners = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                        [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]])
    g = [0.5 - 0.5 / np.sqrt(3), 0.5 + 0.5 / np.sqrt(3)]
    K = np.zeros((8, 8))
    for x in g:
        for y in g:
            for z in g:
                p = np.array([x, y, z])
                f = np.where(corners == 1, p, 1 - p)
                s = np.where(corners == 1, 1.0, -1.0)
                G = np.stack([s[:, 0] * f[:, 1] * f[:, 2], s[:, 1] * f[:, 0] * f[:, 2],
                              s[:, 2] * f[:, 0] * f[:, 1]], axis=1)
                K += G @ G.T / 8
    return K, corners


def fe(n_contrib):
    """int32 rows, cols and f64 values of a cube mesh with about n_contrib
    contributions, and the number of dofs."""
    K, corners = q1_poisson()
    n = max(1, round((n_contrib / 64) ** (1 / 3)))
    m = n + 1
    ex, ey, ez = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
    base = (ex * m * m + ey * m + ez).ravel()
    off = corners[:, 0] * m * m + corners[:, 1] * m + corners[:, 2]
    dofs = (base[:, None] + off[None, :]).astype(np.int32)
    return dofs, K, m ** 3


def triplets(dofs, K):
    r = np.repeat(dofs, 8, axis=1).ravel()
    c = np.tile(dofs, (1, 8)).ravel()
    v = np.tile(K.ravel(), dofs.shape[0])
    return r, c, v


def timed(f, calls=8):
    """Median wall and CPU seconds of calls 2..calls (the first warms up)."""
    wall, cpu = [], []
    for _ in range(calls):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall[1:]), statistics.median(cpu[1:])


def values_case(n):
    dofs, K, nd = fe(n)
    r, c, v = triplets(dofs, K)
    shape = (nd, nd)
    plans = {"float64": ca.plan((r, c), shape), "complex128": ca.plan((r, c), shape, dtype="complex128")}
    variants = {
        "v": v,
        "zeros": np.zeros_like(v),
        "v*(1+1j)": v * (1 + 1j),
        "v+0j": v + 0j,
        "1j*v": 1j * v,
    }
    for name, x in variants.items():
        w, cp = timed(lambda: ca.assemble(x, (r, c), shape))
        P = plans[x.dtype.name]
        A = P.assemble(x)
        w2, cp2 = timed(lambda: P.assemble(x, out=A))
        print(json.dumps({"case": "values", "values": name, "n": len(x),
                          "assemble_s": round(w, 4), "assemble_cpu_s": round(cp, 4),
                          "refill_s": round(w2, 4), "refill_cpu_s": round(cp2, 4)}), flush=True)


def skip_case(n):
    dofs, K, nd = fe(n)
    rng = np.random.default_rng(39)
    removed = rng.random(nd) < 0.05
    marked = np.where(removed[dofs], -1, dofs).astype(np.int32)
    r, c, v = triplets(marked, K)
    keep = (r >= 0) & (c >= 0)
    rk, ck, vk = (np.ascontiguousarray(a[keep]) for a in (r, c, v))
    shape = (nd, nd)
    got = ca.assemble(v, (r, c), shape, skip_negative=True)
    want = ca.assemble(vk, (rk, ck), shape)
    same = (np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
            and got.data.tobytes() == want.data.tobytes())
    del got, want
    w, cp = timed(lambda: ca.assemble(v, (r, c), shape, skip_negative=True))
    w2, cp2 = timed(lambda: ca.assemble(vk, (rk, ck), shape))
    print(json.dumps({"case": "skip", "n": len(v), "kept": int(keep.sum()), "identical": bool(same),
                      "skip_s": round(w, 4), "skip_cpu_s": round(cp, 4),
                      "masked_s": round(w2, 4), "masked_cpu_s": round(cp2, 4),
                      "ratio": round(w / w2, 3)}), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["values", "skip"])
    ap.add_argument("--n", type=float, default=None)
    a = ap.parse_args()
    if a.case == "values":
        values_case(int(a.n or 8e6))
    else:
        skip_case(int(a.n or 5e7))
