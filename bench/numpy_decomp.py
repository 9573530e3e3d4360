"""numpy's (and, where CUDA is, PyTorch's cuSOLVER) side of `bench --decomp`:
batched Cholesky, solve and Cholesky-solve of 4096 matrices of 64x64 and 256 of
512x512, QR of
256 of 256x128, float32 (or float64), the same SPD inputs (X Xᵀ / n + I) as
bench/src/decomp.rs.

Run: python3 bench/numpy_decomp.py [--iters N] [--dtype float64]
"""
import argparse
import time

import numpy as np

CASES = [
    ("cholesky", 4096, 64, 64),
    ("cholesky", 256, 512, 512),
    ("solve", 4096, 64, 64),
    ("solve", 256, 512, 512),
    ("cho_solve", 4096, 64, 64),
    ("cho_solve", 256, 512, 512),
    ("qr", 256, 256, 128),
]


def inputs(xp, batch, m, n, name, mk, eye):
    x = mk((batch, m, n))
    if name == "qr":
        return x, None
    a = x @ xp.swapaxes(x, -1, -2) / n + eye(m)
    return a, mk((batch, m, 1))


def timed(fn, iters, sync=lambda: None):
    for _ in range(2):
        fn()
    sync()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t) * 1e3 / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = ap.parse_args()
    npdt = getattr(np, args.dtype)
    rng = np.random.default_rng(0)
    mk = lambda s: rng.uniform(-1, 1, s).astype(npdt)
    print(f"numpy {np.__version__}")
    np_cfg = np.show_config(mode="dicts")
    print("blas:", np_cfg.get("Build Dependencies", {}).get("blas", {}).get("name"))
    for name, batch, m, n in CASES:
        if name == "cho_solve":
            continue  # numpy has no batched triangular solve
        a, b = inputs(np, batch, m, n, name, mk, lambda k: np.eye(k, dtype=npdt))
        f = {
            "cholesky": lambda: np.linalg.cholesky(a),
            "solve": lambda: np.linalg.solve(a, b),
            "qr": lambda: np.linalg.qr(a),
        }[name]
        cols = n if name == "qr" else m
        print(f"numpy decomp {name} {batch}x{m}x{cols} {args.dtype}: {timed(f, args.iters):10.3f} ms")
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    tdt = getattr(torch, args.dtype)
    mkt = lambda s: torch.rand(s, device=dev, generator=g, dtype=tdt) * 2 - 1
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    for name, batch, m, n in CASES:
        a, b = inputs(torch, batch, m, n, name, mkt, lambda k: torch.eye(k, device=dev, dtype=tdt))
        f = {
            "cholesky": lambda: torch.linalg.cholesky(a),
            "solve": lambda: torch.linalg.solve(a, b),
            "cho_solve": lambda: torch.cholesky_solve(b, torch.linalg.cholesky(a)),
            "qr": lambda: torch.linalg.qr(a),
        }[name]
        cols = n if name == "qr" else m
        ms = timed(f, args.iters * 4, torch.cuda.synchronize)
        print(f"torch decomp {name} {batch}x{m}x{cols} {args.dtype}: {ms:10.3f} ms")


if __name__ == "__main__":
    main()
