#!/usr/bin/env python3
"""Turn wmx's bench JSON and torch_ref.py's JSON (same call, same GPU) into ratios,
a Markdown table and an SVG plot (bandwidth vs size: wmx, PyTorch, copy limit).

    python3 bench/compare.py --wmx wmx.json --torch torch.json \
        --md bench/results.md --svg bench/bandwidth.svg

Python 3 standard library only (no numpy/matplotlib): the plot is written by hand.
"""
import argparse
import json
import math

# wmx op -> the PyTorch row it is compared with.
TORCH_OF = {
    "copy": "copy",
    "copy_buffer": "copy",
    "add": "add",
    "add_submit_each": "add",  # one submit per launch, kernels path (diagnostic)
    "multiply": "multiply",
    "exp": "exp",
    "axpby": "axpby_compiled",  # one fused kernel on both sides
    "axpby_composed": "axpby_eager",  # three kernels on both sides
    "sum_all": "sum_all",
    "sum_last_axis": "sum_last_axis",
    "sum_first_axis": "sum_first_axis",
    "argmax_last_axis": "argmax_last_axis",
}
ELEMENTWISE = ["add", "multiply", "exp", "axpby"]
REDUCTIONS = ["sum_all", "sum_last_axis", "sum_first_axis", "argmax_last_axis"]
DTYPES = ["float32", "float16"]


def load(path):
    with open(path) as f:
        return json.load(f)


def index(rows, path=None):
    out = {}
    for r in rows:
        if r["op"].startswith("lazy_chain"):
            continue
        if path is not None and r.get("path") != path:
            continue
        out[(r["op"], r["dtype"], r["n"])] = r
    return out


def size_label(n):
    p = int(math.log2(n))
    return f"2^{p}" if 1 << p == n else str(n)


