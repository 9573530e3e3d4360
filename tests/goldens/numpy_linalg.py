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

print("\n".join(out))
