"""Goldens for wmx::nn and wmx::optim from PyTorch (CPU, float32).

Run: python3 torch_nn.py > torch_nn.txt   (needs torch; CI reads the output only)

Each line is `name|shape|values`: shape comma-separated (empty for a scalar),
values comma-separated Python reprs of the float32 values. Inputs are written too,
so the Rust side needs no random generator of torch's.
"""
import torch
import torch.nn.functional as F

torch.manual_seed(2026)
out = []


def rec(name, t):
    shape = ",".join(str(d) for d in t.shape)
    vals = t.detach().to(torch.float64).reshape(-1)
    out.append(f"{name}|{shape}|" + ",".join(repr(float(v)) for v in vals))


def grads_of(fn, inputs, g):
    xs = [i.clone().requires_grad_(True) for i in inputs]
    y = fn(*xs)
    (y * g).sum().backward()
    return y, [x.grad for x in xs]


# ---- layers: forward and gradients of sum(y * g)
x = torch.randn(4, 5)
w = torch.randn(3, 5)
b = torch.randn(3)
g = torch.randn(4, 3)
y, (dx, dw, db) = grads_of(lambda x, w, b: F.linear(x, w, b), [x, w, b], g)
for n, t in [("linear.x", x), ("linear.w", w), ("linear.b", b), ("linear.g", g), ("linear.y", y),
             ("linear.dx", dx), ("linear.dw", dw), ("linear.db", db)]:
    rec(n, t)

x = torch.randn(3, 7) * 2 + 1
w = torch.randn(7)
b = torch.randn(7)
g = torch.randn(3, 7)
y, (dx, dw, db) = grads_of(lambda x, w, b: F.layer_norm(x, (7,), w, b, 1e-5), [x, w, b], g)
for n, t in [("ln.x", x), ("ln.w", w), ("ln.b", b), ("ln.g", g), ("ln.y", y), ("ln.dx", dx),
             ("ln.dw", dw), ("ln.db", db)]:
    rec(n, t)
y, (dx, dw) = grads_of(lambda x, w: F.rms_norm(x, (7,), w, 1e-6), [x, w], g)
for n, t in [("rms.y", y), ("rms.dx", dx), ("rms.dw", dw)]:
    rec(n, t)

emb = torch.randn(6, 4)
idx = torch.tensor([[1, 5, 1], [0, 2, 1]])
g = torch.randn(2, 3, 4)
y, (de,) = grads_of(lambda e: F.embedding(idx, e), [emb], g)
for n, t in [("emb.w", emb), ("emb.idx", idx.float()), ("emb.g", g), ("emb.y", y), ("emb.dw", de)]:
    rec(n, t)

# ---- activations
x = torch.linspace(-4, 4, 33)
g = torch.randn(33)
rec("act.x", x)
rec("act.g", g)
acts = {
    "relu": F.relu,
    "relu6": F.relu6,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "elu": lambda x: F.elu(x, 1.0),
    "selu": F.selu,
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "mish": F.mish,
    "softplus": F.softplus,
    "log_sigmoid": F.logsigmoid,
    "hardswish": F.hardswish,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}
for name, f in acts.items():
    y, (dx,) = grads_of(f, [x], g)
    rec(f"act.{name}.y", y)
    rec(f"act.{name}.dx", dx)
xg = torch.randn(3, 8)
gg = torch.randn(3, 4)
y, (dx,) = grads_of(lambda x: F.glu(x, -1), [xg], gg)
for n, t in [("glu.x", xg), ("glu.g", gg), ("glu.y", y), ("glu.dx", dx)]:
    rec(n, t)


# ---- losses: value and gradient with respect to the predictions
def loss_case(name, fn, pred, *rest):
    p = pred.clone().requires_grad_(True)
    v = fn(p, *rest)
    v.sum().backward()
    rec(f"loss.{name}.v", v)
    rec(f"loss.{name}.d", p.grad)


