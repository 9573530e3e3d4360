#!/usr/bin/env python3
"""PyTorch (cuBLAS) reference for wmx's matrix-product cases (bench --linalg), run
in the same call as the wmx bench:

    python3 bench/torch_linalg.py --json torch_linalg.json

Same case names, shapes and counting as bench/src/linalg.rs: TFLOP/s of
2·batch·M·K·N, GB/s of both operands read and the output written once. TF32 is
off (`allow_tf32 = False`), so f32 figures are true FP32 GEMMs. Median of CUDA-
event timings over many calls after a warm-up.
"""
import argparse
import json

import torch
from torch_timing import time_ms


# The products of one training step of issue 43's GPT, as bench/src/linalg.rs's
# GPT_PRODUCTS: (name, m, k, n, a transposed, b transposed).
GPT_PRODUCTS = [
    ("gpt_nt", 2048, 768, 2304, False, True), ("gpt_nt", 2048, 768, 768, False, True),
    ("gpt_nt", 2048, 768, 3072, False, True), ("gpt_nt", 2048, 3072, 768, False, True),
    ("gpt_nt", 2048, 768, 8192, False, True),
    ("gpt_nn", 2048, 2304, 768, False, False), ("gpt_nn", 2048, 768, 768, False, False),
    ("gpt_nn", 2048, 3072, 768, False, False), ("gpt_nn", 2048, 768, 3072, False, False),
    ("gpt_nn", 2048, 8192, 768, False, False),
    ("gpt_tn", 2304, 2048, 768, True, False), ("gpt_tn", 768, 2048, 768, True, False),
    ("gpt_tn", 3072, 2048, 768, True, False), ("gpt_tn", 768, 2048, 3072, True, False),
    ("gpt_tn", 8192, 2048, 768, True, False),
]


def cases():
    out = []
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for s in (1024, 2048, 4096):
            out.append(("matmul", dt, 1, s, s, s, False, False))
        if dt != torch.bfloat16:
            out.append(("matmul_at", dt, 1, 4096, 4096, 4096, True, False))
            out.append(("gemv", dt, 1, 8192, 8192, 1, False, False))
            out.append(("gevm", dt, 1, 1, 8192, 8192, False, False))
            out.append(("bmm", dt, 256, 64, 64, 64, False, False))
            out += [(name, dt, 1, m, k, n, ta, tb) for name, m, k, n, ta, tb in GPT_PRODUCTS]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--ops", help="comma-separated case names (as bench --ops)")
    args = p.parse_args()
    wanted = set(args.ops.split(",")) if args.ops else None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []
    names = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
    for name, dt, batch, m, k, n, ta, tb in cases():
        if wanted is not None and name not in wanted:
            continue
        g = torch.Generator(device="cuda").manual_seed(0)
        lead = (batch,) if batch > 1 else ()
        a = torch.rand(*lead, k, m, device="cuda", generator=g).to(dt).transpose(-1, -2) if ta \
            else torch.rand(*lead, m, k, device="cuda", generator=g).to(dt)
        b = torch.rand(*lead, n, k, device="cuda", generator=g).to(dt).transpose(-1, -2) if tb \
            else torch.rand(*lead, k, n, device="cuda", generator=g).to(dt)
        if name == "gemv":
            b = b.reshape(k)
            fn = lambda: torch.mv(a, b)
        elif name == "gevm":
            a = a.reshape(k)
            fn = lambda: torch.matmul(a, b)
        elif name == "bmm":
            fn = lambda: torch.bmm(a, b)
        else:
            fn = lambda: torch.matmul(a, b)
        flops = 2.0 * batch * m * k * n
        e = torch.finfo(dt).bits // 8
        nbytes = batch * (m * k + k * n + m * n) * e
        iters = max(5, min(200, int(2e11 / max(flops, nbytes * 50))))
        ms = time_ms(fn, iters)
        op = f"{name}_{batch}x{m}x{k}x{n}"
        row = {"op": op, "dtype": names[dt], "ms": ms, "gbps": nbytes / (ms * 1e6),
               "tflops": flops / (ms * 1e9), "path": "torch", "device": torch.cuda.get_device_name()}
        print(f"torch    {op:<28} {names[dt]:<9} {ms * 1e3:10.1f} us {row['gbps']:8.1f} GB/s "
              f"{row['tflops']:7.2f} TFLOP/s")
        rows.append(row)
    for dt in (torch.float32, torch.float16):
        g = torch.Generator(device="cuda").manual_seed(0)
        r, l = 1 << 14, 4096
        x = torch.rand(r, l, device="cuda", generator=g).to(dt)
        j = torch.arange(l, device="cuda")
        w = (0.5 + (j % 7) * 0.25).to(dt)
        b = ((j % 5) * 0.5 - 1.0).to(dt)
        fns = {
            "softmax": lambda: torch.softmax(x, -1),
            "layer_norm": lambda: torch.nn.functional.layer_norm(x, (l,), eps=1e-5),
            "layer_norm_wb": lambda: torch.nn.functional.layer_norm(x, (l,), w, b, eps=1e-5),
            "rms_norm": lambda: torch.nn.functional.rms_norm(x, (l,), eps=1e-5),
        }
        for name, fn in fns.items():
            if wanted is not None and name not in wanted:
                continue
            ms = time_ms(fn, 50)
            nbytes = 2 * r * l * x.element_size()
            op = f"{name}_{r}x{l}"
            row = {"op": op, "dtype": names[dt], "ms": ms, "gbps": nbytes / (ms * 1e6),
                   "path": "torch", "device": torch.cuda.get_device_name()}
            print(f"torch    {op:<28} {names[dt]:<9} {ms * 1e3:10.1f} us {row['gbps']:8.1f} GB/s")
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
