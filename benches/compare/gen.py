"""Write the extra inputs of benches/compare (see run.sh) next to fe.bin.

  rand.bin / rand.shape: N uniformly random (row, col, value) records in
      2^24 x 2^24 (the e2e bench's `rand` extent), 24-byte little-endian
      records like fe.bin; almost no duplicates.
  fe.mtx: the first M records of fe.bin as a MatrixMarket coordinate real
      general file, duplicates kept (readers must sum them), written by
      scipy.io.mmwrite (fast_matrix_market, full precision).
A file that already exists with the right size is kept.
"""
import argparse
import os

import numpy as np

DT = np.dtype([("r", "<u8"), ("c", "<u8"), ("v", "<f8")])
RAND_EXTENT = 1 << 24


def write_rand(path, n, seed=12345):
    if os.path.exists(path) and os.path.getsize(path) == n * DT.itemsize:
        return
    rng = np.random.default_rng(seed)
    step = 1 << 22
    with open(path + ".tmp", "wb") as f:
        for start in range(0, n, step):
            m = min(step, n - start)
            a = np.empty(m, dtype=DT)
            a["r"] = rng.integers(0, RAND_EXTENT, m, dtype=np.uint64)
            a["c"] = rng.integers(0, RAND_EXTENT, m, dtype=np.uint64)
            a["v"] = rng.random(m)
            a.tofile(f)
    os.replace(path + ".tmp", path)
    with open(os.path.splitext(path)[0] + ".shape", "w") as f:
        f.write(f"{RAND_EXTENT},{RAND_EXTENT}\n")


def write_mtx(path, fe_bin, n_nodes, m):
    import scipy.io
    import scipy.sparse as sp

    marker = path + ".count"
    if os.path.exists(path) and os.path.exists(marker) and open(marker).read() == str(m):
        return
    a = np.fromfile(fe_bin, dtype=DT, count=m)
    if len(a) < m:
        raise SystemExit(f"{fe_bin} has only {len(a)} records, {m} wanted for the mtx input")
    coo = sp.coo_matrix((a["v"], (a["r"].astype(np.int64), a["c"].astype(np.int64))),
                        shape=(n_nodes, n_nodes))
    # coo_matrix keeps duplicate (row, col) pairs, and mmwrite writes them as
    # they are: the file has m entry lines.
    scipy.io.mmwrite(path, coo, field="real", symmetry="general")
    with open(marker, "w") as f:
        f.write(str(m))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rand", type=float, default=0, help="records in rand.bin (0: none)")
    ap.add_argument("--mtx", type=float, default=0, help="entries in fe.mtx (0: none)")
    a = ap.parse_args()
    if a.rand:
        write_rand(os.path.join(a.dir, "rand.bin"), int(a.rand))
    if a.mtx:
        n = int(open(os.path.join(a.dir, "fe.shape")).read().split(",")[0])
        write_mtx(os.path.join(a.dir, "fe.mtx"), os.path.join(a.dir, "fe.bin"), n, int(a.mtx))


if __name__ == "__main__":
    main()