logits = torch.randn(5, 4)
tgt = torch.tensor([0, 3, 1, 1, 2])
tgt_ign = torch.tensor([0, -100, 1, 1, 2])
cw = torch.tensor([0.5, 2.0, 1.0, 1.5])
probs = torch.softmax(torch.randn(5, 4), -1)
rec("loss.logits", logits)
rec("loss.tgt", tgt.float())
rec("loss.tgt_ign", tgt_ign.float())
rec("loss.cw", cw)
rec("loss.probs", probs)
loss_case("ce", lambda p: F.cross_entropy(p, tgt), logits)
loss_case("ce_none", lambda p: F.cross_entropy(p, tgt, reduction="none"), logits)
loss_case("ce_sum", lambda p: F.cross_entropy(p, tgt, reduction="sum"), logits)
loss_case("ce_w", lambda p: F.cross_entropy(p, tgt, weight=cw), logits)
loss_case("ce_ign", lambda p: F.cross_entropy(p, tgt_ign, ignore_index=-100), logits)
loss_case("ce_ls", lambda p: F.cross_entropy(p, tgt, label_smoothing=0.1), logits)
loss_case("ce_w_ls", lambda p: F.cross_entropy(p, tgt, weight=cw, label_smoothing=0.2), logits)
loss_case("ce_probs", lambda p: F.cross_entropy(p, probs), logits)
loss_case("ce_probs_ls", lambda p: F.cross_entropy(p, probs, label_smoothing=0.1), logits)
logits3 = torch.randn(2, 4, 3)
tgt3 = torch.tensor([[0, 3, 1], [2, 2, 0]])
rec("loss.logits3", logits3)
rec("loss.tgt3", tgt3.float())
loss_case("ce3", lambda p: F.cross_entropy(p, tgt3), logits3)
logp = torch.log_softmax(torch.randn(5, 4), -1)
rec("loss.logp", logp)
loss_case("nll", lambda p: F.nll_loss(p, tgt), logp)
a = torch.randn(6, 3)
t = torch.randn(6, 3)
rec("loss.a", a)
rec("loss.t", t)
loss_case("mse", lambda p: F.mse_loss(p, t), a)
loss_case("l1", lambda p: F.l1_loss(p, t), a)
loss_case("huber", lambda p: F.huber_loss(p, t, delta=0.7), a)
loss_case("smooth_l1", lambda p: F.smooth_l1_loss(p, t, beta=0.7), a)
loss_case("cos", lambda p: F.cosine_similarity(p, t, dim=1), a)
pb = torch.sigmoid(torch.randn(6, 3))
tb = (torch.rand(6, 3) > 0.5).float()
rec("loss.pb", pb)
rec("loss.tb", tb)
loss_case("bce", lambda p: F.binary_cross_entropy(p, tb), pb)
loss_case("bce_logits", lambda p: F.binary_cross_entropy_with_logits(p, tb), a)
loss_case("kl", lambda p: F.kl_div(p, probs, reduction="sum"), logp)

# ---- optimizers: 20 steps on a least-squares problem, parameters after each
X = torch.randn(16, 3)
Y = torch.randn(16, 2)
W0 = torch.randn(3, 2)
B0 = torch.randn(2)
for n, tt in [("opt.X", X), ("opt.Y", Y), ("opt.W0", W0), ("opt.B0", B0)]:
    rec(n, tt)
class Lion(torch.optim.Optimizer):
    """Lion as the paper (Chen et al. 2023) and MLX define it (torch has none)."""

    def __init__(self, params, lr, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                st = self.state[p]
                m = st.setdefault("m", torch.zeros_like(p))
                c = b1 * m + (1 - b1) * p.grad
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(torch.sign(c), alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


optims = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.05),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1),
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                               weight_decay=0.01),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.05),
    "adam_l2": lambda ps: torch.optim.Adam(ps, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.05, weight_decay=0.1),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=0.01),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=0.01),
    "rmsprop_cm": lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True,
                                                 weight_decay=0.01),
    "lion": lambda ps: Lion(ps, lr=0.01, weight_decay=0.1),
}
for name, make in optims.items():
    W = W0.clone().requires_grad_(True)
    B = B0.clone().requires_grad_(True)
    opt = make([W, B])
    for step in range(20):
        opt.zero_grad()
        loss = ((X @ W + B - Y) ** 2).mean()
        loss.backward()
        opt.step()
        if step in (0, 4, 19):
            rec(f"opt.{name}.{step}.W", W)
            rec(f"opt.{name}.{step}.B", B)

