#!/usr/bin/env python3
"""PyTorch reference for wmx's i64 cases (bench --int64), run in the same call:

    python3 bench/torch_int64.py

The same cases as bench/src/int64.rs: add, multiply, floor_divide (divisors
1..1000) and a full sum of int32 and int64 vectors of 2^20, 2^24 and 2^26
elements; GB/s counts the bytes read and written (3 per element for the
elementwise ops, 1 for the sum).
"""
import torch
from torch_timing import time_ms


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    for p in (20, 24, 26):
        n = 1 << p
        for dt in (torch.int32, torch.int64):
            info = torch.iinfo(dt)
            x = torch.randint(info.min, info.max, (n,), device="cuda", dtype=dt, generator=g)
            y = torch.randint(1, 1001, (n,), device="cuda", dtype=dt, generator=g)
            size = x.element_size()
            cases = [
                ("add", lambda: x + y, 3),
                ("multiply", lambda: x * y, 3),
                ("floor_divide", lambda: torch.floor_divide(x, y), 3),
                ("sum", lambda: x.sum(dtype=dt), 1),
            ]
            for op, fn, moved in cases:
                ms = time_ms(fn, 20)
                name = "i32" if dt == torch.int32 else "i64"
                print(f"torch int64 {op:12} {name} n=2^{p:2}: {ms:8.3f} ms "
                      f"({moved * size * n / ms / 1e6:7.1f} GB/s)")


if __name__ == "__main__":
    main()
