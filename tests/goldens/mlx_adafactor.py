"""Goldens for wmx's Adafactor from MLX's own (`mlx.optimizers.Adafactor` on MLX's
CPU build): `pip install "mlx[cpu]"`, then `python3 tests/goldens/mlx_adafactor.py`
from the repository root (CI reads the output only).

The least-squares problem of the other optimizers' goldens (X, Y, W0, B0 read from
`tests/goldens/torch_nn.txt`): W [3, 2] is factored, B [2] is not. For each
setting, the parameters after steps 1, 5 and 20 of `mean((X @ W + B - Y)^2)`, in
`tests/goldens/mlx_adafactor.txt` (lines `name|shape|values`).
"""
import os

import mlx.core as mx
import mlx.optimizers as optim

HERE = os.path.dirname(os.path.abspath(__file__))


def golden(name):
    for line in open(os.path.join(HERE, "torch_nn.txt")):
        n, shape, vals = line.rstrip("\n").split("|")
        if n == name:
            return mx.array([float(v) for v in vals.split(",")]).reshape(
                [int(d) for d in shape.split(",") if d])
    raise KeyError(name)


X, Y, W0, B0 = (golden(n) for n in ["opt.X", "opt.Y", "opt.W0", "opt.B0"])
SETTINGS = {
    "adafactor": dict(),
    "adafactor_lr": dict(learning_rate=0.05, relative_step=False, beta_1=0.9, weight_decay=0.01),
    "adafactor_warmup": dict(warmup_init=True, scale_parameter=False, clip_threshold=0.5),
}
out = []


def rec(name, a):
    shape = ",".join(str(d) for d in a.shape)
    out.append(f"{name}|{shape}|" + ",".join(repr(v) for v in a.reshape(-1).tolist()))


def loss(p):
    return mx.mean((X @ p["W"] + p["B"] - Y) ** 2)


for name, kw in SETTINGS.items():
    p = {"W": W0, "B": B0}
    opt = optim.Adafactor(**kw)
    vg = mx.value_and_grad(loss)
    for step in range(20):
        _, g = vg(p)
        p = opt.apply_gradients(g, p)
        mx.eval(p)
        if step in (0, 4, 19):
            rec(f"opt.{name}.{step}.W", p["W"])
            rec(f"opt.{name}.{step}.B", p["B"])
with open(os.path.join(HERE, "mlx_adafactor.txt"), "w") as f:
    f.write("\n".join(out) + "\n")
