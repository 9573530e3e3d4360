//! The conformance cases. Each `pub fn name(dev: &Device)` is a whole test body:
//! it creates its inputs on `dev`, runs ops through the public API, reads the
//! results and compares them with the independent reference, panicking with a
//! precise message on a mismatch. Dtypes the device does not support are checked
//! to fail with an error naming the dtype.

use crate::host::HostArr;
use crate::reference::{self as r, binary_dtypes, unary_dtypes};
use crate::rng::{Domain, Rng, edge_values, values, with_edges};
use crate::tol::{Class, Tol, assert_close, assert_close_with, assert_same, class_of};
use crate::val::{Val, cast, make_ok, promote, read_ok, round_to, to_float};
use wmx_core::{self as wmx, Array, BinaryOp, DType, Device, ReduceOp, Result, UnaryOp};

/// A case: its name and its body.
pub type Case = (&'static str, fn(&Device));

// The case files' modules, `ALL` and `for_each_case!` (written by `build.rs`).
include!(concat!(env!("OUT_DIR"), "/cases.rs"));

// ------------------------------------------------------------------ helpers

/// True when `dev` holds and computes `dt`.
pub fn supported(dev: &Device, dt: DType) -> bool {
    dev.check_dtype(dt).is_ok()
}

/// Unwraps, panicking with `what` and the error.
pub fn ok<T>(what: &str, r: Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: unexpected error: {e}"))
}

/// Asserts `r` is an error whose message contains every `needle`.
pub fn expect_err<T>(what: &str, r: Result<T>, needles: &[&str]) {
    match r {
        Ok(_) => panic!("{what}: expected an error mentioning {needles:?}, got Ok"),
        Err(e) => {
            let msg = e.to_string();
            for n in needles {
                assert!(
                    msg.contains(n),
                    "{what}: error message {msg:?} does not mention {n:?}"
                );
            }
        }
    }
}

/// For a dtype `dev` lacks: creating an array of it must fail naming the dtype.
pub fn check_unsupported(dev: &Device, dt: DType) {
    let vals = edge_values(dt);
    expect_err(
        &format!("from_slice of {dt} on {dev}"),
        crate::val::make(dev, dt, &vals, &[vals.len()]),
        &[dt.name()],
    );
    expect_err(
        &format!("zeros of {dt} on {dev}"),
        wmx::with_device(dev, || wmx::zeros(&[3], dt)),
        &[dt.name()],
    );
}

fn show(vals: &[&[Val]], i: usize) -> String {
    vals.iter()
        .map(|v| v[i].to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads `a`, checks its dtype and shape, returns the elements.
fn read_checked(what: &str, a: &Array, dt: DType, shape: &[usize]) -> Vec<Val> {
    assert_eq!(a.dtype(), dt, "{what}: output dtype");
    assert_eq!(a.shape(), shape, "{what}: output shape");
    assert_eq!(a.device(), a.device(), "{what}");
    read_ok(a, what)
}

fn tiny_exp(dt: DType) -> i128 {
    if dt == DType::F16 { 12 } else { 20 }
}

/// Inputs of a unary op on `dt`: edges (only moderate ones for library functions)
/// and random values in the op's natural domain, with some tiny values.
fn unary_inputs(rng: &mut Rng, name: &str, dt: DType, n: usize) -> Vec<Val> {
    let lib = matches!(
        class_of(name),
        Class::Transcendental | Class::Power | Class::Divide
    );
    let mut v: Vec<Val> = edge_values(dt)
        .into_iter()
        .filter(|x| !lib || !x.f().is_finite() || x.f().abs() <= 7.0)
        .collect();
    while v.len() < n {
        let x = if !dt.is_float() {
            if lib {
                crate::rng::value(rng, dt, Domain::SmallInt(100))
            } else {
                crate::rng::value(rng, dt, Domain::Any)
            }
        } else if lib && rng.chance(0.25) {
            let s = if rng.chance(0.5) { -1.0 } else { 1.0 };
            let e = rng.int_in(1, tiny_exp(dt)) as i32;
            Val::F(round_to(dt, s * rng.uniform(1.0, 2.0) * 2f64.powi(-e)))
        } else {
            let x = match name {
                "exp" | "expm1" => rng.uniform(-10.0, 10.0),
                "log" | "log2" | "sqrt" | "rsqrt" => 2f64.powf(rng.uniform(-10.0, 10.0)),
                "log1p" => rng.uniform(-0.99, 100.0),
                "sin" | "cos" => rng.uniform(-10.0, 10.0),
                "tan" => rng.uniform(-1.5, 1.5),
                "tanh" | "sigmoid" | "erf" => rng.uniform(-8.0, 8.0),
                // Near ±1 (the tails) a third of the time.
                "erfinv" if rng.chance(0.35) => {
                    let s = if rng.chance(0.5) { -1.0 } else { 1.0 };
                    s * (1.0 - 2f64.powf(-rng.uniform(1.0, 24.0)))
                }
                "erfinv" => rng.uniform(-1.0, 1.0),
                _ => return_any(rng, dt),
            };
            Val::F(round_to(dt, x))
        };
        v.push(x);
    }
    v
}

fn return_any(rng: &mut Rng, dt: DType) -> f64 {
    crate::rng::value(rng, dt, Domain::Any).f()
}

/// Pairs of inputs of a binary op on (`da`, `db`): every pair of edge values and
/// `extra` random pairs.
fn binary_inputs(
    rng: &mut Rng,
    name: &str,
    da: DType,
    db: DType,
    extra: usize,
) -> (Vec<Val>, Vec<Val>) {
    let lib = class_of(name) == Class::Transcendental;
    let edges = |d: DType| -> Vec<Val> {
        edge_values(d)
            .into_iter()
            .filter(|x| !lib || !x.f().is_finite() || x.f().abs() <= 7.0)
            .collect()
    };
    let (ea, eb) = (edges(da), edges(db));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for x in &ea {
        for y in &eb {
            a.push(*x);
            b.push(*y);
        }
    }
    for _ in 0..extra {
        if name == "power" {
            // Bases of every size, exponents small enough to matter.
            a.push(crate::rng::value(rng, da, Domain::Range(-10.0, 10.0)));
            b.push(crate::rng::value(rng, db, Domain::SmallInt(12)));
            a.push(crate::rng::value(rng, da, Domain::Any));
            b.push(crate::rng::value(rng, db, Domain::Range(-3.0, 3.0)));
        } else if name.ends_with("_shift") {
            // Amounts around every bit width, negative ones too.
            a.push(crate::rng::value(rng, da, Domain::Any));
            b.push(crate::rng::value(rng, db, Domain::Range(-2.0, 70.0)));
        } else if lib {
            a.push(crate::rng::value(rng, da, Domain::Range(-100.0, 100.0)));
            b.push(crate::rng::value(rng, db, Domain::Range(-100.0, 100.0)));
        } else {
            a.push(crate::rng::value(rng, da, Domain::Any));
            b.push(crate::rng::value(rng, db, Domain::Any));
        }
    }
    (a, b)
}

fn f(x: f64) -> Val {
    Val::F(x)
}

fn ints(xs: &[i128]) -> Vec<Val> {
    xs.iter().map(|&i| Val::I(i)).collect()
}

fn reduce_tol(name: &str, dt: DType, xs: &[Val]) -> Tol {
    match name {
        "sum" => Tol::of(Class::Sum, dt, xs.iter().map(|v| v.f().abs()).sum()),
        "prod" if matches!(dt, DType::F32 | DType::F64) => Tol {
            ulps: xs.len() as f64 + 1.0,
            abs: 0.0,
            log_ulps: 0.0,
        },
        "prod" => Tol::of(Class::Sum, dt, 0.0),
        _ => Tol::EXACT,
    }
}

fn axes_usize(axes: Option<&[isize]>, nd: usize) -> Vec<usize> {
    match axes {
        None => (0..nd).collect(),
        Some(a) => a
            .iter()
            .map(|&x| {
                if x < 0 {
                    (x + nd as isize) as usize
                } else {
                    x as usize
                }
            })
            .collect(),
    }
}

fn keep_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    (0..shape.len())
        .filter_map(|d| {
            if axes.contains(&d) {
                keepdims.then_some(1)
            } else {
                Some(shape[d])
            }
        })
        .collect()
}
