#!/usr/bin/env python3
"""How long first touch of fresh anonymous memory takes here, with 4 KiB
pages and with madvise(MADV_HUGEPAGE), alternating, several repetitions.

  target/compare-venv/bin/python scripts/page_faults.py [--gib 1] [--reps 5]

Each repetition maps --gib GiB of anonymous memory, optionally advises
MADV_HUGEPAGE, and writes one byte per 4 KiB page (a strided numpy store, so
the loop itself costs next to nothing: the "again" column, a second pass
over the same pages, shows it). Prints seconds per GiB for every
repetition, so the stalls (direct compaction when transparent huge pages
are in "madvise" defrag mode) show up as outliers rather than averages.
"""
import argparse
import mmap
import os
import time

import numpy as np


def touch(gib, huge):
    n = int(gib * (1 << 30))
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    a = np.frombuffer(m, dtype=np.uint8)
    t0 = time.perf_counter()
    a[::4096] = 1
    t1 = time.perf_counter()
    a[::4096] = 2
    t2 = time.perf_counter()
    del a
    m.close()
    return (t1 - t0) / gib, (t2 - t1) / gib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    thp = open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()
    defrag = open("/sys/kernel/mm/transparent_hugepage/defrag").read().strip()
    print(f"THP enabled: {thp}; defrag: {defrag}; load {os.getloadavg()[0]:.2f}")
    res = {False: [], True: []}
    for _ in range(a.reps):
        for huge in (False, True):
            first, again = touch(a.gib, huge)
            res[huge].append(first)
            print(f"  {'MADV_HUGEPAGE' if huge else '4 KiB pages  '}: first touch {first:.3f} s/GiB, again {again:.3f} s/GiB")
    for huge in (False, True):
        v = sorted(res[huge])
        print(f"{'MADV_HUGEPAGE' if huge else '4 KiB pages'}: min {v[0]:.3f}, median {v[len(v) // 2]:.3f}, max {v[-1]:.3f} s/GiB")
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