def ratio_table(wmx, torch):
    """Markdown: one row per (op, dtype), columns per size: wmx and kernels ratios."""
    t = index(torch)
    paths = {p: index(wmx, p) for p in ("wmx", "kernels")}
    sizes = sorted({k[2] for k in paths["wmx"]} | {k[2] for k in paths["kernels"]})
    head = "| op | dtype | " + " | ".join(size_label(n) for n in sizes) + " |"
    lines = [
        "Ratio to PyTorch's GB/s, `wmx API / bare kernels` (1.00 = PyTorch; "
        "PyTorch GB/s in brackets):",
        "",
        head,
        "|" + "---|" * (len(sizes) + 2),
    ]
    for op in TORCH_OF:
        for dt in DTYPES:
            cells = []
            have = False
            for n in sizes:
                tr = t.get((TORCH_OF[op], dt, n))
                parts = []
                for p in ("wmx", "kernels"):
                    r = paths[p].get((op, dt, n))
                    parts.append(f"{r['gbps'] / tr['gbps']:.2f}" if r and tr else "–")
                    have |= r is not None
                cells.append(" / ".join(parts) + (f" ({tr['gbps']:.0f})" if tr else ""))
            if have:
                lines.append(f"| {op} | {dt} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(wmx, torch):
    """Markdown list of the issue's targets, met or missed, on the wmx API path."""
    t = index(torch)
    w = index(wmx, "wmx")
    kr = index(wmx, "kernels")
    out = ["| target | case | wmx API | kernels | met (API) |", "|---|---|---|---|---|"]

    def ratio(idx, op, dt, n):
        r, tr = idx.get((op, dt, n)), t.get((TORCH_OF[op], dt, n))
        return r["gbps"] / tr["gbps"] if r and tr else None

    def fmt(v):
        return "–" if v is None else f"{v:.2f}"

    for dt in DTYPES:
        for op in ELEMENTWISE:
            for n, goal in ((1 << 26, 0.95), (1 << 24, 0.9)):
                a, b = ratio(w, op, dt, n), ratio(kr, op, dt, n)
                out.append(
                    f"| ≥ {goal} × PyTorch | {op} {dt} {size_label(n)} | {fmt(a)} | {fmt(b)} | "
                    f"{'yes' if a is not None and a >= goal else 'no'} |"
                )
        for op in REDUCTIONS:
            n = 1 << 26
            a, b = ratio(w, op, dt, n), ratio(kr, op, dt, n)
            out.append(
                f"| ≥ 0.9 × PyTorch | {op} {dt} 2^26 | {fmt(a)} | {fmt(b)} | "
                f"{'yes' if a is not None and a >= 0.9 else 'no'} |"
            )
        n = 1 << 26
        f, c = w.get(("axpby", dt, n)), w.get(("axpby_composed", dt, n))
        kf, kc = kr.get(("axpby", dt, n)), kr.get(("axpby_composed", dt, n))
        if f and c:
            s = c["ms"] / f["ms"]
            ks = kc["ms"] / kf["ms"] if kf and kc else None
            out.append(
                f"| fused ≥ 2× faster than composed | axpby {dt} 2^26 | {s:.2f}× | {fmt(ks)}× | "
                f"{'yes' if s >= 2 else 'no'} |"
            )
    for r in wmx:
        if r["op"].startswith("lazy_chain"):
            cpu = r["cpu_us_per_op"]
            out.append(
                f"| ≤ 3 µs CPU per op | {r['op']} ({r['n']} f32) | {cpu:.2f} µs "
                f"(build {r['build_us_per_op']:.2f} + eval {r['eval_us_per_op']:.2f}) | – | "
                f"{'yes' if cpu <= 3 else 'no'} |"
            )
    return "\n".join(out)


def svg_plot(wmx, torch, ops, path):
    """Small multiples: one panel per (op, dtype), GB/s against log2(size)."""
    t = index(torch)
    paths = {p: index(wmx, p) for p in ("wmx", "kernels")}
    series = [
        ("wmx API", "#d62728", lambda op, dt, n: paths["wmx"].get((op, dt, n))),
        ("wmx kernels", "#ff9896", lambda op, dt, n: paths["kernels"].get((op, dt, n))),
        ("PyTorch", "#1f77b4", lambda op, dt, n: t.get((TORCH_OF[op], dt, n))),
        ("copy limit (PyTorch copy)", "#7f7f7f", lambda op, dt, n: t.get(("copy", dt, n))),
    ]
    sizes = sorted({k[2] for k in t} | {k[2] for k in paths["wmx"]})
    if not sizes:
        return
    lo, hi = math.log2(sizes[0]), math.log2(sizes[-1])
    ymax = max([r["gbps"] for r in wmx if r.get("gbps")] + [r["gbps"] for r in torch] + [1])
    ymax = math.ceil(ymax / 500) * 500
    pw, ph, ml, mt, gap = 260, 180, 50, 30, 30
    cols = len(ops)
    width = ml + cols * (pw + gap)
    height = mt + len(DTYPES) * (ph + gap + 20) + 40
    s = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{ml}" y="16" font-size="13">Bandwidth (GB/s, bytes that must move / time) '
        f"against elements, H100 via Vulkan; PyTorch in the same run</text>",
    ]
    for j, dt in enumerate(DTYPES):
        for i, op in enumerate(ops):
            x0 = ml + i * (pw + gap)
            y0 = mt + j * (ph + gap + 20) + 10
            s.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>')
            s.append(f'<text x="{x0 + 4}" y="{y0 + 13}">{op} {dt}</text>')

            def px(n):
                return x0 + (math.log2(n) - lo) / max(hi - lo, 1) * pw

            def py(g):
                return y0 + ph - g / ymax * ph

            for g in range(0, int(ymax) + 1, 1000):
                s.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{py(g):.1f}" y2="{py(g):.1f}" stroke="#eee"/>')
                if i == 0:
                    s.append(f'<text x="{x0 - 4}" y="{py(g) + 4:.1f}" text-anchor="end">{g}</text>')
            for n in sizes:
                s.append(
                    f'<text x="{px(n):.1f}" y="{y0 + ph + 13}" text-anchor="middle">{size_label(n)}</text>'
                )
            for _, color, get in series:
                pts = [(px(n), py(r["gbps"])) for n in sizes if (r := get(op, dt, n))]
                if pts:
                    p = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
                    s.append(f'<polyline points="{p}" fill="none" stroke="{color}" stroke-width="2"/>')
                    for a, b in pts:
                        s.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{color}"/>')
    ly = height - 14
    for k, (name, color, _) in enumerate(series):
        lx = ml + k * 200
        s.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" stroke-width="3"/>')
        s.append(f'<text x="{lx + 25}" y="{ly}">{name}</text>')
    s.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(s) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wmx", required=True, help="JSON written by bench --json")
    p.add_argument("--torch", required=True, help="JSON written by torch_ref.py --json")
    p.add_argument("--md", help="write the Markdown tables here (default: print)")
    p.add_argument("--svg", help="write the bandwidth plot here")
    a = p.parse_args()
    wmx, torch = load(a.wmx), load(a.torch)
    md = "### Targets\n\n" + targets(wmx, torch) + "\n\n### All ratios\n\n" + ratio_table(wmx, torch) + "\n"
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    else:
        print(md)
    if a.svg:
        svg_plot(wmx, torch, ["add", "exp", "axpby", "sum_all", "sum_first_axis", "argmax_last_axis"], a.svg)


if __name__ == "__main__":
    main()
