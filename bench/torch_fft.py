#!/usr/bin/env python3
"""PyTorch (cuFFT) reference for wmx's FFT cases (bench --fft), run in the same
call:

    python3 bench/torch_fft.py

The same cases as bench/src/fft.rs: a batch of 4096 transforms of 1024, one of
2^24 and a 2-D 4096^2, each as complex64 and as rfft of float32.
"""
import torch
from torch_timing import time_ms


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    cases = [("batch 4096 x 1024", (4096, 1024), False),
             ("one of 2^24", (1 << 24,), False),
             ("2-D 4096^2", (4096, 4096), True)]
    for name, shape, two_d in cases:
        re = torch.rand(shape, device="cuda", generator=g) * 2 - 1
        im = torch.rand(shape, device="cuda", generator=g) * 2 - 1
        z = torch.complex(re, im)
        c2c = (lambda: torch.fft.fft2(z)) if two_d else (lambda: torch.fft.fft(z))
        r2c = (lambda: torch.fft.rfft2(re)) if two_d else (lambda: torch.fft.rfft(re))
        for what, fn in (("c64", c2c), ("rfft f32", r2c)):
            ms = time_ms(fn, 10)
            print(f"torch fft {name:18} {what:9}: {ms:8.3f} ms")


if __name__ == "__main__":
    main()
