"""PyTorch side of `bench --train`: one training step (forward, backward, AdamW)
of an MLP 784-1024-1024-10 (ReLU, cross-entropy, batch 256, f32), of a small CNN
and of issue 43's GPT (f32, and f16 under autocast), eager and torch.compile'd, on
CUDA; with --gpt-dir, the GPT's losses against wmx's from the same weights and tokens. Wall clock
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
p.add_argument("--profile", action="store_true", help="torch.profiler tables of one eager GPT step")
p.add_argument("--gpt-dir", help="bench_gpt's WMX_BENCH_GPT_DIR: train its weights and tokens, compare its losses")
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


class Attention(nn.Module):
    """nn::MultiHeadAttention's names and computation (causal, scale 1/sqrt(hd))."""

    def __init__(self, d, h):
        super().__init__()
        self.query_proj, self.key_proj, self.value_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))
        self.h = h

    def forward(self, x):
        b, l, d = x.shape
        sp = lambda t: t.view(b, l, self.h, d // self.h).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(
            sp(self.query_proj(x)), sp(self.key_proj(x)), sp(self.value_proj(x)), is_causal=True)
        return self.out_proj(a.transpose(1, 2).reshape(b, l, d))


class Block(nn.Module):
    """GPT-2's pre-norm block, as nn::TransformerBlock (causal, tanh GELU)."""

    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, h)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    """bench_gpt's model (issue 43), with wmx's parameter names."""

    def __init__(self, vocab=8192, seq=256, d=768, h=12, blocks=4):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for b in self.blocks:
            h = b(h)
        return self.head(self.ln_f(h))


def gpt_step(m, opt, xs, ys, half):
    """One step: cross-entropy of the logits (in f32) against ys, AdamW; f16 under
    autocast (f32 master weights; no loss scaling, as wmx's side)."""
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16, enabled=half):
        logits = m(xs)
    loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), ys.flatten())
    loss.backward()
    opt.step()
    return loss


def gpt_model(init):
    torch.manual_seed(0)
    m = Gpt().to(dev)
    if init is not None:
        m.load_state_dict(init)
    return m


def gpt_data():
    if args.gpt_dir:
        import numpy as np
        load = lambda f: torch.from_numpy(np.load(f"{args.gpt_dir}/{f}").astype("int64")).to(dev)
        return load("gpt_tokens.npy"), load("gpt_targets.npy")
    g = torch.Generator(device=dev).manual_seed(0)
    return tuple(torch.randint(0, 8192, (8, 256), device=dev, generator=g) for _ in range(2))


def gpt_init():
    if not args.gpt_dir:
        return None
    from safetensors.torch import load_file
    return load_file(f"{args.gpt_dir}/gpt_init.safetensors", device=dev)


def gpt_agree(init, xs, ys):
    """Trains wmx's initial weights on wmx's tokens as bench_gpt's agreement run
    did and compares the losses; returns the largest relative difference per dtype."""
    want = json.load(open(f"{args.gpt_dir}/gpt_losses.json"))
    out = {}
    for dt, half, tol in (("float32", False, 2e-3), ("float16", True, 2e-2)):
        m = gpt_model(init)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
        got = [gpt_step(m, opt, xs, ys, half).item() for _ in range(len(want[dt]))]
        diff = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(got, want[dt]))
        ok = diff <= tol
        print(f"gpt losses {dt}: torch {[round(v, 4) for v in got]}")
        print(f"gpt losses {dt}: wmx   {[round(v, 4) for v in want[dt]]} "
              f"(largest relative difference {diff:.2e}, {'agree' if ok else 'DISAGREE'} within {tol})")
        out[dt] = (diff, ok)
    return out


def run_gpt(name, compiled, half, init, xs, ys):
    m = gpt_model(init)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    step = lambda: gpt_step(m, opt, xs, ys, half)
    f = torch.compile(step) if compiled else step
    dt = "float16" if half else "float32"
    if args.profile and not compiled:
        for _ in range(3):
            f()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            f()
            torch.cuda.synchronize()
        print(f"torch.profiler, one eager {dt} gpt step:")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))
    for _ in range(WARMUP + (10 if compiled else 0)):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    host = 0.0
    for _ in range(20):
        h = time.perf_counter()
        f()
        host += time.perf_counter() - h
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) * 1e3 / 20
    print(f"torch {name:9s} gpt {dt} b8 l256 d768: {ms:8.3f} ms/step (host {host * 50:.3f} ms)")
    return {"op": f"train_gpt_{name}", "dtype": dt, "ms": ms, "host_ms": host * 50}


torch.backends.cuda.matmul.allow_tf32 = False
init = gpt_init()
xs, ys = gpt_data()
agreement = gpt_agree(init, xs, ys) if args.gpt_dir else {}
for half in (False, True):
    rows += [run_gpt("eager", False, half, init, xs, ys), run_gpt("compiled", True, half, init, xs, ys)]
if args.json:
    json.dump(rows, open(args.json, "w"), indent=1)
if not all(ok for _, ok in agreement.values()):
    raise SystemExit("the GPT losses of wmx and PyTorch disagree")
