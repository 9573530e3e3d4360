"""PyTorch side of `bench --train`: one training step (forward, backward, AdamW)
of an MLP 784-1024-1024-10 (ReLU, cross-entropy, batch 256, f32), of a small CNN
and of 4 GPT-2-small blocks, eager and torch.compile'd, on CUDA. Wall clock
over 50 (MLP) or 20 steps after warm-up, synchronised at both ends, as the wmx
side. Prints a line per case and writes --json.
"""
import argparse
import json
import time

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--json")
p.add_argument("--profile", action="store_true", help="torch.profiler table of one eager GPT step")
args = p.parse_args()
dev = "cuda"
BATCH, STEPS, WARMUP = 256, 50, 5
torch.manual_seed(0)
x = torch.randn(BATCH, 784, device=dev)
y = torch.randint(0, 10, (BATCH,), device=dev)


def model():
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10)).to(dev)


def time_classifier(m, xs, ys, compiled, steps):
    """ms per step and host ms of a cross-entropy + AdamW step of `m`, eager or
    torch.compile'd, after warm-up, synchronised at both ends."""
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(m(xs), ys)
        loss.backward()
        opt.step()
        return loss

    f = torch.compile(step) if compiled else step
    for _ in range(WARMUP + (10 if compiled else 0)):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    host = 0.0
    for _ in range(steps):
        h = time.perf_counter()
        f()
        host += time.perf_counter() - h
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3 / steps, host * 1e3 / steps


def run(name, compiled):
    ms, host = time_classifier(model(), x, y, compiled, STEPS)
    print(f"torch {name:9s} mlp f32 batch {BATCH}: {ms:8.3f} ms/step (host {host:.3f} ms)")
    return {"op": f"train_mlp_{name}", "ms": ms, "host_ms": host}


rows = [run("eager", False), run("compiled", True)]
if args.json:
    json.dump(rows, open(args.json, "w"), indent=1)


def run_cnn(name, compiled):
    """bench_cnn's model: 3x3 convolutions 3-32-64-128 (ReLU, max pooling after the
    first two), global average pooling, a linear layer; batch 128 of 32x32x3,
    channels-last memory format (wmx's layout), TF32 off."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(128, 10)).to(dev).to(memory_format=torch.channels_last)
    xc = torch.randn(128, 3, 32, 32, device=dev).contiguous(memory_format=torch.channels_last)
    yc = torch.randint(0, 10, (128,), device=dev)
    ms, host = time_classifier(m, xc, yc, compiled, 20)
    print(f"torch {name:9s} cnn f32 batch 128: {ms:8.3f} ms/step (host {host:.3f} ms)")
    return {"op": f"train_cnn_{name}", "ms": ms, "host_ms": host}


torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
rows += [run_cnn("eager", False), run_cnn("compiled", True)]


class Block(nn.Module):
    """GPT-2's pre-norm block, as nn::TransformerBlock (causal, tanh GELU)."""

    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.h = h

    def forward(self, x):
        b, l, d = x.shape
        y = self.ln1(x)
        sp = lambda t: t.view(b, l, self.h, d // self.h).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(sp(self.q(y)), sp(self.k(y)), sp(self.v(y)),
                                                             is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, l, d))
        return x + self.mlp(self.ln2(x))


def run_gpt(name, compiled, math_sdpa):
    torch.manual_seed(0)
    m = nn.Sequential(*(Block(768, 12) for _ in range(4))).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
    xg = torch.randn(8, 256, 768, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = (m(xg) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    f = torch.compile(step) if compiled else step
    if args.profile and not compiled and not math_sdpa:
        for _ in range(3):
            f()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            f()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=20))
    ctx = torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH) if math_sdpa else None
    if ctx:
        ctx.__enter__()
    for _ in range(WARMUP + (10 if compiled else 0)):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        f()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) * 1e3 / 20
    if ctx:
        ctx.__exit__(None, None, None)
    print(f"torch {name:22s} gpt4 f32 b8 l256 d768: {ms:8.3f} ms/step")
    return {"op": f"train_gpt_{name}", "ms": ms}


rows += [run_gpt("eager", False, False), run_gpt("eager_math_sdpa", False, True),
         run_gpt("compiled", True, False)]
if args.json:
    json.dump(rows, open(args.json, "w"), indent=1)
