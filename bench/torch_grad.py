#!/usr/bin/env python3
"""PyTorch autograd reference for wmx's transform cases (bench.rs: sum_axpby,
grad_sum_axpby, gelu_sum, grad_gelu_sum), run in the same call as the wmx bench.

    python3 bench/torch_grad.py --json torch_grad.json

Each figure is the median of CUDA-event timings over many calls after a warm-up.
The grad cases run the forward and the backward (torch.autograd.grad), as wmx's
grad cases evaluate the gradient graph from the inputs; bytes as bench.rs counts.
"""
import argparse
import json
import math

import torch
from torch_timing import time_ms


def gelu_sum(x):
    """bench.rs's gelu_sum: nine elementwise ops and a sum in f32 (.float() is a
    no-op for f32; for f16 it is one cast, as wmx's astype)."""
    c = x * x * x
    c = c * 0.044715 + x
    t = torch.tanh(c * math.sqrt(2.0 / math.pi))
    return ((x * 0.5) * (t + 1.0)).float().sum()


def cases(n, dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(n, device="cuda", dtype=dtype, generator=g) * 2 - 1
    y = torch.rand(n, device="cuda", dtype=dtype, generator=g) * 2 - 1
    xg = x.clone().requires_grad_(True)
    yg = y.clone().requires_grad_(True)
    e = x.element_size()
    return [
        ("sum_axpby", lambda: (2.0 * x + 0.5 * y).sum(), 2 * n * e),
        ("grad_sum_axpby",
         lambda: torch.autograd.grad((2.0 * xg + 0.5 * yg).sum(), (xg, yg)), 2 * n * e),
        ("gelu_sum", lambda: gelu_sum(x), n * e),
        ("grad_gelu_sum", lambda: torch.autograd.grad(gelu_sum(xg), (xg,)), 2 * n * e),
    ]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1048576,16777216")
    p.add_argument("--dtypes", default="float32,float16")
    p.add_argument("--json")
    a = p.parse_args()
    rows = []
    for dt in a.dtypes.split(","):
        for n in [int(s) for s in a.sizes.split(",")]:
            for name, fn, nbytes in cases(n, getattr(torch, dt)):
                ms = time_ms(fn, 200 if n <= 1 << 20 else 50)
                gbps = nbytes / (ms * 1e6)
                rows.append({"op": name, "dtype": dt, "n": n, "ms": ms, "gbps": gbps})
                print(f"torch {name:<16} {dt:<8} n={n:>10} {ms * 1e3:10.2f} us {gbps:8.1f} GB/s", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
