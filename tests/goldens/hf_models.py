"""Goldens for wmx's models from Hugging Face `transformers` and PyTorch on the CPU:
`pip install torch transformers`, then `python3 tests/goldens/hf_models.py [OUT]`
from the repository root (OUT defaults to tests/goldens; CI reads the outputs only).

For each architecture, a tiny random checkpoint saved by `save_pretrained` (exactly
the files a Hugging Face folder has: config.json, model.safetensors in
transformers' names and layouts) in OUT/hf_<name>/, and in OUT/hf_models.txt the
logits of a fixed prompt and `generate`'s 32 greedy tokens (lines
`name|shape|values`). Weights are scaled up from the default initialisation so the
logits are a few units apart; the smallest gap between the two best logits of each
greedy step is printed (token-for-token comparison needs it well above f32
rounding).

- llama: grouped-query attention, untied output layer, RoPE with linear scaling;
- qwen2: biases on q, k and v, tied embeddings, rope_theta 1e6;
- mistral: grouped-query attention, no sliding window;
- gpt2: Conv1D weights, the `transformer.` prefix, learned positions.
"""
import os
import sys

import torch
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
PROMPT = [1, 17, 42, 99, 5, 63, 120, 7, 33]
COMMON = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, max_position_embeddings=256, rms_norm_eps=1e-5,
              bos_token_id=1, eos_token_id=2)
MODELS = {
    "llama": (LlamaForCausalLM, LlamaConfig(**COMMON, num_key_value_heads=2, tie_word_embeddings=False,
                                            rope_theta=10000.0,
                                            rope_scaling={"rope_type": "linear", "factor": 2.0})),
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(**COMMON, num_key_value_heads=2, tie_word_embeddings=True,
                                            rope_theta=1000000.0)),
    "mistral": (MistralForCausalLM, MistralConfig(**COMMON, num_key_value_heads=1, sliding_window=None,
                                                  tie_word_embeddings=False)),
    "gpt2": (GPT2LMHeadModel, GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                                         bos_token_id=1, eos_token_id=2)),
}
lines = []


def rec(name, t):
    t = t.detach().to(torch.float32)
    shape = ",".join(str(d) for d in t.shape)
    t = t.reshape(-1)
    lines.append(f"{name}|{shape}|" + ",".join(repr(float(v)) for v in t.tolist()))


torch.manual_seed(38)
for name, (cls, cfg) in MODELS.items():
    cfg.torch_dtype = torch.float32
    m = cls(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(3.0)
    m.generation_config.pad_token_id = 0
    folder = os.path.join(OUT, f"hf_{name}")
    m.save_pretrained(folder, safe_serialization=True)
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        logits = m(ids).logits[0]
        out = m.generate(ids, max_new_tokens=32, min_new_tokens=32, do_sample=False,
                         eos_token_id=None, output_scores=True, return_dict_in_generate=True)
    gap = min((s[0].topk(2).values[0] - s[0].topk(2).values[1]).item() for s in out.scores)
    rec(f"hf_{name}.logits", logits)
    rec(f"hf_{name}.tokens", out.sequences[0, len(PROMPT):])
    print(f"hf_{name}: {sorted(os.listdir(folder))}, smallest gap {gap:.4g}")
import transformers
with open(os.path.join(OUT, "hf_models.txt"), "w") as f:
    f.write(f"# transformers {transformers.__version__}, torch {torch.__version__}\n")
    f.write("\n".join(lines) + "\n")
