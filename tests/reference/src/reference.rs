//! An independent reference of every op, from `docs/SEMANTICS.md`: integers
//! exactly in i128 (then wrapped), floats in f64 (the caller rounds to the output
//! dtype and compares with the tolerance of [`crate::tol`]).
//!
//! Ops are looked up by name, so an op added to core without a reference here
//! fails the suite ("no reference for …") instead of going untested.

use crate::tol::Class;
use crate::val::{Val, promote, to_float, wrap};
use wmx_spec::DType;

/// The dtype rule of an elementwise op (restated from SEMANTICS.md, by name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Output of the (promoted) input dtype.
    Same,
    /// Inputs to float first (ints and bool → f32).
    Float,
    /// Output bool, inputs promoted.
    Compare,
    /// Output bool, nonzero is true.
    Logical,
    /// Integers and bool only.
    Bitwise,
    /// Float predicate, output bool (false for integers).
    Predicate,
}

/// The rule of a unary op by name.
pub fn unary_rule(name: &str) -> Rule {
    match name {
        "negative" | "abs" | "sign" | "square" | "floor" | "ceil" | "round" => Rule::Same,
        "sqrt" | "rsqrt" | "cbrt" | "exp" | "expm1" | "log" | "log1p" | "log2" | "sin" | "cos"
        | "tan" | "tanh" | "sigmoid" | "erf" | "erfinv" => Rule::Float,
        "logical_not" => Rule::Logical,
        "isnan" | "isinf" => Rule::Predicate,
        _ => {
            panic!("no reference for unary op {name:?}: add it to tests/reference/src/reference.rs")
        }
    }
}

/// The rule of a binary op by name.
pub fn binary_rule(name: &str) -> Rule {
    match name {
        "add" | "subtract" | "multiply" | "floor_divide" | "remainder" | "power" | "maximum"
        | "minimum" => Rule::Same,
        "divide" | "arctan2" | "hypot" => Rule::Float,
        "equal" | "not_equal" | "less" | "less_equal" | "greater" | "greater_equal" => {
            Rule::Compare
        }
        "logical_and" | "logical_or" => Rule::Logical,
        "bitwise_and" | "bitwise_or" | "bitwise_xor" | "left_shift" | "right_shift" => {
            Rule::Bitwise
        }
        _ => panic!(
            "no reference for binary op {name:?}: add it to tests/reference/src/reference.rs"
        ),
    }
}

/// (dtype the input is converted to, output dtype) of a unary op.
pub fn unary_dtypes(name: &str, x: DType) -> (DType, DType) {
    match unary_rule(name) {
        Rule::Same => (x, x),
        Rule::Float => (to_float(x), to_float(x)),
        Rule::Logical | Rule::Predicate | Rule::Compare => (x, DType::Bool),
        Rule::Bitwise => unreachable!(),
    }
}

/// (dtype both inputs are converted to, output dtype) of a binary op, or `None`
/// when the op is undefined for the dtypes (bitwise on floats).
pub fn binary_dtypes(name: &str, a: DType, b: DType) -> Option<(DType, DType)> {
    let c = promote(a, b);
    Some(match binary_rule(name) {
        Rule::Same => (c, c),
        Rule::Float => (to_float(c), to_float(c)),
        Rule::Compare | Rule::Logical | Rule::Predicate => (c, DType::Bool),
        Rule::Bitwise if c.is_float() => return None,
        Rule::Bitwise => (c, c),
    })
}

/// The accuracy class of an elementwise op by name.
pub fn class_of(name: &str) -> Class {
    match name {
        "add" | "subtract" | "multiply" | "square" | "remainder" => Class::Arith,
        "divide" | "floor_divide" | "sqrt" | "rsqrt" | "hypot" => Class::Divide,
        "exp" | "expm1" | "log" | "log1p" | "log2" | "sin" | "cos" | "tan" | "tanh" | "sigmoid"
        | "erf" | "erfinv" | "arctan2" | "cbrt" => Class::Transcendental,
        "power" => Class::Power,
        _ => Class::Exact,
    }
}