# ---- scaled dot-product attention: values and gradients of sum(out * g)
def sdpa_case(name, hq, hkv, lq, lk, d, dv, mask=None, gqa=False, bool_mask=None):
    q = torch.randn(2, hq, lq, d)
    k = torch.randn(2, hkv, lk, d)
    v = torch.randn(2, hkv, lk, dv)
    g = torch.randn(2, hq, lq, dv)
    for n, t in [("q", q), ("k", k), ("v", v), ("g", g)]:
        rec(f"sdpa.{name}.{n}", t)
    if bool_mask is not None:
        rec(f"sdpa.{name}.mask", bool_mask.float())
    if mask is not None:
        rec(f"sdpa.{name}.add", mask)
    qs, ks, vs = (t.clone().requires_grad_(True) for t in (q, k, v))
    m = bool_mask if bool_mask is not None else mask
    o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=m, enable_gqa=gqa)
    # A query with every key masked: zeros (wmx's definition; PyTorch gives NaN).
    o = torch.nan_to_num(o, nan=0.0)
    (o * g).sum().backward()
    for n, t in [("o", o), ("dq", qs.grad), ("dk", ks.grad), ("dv", vs.grad)]:
        rec(f"sdpa.{name}.{n}", torch.nan_to_num(t, nan=0.0))


def band(lq, lk, window=None):
    i = torch.arange(lq)[:, None] + (lk - lq)
    j = torch.arange(lk)[None, :]
    keep = j <= i
    if window is not None:
        keep &= j > i - window
    return keep


sdpa_case("plain", 2, 2, 5, 5, 4, 3)
sdpa_case("causal", 2, 2, 3, 6, 4, 4, bool_mask=band(3, 6))
sdpa_case("gqa", 4, 2, 4, 7, 8, 8, gqa=True, bool_mask=band(4, 7))
sdpa_case("window", 2, 1, 6, 6, 4, 4, gqa=True, bool_mask=band(6, 6, window=2))
sdpa_case("additive", 2, 2, 3, 5, 4, 4, mask=torch.randn(1, 2, 3, 5))
rm = torch.rand(2, 1, 4, 5) > 0.4
rm[0, 0, 1, :] = False  # a query with no key
sdpa_case("boolean", 2, 2, 4, 5, 4, 4, bool_mask=rm)

# ---- multi-head attention (MLX's separate projections = PyTorch's packed ones)
E, H, L = 8, 2, 5
mha = torch.nn.MultiheadAttention(E, H, batch_first=True)
with torch.no_grad():
    for n, t in [("mha.wq", mha.in_proj_weight[:E]), ("mha.wk", mha.in_proj_weight[E:2 * E]),
                 ("mha.wv", mha.in_proj_weight[2 * E:]), ("mha.bq", mha.in_proj_bias[:E]),
                 ("mha.bk", mha.in_proj_bias[E:2 * E]), ("mha.bv", mha.in_proj_bias[2 * E:]),
                 ("mha.wo", mha.out_proj.weight), ("mha.bo", mha.out_proj.bias)]:
        rec(n, t)
xm = torch.randn(2, L, E)
gm = torch.randn(2, L, E)
rec("mha.x", xm)
rec("mha.g", gm)
xs = xm.clone().requires_grad_(True)
causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)  # True: masked (PyTorch's MHA)
o, _ = mha(xs, xs, xs, attn_mask=causal, need_weights=False)
(o * gm).sum().backward()
rec("mha.o", o)
rec("mha.dx", xs.grad)

# ---- group and batch normalisation, channels-last ([N, H, W, C]: wmx's and MLX's
# layout; PyTorch's modules run on the permuted input)
xn = torch.randn(3, 4, 5, 6) * 2 + 0.5
gn_ = torch.randn(3, 4, 5, 6)
rec("norm.x", xn)
rec("norm.g", gn_)
gnm = torch.nn.GroupNorm(3, 6)
with torch.no_grad():
    gnm.weight.copy_(torch.randn(6))
    gnm.bias.copy_(torch.randn(6))
rec("gn.w", gnm.weight)
rec("gn.b", gnm.bias)
xs = xn.clone().requires_grad_(True)
o = gnm(xs.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
(o * gn_).sum().backward()
rec("gn.y", o)
rec("gn.dx", xs.grad)
bn = torch.nn.BatchNorm2d(6, momentum=0.2)
with torch.no_grad():
    bn.weight.copy_(torch.randn(6))
    bn.bias.copy_(torch.randn(6))
rec("bn.w", bn.weight)
rec("bn.b", bn.bias)
xs = xn.clone().requires_grad_(True)
o = bn(xs.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
(o * gn_).sum().backward()
rec("bn.y", o)
rec("bn.dx", xs.grad)
rec("bn.rm", bn.running_mean)
rec("bn.rv", bn.running_var)
bn.eval()
rec("bn.y_eval", bn(xn.permute(0, 3, 1, 2)).permute(0, 2, 3, 1))

print("\n".join(out))
