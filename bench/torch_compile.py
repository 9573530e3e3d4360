#!/usr/bin/env python3
"""PyTorch reference for wmx's compiled-mode cases (bench: gelu10, gelu10_compiled,
gelu_sum, gelu_sum_compiled, lazy_chain_1000[_compiled]), run in the same call as
the wmx bench:

    python3 bench/torch_compile.py --json torch_compile.json

Each case runs eager (one kernel per op) and under torch.compile (Triton, fused).
Times are medians of CUDA-event timings (torch_timing.py); bytes as bench counts
them: gelu10 reads x and writes the result (2N elements), gelu_sum reads x (N).
The chain rows give host microseconds per op of 1000 dependent small ops.
"""
import argparse
import json
import math
import time

import torch
from torch_timing import time_ms


def gelu10(x):
    """bench's gelu10: tanh-GELU written out as 9 elementwise ops, op for op."""
    u = x * x
    u = u * x
    u = u * 0.044715
    u = u + x
    u = u * 0.7978845608
    u = torch.tanh(u)
    u = u + 1.0
    u = u * x
    return u * 0.5


def gelu_sum(x):
    """bench's gelu_sum: nine elementwise ops and a sum accumulated in f32."""
    c = x * x * x
    c = c * 0.044715 + x
    t = torch.tanh(c * math.sqrt(2.0 / math.pi))
    return ((x * 0.5) * (t + 1.0)).float().sum()


def chain(x, y):
    z = x
    for i in range(1000):
        z = z + y if i % 2 == 0 else z * y
    return z


def chain_us_per_op(fn, x, y):
    """Best of 7: host microseconds per op of one 1000-op call, then a sync."""
    best = None
    for _ in range(7):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn(x, y)
        torch.cuda.synchronize()
        us = (time.perf_counter() - t) * 1e6 / 1000
        best = us if best is None else min(best, us)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1024,65536,1048576,16777216,67108864")
    p.add_argument("--dtypes", default="float32,float16")
    p.add_argument("--json")
    a = p.parse_args()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    # One compiled graph per size and dtype (as wmx traces per signature): more
    # than dynamo's default limit of 8, past which it silently runs eager.
    torch._dynamo.config.recompile_limit = 64
    gelu10_c = torch.compile(gelu10, dynamic=False)
    gelu_sum_c = torch.compile(gelu_sum, dynamic=False)
    rows = []
    for dt_name in a.dtypes.split(","):
        dtype = getattr(torch, dt_name)
        for n in [int(s) for s in a.sizes.split(",")]:
            g = torch.Generator(device="cuda").manual_seed(1)
            x = torch.rand(n, device="cuda", dtype=dtype, generator=g) * 2 - 1
            e = x.element_size()
            iters = 200 if n <= 1 << 20 else 50
            for name, fn, nbytes in [
                ("gelu10_eager", lambda: gelu10(x), 2 * n * e),
                ("gelu10_compiled", lambda: gelu10_c(x), 2 * n * e),
                ("gelu_sum_eager", lambda: gelu_sum(x), n * e),
                ("gelu_sum_compiled", lambda: gelu_sum_c(x), n * e),
            ]:
                ms = time_ms(fn, iters)
                row = {"op": name, "dtype": dt_name, "n": n, "ms": ms,
                       "gbps": nbytes / ms / 1e6}
                rows.append(row)
                print(f"{name:18s} {dt_name:8s} n={n:>10d} {ms * 1e3:10.2f} us "
                      f"{row['gbps']:8.1f} GB/s")
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    chain_c = torch.compile(chain, dynamic=False)
    chain_c(x, y)
    for name, fn in [("lazy_chain_1000_eager", chain), ("lazy_chain_1000_compiled", chain_c)]:
        us = chain_us_per_op(fn, x, y)
        rows.append({"op": name, "dtype": "float32", "n": 4096, "us_per_op": us})
        print(f"{name} (1000 dependent ops on 4096 f32): {us:.3f} us/op")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