/// Where a unary op's derivative is sampled: where it is finite and its f32
/// computation well conditioned.
pub fn unary_domain(name: &str) -> (f64, f64) {
    match name {
        "sqrt" | "rsqrt" | "log" | "log2" => (0.3, 4.0),
        "log1p" => (-0.6, 3.0),
        "tan" => (-1.2, 1.2),
        "erf" => (-2.5, 2.5),
        "erfinv" => (-0.9, 0.9),
        _ => (-3.0, 3.0),
    }
}

/// The derivative of `f` at `x` by central differences in f64, or `None` where
/// `f` is not smooth within about 1e-3 of `x` (a kink, a jump, a pole, NaN), so
/// tests sample elsewhere: steps of 1e-6 and 1e-3 (relative to `max(|x|, 1)`)
/// must agree to 1e-4.
pub fn derivative(f: impl Fn(f64) -> f64, x: f64) -> Option<f64> {
    let s = x.abs().max(1.0);
    let d = |h: f64| (f(x + h * s) - f(x - h * s)) / (2.0 * h * s);
    let (fine, coarse) = (d(1e-6), d(1e-3));
    let smooth = fine.is_finite()
        && coarse.is_finite()
        && (fine - coarse).abs() <= 1e-4 * fine.abs().max(1.0);
    smooth.then_some(fine)
}

fn b(x: bool) -> Val {
    Val::I(x as i128)
}

/// Unary op on `x` (already of the op's input dtype `dt`); floats unrounded.
pub fn unary(name: &str, dt: DType, x: Val) -> Val {
    match (x, unary_rule(name)) {
        (_, Rule::Logical) => b(!x.nonzero()),
        (Val::I(_), Rule::Predicate) => b(false),
        (Val::F(v), Rule::Predicate) => b(match name {
            "isnan" => v.is_nan(),
            _ => v.is_infinite(),
        }),
        (Val::I(i), _) => Val::I(wrap(
            dt,
            match name {
                "negative" if dt == DType::Bool => i,
                "abs" if dt == DType::Bool => i,
                "negative" => -i,
                "abs" => i.abs(),
                "sign" => i.signum(),
                // Wrapped mod 2^128: the same low 64 bits.
                "square" => i.wrapping_mul(i),
                "floor" | "ceil" | "round" => i,
                _ => panic!("unary {name} on integer {dt}: the op should promote to float"),
            },
        )),
        (Val::F(v), _) => Val::F(match name {
            "negative" => -v,
            "abs" => v.abs(),
            "sign" => {
                if v > 0.0 {
                    1.0
                } else if v < 0.0 {
                    -1.0
                } else {
                    v // ±0 and NaN kept
                }
            }
            "square" => v * v,
            "floor" => v.floor(),
            "ceil" => v.ceil(),
            "round" => v.round_ties_even(),
            "sqrt" => v.sqrt(),
            "rsqrt" => 1.0 / v.sqrt(),
            "cbrt" => v.cbrt(),
            "exp" => v.exp(),
            "expm1" => v.exp_m1(),
            "log" => v.ln(),
            "log1p" => v.ln_1p(),
            "log2" => v.log2(),
            "sin" => v.sin(),
            "cos" => v.cos(),
            "tan" => v.tan(),
            "tanh" => v.tanh(),
            // e^x / (1 + e^x) below 0: 1 / (1 + e^-x) would underflow to 0 early.
            "sigmoid" if v < 0.0 => v.exp() / (1.0 + v.exp()),
            "sigmoid" => 1.0 / (1.0 + (-v).exp()),
            "erf" => erf(v),
            "erfinv" => erfinv(v),
            _ => unreachable!("{name}"),
        }),
    }
}

