#!/usr/bin/env python3
"""Summarise the JSON lines run.sh collected: per input and tool, the
median first-call and third-call times and the largest peak above the
inputs, each run's ratios against the peers of the same round, and the
small-call table.

  python summarize.py results.jsonl [--raw]   # --raw: every process's calls too
"""
import json
import statistics
import sys
from collections import defaultdict


def name(r):
    """The tool, with its index type when that is not int32."""
    ix = r.get("index", "int32")
    return r["tool"] if ix in (None, "int32") else f"{r['tool']} {ix}"


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
    if "--raw" in sys.argv[2:]:
        print("| input | round | tool | load | call 1 s (CPU s) | call 2 s | call 3 s | peaks above inputs MiB | result MiB |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            if "calls" in r and "round" in r:
                cs = r["calls"]
                ts = " | ".join(f"{c['s']:.3f}" + (f" ({c['cpu_s']:.2f})" if "cpu_s" in c else "") for c in cs)
                pk = " / ".join(f"{c['peak_mib']:.0f}" for c in cs)
                print(f"| {r['input']} | {r['round']} | {name(r)} | {r.get('load_start', 0):.1f} | {ts} | {pk} "
                      f"| {cs[0]['result_mib']:.0f} |")
        print()
    big = defaultdict(list)
    small = []
    for r in rows:
        if r.get("tool") == "small":
            small.append(r)
        elif "calls" in r:
            big[(r.get("input", "?"), name(r))].append(r)
    print("| input | tool | runs | first call (median, min-max) | third call (median, min-max) | peak above inputs | result | working (peak - result) | load | paths |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (inp, tool), rs in sorted(big.items()):
        first = [r["calls"][0]["s"] for r in rs]
        third = [r["calls"][-1]["s"] for r in rs]
        peak = max(c["peak_mib"] for r in rs for c in r["calls"])
        res = rs[0]["calls"][0]["result_mib"]
        work = max(c["peak_mib"] - c["result_mib"] for r in rs for c in r["calls"])
        loads = [r.get("load_start", 0) for r in rs]
        paths = sorted({p for r in rs for p in r.get("paths", [])}) or ["-"]
        print(f"| {inp} | {tool} | {len(rs)} | {statistics.median(first):.3f} ({min(first):.3f}-{max(first):.3f}) "
              f"| {statistics.median(third):.3f} ({min(third):.3f}-{max(third):.3f}) | {peak:.0f} MiB | {res:.0f} MiB "
              f"| {work:.0f} MiB | {min(loads):.1f}-{max(loads):.1f} | {','.join(paths)} |")
    # Ratios within each round (the runs of one round are adjacent).
    rounds = defaultdict(dict)
    for r in rows:
        if "round" in r and "calls" in r:
            rounds[(r["input"], r["round"])][name(r)] = r
    print()
    print("| input | round | ours first | best peer first | ratio | ours third | scipy third | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for (inp, rnd), t in sorted(rounds.items()):
        if "ours" not in t:
            continue
        o = t["ours"]["calls"]
        peers = [t[p]["calls"][0]["s"] for p in ("scipy", "eigen") if p in t]
        sc = t["scipy"]["calls"][-1]["s"] if "scipy" in t else float("nan")
        if peers:
            print(f"| {inp} | {rnd} | {o[0]['s']:.3f} | {min(peers):.3f} | {min(peers) / o[0]['s']:.2f} "
                  f"| {o[-1]['s']:.3f} | {sc:.3f} | {sc / o[-1]['s']:.2f} |")
    # Other index types against int32, ours, same round.
    ix_rows = [(k, t) for k, t in sorted(rounds.items()) if any(" " in n for n in t)]
    if ix_rows:
        print()
        print("| input | round | tool | first / int32 first | third / int32 third |")
        print("|---|---|---|---|---|")
        for (inp, rnd), t in ix_rows:
            if "ours" not in t:
                continue
            o = t["ours"]["calls"]
            for n, x in sorted(t.items()):
                if n.startswith("ours "):
                    c = x["calls"]
                    print(f"| {inp} | {rnd} | {n} | {c[0]['s'] / o[0]['s']:.2f} | {c[-1]['s'] / o[-1]['s']:.2f} |")
    if small:
        print()
        print("| n | side | ours (median) | of which the extension call | scipy (median) | scipy / ours | Eigen (median) | Eigen / ours | kernel | load |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for s in small:
            for c in s["cases"]:
                print(f"| {c['n']} | {c['side']} | {c['ours_ms']} ms | {c.get('native_ms', '-')} ms | {c['scipy_ms']} ms | {c['scipy_over_ours']} "
                      f"| {c.get('eigen_ms', '-')} ms | {c.get('eigen_over_ours', '-')} | {c.get('kernel', '-')} "
                      f"| {s['load_start']:.1f} |")


if __name__ == "__main__":
    main()
