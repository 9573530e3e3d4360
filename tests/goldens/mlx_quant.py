"""Goldens for wmx's affine quantization from MLX's CPU build: `pip install "mlx[cpu]"`,
then `python3 tests/goldens/mlx_quant.py > tests/goldens/mlx_quant.txt` (CI reads the
output only).

Lines are `name|shape|values` as in torch_nn.py: floats as the shortest decimal of
their f32 value (f16/bf16 widened exactly, so values, scales and biases compare bit
for bit), packed words as integers.
For each dtype, bits and group size: the weights `w` (already rounded to the dtype),
MLX's `quantize` (`wq`, `scales`, `biases`) and, for groups of 64, `dequantize`
(`deq`). Rows cover
the edge cases of the scale rule: a constant row, an all-zero row, a row whose
largest magnitude is negative, and a row whose value nearest zero rounds its edge
to zero. Then `quantized_matmul` of f32 x by a quantized f32 w (recorded as MLX quantized
it), transposed or not.
"""

import mlx.core as mx
import numpy as np

mx.set_default_device(mx.cpu)
rng = np.random.default_rng(38)
out = []


def rec(name, a):
    a = np.array(a.astype(mx.float32) if a.dtype in (mx.float16, mx.bfloat16) else a)
    shape = ",".join(str(d) for d in a.shape)
    flat = a.reshape(-1)
    if np.issubdtype(flat.dtype, np.integer):
        vals = ",".join(str(int(v)) for v in flat)
    else:
        # The shortest decimal that parses back to the same f32.
        vals = ",".join(str(v) for v in flat.astype(np.float32))
    out.append(f"{name}|{shape}|{vals}")


def weights(k):
    rows = [
        rng.standard_normal(k) * 0.05,
        rng.standard_normal(k) * 3.0 + 1.0,
        np.full(k, 0.75),
        np.zeros(k),
        -np.abs(rng.standard_normal(k)) * 2.0,
        np.abs(rng.standard_normal(k)) + 1e-3,
        rng.uniform(-1e4, 1e4, k),
    ]
    return np.stack(rows).astype(np.float32)


names = {"f32": mx.float32, "f16": mx.float16, "bf16": mx.bfloat16}
for dt, dtype in names.items():
    for bits in [2, 3, 4, 5, 6, 8]:
        for group in [32, 64, 128]:
            w = mx.array(weights(max(2 * group, 128))).astype(dtype)
            wq, s, b = mx.quantize(w, group_size=group, bits=bits)
            deq = mx.dequantize(wq, s, b, group_size=group, bits=bits)
            name = f"q_{dt}_b{bits}_g{group}"
            rec(f"{name}.w", w)
            rec(f"{name}.wq", wq)
            rec(f"{name}.scales", s)
            rec(f"{name}.biases", b)
            if group == 64:
                rec(f"{name}.deq", deq)

def dyadic(shape):
    """Normal values on a grid of 1/64: short to write, exact in every float type."""
    return mx.array((np.round(rng.standard_normal(shape) * 64) / 64).astype(np.float32))


for bits, group in [(4, 64), (3, 32), (8, 128), (2, 64), (6, 64)]:
    x = dyadic((3, 128))
    w = dyadic((40, 128))
    wq, s, b = mx.quantize(w, group_size=group, bits=bits)
    y = mx.quantized_matmul(x, wq, s, b, transpose=True, group_size=group, bits=bits)
    name = f"qmm_t_b{bits}_g{group}"
    for part, a in [("x", x), ("wq", wq), ("scales", s), ("biases", b), ("y", y)]:
        rec(f"{name}.{part}", a)
    # x @ W with W [128, 128] quantized along its rows.
    w2 = dyadic((128, 128))
    wq2, s2, b2 = mx.quantize(w2, group_size=group, bits=bits)
    y2 = mx.quantized_matmul(x, wq2, s2, b2, transpose=False, group_size=group, bits=bits)
    name = f"qmm_n_b{bits}_g{group}"
    for part, a in [("x", x), ("wq", wq2), ("scales", s2), ("biases", b2), ("y", y2)]:
        rec(f"{name}.{part}", a)

print("\n".join(out))