/// Binary op on `a`, `b` (already of the op's input dtype `dt`); floats unrounded.
pub fn binary(name: &str, dt: DType, a: Val, bv: Val) -> Val {
    let rule = binary_rule(name);
    if rule == Rule::Logical {
        return b(match name {
            "logical_and" => a.nonzero() && bv.nonzero(),
            _ => a.nonzero() || bv.nonzero(),
        });
    }
    match (a, bv) {
        (Val::I(x), Val::I(y)) => {
            if rule == Rule::Compare {
                return b(compare(name, x.cmp(&y) as i8 as f64, false));
            }
            Val::I(wrap(
                dt,
                match name {
                    "add" => x + y,
                    "subtract" => x - y,
                    // Wrapped mod 2^128: the same low 64 bits.
                    "multiply" => x.wrapping_mul(y),
                    "floor_divide" => {
                        if y == 0 {
                            0
                        } else {
                            let q = x / y;
                            if x % y != 0 && ((x < 0) != (y < 0)) {
                                q - 1
                            } else {
                                q
                            }
                        }
                    }
                    "remainder" => {
                        if y == 0 {
                            0
                        } else {
                            let r = x % y;
                            if r != 0 && ((r < 0) != (y < 0)) {
                                r + y
                            } else {
                                r
                            }
                        }
                    }
                    "power" => int_pow(dt, x, y),
                    "maximum" => x.max(y),
                    "minimum" => x.min(y),
                    "bitwise_and" => x & y,
                    "bitwise_or" => x | y,
                    "bitwise_xor" => x ^ y,
                    "left_shift" | "right_shift" => shift(name, dt, x, y),
                    _ => panic!("binary {name} on integer {dt}: should have promoted to float"),
                },
            ))
        }
        (Val::F(x), Val::F(y)) => {
            if rule == Rule::Compare {
                let ord = x.partial_cmp(&y).map(|o| o as i8 as f64);
                return b(compare(name, ord.unwrap_or(f64::NAN), true));
            }
            Val::F(match name {
                "add" => x + y,
                "subtract" => x - y,
                "multiply" => x * y,
                "divide" => x / y,
                // Computed on the quotient rounded to the compute type (f32, or f64).
                "floor_divide" if dt == DType::F64 => (x / y).floor(),
                "floor_divide" => ((x / y) as f32 as f64).floor(),
                "remainder" => {
                    let r = x % y;
                    if r == 0.0 {
                        0.0f64.copysign(y)
                    } else if (r < 0.0) != (y < 0.0) {
                        r + y
                    } else {
                        r
                    }
                }
                "power" => x.powf(y),
                "maximum" if x.is_nan() || y.is_nan() => f64::NAN,
                "minimum" if x.is_nan() || y.is_nan() => f64::NAN,
                "maximum" => x.max(y),
                "minimum" => x.min(y),
                "arctan2" => x.atan2(y),
                "hypot" => x.hypot(y),
                _ => panic!("binary {name} on float {dt}"),
            })
        }
        _ => panic!("mixed values {a:?} {bv:?} for {name}"),
    }
}

/// `ord` is -1/0/1, or NaN when unordered.
fn compare(name: &str, ord: f64, _float: bool) -> bool {
    if ord.is_nan() {
        return name == "not_equal";
    }
    match name {
        "equal" => ord == 0.0,
        "not_equal" => ord != 0.0,
        "less" => ord < 0.0,
        "less_equal" => ord <= 0.0,
        "greater" => ord > 0.0,
        "greater_equal" => ord >= 0.0,
        _ => unreachable!(),
    }
}

/// numpy's shifts of `x` by `y` in `dt`: past the bit width (or by a negative
/// amount) a left shift gives 0 and a right shift 0 or -1 (the sign); a right
/// shift of a signed value is arithmetic. bool shifts its 0/1 as i32 (`!= 0`
/// after).
pub fn shift(name: &str, dt: DType, x: i128, y: i128) -> i128 {
    let bits = match dt {
        DType::Bool => 32,
        d => 8 * d.size() as i128,
    };
    let in_range = (0..bits).contains(&y);
    if name == "left_shift" {
        if in_range { x << y } else { 0 }
    } else if in_range {
        x >> y
    } else if x < 0 {
        -1
    } else {
        0
    }
}

