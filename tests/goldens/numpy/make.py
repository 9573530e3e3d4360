#!/usr/bin/env python3
"""Writes the numpy files wmx's file tests read (tests/tests/files.rs):

    python3 tests/goldens/numpy/make.py     # numpy 2.x; rewrites the files here

Values follow closed formulas the test recomputes: element i of each 1-D array is
f(i) below, the 2-D arrays are reshapes of them.
"""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
i = np.arange(12)
f = (i - 5.5) / 4  # exact in f16 and f32
arrays = {
    "bool": (i % 3 == 0),
    "uint8": (i * 23 % 256).astype(np.uint8),
    "int32": ((i - 6) * 1000003).astype(np.int32),
    "uint32": (i * 400000000 % 2**32).astype(np.uint32),
    "int64": ((i - 6) * 10**15).astype(np.int64),
    "float16": f.astype(np.float16),
    "float32": f.astype(np.float32),
}
for name, a in arrays.items():
    np.save(os.path.join(here, f"{name}.npy"), a)
# A 3x4 float32 in Fortran order, and big-endian float32 (4 x 3).
np.save(os.path.join(here, "fortran.npy"), np.asfortranarray(f.astype(np.float32).reshape(3, 4)))
np.save(os.path.join(here, "big_endian.npy"), f.astype(">f4").reshape(4, 3))
# float64 loads as wmx's f64, exactly.
np.save(os.path.join(here, "float64.npy"), f)
np.savez(os.path.join(here, "several.npz"), x=f.astype(np.float32).reshape(2, 6), n=i.astype(np.int32))
np.savez_compressed(os.path.join(here, "compressed.npz"), m=(i % 2 == 1))
