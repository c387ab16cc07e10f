"""matvec benchmarks (issue 10), run by benches/compare/matvec.sh.

1. In memory: coo_assembler's File.matvec (all cores) against scipy's
   csr_array @ x (one core) on the same FE matrix, alternating, best of N.
2. Out of core: the file evicted from the page cache (posix_fadvise
   DONTNEED on it), then a cold sequential read of the file (8 MiB reads)
   against a cold File.matvec(paging="stream"), alternating, best of N;
   each run in a child process inside a memory cgroup (--cgroup) whose
   limit is below the file size, so the page cache cannot hold the file for
   it. Reported as matvec bytes/s over read bytes/s.
3. Exports: MB/s of each format (output bytes / wall time), file cached.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

CHILD = r"""
import os, sys, time, json
import numpy as np
mode, path = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
if mode == "read":
    t = time.perf_counter()
    n = 0
    while True:
        b = os.read(fd, 8 << 20)
        if not b:
            break
        n += len(b)
    dt = time.perf_counter() - t
else:
    import coo_assembler as ca
    f = ca.open(path)
    x = np.random.default_rng(1).standard_normal(f.shape[1])
    t = time.perf_counter()
    y = f.matvec(x, paging=mode)
    dt = time.perf_counter() - t
    n = os.path.getsize(path)
os.close(fd)
rss = int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1])
print(json.dumps(dict(seconds=dt, bytes=n, hwm_kib=rss)))
"""


def child(mode, path, cgroup):
    cmd = [sys.executable, "-c", CHILD, mode, path]
    if cgroup:
        # Join the cgroup before exec: everything the child caches counts there.
        cmd = ["sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh"] + cmd
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def best(f, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("matrix")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--inner", type=int, default=10, help="products per timed round")
    ap.add_argument("--cgroup", default=None, help="memory cgroup (v1) directory to run cold runs in")
    a = ap.parse_args()
    import coo_assembler as ca

    f = ca.open(a.matrix)
    size = os.path.getsize(a.matrix)
    print(f"matrix {f.shape[0]} x {f.shape[1]}, nnz {f.nnz}, file {size / 1e6:.0f} MB, dtype {f.dtype}")
    csr = f.to_scipy("csr")
    csr.data = np.array(csr.data)  # scipy on its own memory
    x = np.random.default_rng(0).standard_normal(f.shape[1])
    y_ref = csr @ x
    y = f.matvec(x, paging="keep")
    err = np.linalg.norm(y - y_ref) / np.linalg.norm(y_ref)
    assert err <= 1e-12, f"matvec differs from scipy: relative error {err:.2e}"
    rows = {"scipy csr_array @ x": [], "coo_assembler matvec": []}
    for _ in range(a.reps):  # alternating rounds
        rows["scipy csr_array @ x"].append(best(lambda: csr @ x, a.inner))
        rows["coo_assembler matvec"].append(best(lambda: f.matvec(x, paging="keep"), a.inner))
    s, o = min(rows["scipy csr_array @ x"]), min(rows["coo_assembler matvec"])
    print(f"\nin memory (best of {a.reps} alternating rounds of best-of-{a.inner}):")
    print("| | ms | speed-up |\n|---|---|---|")
    print(f"| scipy csr_array @ x (1 thread) | {s * 1e3:.1f} | 1.00 |")
    print(f"| coo_assembler matvec ({os.cpu_count()} threads) | {o * 1e3:.1f} | {s / o:.2f} |")

    reads, mvs = [], []
    for _ in range(a.reps):
        reads.append(child("read", a.matrix, a.cgroup))
        mvs.append(child("stream", a.matrix, a.cgroup))
    r = min(reads, key=lambda d: d["seconds"])
    m = min(mvs, key=lambda d: d["seconds"])
    rb, mb = r["bytes"] / r["seconds"], m["bytes"] / m["seconds"]
    where = f"in cgroup {a.cgroup}" if a.cgroup else "no cgroup"
    print(f"\nout of core, file evicted before each run, {where} (best of {a.reps} alternating):")
    print("| | s | MB/s | peak RSS MiB |\n|---|---|---|---|")
    print(f"| sequential read (8 MiB reads) | {r['seconds']:.2f} | {rb / 1e6:.0f} | {r['hwm_kib'] / 1024:.0f} |")
    print(f"| matvec, paging=stream | {m['seconds']:.2f} | {mb / 1e6:.0f} | {m['hwm_kib'] / 1024:.0f} |")
    print(f"matvec at {100 * mb / rb:.0f}% of the sequential read speed")

    print(f"\nexports (file cached, best of {a.reps}):")
    print("| format | s | output MB | MB/s |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(a.matrix))) as d:
        for fmt, kw in [("mtx", {}), ("mtx", {"symmetric": True}), ("npz", {}), ("petsc", {})]:
            out = os.path.join(d, "out." + fmt)
            times, nbytes = [], 0
            for _ in range(a.reps):
                t = time.perf_counter()
                nbytes = f.export(out, fmt, **kw)["bytes"]
                times.append(time.perf_counter() - t)
                os.remove(out)
            name = fmt + (" --symmetric" if kw else "")
            print(f"| {name} | {min(times):.2f} | {nbytes / 1e6:.0f} | {nbytes / 1e6 / min(times):.0f} |")


if __name__ == "__main__":
    main()
