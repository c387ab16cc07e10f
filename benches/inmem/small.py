#!/usr/bin/env python3
"""Small calls, warm: N random coordinates in a square of side max(16, N/8)
(about 8 contributions per row), int32 indices, float64 values; ours
(`_native.assemble_direct`, CSR) and scipy (`coo_array(...).tocsr()`)
alternating call by call, the median of many calls each. One JSON line.

  python small.py [--sizes 100,1e4,1e6] [--seconds 2]
"""
import argparse
import json
import os
import statistics
import time

import numpy as np
import scipy.sparse as sp
from coo_assembler import _native


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1e4,1e6")
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    out = {"tool": "small", "load_start": os.getloadavg()[0], "cases": []}
    for n in [int(float(s)) for s in a.sizes.split(",")]:
        side = max(16, n // 8)
        g = np.random.default_rng(n)
        r = g.integers(0, side, n, dtype=np.int32)
        c = g.integers(0, side, n, dtype=np.int32)
        v = g.standard_normal(n)
        shape = (side, side)
        ours = lambda: _native.assemble_direct(v, r, c, shape)  # noqa: E731
        scipy = lambda: sp.coo_array((v, (r, c)), shape=shape).tocsr()  # noqa: E731
        for f in (ours, scipy):  # warm up
            f()
        t = {"ours": [], "scipy": []}
        end = time.perf_counter() + a.seconds
        while time.perf_counter() < end or len(t["ours"]) < 5:
            for name, f in (("ours", ours), ("scipy", scipy)):
                t0 = time.perf_counter()
                f()
                t[name].append(time.perf_counter() - t0)
        med = {k: statistics.median(x) for k, x in t.items()}
        out["cases"].append({"n": n, "side": side, "calls": len(t["ours"]),
                             "ours_ms": round(med["ours"] * 1e3, 4),
                             "scipy_ms": round(med["scipy"] * 1e3, 4),
                             "scipy_over_ours": round(med["scipy"] / med["ours"], 2)})
    out["load_end"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
