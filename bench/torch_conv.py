#!/usr/bin/env python3
"""PyTorch (cuDNN) reference for wmx's convolution cases (bench --conv), run in the
same call as the wmx bench:

    python3 bench/torch_conv.py --json torch_conv.json

Same names, shapes and FLOP counts as bench/src/conv.rs: channels-last memory format
(wmx's layout), TF32 off, cudnn.benchmark on (cuDNN picks its fastest algorithm).
Forward is F.conv; backward is torch.autograd.grad of the output for the input and
the weight with a given cotangent, as wmx's vjp.
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch_timing import time_ms

CASES = [
    # name, n, spatial, cin, cout, kernel, stride, pad, groups
    ("r3x3_64", 32, (56, 56), 64, 64, (3, 3), 1, 1, 1),
    ("r3x3_256", 32, (14, 14), 256, 256, (3, 3), 1, 1, 1),
    ("r1x1_1024", 32, (14, 14), 1024, 256, (1, 1), 1, 0, 1),
    ("stem7x7", 32, (224, 224), 3, 64, (7, 7), 2, 3, 1),
    ("dw3x3", 32, (112, 112), 32, 32, (3, 3), 1, 1, 32),
    ("conv1d_4096", 8, (4096,), 512, 512, (3,), 1, 1, 1),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    rows = []
    for dt, dname in ((torch.float32, "float32"), (torch.float16, "float16")):
        for name, n, sp, cin, cout, k, s, pad, g in CASES:
            conv = {1: F.conv1d, 2: F.conv2d}[len(sp)]
            x = torch.randn(n, cin, *sp, device="cuda", dtype=dt)
            w = torch.randn(cout, cin // g, *k, device="cuda", dtype=dt)
            if len(sp) == 2:
                x = x.contiguous(memory_format=torch.channels_last)
                w = w.contiguous(memory_format=torch.channels_last)
            fwd = lambda: conv(x, w, stride=s, padding=pad, groups=g)
            y = fwd()
            out = y.numel()
            flops = 2.0 * out * (cin // g) * torch.tensor(k).prod().item()
            xg, wg = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
            yg = conv(xg, wg, stride=s, padding=pad, groups=g)
            gy = torch.ones_like(yg)

            def bwd():
                yb = conv(xg, wg, stride=s, padding=pad, groups=g)
                return torch.autograd.grad(yb, (xg, wg), gy)

            tf = time_ms(fwd, 20)
            # The forward is part of the timed backward call; subtract it, as wmx's
            # vjp (lazy) also records the forward but evaluates only the gradients.
            tb = time_ms(bwd, 20) - tf
            print(f"torch conv {name:12} {dname}: forward {tf:8.3} ms ({flops / tf / 1e9:6.1f} TFLOP/s), "
                  f"backward {tb:8.3} ms ({2 * flops / tb / 1e9:6.1f} TFLOP/s)")
            rows.append({"op": f"conv_{name}_fwd", "dtype": dname, "ms": tf, "tflops": flops / tf / 1e9})
            rows.append({"op": f"conv_{name}_bwd", "dtype": dname, "ms": tb, "tflops": 2 * flops / tb / 1e9})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
