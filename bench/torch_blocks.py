#!/usr/bin/env python3
"""PyTorch reference for wmx's building-block cases (bench --blocks), run in the
same call as the wmx bench:

    python3 bench/torch_blocks.py --json torch_blocks.json

Same case names, sizes and byte counts as bench/src/blocks.rs:
torch.cat, indexing x[idx], torch.cumsum, torch.sort, torch.rand and
index_add_ (scatter_add into bins), all f32. With --large, the 3 GiB cases of
bench --large instead (add, sum, row and column sums of f32; an f16 add).
"""
import argparse
import json

import torch
from torch_timing import time_ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--large", action="store_true")
    args = p.parse_args()
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    rand = lambda n: torch.rand(n, device=dev, generator=g) * 2 - 1
    cases = []
    if args.large:
        n, cols = 3 << 28, 4096
        x = rand(n).reshape(n // cols, cols)
        cases += [
            ("large_add_3GiB", "float32", 12.0 * n, lambda: x + x),
            ("large_sum_3GiB", "float32", 4.0 * n, lambda: x.sum()),
            ("large_rowsum_3GiB", "float32", 4.0 * n, lambda: x.sum(1)),
            ("large_colsum_3GiB", "float32", 4.0 * n, lambda: x.sum(0)),
        ]
        h = rand(2 * n).half().reshape(2 * n // cols, cols)
        cases.append(("large_add_3GiB", "float16", 12.0 * n, lambda: h + h))
        report(cases, args, 60, n)
        # bench --large's 6 GiB cases (past one buffer of the device through Vulkan).
        del x, h
        n = 3 << 29
        x = rand(n).reshape(n // cols, cols)
        cases = [
            ("huge_add_6GiB", "float32", 12.0 * n, lambda: x + x),
            ("huge_sum_6GiB", "float32", 4.0 * n, lambda: x.sum()),
            ("huge_rowsum_6GiB", "float32", 4.0 * n, lambda: x.sum(1)),
            ("huge_colsum_6GiB", "float32", 4.0 * n, lambda: x.sum(0)),
        ]
        huge = args.json and args.json.replace(".json", "_huge.json")
        return report(cases, argparse.Namespace(json=huge), 30, n)
    n = 1 << 25
    a, b = rand(n), rand(n)
    cases.append((f"concat_2x{n}", 2 * n, 16.0 * n, lambda: torch.cat([a, b])))
    n = 1 << 24
    x = rand(n)
    idx = torch.randint(0, n, (n,), device=dev, generator=g, dtype=torch.int32)
    cases.append((f"take_{n}", n, 12.0 * n, lambda: x[idx]))
    n = 1 << 26
    y = rand(n)
    cases.append((f"cumsum_{n}", n, 8.0 * n, lambda: torch.cumsum(y, 0)))
    n = 1 << 24
    z = rand(n)
    cases.append((f"sort_{n}", n, 8.0 * n, lambda: torch.sort(z)))
    zh = z.half()
    cases_f16 = [(f"sort_{n}", "float16", 4.0 * n, lambda: torch.sort(zh), n)]
    n = 1 << 26
    cases.append((f"uniform_{n}", n, 4.0 * n, lambda n=n: torch.rand(n, device=dev)))
    n, bins = 1 << 24, 1 << 20
    upd = rand(n)
    bidx = torch.randint(0, bins, (n,), device=dev, generator=g)
    zeros = torch.zeros(bins, device=dev)
    cases.append((f"scatter_add_{n}_into_{bins}", n, 12.0 * n,
                  lambda: zeros.clone().index_add_(0, bidx, upd)))
    report([(op, "float32", nbytes, fn, count) for op, count, nbytes, fn in cases]
           + cases_f16, args, 20)


def report(cases, args, iters, n=None):
    rows = []
    for case in cases:
        op, dtype, nbytes, fn = case[:4]
        count = case[4] if len(case) > 4 else n
        ms = time_ms(fn, iters)
        row = {"op": op, "dtype": dtype, "n": count, "ms": ms, "gbps": nbytes / (ms * 1e6),
               "path": "torch", "device": torch.cuda.get_device_name()}
        print(f"torch    {op:<28} {dtype}   {ms * 1e3:10.1f} us {row['gbps']:8.1f} GB/s")
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
