"""PyTorch's `alpha * x + beta * y` (eager: three kernels; torch.compile: one) in
the seed's loop, one result per iteration and a synchronise at the end, wall
clock, at the sizes of `axpby_bench`: the scale for its numbers on a CUDA GPU.

    python3 bench_torch.py [--json PATH]
"""
import json
import sys
import time

import torch


def bench(f, x, y, iters, warm=100):
    for _ in range(warm):
        f(x, y)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        f(x, y)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / iters


def main():
    alpha, beta = 4.0, 2.0
    simple = lambda x, y: alpha * x + beta * y  # noqa: E731
    compiled = torch.compile(simple)
    rows = []
    for shape in [(256, 512), (4096, 4096)]:
        iters = 5000 if shape[0] * shape[1] <= 1 << 20 else 200
        for dtype in [torch.float32, torch.float16]:
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(shape, device="cuda", generator=g).to(dtype)
            y = torch.randn(shape, device="cuda", generator=g).to(dtype)
            eager_s = bench(simple, x, y, iters)
            compiled_s = bench(compiled, x, y, iters)
            name = str(dtype).replace("torch.float", "f")
            print(f"torch {name} {shape}: eager {eager_s * 1e6:.2f} us | compiled {compiled_s * 1e6:.2f} us")
            rows.append({"dtype": name, "shape": list(shape), "iters": iters,
                         "eager_s": eager_s, "compiled_s": compiled_s})
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
