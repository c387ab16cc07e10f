"""Time scipy, DuckDB and coo-assembler on the same inputs, in one run
(see run.sh, which writes the inputs).

Each tool runs in its own child process under /usr/bin/time (peak RSS is
its %M, the child's ru_maxrss). Inputs (--inputs):
  fe    fe.bin, FE contributions in element order (24-byte records);
  rand  rand.bin, uniformly random coordinates in 2^24 x 2^24;
  mtx   fe.mtx, MatrixMarket coordinate file with duplicates.
Tools, per bin input:
  scipy:  scipy's best pipeline: load = the records read (numpy.fromfile,
          2 Mi records at a time) into contiguous int32 row and column
          arrays (int64 when the shape does not fit int32) and a
          contiguous float64 value array; work = coo_array((v, (r, c)),
          shape).tocsr() (sorts and sums duplicates); write = the CSR
          arrays written raw and fsynced (in the total);
  scipy-views (--scipy-views only): the form the earlier figures used,
          coo_array given the record array's strided uint64 views (scipy's
          slowest input form), for comparison;
  duckdb: load = numpy.fromfile + registering the columns as a pandas
          DataFrame (zero copy); work = SELECT r, c, sum(v) ... GROUP BY r, c
          ORDER BY r, c materialized with fetchnumpy(), memory_limit
          --duckdb-limit, 2 threads;
per mtx input:
  scipy-mmread: load = scipy.io.mmread (fast_matrix_market, every core);
          work = .tocsr();
and for every input coo-assembler's CLI, file to fsynced .hrry file, once
per --budgets x --threads combination ("ours 256MiB t2"), input by path.
'total' is the child's wall time from start to result (interpreter start-up
and imports excluded for Python; process wall time for the CLI). Every
repetition runs every tool once, in the same order, so the tools alternate;
the best total per tool is reported, with each tool's ratio to each of
our configurations, and the child's CPU seconds (user + system, Python
start-up and imports included).
"""
import argparse
import re
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import sys, time, json, os
mode, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
limit = sys.argv[4]
import numpy as np
dt = np.dtype([("r", "<u8"), ("c", "<u8"), ("v", "<f8")])
out = {}
def write_csr(m, out):
    # The cheapest write of the result: its three arrays, raw, fsynced
    # (ours writes an fsynced .hrry file).
    t = time.perf_counter()
    with open(out, "wb") as f:
        for x in (m.indptr, m.indices, m.data):
            x.tofile(f)
        f.flush()
        os.fsync(f.fileno())
    os.remove(out)
    return time.perf_counter() - t
if mode == "scipy":
    import scipy.sparse as sp
    ix = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    t0 = time.perf_counter()
    # The records read in 2 Mi-record chunks straight into contiguous index
    # and value arrays (no whole record array: less memory, fewer fresh
    # pages; as fast or faster than fromfile + astype in our runs).
    count = os.path.getsize(path) // dt.itemsize
    r = np.empty(count, ix)
    c = np.empty(count, ix)
    v = np.empty(count, np.float64)
    step = 1 << 21
    with open(path, "rb") as f:
        for i in range(0, count, step):
            b = np.fromfile(f, dtype=dt, count=min(step, count - i))
            r[i:i + len(b)] = b["r"]
            c[i:i + len(b)] = b["c"]
            v[i:i + len(b)] = b["v"]
    del b
    t1 = time.perf_counter()
    m = sp.coo_array((v, (r, c)), shape=(n, n)).tocsr()
    t2 = time.perf_counter()
    w = write_csr(m, path + ".scipy.out")
    out = dict(load=t1 - t0, work=t2 - t1, write=w, total=t2 - t0 + w, nnz=int(m.nnz))
elif mode == "scipy-views":
    import scipy.sparse as sp
    t0 = time.perf_counter()
    a = np.fromfile(path, dtype=dt)
    r, c, v = a["r"], a["c"], a["v"]
    t1 = time.perf_counter()
    m = sp.coo_array((v, (r, c)), shape=(n, n)).tocsr()
    t2 = time.perf_counter()
    w = write_csr(m, path + ".scipy.out")
    out = dict(load=t1 - t0, work=t2 - t1, write=w, total=t2 - t0 + w, nnz=int(m.nnz))
elif mode == "scipy-mmread":
    import scipy.io
    t0 = time.perf_counter()
    coo = scipy.io.mmread(path)
    t1 = time.perf_counter()
    m = coo.tocsr()
    t2 = time.perf_counter()
    out = dict(load=t1 - t0, work=t2 - t1, total=t2 - t0, nnz=int(m.nnz))
elif mode == "duckdb":
    import duckdb, pandas as pd
    con = duckdb.connect()
    con.execute(f"SET memory_limit='{limit}'")
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

INPUTS = {
    # name: (file, shape file or None, CLI format)
    "fe": ("fe.bin", "fe.shape", "bin"),
    "rand": ("rand.bin", "rand.shape", "bin"),
    "mtx": ("fe.mtx", None, "mtx"),
}


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (lscpu failed)"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def run_child(argv):
    t0 = time.perf_counter()
    argv = ["/usr/bin/time", "-f", "MAXRSS %M CPU %U %S"] + argv
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{argv[:3]} failed:\n{out.decode()}\n{err.decode()}")
    return wall, out.decode(), err.decode()


