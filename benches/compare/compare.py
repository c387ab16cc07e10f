"""Time scipy, DuckDB and coo-assembler on one FE bin file (see run.sh).

Each tool runs in its own child process under /usr/bin/time (peak RSS is
its %M, the child's ru_maxrss).
Reported, per tool:
  scipy:  load = numpy.fromfile into a structured dtype; convert =
          coo_array((v, (r, c)), shape).tocsr() (sorts and sums duplicates);
  duckdb: load = numpy.fromfile + registering the columns as a pandas
          DataFrame (zero copy); query = SELECT r, c, sum(v) ... GROUP BY r, c
          ORDER BY r, c materialized with fetchnumpy(), memory_limit 256MB,
          2 threads;
  coo-assembler: the CLI, file to fsynced .hrry file, 256 MiB, 2 threads.
'total' is the child's wall time from start to result (imports excluded).
"""
import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import sys, time, json, os
mode, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
import numpy as np
dt = np.dtype([("r", "<u8"), ("c", "<u8"), ("v", "<f8")])
out = {}
if mode == "scipy":
    import scipy.sparse as sp
    t0 = time.perf_counter()
    a = np.fromfile(path, dtype=dt)
    r, c, v = a["r"], a["c"], a["v"]
    t1 = time.perf_counter()
    m = sp.coo_array((v, (r, c)), shape=(n, n)).tocsr()
    t2 = time.perf_counter()
    out = dict(load=t1 - t0, work=t2 - t1, total=t2 - t0, nnz=int(m.nnz))
elif mode == "duckdb":
    import duckdb, pandas as pd
    con = duckdb.connect()
    con.execute("SET memory_limit='256MB'")
    con.execute("SET threads=2")
    con.execute("SET enable_progress_bar=false")
    con.execute("SET preserve_insertion_order=false")
    t0 = time.perf_counter()
    a = np.fromfile(path, dtype=dt)
    df = pd.DataFrame({"r": a["r"], "c": a["c"], "v": a["v"]}, copy=False)
    con.register("contribs", df)
    t1 = time.perf_counter()
    res = con.execute("SELECT r, c, sum(v) AS v FROM contribs GROUP BY r, c ORDER BY r, c").fetchnumpy()
    t2 = time.perf_counter()
    out = dict(load=t1 - t0, work=t2 - t1, total=t2 - t0, nnz=int(len(res["v"])))
print(json.dumps(out))
"""


def run_child(argv):
    t0 = time.perf_counter()
    argv = ["/usr/bin/time", "-f", "MAXRSS %M"] + argv
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{argv[:3]} failed:\n{out.decode()}\n{err.decode()}")
    return wall, out.decode(), err.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--budget", default="256MiB")
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    path = os.path.join(a.dir, "fe.bin")
    n = int(open(os.path.join(a.dir, "fe.shape")).read().split(",")[0])
    count = os.path.getsize(path) // 24
    rows = []
    for rep in range(a.reps):
        for tool in ["scipy", "duckdb", "coo-assembler"]:
            if tool == "coo-assembler":
                out = os.path.join(a.dir, "out.hrry")
                argv = [a.cli, "assemble", "--shape", f"{n},{n}",
                        "--format", "bin", "--input", path, "--memory-budget", a.budget, "--threads", "2",
                        "--temp-dir", a.dir, "--output", out]
                wall, so, se = run_child(argv)
                os.remove(out)
                res = dict(total=wall, nnz=int(se.split("nnz ")[1].split()[0]))
            else:
                argv = [sys.executable, "-c", CHILD, tool, path, str(n)]
                wall, so, se = run_child(argv)
                res = json.loads(so[so.rindex("{"):])
            rss = [l for l in se.splitlines() if l.startswith("MAXRSS")]
            res["rss_mib"] = int(rss[0].split()[1]) / 1024 if rss else None
            res["tool"] = tool
            rows.append(res)
    best = {}
    for r in rows:
        if r["tool"] not in best or r["total"] < best[r["tool"]]["total"]:
            best[r["tool"]] = r
    ours = best["coo-assembler"]["total"]
    print(f"\n{count} FE contributions, matrix {n}x{n}; best of {a.reps}\n")
    print("| tool | load s | sort+sum s | total s | nnz | total / coo-assembler | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for t in ["scipy", "duckdb", "coo-assembler"]:
        r = best[t]
        f = lambda k: f"{r[k]:.2f}" if k in r else "-"
        rss = f"{r['rss_mib']:.0f}" if r.get("rss_mib") else "-"
        print(f"| {t} | {f('load')} | {f('work')} | {r['total']:.2f} | {r['nnz']} | {r['total'] / ours:.2f} | {rss} |")
    nnz = {best[t]["nnz"] for t in best}
    print("\nnnz agree" if len(nnz) == 1 else f"\nnnz DISAGREE: {nnz}")


if __name__ == "__main__":
    main()
