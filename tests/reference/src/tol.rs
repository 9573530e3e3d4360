//! Tolerances (the one table) and comparison of results with the reference.
//!
//! A float result `got` matches the exact reference `want` when
//! - `want` is NaN and `got` is NaN; or
//! - `got == round(want)` (the reference rounded to the output dtype; ±0 equal,
//!   ±inf must match exactly); or
//! - `got` and `want` are finite and `|got − want| ≤ ulps · ulp(want) + abs`.
//!
//! Integers and bool always match exactly. An f32 or bf16 result whose reference is in
//! f32's subnormal range may be zero: WGSL allows flushing f32 subnormals (bf16 is
//! computed in f32), and NVIDIA's Vulkan driver does.
//!
//! | class | ops | f32 | f16, bf16 | f64 |
//! |---|---|---|---|---|
//! | `Exact` | moves, casts, compares, neg/abs/sign/floor/ceil/round, max/min, where | 0 | 0 | 0 |
//! | `Arith` | add, subtract, multiply, square, remainder, axpby | 1 ulp | 1 ulp (f32 compute, then rounding) | 1 ulp |
//! | `Divide` | divide, floor_divide, rsqrt, sqrt | 3 ulp | 1 ulp | 3 ulp |
//! | `Transcendental` | exp, expm1, log, log1p, log2, sin, cos, tan, tanh, sigmoid, erf, erfinv, arctan2 | 4 ulp + 2^-21 abs | 1 ulp + 2^-21 abs | 4 ulp + 2^-50 abs |
//! | `Power` | power | 8 ulp + 1 ulp per unit of \|log2 result\| | 1 ulp | as f32 |
//! | `Composite` | mean, var, logsumexp (several rounded steps) | 8 ulp + 1e-6·scale | 3 ulp + 2^-11·scale (f16) / 2^-8·scale (bf16) | 8 ulp + 1e-14·scale |
//! | `Sum` | sum, prod (any order of accumulation) | 1 ulp + 1e-5·Σ\|x\| | 1 ulp + 2^-20·Σ\|x\| (f32 accumulation) | 1 ulp + 1e-14·Σ\|x\| |
//!
//! `power` may be `exp2(y·log2 x)` (the WGSL spec allows it): rounding `y·log2 x`
//! to f32 alone costs about 0.7·|log2 result| ulp, hence the log term.
//!
//! `scale` is the magnitude of the inputs the result is computed from (e.g.
//! `max|x|` for logsumexp, `mean(x²)` for var); the cases pass it as `abs`.

pub use crate::reference::class_of;
use crate::val::{Val, round_to, ulp};
use wmx_spec::DType;

/// How accurate an op must be (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Bit-exact after rounding the reference to the output dtype.
    Exact,
    /// One correctly rounded arithmetic step (two for half types).
    Arith,
    /// Division and square roots (WGSL allows 2.5 ulp).
    Divide,
    /// Library functions.
    Transcendental,
    /// `power` (often `exp2(y·log2 x)` on GPUs).
    Power,
    /// Ops built from several rounded steps.
    Composite,
    /// Accumulations.
    Sum,
}

/// A tolerance: `ulps` of the output dtype at the reference value, plus `abs`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tol {
    /// Units in the last place of the output dtype.
    pub ulps: f64,
    /// Absolute slack.
    pub abs: f64,
    /// Extra ulps per unit of |log2| of the reference (for `power`).
    pub log_ulps: f64,
}

impl Tol {
    /// Bit-exact (after rounding the reference).
    pub const EXACT: Tol = Tol {
        ulps: 0.0,
        abs: 0.0,
        log_ulps: 0.0,
    };

    /// The table entry for `class` and output `dt`; `scale` is the magnitude the
    /// `Composite` and `Sum` classes are relative to (0 for the others).
    pub fn of(class: Class, dt: DType, scale: f64) -> Tol {
        if !dt.is_float() {
            return Tol::EXACT;
        }
        if dt == DType::F64 {
            return Self::of_f64(class, scale);
        }
        let half = dt != DType::F32;
        let half_eps = if dt == DType::F16 {
            2f64.powi(-11)
        } else {
            2f64.powi(-8)
        };
        let (ulps, abs) = match (class, half) {
            (Class::Exact, _) => (0.0, 0.0),
            (Class::Arith, _) => (1.0, 0.0),
            (Class::Divide, false) => (3.0, 0.0),
            (Class::Divide, true) => (1.0, 0.0),
            (Class::Transcendental, false) => (4.0, 2f64.powi(-21)),
            (Class::Transcendental, true) => (1.0, 2f64.powi(-21)),
            (Class::Power, false) => (8.0, 0.0),
            (Class::Power, true) => (1.0, 0.0),
            (Class::Composite, false) => (8.0, 1e-6 * scale),
            (Class::Composite, true) => (3.0, half_eps * scale),
            (Class::Sum, false) => (1.0, 1e-5 * scale),
            (Class::Sum, true) => (1.0, 2f64.powi(-20) * scale),
        };
        let log_ulps = if class == Class::Power && !half {
            1.0
        } else {
            0.0
        };
        Tol {
            ulps,
            abs,
            log_ulps,
        }
    }
}

