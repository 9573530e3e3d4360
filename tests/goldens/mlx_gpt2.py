"""Goldens for wmx's GPT-2 from MLX's own implementation (mlx-lm on MLX's CPU build):
`pip install "mlx[cpu]" mlx-lm`, then `python3 tests/goldens/mlx_gpt2.py` from the
repository root (CI reads the outputs only).

Writes two tiny random checkpoints: `tests/goldens/gpt2_tiny/` in Hugging Face's
layout as `openai-community/gpt2` has it (names without the `transformer.` prefix,
`Conv1D` weights `[in, out]`, the causal-mask buffers `h.N.attn.bias`), and
`tests/goldens/gpt2_tiny_q4/`, the same model quantized by mlx-lm to 4 bits in
groups of 32 and saved as mlx-lm saves it (`model.` names, `[out, in]` weights);
and `tests/goldens/mlx_gpt2.txt`: for each, the logits of a fixed prompt and 32
greedy tokens through mlx-lm's KV cache (lines `name|shape|values`).
"""
import json
import os

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map
from mlx_lm.models import gpt2
from mlx_lm.models.cache import make_prompt_cache

HERE = os.path.dirname(os.path.abspath(__file__))
mx.random.seed(2)
CONFIG = {
    "architectures": ["GPT2LMHeadModel"],
    "model_type": "gpt2",
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_ctx": 128,
    "n_positions": 128,
    "layer_norm_epsilon": 1e-5,
    "vocab_size": 128,
    "activation_function": "gelu_new",
    "bos_token_id": 1,
    "eos_token_id": 2,
}
ARGS = {k: v for k, v in CONFIG.items() if k in ("model_type", "n_ctx", "n_embd", "n_head", "n_layer", "n_positions", "layer_norm_epsilon", "vocab_size")}
PROMPT = [1, 17, 42, 99, 5, 63, 120, 7, 33]
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
out = []


def rec(name, a):
    a = a.astype(mx.float32)
    shape = ",".join(str(d) for d in a.shape)
    out.append(f"{name}|{shape}|" + ",".join(str(v) for v in a.reshape(-1).tolist()))


def run(model, name):
    rec(f"{name}.logits", model(mx.array([PROMPT]))[0])
    cache = make_prompt_cache(model)
    y = model(mx.array([PROMPT]), cache=cache)[:, -1, :]
    toks, gap = [], float("inf")
    for _ in range(32):
        top = mx.sort(y[0])
        gap = min(gap, (top[-1] - top[-2]).item())
        t = mx.argmax(y[0]).item()
        toks.append(t)
        y = model(mx.array([[t]]), cache=cache)[:, -1, :]
    rec(f"{name}.tokens", mx.array(toks))
    print(f"{name}: smallest gap between the two best logits {gap:.4g}")


def save(folder, config, weights):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    mx.save_safetensors(os.path.join(folder, "model.safetensors"), weights)


model = gpt2.Model(gpt2.ModelArgs(**ARGS))
# Larger weights than the default initialisation: logits a few units apart.
model.update(tree_map(lambda v: v * 2, model.parameters()))
mx.eval(model.parameters())
hf = {}
for k, v in tree_flatten(model.parameters()):
    k = k.removeprefix("model.")
    hf[k] = v.T if k.endswith(CONV1D) else v
n = CONFIG["n_positions"]
for i in range(CONFIG["n_layer"]):
    hf[f"h.{i}.attn.bias"] = mx.tril(mx.ones((n, n)))[None, None]
save(os.path.join(HERE, "gpt2_tiny"), CONFIG, hf)
run(model, "gpt2_tiny")
nn.quantize(model, group_size=32, bits=4)
mx.eval(model.parameters())
save(os.path.join(HERE, "gpt2_tiny_q4"), {**CONFIG, "quantization": {"group_size": 32, "bits": 4}},
     dict(tree_flatten(model.parameters())))
run(model, "gpt2_tiny_q4")
with open(os.path.join(HERE, "mlx_gpt2.txt"), "w") as f:
    f.write("\n".join(out) + "\n")
