"""Goldens for wmx's contractions and linear algebra: opt_einsum's optimal paths
and numpy/scipy decompositions (float64 on the CPU).

Run: python3 numpy_linalg.py > numpy_linalg.txt   (needs numpy, scipy, opt_einsum;
CI reads the output only)

Lines are `name|shape|values` (values in row-major order, as float64 reprs).
"""
import numpy as np
import opt_einsum as oe

out = []


def rec(name, a):
    a = np.asarray(a, dtype=np.float64)
    shape = ",".join(str(d) for d in a.shape)
    out.append(f"{name}|{shape}|" + ",".join(repr(float(v)) for v in a.reshape(-1)))


# einsum paths: opt_einsum's optimal order, as (i, j) pairs in a shrinking list.
PATHS = [
    ("path0", "ab,bc,cd->ad", [(30, 2), (2, 40), (40, 5)]),
    ("path1", "ea,fb,abcd,gc,hd->efgh", [(6, 5), (7, 4), (5, 4, 3, 2), (8, 3), (9, 2)]),
    ("path2", "ab,bc,cd,de,ef->af", [(10, 2), (2, 12), (12, 3), (3, 14), (14, 4)]),
    ("path3", "abc,bd,ce,ad->e", [(4, 5, 6), (5, 7), (6, 3), (4, 7)]),
]
for name, spec, shapes in PATHS:
    path, _ = oe.contract_path(spec, *shapes, shapes=True, optimize="optimal")
    rec(name, [sorted(p) for p in path])


# Decompositions' sign-free results on seeded matrices (the inputs recorded too).
rng = np.random.default_rng(41)
a = rng.standard_normal((2, 5, 5))
rec("a", a)
rec("svdvals_a", np.linalg.svd(a, compute_uv=False))
rec("det_a", np.linalg.det(a))
sign, logdet = np.linalg.slogdet(a)
rec("slogdet_sign_a", sign)
rec("slogdet_log_a", logdet)
rec("inv_a", np.linalg.inv(a))
sym = a + np.swapaxes(a, -1, -2)
rec("eigvalsh_sym", np.linalg.eigvalsh(sym))
tall = rng.standard_normal((7, 4))
rec("tall", tall)
rec("pinv_tall", np.linalg.pinv(tall))
b = rng.standard_normal((7, 2))
rec("b", b)
x, res, rank, sv = np.linalg.lstsq(tall, b, rcond=None)
rec("lstsq_x", x)
rec("lstsq_res", res)
rec("lstsq_sv", sv)
# A rank-deficient wide matrix: pinv and lstsq drop the zero singular value.
wide = rng.standard_normal((3, 2)) @ rng.standard_normal((2, 6))
rec("wide", wide)
rec("pinv_wide", np.linalg.pinv(wide))
rec("lstsq_wide_rank", [np.linalg.matrix_rank(wide)])
for name, o in [("2", 2), ("1", 1), ("inf", np.inf), ("ninf", -np.inf), ("0", 0), ("3.5", 3.5), ("n1", -1)]:
    rec(f"vnorm_{name}", np.linalg.norm(tall, ord=o, axis=1))
for name, o in [("fro", "fro"), ("nuc", "nuc"), ("1", 1), ("n1", -1), ("2", 2), ("n2", -2), ("inf", np.inf), ("ninf", -np.inf)]:
    rec(f"mnorm_{name}", np.linalg.norm(tall, ord=o))
    rec(f"bnorm_{name}", np.linalg.norm(a, ord=o, axis=(2, 1)))
rec("norm_all", [np.linalg.norm(a)])
rec("mpow3", np.linalg.matrix_power(a[0], 3))
rec("mpowm2", np.linalg.matrix_power(a[0], -2))
v1 = rng.standard_normal((4, 3))
v2 = rng.standard_normal((3,))
rec("v1", v1)
rec("v2", v2)
rec("cross", np.cross(v1, v2))

print("\n".join(out))
