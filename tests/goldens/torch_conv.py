"""Goldens for wmx's convolution and pooling from PyTorch (CPU, float32).

Run: python3 torch_conv.py > torch_conv.txt   (needs torch; CI reads the output only)

Lines are `name|shape|values` as in torch_nn.py. Arrays are in PyTorch's layouts
(NCHW inputs, [C_out, C_in/groups, k...] weights, [C_in, C_out/groups, k...] for
transposed convolutions): the Rust side converts them with `to_channels_last` and
`conv_weight_from_torch`, which are checked by the same comparison. Gradients are
those of sum(y * g).
"""
import torch
import torch.nn.functional as F

torch.manual_seed(36)
torch.backends.cudnn.allow_tf32 = False
out = []


def rec(name, t):
    shape = ",".join(str(d) for d in t.shape)
    vals = t.detach().to(torch.float64).reshape(-1)
    out.append(f"{name}|{shape}|" + ",".join(repr(float(v)) for v in vals))


def case(name, fn, inputs):
    """Records the inputs, y = fn(*inputs), a cotangent g and the gradients."""
    xs = [i.clone().requires_grad_(True) for i in inputs]
    y = fn(*xs)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    for i, (a, x) in enumerate(zip(inputs, xs)):
        rec(f"{name}.in{i}", a)
        rec(f"{name}.d{i}", x.grad)
    rec(f"{name}.g", g)
    rec(f"{name}.y", y)


case("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
     [torch.randn(2, 4, 9, 8), torch.randn(6, 2, 3, 3), torch.randn(6)])
case("conv1d_depthwise", lambda x, w: F.conv1d(x, w, stride=2, padding=1, dilation=2, groups=3),
     [torch.randn(2, 3, 11), torch.randn(6, 1, 3)])
case("conv3d", lambda x, w: F.conv3d(x, w, stride=(1, 2, 1), padding=(1, 0, 1)),
     [torch.randn(1, 2, 4, 5, 3), torch.randn(3, 2, 2, 3, 2)])
case("conv_transpose2d",
     lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2),
     [torch.randn(2, 4, 5, 4), torch.randn(4, 3, 3, 2), torch.randn(6)])
case("conv_transpose1d",
     lambda x, w: F.conv_transpose1d(x, w, stride=3, padding=4, output_padding=2, dilation=2),
     [torch.randn(1, 3, 6), torch.randn(3, 2, 4)])
case("max_pool2d", lambda x: F.max_pool2d(x, (3, 2), stride=2, padding=1, dilation=(1, 2), ceil_mode=True),
     [torch.randn(2, 3, 9, 7)])
case("max_pool3d", lambda x: F.max_pool3d(x, 2, stride=(2, 1, 2), ceil_mode=True),
     [torch.randn(1, 2, 5, 4, 7)])
case("avg_pool2d", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
     [torch.randn(2, 3, 8, 7)])
case("avg_pool2d_excl", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
     [torch.randn(2, 3, 8, 7)])
case("avg_pool1d", lambda x: F.avg_pool1d(x, 4, stride=3, padding=2),
     [torch.randn(2, 3, 10)])
case("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 2)),
     [torch.randn(2, 3, 7, 5)])

print("\n".join(out))
