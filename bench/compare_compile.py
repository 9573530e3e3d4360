#!/usr/bin/env python3
"""Ratios for issue 15's cases from one device call: wmx's bench JSON (wmx path)
against torch_ref.py (single ops) and torch_compile.py (the 10-op chain, eager and
torch.compile). Prints Markdown tables; ratio = PyTorch time / wmx time (> 1: wmx
faster).

    python3 bench/compare_compile.py --wmx wmx.json [--repeat wmx_repeat.json] \
        --torch torch.json --torch-compile torch_compile.json
"""
import argparse
import json


def index(rows, path=None):
    out = {}
    for r in rows:
        if "ms" not in r or (path and r.get("path", path) != path):
            continue
        out[(r["op"], r["dtype"], r["n"])] = r["ms"] * 1e3
    return out


def size(n):
    return f"2^{n.bit_length() - 1}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wmx", required=True)
    p.add_argument("--repeat")
    p.add_argument("--torch", required=True)
    p.add_argument("--torch-compile", required=True)
    a = p.parse_args()
    w = index(json.load(open(a.wmx)), "wmx")
    rep = index(json.load(open(a.repeat)), "wmx") if a.repeat else {}
    t = index(json.load(open(a.torch)))
    tc = index(json.load(open(a.torch_compile)))
    sizes = sorted({k[2] for k in w})

    print("### 10-op chain (gelu10) and sum(gelu(x)): µs per call, ratios to PyTorch\n")
    print("| case | dtype | n | wmx lazy | wmx compiled | eager | torch.compile "
          "| × eager | × torch.compile |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case, lazy, comp in [("gelu10", "gelu10", "gelu10_compiled"),
                             ("gelu_sum", "gelu_sum", "gelu_sum_compiled")]:
        for dt in ["float32", "float16"]:
            for n in sizes:
                k = (comp, dt, n)
                if k not in w:
                    continue
                e = tc.get((f"{case}_eager", dt, n))
                c = tc.get((f"{case}_compiled", dt, n))
                print(f"| {case} | {dt} | {size(n)} | {w.get((lazy, dt, n), 0):.1f} "
                      f"| {w[k]:.1f} | {e:.1f} | {c:.1f} | {e / w[k]:.2f} | {c / w[k]:.2f} |")

    print("\n### Single ops through the API, one eval per op: µs, ratio to PyTorch eager\n")
    print("| op | dtype | n | wmx | wmx (repeat) | PyTorch | ratio | ratio (repeat) |")
    print("|---|---|---|---|---|---|---|---|")
    for op in ["add", "exp", "sum_all", "sum_last_axis"]:
        for dt in ["float32", "float16"]:
            for n in sizes:
                if n > 1 << 24 or (op, dt, n) not in w or (op, dt, n) not in t:
                    continue
                if n == 1 << 24 and not op.startswith("sum"):
                    continue
                tv = t[(op, dt, n)]
                r = rep.get((op, dt, n))
                rs = f"{r:.2f}" if r else "-"
                rr = f"{tv / r:.2f}" if r else "-"
                print(f"| {op} | {dt} | {size(n)} | {w[(op, dt, n)]:.2f} | {rs} | {tv:.2f} "
                      f"| {tv / w[(op, dt, n)]:.2f} | {rr} |")


if __name__ == "__main__":
    main()