impl Tol {
    /// The f64 column: f32's ulps (GPUs compute f64 library functions in software,
    /// wmx's own in `f64.wgsl`), absolute slack scaled to f64.
    fn of_f64(class: Class, scale: f64) -> Tol {
        let (ulps, abs, log_ulps) = match class {
            Class::Exact => (0.0, 0.0, 0.0),
            Class::Arith => (1.0, 0.0, 0.0),
            Class::Divide => (3.0, 0.0, 0.0),
            Class::Transcendental => (4.0, 2f64.powi(-50), 0.0),
            Class::Power => (8.0, 0.0, 1.0),
            Class::Composite => (8.0, 1e-14 * scale, 0.0),
            Class::Sum => (1.0, 1e-14 * scale, 0.0),
        };
        Tol {
            ulps,
            abs,
            log_ulps,
        }
    }
}

/// Whether `got` (a value of `dt`) matches the exact reference `want`.
pub fn matches(got: Val, want: Val, dt: DType, tol: Tol) -> bool {
    match (got, want) {
        (Val::I(g), Val::I(w)) => g == w,
        (Val::F(g), Val::F(w)) => {
            if w.is_nan() {
                return g.is_nan();
            }
            if g.is_nan() {
                return false;
            }
            let wr = round_to(dt, w);
            if g == wr {
                return true;
            }
            // WGSL lets f32 results in the subnormal range flush to zero (NVIDIA's
            // Vulkan driver does).
            let f32_range = matches!(dt, DType::F32 | DType::BF16);
            if f32_range && g == 0.0 && wr.abs() < f32::MIN_POSITIVE as f64 {
                return true;
            }
            if g.is_infinite() || w.is_infinite() {
                return false;
            }
            // A reference that overflows in `dt` still has a finite exact value.
            let ulps = tol.ulps + tol.log_ulps * w.abs().log2().abs();
            (g - w).abs() <= ulps * ulp(dt, w) + tol.abs
        }
        (Val::F(g), Val::I(w)) => g == w as f64,
        (Val::I(_), Val::F(_)) => false,
    }
}

/// Panics at the first element where `got` differs from `want`; `what` names the
/// case, `input` describes element `i`'s inputs.
pub fn assert_close(
    what: &str,
    dt: DType,
    got: &[Val],
    want: &[Val],
    tol: Tol,
    input: &dyn Fn(usize) -> String,
) {
    assert_close_with(what, dt, got, want, &|_| tol, input)
}

/// [`assert_close`] with a tolerance per element.
pub fn assert_close_with(
    what: &str,
    dt: DType,
    got: &[Val],
    want: &[Val],
    tol: &dyn Fn(usize) -> Tol,
    input: &dyn Fn(usize) -> String,
) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: got {} elements, want {}",
        got.len(),
        want.len()
    );
    let mut bad = Vec::new();
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if !matches(g, w, dt, tol(i)) {
            bad.push(i);
        }
    }
    if let Some(&i) = bad.first() {
        let shown: Vec<String> = bad
            .iter()
            .take(5)
            .map(|&i| {
                let wr = match want[i] {
                    Val::F(w) => format!(" (rounded {:e})", round_to(dt, w)),
                    _ => String::new(),
                };
                format!(
                    "  [{i}] inputs {}: got {}, want {}{wr}",
                    input(i),
                    got[i],
                    want[i]
                )
            })
            .collect();
        panic!(
            "{what}: {} of {} elements of dtype {dt} differ (tolerance {:?}); first at {i}:\n{}",
            bad.len(),
            got.len(),
            tol(i),
            shown.join("\n")
        );
    }
}

/// [`assert_close`] with exact comparison and the sign of zero checked too.
pub fn assert_same(what: &str, got: &[Val], want: &[Val], input: &dyn Fn(usize) -> String) {
    assert_eq!(got.len(), want.len(), "{what}: element counts differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.same(w),
            "{what}: element {i} (inputs {}): got {g:?}, want {w:?} (exact, sign of zero included)",
            input(i)
        );
    }
}
