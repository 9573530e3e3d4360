"""Goldens for wmx::fft: numpy's np.fft on seeded inputs (computed in float64 /
complex128 from the float32 values recorded here), and numpy's complex64 .npy
files for wmx's file tests.

Run: python3 numpy_fft.py > numpy_fft.txt   (needs numpy 2.x; CI reads the
output and the .npy files only)

Lines are `name|shape|values` (row-major float64 reprs); a complex array is
recorded as its (real, imaginary) pairs: shape [..., 2].
"""
import os

import numpy as np

out = []


def rec(name, a):
    a = np.asarray(a)
    if np.iscomplexobj(a):
        a = np.stack([a.real, a.imag], axis=-1)
    a = a.astype(np.float64)
    shape = ",".join(str(d) for d in a.shape)
    out.append(f"{name}|{shape}|" + ",".join(repr(float(v)) for v in a.reshape(-1)))


rng = np.random.default_rng(40)


def cplx(*shape):
    re = rng.standard_normal(shape).astype(np.float32)
    im = rng.standard_normal(shape).astype(np.float32)
    return re.astype(np.float64) + 1j * im.astype(np.float64)


def real(*shape):
    return rng.standard_normal(shape).astype(np.float32).astype(np.float64)


a = cplx(3, 30)
rec("a", a)
rec("fft_a_ortho", np.fft.fft(a, norm="ortho"))
rec("ifft_a_n45_axis0", np.fft.ifft(a, n=45, axis=0))
b = cplx(2, 97)
rec("b", b)
rec("ifft_b", np.fft.ifft(b))
rec("fft_b_n64_forward", np.fft.fft(b, n=64, norm="forward"))
r = real(2, 100)
rec("r", r)
rec("rfft_r", np.fft.rfft(r))
rec("rfft_r_n63", np.fft.rfft(r, n=63))
h = cplx(2, 5)
rec("h", h)
rec("irfft_h", np.fft.irfft(h))
rec("irfft_h_n9_ortho", np.fft.irfft(h, n=9, norm="ortho"))
c = cplx(6, 10)
rec("c", c)
rec("fft2_c_s4_12", np.fft.fft2(c, s=(4, 12)))
d = real(3, 4, 5)
rec("d", d)
rec("rfftn_d", np.fft.rfftn(d))
rec("irfftn_rfftn_d", np.fft.irfftn(np.fft.rfftn(d), s=(3, 4, 5), axes=(0, 1, 2)))
e = cplx(4, 3, 6)
rec("e", e)
rec("ifftn_e_axes02_forward", np.fft.ifftn(e, axes=(0, 2), norm="forward"))
print("\n".join(out))

# complex64 files: element k is f(k) + 2 f(11 - k) i, f(k) = (k - 5.5) / 4.
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "numpy")
f = (np.arange(12) - 5.5) / 4
z = (f + 2j * f[::-1]).astype(np.complex64)
np.save(os.path.join(here, "complex64.npy"), z.reshape(3, 4))
np.save(os.path.join(here, "complex64_big_endian.npy"), z.astype(">c8"))
