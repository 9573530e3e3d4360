#!/usr/bin/env python3
"""PyTorch reference for wmx's attention cases (bench --attention), run in the same
call as the wmx bench:

    python3 bench/torch_attention.py --json torch_attention.json

Same names, shapes and FLOP counts as bench/src/attention.rs: f16, D = 128,
F.scaled_dot_product_attention (PyTorch picks its flash or cuDNN kernel; the
`math` rows force the composed form). Causal prefill uses is_causal (queries and
keys of one length, so PyTorch's top-left alignment is wmx's); decoding has no
mask and grouped heads (enable_gqa). The backward is torch.autograd.grad of q, k
and v with a cotangent of ones, the forward subtracted (wmx's vjp evaluates only
the gradients).
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch_timing import time_ms

D = 128
CASES = [
    # name, b, hq, hkv, lq, lk, causal, math, bwd
    ("prefill_2k", 1, 32, 32, 2048, 2048, True, True, True),
    ("prefill_2k_b8", 8, 32, 32, 2048, 2048, True, False, False),
    ("prefill_8k", 1, 32, 32, 8192, 8192, True, False, False),
    ("decode_4k", 1, 32, 8, 1, 4096, False, True, False),
    ("decode_32k", 1, 32, 8, 1, 32768, False, True, False),
    ("prefill_32k", 1, 32, 32, 32768, 32768, True, False, False),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    args = p.parse_args()
    rows = []
    dt = torch.float16
    for name, b, hq, hkv, lq, lk, causal, math, bwd in CASES:
        q = 2 * torch.rand(b, hq, lq, D, device="cuda", dtype=dt) - 1
        k = 2 * torch.rand(b, hkv, lk, D, device="cuda", dtype=dt) - 1
        v = torch.rand(b, hkv, lk, D, device="cuda", dtype=dt) - 0.5
        pairs = sum(i + lk - lq + 1 for i in range(lq)) if causal else lq * lk
        flops = 4.0 * b * hq * pairs * D
        gqa = hq != hkv

        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

        def push(path, ms, f):
            print(f"torch attention {name:14} {path:18}: {ms:9.3f} ms ({f / ms / 1e9:7.2f} TFLOP/s)")
            rows.append({"op": f"attn_{name}_{path}", "dtype": "float16", "ms": ms, "tflops": f / ms / 1e9})

        tf = time_ms(fwd, 10)
        push("sdpa", tf, flops)
        if bwd:
            qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
            og = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, enable_gqa=gqa)
            go = torch.ones_like(og)

            def back():
                o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, enable_gqa=gqa)
                return torch.autograd.grad(o, (qg, kg, vg), go)

            push("sdpa_bwd", time_ms(back, 10) - tf, 2.5 * flops)
        if math:
            with sdpa_kernel(SDPBackend.MATH):
                try:
                    push("math", time_ms(fwd, 10), flops)
                except torch.OutOfMemoryError as e:
                    print(f"torch attention {name:14} math: out of memory ({e})")
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
