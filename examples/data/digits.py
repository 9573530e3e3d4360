"""Exports scikit-learn's digits (1,797 8x8 images, pixel values 0..16, UCI's
optical recognition of handwritten digits) to digits.npz with a fixed split.

Run once: pip install scikit-learn && python3 digits.py
The examples read the committed digits.npz (CI needs no Python packages).
"""
import numpy as np
from sklearn.datasets import load_digits

d = load_digits()
x = d.data.astype(np.uint8)       # [1797, 64], 0..16
y = d.target.astype(np.uint8)     # [1797], 0..9
order = np.random.default_rng(0).permutation(len(y))
x, y = x[order], y[order]
n_test = 360
np.savez(
    "digits.npz",
    x_train=x[n_test:], y_train=y[n_test:], x_test=x[:n_test], y_test=y[:n_test],
)
print("train", len(y) - n_test, "test", n_test)
