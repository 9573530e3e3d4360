"""PyTorch side of `bench --train`: one training step (forward, backward, AdamW)
of an MLP 784-1024-1024-10 (ReLU, cross-entropy, batch 256, f32), eager and
torch.compile'd, on CUDA. Wall clock over 50 steps after warm-up, synchronised at
both ends, as the wmx side. Prints a line per case and writes --json.
"""
import argparse
import json
import time

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--json")
args = p.parse_args()
dev = "cuda"
BATCH, STEPS, WARMUP = 256, 50, 5
torch.manual_seed(0)
x = torch.randn(BATCH, 784, device=dev)
y = torch.randint(0, 10, (BATCH,), device=dev)


def model():
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10)).to(dev)


def run(name, compiled):
    m = model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    f = torch.compile(step) if compiled else step
    for _ in range(WARMUP + (10 if compiled else 0)):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    host = 0.0
    for _ in range(STEPS):
        h = time.perf_counter()
        f()
        host += time.perf_counter() - h
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) * 1e3 / STEPS
    print(f"torch {name:9s} mlp f32 batch {BATCH}: {ms:8.3f} ms/step (host {host * 1e3 / STEPS:.3f} ms)")
    return {"op": f"train_mlp_{name}", "ms": ms, "host_ms": host * 1e3 / STEPS}


rows = [run("eager", False), run("compiled", True)]
if args.json:
    json.dump(rows, open(args.json, "w"), indent=1)
