#!/usr/bin/env python3
"""PyTorch reference for wmx's language-model benchmark (bench --llm), run in the
same call as the wmx bench:

    python3 bench/torch_llm.py --json torch_llm.json [--compile]

The same model as bench/src/llm.rs: a Llama 3.2 1B-shaped model with random f16
weights (hidden 2048, 16 layers, 32/8 heads, MLP 8192, vocabulary 128256, tied
embeddings), a 512-token prompt, 256 greedy tokens at batch 1. With `transformers`
installed: `LlamaForCausalLM` and `generate` (eager, dynamic cache), and with
--compile `torch.compile` over a static cache (transformers' recipe). Without it,
the same architecture written here in eager PyTorch (F.scaled_dot_product_attention,
a preallocated KV cache), marked `manual` in the rows. Prefill is one forward of
the prompt; decode is (generation time - prefill) / 256.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

D, LAYERS, HEADS, KV, HD, INTER, VOCAB = 2048, 16, 32, 8, 64, 8192, 128256
PROMPT, NEW = 512, 256


def sync_time(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3, out


def hf_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=D, intermediate_size=INTER, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=KV, head_dim=HD,
                      vocab_size=VOCAB, tie_word_embeddings=True, rope_theta=500000.0,
                      max_position_embeddings=2048, torch_dtype=torch.float16)
    with torch.device("cuda"):
        m = LlamaForCausalLM(cfg).to(torch.float16).eval()
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    return m


def rope(x, pos):
    inv = 1.0 / (500000.0 ** (torch.arange(0, HD, 2, device=x.device, dtype=torch.float32) / HD))
    f = pos[:, None].float() * inv[None]
    cos, sin = torch.cat([f.cos(), f.cos()], -1).half(), torch.cat([f.sin(), f.sin()], -1).half()
    x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Manual:
    """The architecture in eager PyTorch: no transformers needed."""

    def __init__(self):
        g = lambda *s: torch.randn(*s, device="cuda", dtype=torch.float16) * 0.02
        self.emb = g(VOCAB, D)
        self.layers = [dict(q=g(HEADS * HD, D), k=g(KV * HD, D), v=g(KV * HD, D), o=g(D, HEADS * HD),
                            gate=g(INTER, D), up=g(INTER, D), down=g(D, INTER),
                            n1=torch.ones(D, device="cuda", dtype=torch.float16),
                            n2=torch.ones(D, device="cuda", dtype=torch.float16))
                       for _ in range(LAYERS)]
        self.norm = torch.ones(D, device="cuda", dtype=torch.float16)

    def forward(self, ids, cache, pos):
        b, l = ids.shape
        h = self.emb[ids]
        p = torch.arange(pos, pos + l, device="cuda")
        for w, (kc, vc) in zip(self.layers, cache):
            x = F.rms_norm(h, (D,), w["n1"], 1e-5)
            q = F.linear(x, w["q"]).view(b, l, HEADS, HD).transpose(1, 2)
            k = F.linear(x, w["k"]).view(b, l, KV, HD).transpose(1, 2)
            v = F.linear(x, w["v"]).view(b, l, KV, HD).transpose(1, 2)
            q, k = rope(q, p), rope(k, p)
            kc[:, :, pos:pos + l] = k
            vc[:, :, pos:pos + l] = v
            o = F.scaled_dot_product_attention(q, kc[:, :, :pos + l], vc[:, :, :pos + l],
                                               is_causal=l > 1, enable_gqa=True)
            h = h + F.linear(o.transpose(1, 2).reshape(b, l, -1), w["o"])
            x = F.rms_norm(h, (D,), w["n2"], 1e-5)
            h = h + F.linear(F.silu(F.linear(x, w["gate"])) * F.linear(x, w["up"]), w["down"])
        return F.linear(F.rms_norm(h, (D,), self.norm, 1e-5), self.emb)

    def generate(self, ids, new):
        cache = [(torch.empty(1, KV, PROMPT + new, HD, device="cuda", dtype=torch.float16),
                  torch.empty(1, KV, PROMPT + new, HD, device="cuda", dtype=torch.float16))
                 for _ in range(LAYERS)]
        t = self.forward(ids, cache, 0)[:, -1].argmax(-1, keepdim=True)
        out = [t]
        for i in range(new - 1):
            t = self.forward(t, cache, PROMPT + i)[:, -1].argmax(-1, keepdim=True)
            out.append(t)
        return torch.cat(out, 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--compile", action="store_true")
    args = p.parse_args()
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (1, PROMPT), device="cuda")
    rows = []

    def push(op, n, ms):
        print(f"torch llm {op:32}: {ms:9.3f} ms")
        rows.append({"op": op, "dtype": "float16", "n": n, "ms": ms, "gbps": 0.0})

    try:
        m = hf_model()
        kind = "transformers"
    except ImportError as e:
        print(f"transformers is not installed ({e}): the manual model")
        m, kind = Manual(), "manual"
    with torch.inference_mode():
        if kind == "transformers":
            gen = lambda: m.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False)
            fwd = lambda: m(ids, use_cache=False).logits[:, -1].argmax(-1)
        else:
            gen = lambda: m.generate(ids, NEW)
            fwd = lambda: m.forward(ids, [(torch.empty(1, KV, PROMPT, HD, device="cuda", dtype=torch.float16),) * 2
                                          for _ in range(LAYERS)], 0)[:, -1].argmax(-1)
        variants = [(f"{kind}_eager", gen)]
        for name, g in variants:
            g()  # warm-up
            fwd()
            prefill = min(sync_time(fwd)[0] for _ in range(3))
            total, out = sync_time(g)
            assert out.shape[-1] >= NEW, out.shape
            push(f"llm_f16_prefill_{name}", PROMPT, prefill)
            push(f"llm_f16_decode_{name}", NEW, (total - prefill) / NEW)
            print(f"  {name}: {1e3 * NEW / (total - prefill):.1f} tokens/s decode")
        if args.compile and kind == "transformers":
            try:
                # transformers compiles the forward itself for a static cache.
                m.generation_config.cache_implementation = "static"
                t0 = time.perf_counter()
                gen()
                gen()
                print(f"  compile and warm-up: {time.perf_counter() - t0:.0f} s")
                total, out = sync_time(gen)
                prefill = min(sync_time(fwd)[0] for _ in range(3))
                push("llm_f16_decode_transformers_compile_static", NEW, (total - prefill) / NEW)
                print(f"  compiled: {1e3 * NEW / (total - prefill):.1f} tokens/s decode")
            except Exception as e:  # a failed compile still leaves the eager rows
                print(f"torch.compile failed: {type(e).__name__}: {e}")
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    ms = min(sync_time(lambda: dst.copy_(src))[0] for _ in range(5))
    push("copy_1GiB", 1, ms)
    rows[-1]["gbps"] = (1 << 30) / ms / 1e6
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "kind": kind, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