/// Integer power: by squaring, wrapping in `dt`; negative exponents give 0 unless
/// the base is 1 or −1.
pub fn int_pow(dt: DType, x: i128, y: i128) -> i128 {
    if y < 0 {
        return match x {
            1 => 1,
            -1 => {
                if y % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut acc, mut base, mut e) = (1i128, wrap(dt, x), y);
    while e > 0 {
        if e & 1 == 1 {
            acc = wrap(dt, acc.wrapping_mul(base));
        }
        base = wrap(dt, base.wrapping_mul(base));
        e >>= 1;
    }
    acc
}

/// The inverse of [`erf`] by bisection (NaN outside [-1, 1], ±inf at ±1): slow and
/// independent of any approximation of erfinv.
pub fn erfinv(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 1.0 {
        return f64::NAN;
    }
    if x.abs() == 1.0 {
        return x * f64::INFINITY;
    }
    // Past 1/2, bisect on erfc(y) against 1 - |x| (exact there): erf's own
    // rounding near 1 would leave y uncertain by 2^-53 / erf'(y).
    let a = x.abs();
    let (mut lo, mut hi) = (0.0f64, 30.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        let below = if a > 0.5 {
            erfc_pos(mid) > 1.0 - a
        } else {
            erf(mid) < a
        };
        if below {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if x == 0.0 {
        x
    } else {
        (0.5 * (lo + hi)).copysign(x)
    }
}

/// erfc(a) for a >= 0 to a few ulps: 1 - erf in double-double below 3, the
/// continued fraction above.
fn erfc_pos(a: f64) -> f64 {
    if a < 3.0 {
        let e = erf_dd(a);
        dd::add((1.0, 0.0), (-e.0, -e.1)).0
    } else {
        erfc_cf(a)
    }
}

/// erfc(a), a >= 3: exp(-a^2)/sqrt(pi) * 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))).
fn erfc_cf(a: f64) -> f64 {
    let mut f = a;
    for k in (1..120).rev() {
        f = a + (k as f64 / 2.0) / f;
    }
    // exp(-a^2) with a^2's rounding carried.
    let h = a * a;
    let l = a.mul_add(a, -h);
    let e = (-h).exp();
    e.mul_add(-l, e) / (std::f64::consts::PI.sqrt() * f)
}

/// erf(a) for 0 <= a < 3 in double-double: the Maclaurin series.
fn erf_dd(a: f64) -> dd::Dd {
    // erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
    let a2 = dd::mul((a, 0.0), (a, 0.0));
    let mut term = (a, 0.0); // (-1)^n x^(2n+1)/n!
    let mut sum = (a, 0.0);
    for k in 1..200 {
        let n = k as f64;
        term = dd::div(dd::mul(term, (-a2.0, -a2.1)), n);
        let t = dd::div(term, 2.0 * n + 1.0);
        sum = dd::add(sum, t);
        if t.0.abs() <= 1e-34 * sum.0.abs() {
            break;
        }
    }
    dd::mul(
        sum,
        (std::f64::consts::FRAC_2_SQRT_PI, 1.533545961316588e-17),
    )
}

/// The error function to about 1e-17: the Maclaurin series in double-double
/// arithmetic below 3 (the series' cancellation costs up to 2^8 there, far
/// inside double-double's 2^-104), a continued fraction for erfc above.
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 3.0 {
        erf_dd(a).0
    } else if a > 6.0 {
        1.0
    } else {
        1.0 - erfc_cf(a)
    };
    if x < 0.0 { -r } else { r }
}

/// Double-double arithmetic (hi, lo) for [`erf`].
mod dd {
    pub type Dd = (f64, f64);
    fn two_sum(a: f64, b: f64) -> Dd {
        let s = a + b;
        let v = s - a;
        (s, (a - (s - v)) + (b - v))
    }
    fn norm(h: f64, l: f64) -> Dd {
        let s = h + l;
        (s, l - (s - h))
    }
    pub fn add(a: Dd, b: Dd) -> Dd {
        let (s, e) = two_sum(a.0, b.0);
        norm(s, e + a.1 + b.1)
    }
    pub fn mul(a: Dd, b: Dd) -> Dd {
        let p = a.0 * b.0;
        let e = a.0.mul_add(b.0, -p) + (a.0 * b.1 + a.1 * b.0);
        norm(p, e)
    }
    pub fn div(a: Dd, d: f64) -> Dd {
        let q = a.0 / d;
        let p = q * d;
        let pe = q.mul_add(d, -p);
        let r = ((a.0 - p) - pe) + a.1;
        norm(q, r / d)
    }
}

/// Output dtype of a reduction (SEMANTICS.md table), by name.
pub fn reduce_dtype(name: &str, x: DType) -> DType {
    match name {
        "sum" | "prod" => match x {
            DType::Bool | DType::U8 | DType::U32 => DType::U32,
            d => d,
        },
        "max" | "min" => x,
        "all" | "any" => DType::Bool,
        _ => panic!(
            "no reference for reduction {name:?}: add it to tests/reference/src/reference.rs"
        ),
    }
}

/// A reduction of `xs` (values of dtype `dt`), output of [`reduce_dtype`];
/// floats accumulate exactly enough in f64; `None` when undefined (max of empty).
pub fn reduce(name: &str, dt: DType, xs: &[Val]) -> Option<Val> {
    let out = reduce_dtype(name, dt);
    Some(match name {
        "all" => b(xs.iter().all(|v| v.nonzero())),
        "any" => b(xs.iter().any(|v| v.nonzero())),
        _ if dt.is_float() => {
            let fs = xs.iter().map(|v| v.f());
            Val::F(match name {
                "sum" => fs.sum(),
                "prod" => fs.product(),
                "max" | "min" => {
                    let mut it = fs;
                    let mut acc = it.next()?;
                    for v in it {
                        if acc.is_nan() || v.is_nan() {
                            acc = f64::NAN;
                        } else if (name == "max" && v > acc) || (name == "min" && v < acc) {
                            acc = v;
                        }
                    }
                    acc
                }
                _ => unreachable!(),
            })
        }
        _ => {
            let is = xs.iter().map(|v| v.as_int());
            Val::I(match name {
                "sum" => wrap(out, is.fold(0, |a, v| wrap(out, a + v))),
                "prod" => is.fold(1, |a, v| wrap(out, a * v)),
                "max" => is.max()?,
                "min" => is.min()?,
                _ => unreachable!(),
            })
        }
    })
}

/// Index of the extreme (first NaN wins, then the first extreme); `None` if empty.
pub fn arg_reduce(name: &str, xs: &[Val]) -> Option<usize> {
    if xs.is_empty() {
        return None;
    }
    if let Some(i) = xs.iter().position(|v| v.f().is_nan()) {
        return Some(i);
    }
    let mut best = 0;
    for (i, v) in xs.iter().enumerate() {
        let ord = match (v, &xs[best]) {
            (Val::I(a), Val::I(b)) => a.partial_cmp(b),
            (a, b) => a.f().partial_cmp(&b.f()),
        };
        let better = match name {
            "argmax" => ord == Some(std::cmp::Ordering::Greater),
            _ => ord == Some(std::cmp::Ordering::Less),
        };
        if better {
            best = i;
        }
    }
    Some(best)
}

/// Mixed-dtype helper: the promoted input dtype of a binary op on `a`, `b`.
pub fn binary_input_dtype(name: &str, a: DType, b: DType) -> Option<DType> {
    binary_dtypes(name, a, b).map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_reference_values() {
        // Values from Abramowitz & Stegun table 7.1 / high-precision tables.
        for (x, want) in [
            (0.0, 0.0),
            (0.1, 0.1124629160182849),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (2.5, 0.999_593_047_982_555),
            (3.0, 0.9999779095030014),
            (4.0, 0.9999999845827421),
        ] {
            let got = erf(x);
            assert!((got - want).abs() < 1e-14, "erf({x}) = {got}, want {want}");
            assert_eq!(erf(-x), -got);
        }
    }
}
