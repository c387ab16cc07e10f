#!/usr/bin/env python3
"""One tool on one input, in this (fresh) process: load the arrays, then
call the tool `--calls` times; per call the wall time, the CPU seconds
(user + system, every thread), and the peak RSS
above what the process held before the call (the loaded inputs, and
nothing else alive), and the bytes of the result. Prints one JSON line.

  python py_case.py --tool ours|native|scipy --data DATA/fe [--calls 3]
      [--index int32|int64|uint64] [--threads N] [--budget SIZE]

Tools: `ours` is the public call, `coo_assembler.assemble(v, (r, c), shape)`,
with the library's defaults (exact sums, CSR, 256 MiB, every core) unless
--threads / --budget / --layout are given; the JSON line says which path
served each call (`direct`: the in-memory kernel, `builder`: the fallback
through a temporary file). `native` is the extension's own call
(`_native.assemble_arrays` with the arguments `assemble` passes it, taken
from one untimed call; no scipy array made); `scipy` is
`coo_array((v, (r, c)), shape).tocsr()`. (The earlier rounds measured a
bench-only entry point, `_native.assemble_direct`, that main no longer has.)

`--data P` reads P_r32.npy, P_c32.npy, P_v.npy and P.shape (written by
run.sh). The peak is VmHWM after resetting it (`/proc/self/clear_refs`
5) just before the call.
"""
import argparse
import gc
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
    """User + system CPU seconds of this process (every thread) so far."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def nbytes(a):
    if isinstance(a, tuple):
        return sum(x.nbytes for x in a)
    return a.data.nbytes + a.indices.nbytes + a.indptr.nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--index", default="int32")
    ap.add_argument("--threads", type=int, default=0, help="0: the tool's default")
    ap.add_argument("--budget", default=None, help="default: the library's (256 MiB)")
    ap.add_argument("--layout", default=None, help="default: csr")
    ap.add_argument("--wait", type=float, default=0,
                    help="sleep this long after loading (to attach perf -p)")
    a = ap.parse_args()
    r = np.load(a.data + "_r32.npy")
    c = np.load(a.data + "_c32.npy")
    v = np.load(a.data + "_v.npy")
    if a.index != "int32":
        r = r.astype(a.index)
        c = c.astype(a.index)
    with open(a.data + ".shape") as f:
        shape = tuple(int(x) for x in f.read().strip().split(","))
    paths = []
    # `assemble` imports scipy.sparse on its first call (to make the
    # result); import it here, untimed, as the scipy case does, so the
    # first call does not pay for the import (about 0.1-0.3 s here).
    import scipy.sparse  # noqa: F401
    if a.tool == "ours":
        import coo_assembler as ca
        from coo_assembler import _native

        # Which path served the call: assemble() asks the kernel first and
        # falls back to the Builder when it answers None. The wrapper costs
        # one Python call.
        kernel = _native.assemble_arrays

        def traced(*args, **kw):
            res = kernel(*args, **kw)
            paths.append("builder" if res is None else "direct")
            return res

        _native.assemble_arrays = traced
        kw = {}
        if a.threads:
            kw["threads"] = a.threads
        if a.budget:
            kw["memory_budget"] = a.budget
        if a.layout:
            kw["layout"] = a.layout

        def call():
            return ca.assemble(v, (r, c), shape, **kw)
    elif a.tool == "native":
        import coo_assembler as ca
        from coo_assembler import _native

        kernel = _native.assemble_arrays
        seen = []

        def capture(*args, **kw):
            seen.append((args, kw))
            return None  # let assemble() fall back; the result is not used

        # One untimed call on the first 1000 contributions gives the
        # argument form; the timed call takes the whole arrays.
        _native.assemble_arrays = capture
        try:
            ca.assemble(v[:1000], (r[:1000], c[:1000]), shape)
        finally:
            _native.assemble_arrays = kernel
        args, kw = seen[0]
        args = (v, [r, c]) + tuple(args[2:])
        if a.threads or a.budget or a.layout:
            raise SystemExit("native: the library's defaults only")

        def call():
            return kernel(*args, **kw)
    elif a.tool == "scipy":
        import scipy.sparse as sp

        def call():
            return sp.coo_array((v, (r, c)), shape=shape).tocsr()
    else:
        raise SystemExit(f"unknown tool {a.tool}")
    gc.collect()
    if a.wait:
        import sys
        print(f"loaded, pid {os.getpid()}", file=sys.stderr, flush=True)
        time.sleep(a.wait)
    out = {"tool": a.tool, "n": len(v), "index": a.index, "threads": a.threads or None,
           "load_start": os.getloadavg()[0], "calls": []}
    for _ in range(a.calls):
        gc.collect()
        before = status("VmRSS")
        reset_peak()
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        res = call()
        t = time.perf_counter() - t0
        cpu = cpu_seconds() - c0
        peak = status("VmHWM") - before
        out["calls"].append({"s": round(t, 4), "cpu_s": round(cpu, 4),
                             "peak_mib": round(peak / 2**20, 1),
                             "result_mib": round(nbytes(res) / 2**20, 1)})
        del res
    if paths:
        out["paths"] = paths
    out["load_end"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
