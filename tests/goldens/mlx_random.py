"""Goldens for wmx::random from MLX's CPU build: `pip install "mlx[cpu]"`, then
`python3 tests/goldens/mlx_random.py > tests/goldens/mlx_random.txt`.

One case per line, `key=value` fields separated by spaces (lists comma-separated):
the MLX call (`op`), its seed and arguments, and `values`, the result flattened:
integers exactly, floats as the shortest decimal of the f32 result (f16 and bf16
results widened to f32 first, exactly)."""

import mlx.core as mx

mx.set_default_device(mx.cpu)


def vals(a):
    flat = a.reshape(-1)
    if flat.dtype == mx.bool_:
        return [int(v) for v in flat.tolist()]
    if mx.issubdtype(flat.dtype, mx.integer):
        return [int(v) for v in flat.tolist()]
    return [float(v) for v in flat.astype(mx.float32).tolist()]


cases = []
# mx.random.bits is not in MLX's Python API; split(key, n) is bits of shape [n, 2],
# whose layout is that of any shape of 2n elements. Odd counts are covered by the
# uniform cases (f32 of the bits).
for seed, n in [(0, 5), (42, 8), (2**40 + 7, 1), (123, 3), (99, 0)]:
    cases.append({"op": "bits", "seed": seed, "shape": [2 * n],
                  "values": vals(mx.random.split(mx.random.key(seed), n))})
for seed, num in [(7, 3), (8, 1), (2**63 + 1, 4)]:
    cases.append({"op": "split", "seed": seed, "num": num, "shape": [num, 2],
                  "values": vals(mx.random.split(mx.random.key(seed), num))})
for seed, shape, lo, hi, dt in [(1, [6], 0.0, 1.0, "f32"), (5, [2, 3], -2.0, 3.0, "f32"),
                                (14, [7], 0.0, 1.0, "f32"), (15, [3, 5], 0.0, 1.0, "f32"),
                                (6, [9], 0.0, 1.0, "f16"), (7, [5], -1.0, 1.0, "bf16")]:
    dtype = {"f32": mx.float32, "f16": mx.float16, "bf16": mx.bfloat16}[dt]
    u = mx.random.uniform(lo, hi, shape, dtype, key=mx.random.key(seed))
    cases.append({"op": "uniform", "seed": seed, "shape": shape, "low": lo, "high": hi,
                  "dtype": dt, "values": vals(u.astype(mx.float32))})
for seed, shape, lo, hi in [(9, [8], -5, 17), (10, [3, 3], 0, 2), (16, [1], 3, 4)]:
    cases.append({"op": "randint", "seed": seed, "shape": shape, "low": lo, "high": hi,
                  "values": vals(mx.random.randint(lo, hi, shape, key=mx.random.key(seed)))})
for seed, p, shape in [(11, 0.3, [16]), (12, 1.0, [4]), (13, 0.0, [4])]:
    cases.append({"op": "bernoulli", "seed": seed, "p": p, "shape": shape,
                  "values": vals(mx.random.bernoulli(p, shape, key=mx.random.key(seed)))})
for seed, n in [(21, 10), (22, 1), (23, 300)]:
    cases.append({"op": "permutation", "seed": seed, "n": n, "shape": [n],
                  "values": vals(mx.random.permutation(n, key=mx.random.key(seed)))})
# categorical: one distribution with an output shape goes by the inverse CDF in
# MLX, several (or a 1-D one) by the Gumbel-max trick; -inf entries never come.
for seed, lshape, scale in [(31, [1, 10], 2), (32, [10], 2), (33, [3, 6], 2), (34, [1, 1, 7], 2),
                            (35, [2, 1, 5], 2)] + [(s, [1, 12], 0.3) for s in range(36, 46)]:
    logits = scale * mx.random.normal(lshape, key=mx.random.key(seed + 100))
    logits = mx.where(mx.arange(lshape[-1]) % 4 == 1, -float("inf"), logits)
    c = mx.random.categorical(logits, key=mx.random.key(seed))
    cases.append({"op": "categorical", "seed": seed, "lshape": lshape, "logits": vals(logits),
                  "shape": list(c.shape), "values": vals(c)})
print(f"# mlx {mx.__version__}")
for c in cases:
    print(" ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in c.items()))
