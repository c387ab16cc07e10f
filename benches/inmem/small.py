#!/usr/bin/env python3
"""Small calls, warm: N random coordinates in a square of side max(16, N/8)
(about 8 contributions per row), int32 indices, float64 values. Ours is
the public call, `coo_assembler.assemble(v, (r, c), shape)` (defaults:
exact sums, CSR), and scipy is `coo_array((v, (r, c)), shape).tocsr()`,
alternating call by call, the median of many calls each. `native_ms` is
the extension's own call (`_native.assemble_arrays` with the arguments
`assemble` gave it, before the scipy array is made): the rest of
`ours_ms` is the Python wrapper. With --eigen,
the same arrays are written to a temporary directory and the Eigen case
(`eigen_case PREFIX --median SECONDS`, its own process, warm) gives its
median too. One JSON line.

  python small.py [--sizes 100,1e4,1e6] [--seconds 2] [--eigen BIN/eigen_case]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import scipy.sparse as sp

import coo_assembler as ca
from coo_assembler import _native


def native_call(v, r, c, shape):
    """The extension call assemble() makes for these arrays, as a function
    of no arguments, and whether it took the in-memory kernel."""
    kernel = _native.assemble_arrays
    seen = []

    def traced(*args, **kw):
        res = kernel(*args, **kw)
        seen.append((args, kw, res is not None))
        return res

    _native.assemble_arrays = traced
    try:
        ca.assemble(v, (r, c), shape)
    finally:
        _native.assemble_arrays = kernel
    args, kw, direct = seen[0]
    return (lambda: kernel(*args, **kw)), len(seen) == 1 and direct


def eigen_median(exe, r, c, v, shape, seconds):
    with tempfile.TemporaryDirectory(prefix="inmem-small-") as d:
        pre = os.path.join(d, "s")
        np.save(pre + "_r32.npy", r)
        np.save(pre + "_c32.npy", c)
        np.save(pre + "_v.npy", v)
        with open(pre + ".shape", "w") as f:
            f.write(f"{shape[0]},{shape[1]}")
        out = subprocess.run([exe, pre, "--median", str(seconds)], capture_output=True,
                             text=True, check=True).stdout
    return json.loads(out)["median_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1e4,1e6")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--eigen", default=None, help="the eigen_case binary (run.sh builds it)")
    a = ap.parse_args()
    out = {"tool": "small", "load_start": os.getloadavg()[0], "cases": []}
    for n in [int(float(s)) for s in a.sizes.split(",")]:
        side = max(16, n // 8)
        g = np.random.default_rng(n)
        r = g.integers(0, side, n, dtype=np.int32)
        c = g.integers(0, side, n, dtype=np.int32)
        v = g.standard_normal(n)
        shape = (side, side)
        ours = lambda: ca.assemble(v, (r, c), shape)  # noqa: E731
        scipy = lambda: sp.coo_array((v, (r, c)), shape=shape).tocsr()  # noqa: E731
        native, kernel = native_call(v, r, c, shape)
        tools = (("ours", ours), ("scipy", scipy), ("native", native))
        for _, f in tools:  # warm up
            f()
        t = {name: [] for name, _ in tools}
        end = time.perf_counter() + a.seconds
        while time.perf_counter() < end or len(t["ours"]) < 5:
            for name, f in tools:
                t0 = time.perf_counter()
                f()
                t[name].append(time.perf_counter() - t0)
        med = {k: statistics.median(x) for k, x in t.items()}
        case = {"n": n, "side": side, "calls": len(t["ours"]),
                "kernel": kernel,
                "ours_ms": round(med["ours"] * 1e3, 4),
                "native_ms": round(med["native"] * 1e3, 4),
                "scipy_ms": round(med["scipy"] * 1e3, 4),
                "scipy_over_ours": round(med["scipy"] / med["ours"], 2)}
        if a.eigen:
            e = eigen_median(a.eigen, r, c, v, shape, a.seconds)
            case["eigen_ms"] = round(e, 4)
            case["eigen_over_ours"] = round(e / 1e3 / med["ours"], 2)
        out["cases"].append(case)
    out["load_end"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
