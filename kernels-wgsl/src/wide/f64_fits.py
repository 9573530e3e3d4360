"""Chebyshev fits of g(x) = erfc(x) exp(x^2) for f64.wgsl's erfc_large.

Run: python3 f64_fits.py > fits.wgsl (needs mpmath), then paste the functions at
the end of f64.wgsl. Each fit is a polynomial in t in [-1, 1] (x mapped linearly
onto its interval); the tail fits g(x) x in u = 1/x. Prints the largest relative
error of each fit (on 2000 points) as a comment.
"""
import mpmath as mp

mp.mp.dps = 50


def g(x):
    return mp.erfc(x) * mp.exp(x * x)


def fit(name, f, deg):
    poly = mp.chebyfit(f, [-1, 1], deg)
    err = max(abs((mp.polyval(poly, t) - f(t)) / f(t)) for t in mp.linspace(-1, 1, 2000))
    lines = [f"// Relative error of the fit {float(err):.1e}.", f"fn {name}(t: f64) -> f64 {{"]
    lines.append(f"    var p = {float(poly[0]):.17e}lf;")
    for c in poly[1:]:
        lines.append(f"    p = fma(p, t, {float(c):.17e}lf);")
    lines.append("    return p;")
    lines.append("}")
    print("\n".join(lines))


def on(a, b):
    a, b = mp.mpf(a), mp.mpf(b)
    return lambda t: g((b - a) / 2 * t + (a + b) / 2)


fit("erfc_g1", on(1, 2), 17)
fit("erfc_g2", on(2, 3.5), 19)
fit("erfc_g3", on(3.5, 6), 19)
ua, ub = mp.mpf(1) / 27, mp.mpf(1) / 6
fit("erfc_g4", lambda t: g(1 / ((ub - ua) / 2 * t + (ua + ub) / 2)) / ((ub - ua) / 2 * t + (ua + ub) / 2), 14)
