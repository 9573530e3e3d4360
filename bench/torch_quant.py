#!/usr/bin/env python3
"""PyTorch reference for wmx's quantized-product cases (bench --quant), run in the
same call as the wmx bench:

    python3 bench/torch_quant.py --json torch_quant.json

The same chain as bench/src/quant.rs: 16 f16 weights alternating [8192, 2048] and
[2048, 8192], applied to x ([1, 2048] and [512, 2048]) with F.linear (x @ W.T, cuBLAS),
and the copy limit: a device-to-device copy of 1 GiB (GB/s counts the bytes read,
as the wmx rows count the weights read).
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch_timing import time_ms

D, H, LAYERS = 2048, 8192, 16


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dt = torch.float16
    ws = [(torch.rand((H, D) if i % 2 == 0 else (D, H), device="cuda", dtype=dt) - 0.5) * 0.04
          for i in range(LAYERS)]
    wbytes = sum(2 * w.numel() for w in ws)
    rows = []

    def push(op, n, ms, nbytes):
        print(f"torch quant {op:24}: {ms:9.3f} ms ({nbytes / ms / 1e6:8.1f} GB/s)")
        rows.append({"op": op, "dtype": "float16", "n": n, "ms": ms, "gbps": nbytes / ms / 1e6})

    for m in [1, 512]:
        x = torch.rand(m, D, device="cuda", dtype=dt) - 0.5

        def chain():
            y = x
            for w in ws:
                y = F.linear(y, w)
            return y

        push(f"f16_chain_m{m}", m, time_ms(chain, 20), wbytes)
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    push("copy_1GiB", 1, time_ms(lambda: dst.copy_(src), 20), 1 << 30)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
