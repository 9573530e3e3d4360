"""Goldens for wmx's Llama from MLX's own implementation (mlx-lm on MLX's CPU build):
`pip install "mlx[cpu]" mlx-lm`, then `python3 tests/goldens/mlx_llama.py` from the
repository root (CI reads the outputs only).

Writes two tiny random checkpoints in Hugging Face's layout (`config.json` and
`model.safetensors`, the names of `transformers`' LlamaForCausalLM, which mlx-lm
shares): `tests/goldens/llama_tiny/` (f32, grouped-query attention, an untied
output layer) and `tests/goldens/llama_tiny_q4/` (the same model quantized by
mlx-lm to 4 bits in groups of 32, MLX's format), `tests/goldens/qwen2_tiny/` (Qwen2:
biased q, k, v and tied embeddings), and `tests/goldens/mlx_llama.txt`:
for each, the logits of a fixed prompt (token ids) and 32 greedily generated tokens
with a KV cache, lines `name|shape|values` as the other goldens. The smallest gap
between the two best logits of each generated step is printed: greedy decoding is
compared token for token, so it must stay well above f32 rounding. Then 24
tokens from mlx-lm's `generate_step` with each sampler setting in SAMPLING. Last,
`llama_tiny/tokenizer.json` (trained here) and `llama_tiny/generate_expected.txt`,
the text that `examples/generate` must print for GENERATE_PROMPT.
"""
import json
import os

import mlx.core as mx
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map
from mlx_lm.models import llama, qwen2
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.sample_utils import make_logits_processors, make_sampler

HERE = os.path.dirname(os.path.abspath(__file__))
mx.random.seed(38)
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rms_norm_eps": 1e-5,
    "vocab_size": 128,
    "rope_theta": 10000.0,
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
}
PROMPT = [1, 17, 42, 99, 5, 63, 120, 7, 33]
# The tokenizer's training text, and the prompt of examples/generate's check.
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a language model predicts the next token from the ones before it",
    "arrays are lazy until a value is read, then the graph runs on the device",
    "Weights quantize to four bits in groups, with a scale and a bias each.",
] * 4
GENERATE_PROMPT = "the lazy fox reads the arrays"
# (name, seed, make_sampler's arguments, (repetition_penalty, context) or None);
# tests/src/cases/llama.rs sets the same.
SAMPLING = [
    ("temp", 7, dict(temp=1.0), None),
    ("top_p", 11, dict(temp=0.8, top_p=0.9), None),
    ("top_k", 3, dict(temp=1.0, top_k=5), None),
    ("min_p", 5, dict(temp=1.0, min_p=0.1, min_tokens_to_keep=3), None),
    ("penalty", 0, dict(temp=0.0), (1.5, 20)),
    ("all", 9, dict(temp=0.7, top_p=0.95, min_p=0.05, top_k=20), (1.3, 10)),
]
out = []


def rec(name, a):
    a = a.astype(mx.float32)
    shape = ",".join(str(d) for d in a.shape)
    out.append(f"{name}|{shape}|" + ",".join(str(v) for v in a.reshape(-1).tolist()))


def run(model, name):
    logits = model(mx.array([PROMPT]))
    rec(f"{name}.logits", logits[0])
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


def save(model, folder, config):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    mx.save_safetensors(os.path.join(folder, "model.safetensors"), dict(tree_flatten(model.parameters())))


model = llama.Model(llama.ModelArgs(**{k: v for k, v in CONFIG.items() if k not in ("architectures", "torch_dtype", "bos_token_id", "eos_token_id")}))
# Larger weights than the default initialisation: logits a few units apart.
model.update(tree_map(lambda v: v * 3, model.parameters()))
mx.eval(model.parameters())
save(model, os.path.join(HERE, "llama_tiny"), CONFIG)
run(model, "llama_tiny")
nn.quantize(model, group_size=32, bits=4)
mx.eval(model.parameters())
save(model, os.path.join(HERE, "llama_tiny_q4"), {**CONFIG, "quantization": {"group_size": 32, "bits": 4}})
run(model, "llama_tiny_q4")

# Qwen2: biases on q, k and v, tied embeddings (the file also holds a copy as
# lm_head.weight, which some exporters write), rope_theta 1e6.
mx.random.seed(39)
QWEN = {**CONFIG, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "tie_word_embeddings": True, "rope_theta": 1000000.0}
del QWEN["head_dim"]
qwen = qwen2.Model(qwen2.ModelArgs(**{k: v for k, v in QWEN.items() if k not in ("architectures", "torch_dtype", "bos_token_id", "eos_token_id", "head_dim")}))
qwen.update(tree_map(lambda v: v * 3, qwen.parameters()))
mx.eval(qwen.parameters())
w = dict(tree_flatten(qwen.parameters()))
save_weights = {**w, "lm_head.weight": w["model.embed_tokens.weight"]}
os.makedirs(os.path.join(HERE, "qwen2_tiny"), exist_ok=True)
with open(os.path.join(HERE, "qwen2_tiny", "config.json"), "w") as f:
    json.dump(QWEN, f, indent=1)
mx.save_safetensors(os.path.join(HERE, "qwen2_tiny", "model.safetensors"), save_weights)
run(qwen, "qwen2_tiny")

# Sampling: mlx-lm's generate_step with its samplers and repetition penalty on the
# f32 checkpoint, each after mx.random.seed (the draws follow MLX's global stream).
f32 = llama.Model(llama.ModelArgs(**{k: v for k, v in CONFIG.items() if k not in ("architectures", "torch_dtype", "bos_token_id", "eos_token_id")}))
f32.load_weights(os.path.join(HERE, "llama_tiny", "model.safetensors"))
for name, seed, sampler, penalty in SAMPLING:
    mx.random.seed(seed)
    procs = make_logits_processors(repetition_penalty=penalty[0], repetition_context_size=penalty[1]) if penalty else None
    toks = [int(t) for t, _ in generate_step(mx.array(PROMPT), f32, max_tokens=24, sampler=make_sampler(**sampler), logits_processors=procs)]
    rec(f"sample.{name}", mx.array(toks))

# A tokenizer for the tiny checkpoint (SentencePiece-style BPE as Llama 2's, 128
# tokens, trained here) and the text `examples/generate` must print for a prompt:
# mlx-lm's greedy tokens up to the end-of-sequence token, decoded.
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.normalizer = normalizers.Replace(" ", "\u2581")
tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=128, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False))
tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
assert tok.get_vocab_size() == 128, tok.get_vocab_size()
tok.save(os.path.join(HERE, "llama_tiny", "tokenizer.json"))
ids = tok.encode(GENERATE_PROMPT).ids
toks = []
for t, _ in generate_step(mx.array(ids), f32, max_tokens=40):
    toks.append(int(t))
    if int(t) == 2:
        break
with open(os.path.join(HERE, "llama_tiny", "generate_expected.txt"), "w") as f:
    f.write(tok.decode(toks) + "\n")
print(f"prompt {ids}, {len(toks)} tokens: {tok.decode(toks)!r}")
with open(os.path.join(HERE, "mlx_llama.txt"), "w") as f:
    f.write("\n".join(out) + "\n")