def ours_nnz(stderr):
    """The entry count of the CLI's closing line ('wrote K.hrry: 50,000,000
    contributions -> 21,324,199 entries in ...')."""
    m = re.search(r"-> ([0-9,]+) entr", stderr)
    if not m:
        raise SystemExit(f"no entry count in the CLI's output: {stderr!r}")
    return int(m.group(1).replace(",", ""))


def ours_summary(stderr):
    """'22 runs spilled (101.2 MiB), 1 merge pass' from the CLI's closing
    line ('' when nothing was spilled: the line then says nothing of it)."""
    for line in stderr.splitlines():
        if line.startswith("wrote "):
            parts = [p for p in line.split("; ") if " spilled (" in p]
            return parts[0].strip() if parts else "no spill"
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--inputs", default="fe")
    ap.add_argument("--budgets", default="256MiB", help="comma list, e.g. 256MiB,4GiB")
    ap.add_argument("--threads", default="2", help="comma list of --threads for the CLI, e.g. 2,1")
    ap.add_argument("--duckdb-limit", default="256MB")
    ap.add_argument("--no-duckdb", action="store_true")
    ap.add_argument("--scipy-views", action="store_true",
                    help="also time scipy on the record array's strided uint64 views")
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    ours = [(b, int(t)) for b in a.budgets.split(",") for t in a.threads.split(",")]
    load0 = os.getloadavg()
    print(f"CPU: {cpu_model()} ({os.cpu_count()} CPUs); load average at start "
          f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; {time.strftime('%Y-%m-%d %H:%M')}")
    for inp in a.inputs.split(","):
        fname, shape_file, fmt = INPUTS[inp]
        path = os.path.join(a.dir, fname)
        if shape_file:
            n = int(open(os.path.join(a.dir, shape_file)).read().split(",")[0])
            count = os.path.getsize(path) // 24
        else:
            with open(path) as f:
                line = f.readline()
                while line.startswith("%"):
                    line = f.readline()
                n, _, count = (int(x) for x in line.split())
        tools = (["scipy"] + (["scipy-views"] if a.scipy_views else [])
                 + ([] if a.no_duckdb else ["duckdb"]) if fmt == "bin" else ["scipy-mmread"])
        tools += [f"ours {b} t{t}" for b, t in ours]
        rows = []
        for rep in range(a.reps):
            for tool in tools:
                if tool.startswith("ours"):
                    _, budget, t = tool.split()
                    out = os.path.join(a.dir, "out.hrry")
                    argv = [a.cli, "assemble", "--format", fmt, "--input", path,
                            "--memory-budget", budget, "--threads", t[1:],
                            "--temp-dir", a.dir, "--output", out]
                    if fmt == "bin":
                        argv += ["--shape", f"{n},{n}"]
                    wall, so, se = run_child(argv)
                    os.remove(out)
                    res = dict(total=wall, nnz=ours_nnz(se), note=ours_summary(se))
                else:
                    argv = [sys.executable, "-c", CHILD, tool, path, str(n), a.duckdb_limit]
                    wall, so, se = run_child(argv)
                    res = json.loads(so[so.rindex("{"):])
                rss = [l.split() for l in se.splitlines() if l.startswith("MAXRSS")]
                res["rss_mib"] = int(rss[0][1]) / 1024 if rss else None
                # user + system CPU seconds of the whole child (Python
                # start-up and imports included): less sensitive to the load
                # of a shared machine than wall time.
                res["cpu"] = float(rss[0][3]) + float(rss[0][4]) if rss else None
                res["tool"] = tool
                rows.append(res)
                print(f"  rep {rep + 1} {inp} {tool}: {res['total']:.2f} s", file=sys.stderr)
        best = {}
        for r in rows:
            if r["tool"] not in best or r["total"] < best[r["tool"]]["total"]:
                best[r["tool"]] = r
        ours_tools = [t for t in tools if t.startswith("ours")]
        print(f"\n{inp}: {count} contributions, {n}x{n}, {os.path.getsize(path) / 1e9:.2f} GB "
              f"({fname}); best of {a.reps}\n")
        head = " | ".join(f"/ {t[5:]}" for t in ours_tools)
        print(f"| tool | load s | work s | write s | total s | cpu s | nnz | {head} | peak RSS MiB | notes |")
        print("|---|---|---|---|---|---|---|" + "---|" * len(ours_tools) + "---|---|")
        for t in tools:
            r = best[t]
            f = lambda k: f"{r[k]:.2f}" if k in r else "-"
            rss = f"{r['rss_mib']:.0f}" if r.get("rss_mib") else "-"
            ratios = " | ".join(f"{r['total'] / best[o]['total']:.2f}" for o in ours_tools)
            cpu = f"{r['cpu']:.2f}" if r.get("cpu") is not None else "-"
            print(f"| {t} | {f('load')} | {f('work')} | {f('write')} | {r['total']:.2f} | {cpu} | {r['nnz']} | {ratios} | {rss} | {r.get('note', '')} |")
        nnz = {best[t]["nnz"] for t in best}
        print("\nnnz agree" if len(nnz) == 1 else f"\nnnz DISAGREE: {nnz}")
    load1 = os.getloadavg()
    print(f"\nload average at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")


if __name__ == "__main__":
    main()
