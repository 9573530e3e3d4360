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

/// Every case with its name (the same list as [`crate::conformance_tests!`]).
pub const ALL: &[Case] = crate::for_each_case!(list);

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

// ------------------------------------------------------------------ creation

/// from_slice / from_vec / from_bytes_on and reading back, every dtype, several shapes.
pub fn creation_from_slice_round_trip(dev: &Device) {
    let mut rng = Rng::new(1);
    for dt in DType::ALL {
        if !supported(dev, dt) {
            check_unsupported(dev, dt);
            continue;
        }
        for shape in [vec![], vec![0], vec![7], vec![2, 3, 4], vec![1, 1, 40]] {
            let n: usize = shape.iter().product();
            let vals = with_edges(&mut rng, dt, n, Domain::Any);
            let a = make_ok(dev, dt, &vals, &shape);
            assert_eq!(a.device(), dev, "array created on {dev}");
            assert!(a.is_evaluated(), "data arrays are evaluated");
            let got = read_checked(&format!("round trip {dt} {shape:?}"), &a, dt, &shape);
            assert_same(&format!("round trip {dt} {shape:?}"), &got, &vals, &|i| {
                show(&[&vals], i)
            });
            assert_eq!(a.nbytes(), n * dt.size());
            let bytes = ok("to_bytes", a.to_bytes());
            let b = ok(
                "from_bytes_on",
                Array::from_bytes_on(bytes.clone(), &shape, dt, dev),
            );
            assert_eq!(ok("to_bytes", b.to_bytes()), bytes, "bytes round trip {dt}");
        }
    }
    let a = ok(
        "from_vec",
        wmx::with_device(dev, || Array::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[3, 2])),
    );
    assert_eq!(a.device(), dev);
    assert_eq!(ok("to_vec", a.to_vec::<i32>()), vec![1, 2, 3, 4, 5, 6]);
    let f = ok("to_vec_f64", a.to_vec_f64());
    assert_eq!(f, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

/// `wmx::scalar`, `Array::scalar`, item.
pub fn creation_scalar(dev: &Device) {
    for dt in DType::ALL {
        if !supported(dev, dt) {
            continue;
        }
        for v in [0.0, -1.0, 2.5, 300.0, f64::NAN] {
            let a = ok("scalar", wmx::with_device(dev, || wmx::scalar(v, dt)));
            assert_eq!(a.device(), dev);
            let want = cast(Val::F(v), dt);
            let got = read_checked(&format!("scalar({v}, {dt})"), &a, dt, &[]);
            assert_same(&format!("scalar({v}, {dt})"), &got, &[want], &|_| {
                v.to_string()
            });
        }
    }
    let a = ok(
        "Array::scalar",
        wmx::with_device(dev, || Array::scalar(3.5f32)),
    );
    assert_eq!((a.shape(), a.ndim(), a.size()), (&[][..], 0, 1));
    assert_eq!(ok("item", a.item::<f32>()), 3.5);
    let b = ok(
        "Array::scalar",
        wmx::with_device(dev, || Array::scalar(true)),
    );
    assert!(ok("item", b.item::<bool>()));
}

/// zeros / ones / full with values that must be cast (truncation, saturation,
/// NaN → 0, f16 overflow → inf).
pub fn creation_full_zeros_ones(dev: &Device) {
    for dt in DType::ALL {
        if !supported(dev, dt) {
            continue;
        }
        for shape in [vec![], vec![0], vec![5], vec![2, 3]] {
            let n: usize = shape.iter().product();
            let z = ok("zeros", wmx::with_device(dev, || wmx::zeros(&shape, dt)));
            let o = ok("ones", wmx::with_device(dev, || wmx::ones(&shape, dt)));
            assert_eq!(z.device(), dev);
            for (a, v) in [(z, 0.0), (o, 1.0)] {
                let got = read_checked("zeros/ones", &a, dt, &shape);
                assert_same("zeros/ones", &got, &vec![cast(Val::F(v), dt); n], &|_| {
                    format!("{v} as {dt}")
                });
            }
        }
        for v in [
            2.7,
            -1.0,
            -3.9,
            f64::NAN,
            70000.0,
            65519.0,
            1e10,
            -1e10,
            -0.0,
            0.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            255.5,
        ] {
            let a = ok("full", wmx::with_device(dev, || wmx::full(&[2, 2], v, dt)));
            let got = read_checked(&format!("full({v}, {dt})"), &a, dt, &[2, 2]);
            assert_same(
                &format!("full(value {v}) as {dt}"),
                &got,
                &[cast(Val::F(v), dt); 4],
                &|_| v.to_string(),
            );
        }
    }
}

/// arange: positive, negative and fractional steps, empty ranges, int dtypes, errors.
pub fn creation_arange(dev: &Device) {
    let cases: &[(f64, f64, f64)] = &[
        (0.0, 10.0, 1.0),
        (5.0, 0.0, -1.0),
        (0.0, 1.0, 0.1),
        (0.0, 0.0, 1.0),
        (3.0, 1.0, 1.0),
        (1.0, 3.0, -1.0),
        (-1.0, -10.0, -2.5),
        (0.5, 3.0, 1.0),
        (-3.0, 3.0, 0.75),
        (0.0, 2050.0, 1.0),
        (0.0, 300.0, 7.0),
    ];
    for &(start, stop, step) in cases {
        let n = ((stop - start) / step).ceil().max(0.0) as usize;
        for dt in DType::ALL {
            if !supported(dev, dt) {
                continue;
            }
            let what = format!("arange({start}, {stop}, {step}, {dt})");
            let a = ok(
                &what,
                wmx::with_device(dev, || wmx::arange(start, stop, step, dt)),
            );
            let got = read_checked(&what, &a, dt, &[n]);
            let want: Vec<Val> = (0..n)
                .map(|i| cast(Val::F(start + i as f64 * step), dt))
                .collect();
            assert_close(
                &what,
                dt,
                &got,
                &want,
                Tol::of(Class::Arith, dt, 0.0),
                &|i| format!("i={i}"),
            );
        }
    }
    for (start, stop, step) in [
        (0.0, 5.0, 0.0),
        (0.0, f64::NAN, 1.0),
        (0.0, 1.0, f64::INFINITY),
    ] {
        expect_err(
            "arange with a bad step",
            wmx::with_device(dev, || wmx::arange(start, stop, step, DType::F32)),
            &[&format!("step={step}")],
        );
    }
}

/// linspace: endpoints included, num 0 and 1, descending, integer dtypes.
pub fn creation_linspace(dev: &Device) {
    for (start, stop, num) in [
        (0.0, 1.0, 5usize),
        (1.0, 0.0, 3),
        (2.0, 7.0, 0),
        (2.0, 7.0, 1),
        (0.0, 10.0, 11),
        (-1.0, 1.0, 100),
    ] {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::I32] {
            if !supported(dev, dt) {
                continue;
            }
            let what = format!("linspace({start}, {stop}, {num}, {dt})");
            let a = ok(
                &what,
                wmx::with_device(dev, || wmx::linspace(start, stop, num, dt)),
            );
            let got = read_checked(&what, &a, dt, &[num]);
            let want: Vec<Val> = (0..num)
                .map(|i| {
                    let v = if i + 1 == num && num > 1 {
                        stop
                    } else {
                        start + i as f64 * (stop - start) / (num.max(2) - 1) as f64
                    };
                    cast(Val::F(v), dt)
                })
                .collect();
            assert_close(
                &what,
                dt,
                &got,
                &want,
                // GPUs compute start + i·step in f32: the product's rounding is
                // relative to the range's magnitude, not to the (possibly smaller) result.
                Tol {
                    abs: if dt.is_float() {
                        crate::val::ulp(dt, start.abs().max(stop.abs()))
                    } else {
                        0.0
                    },
                    ..Tol::of(Class::Arith, dt, 0.0)
                },
                &|i| format!("i={i}"),
            );
        }
    }
}

/// eye for every dtype, n = 0, 1, 4.
pub fn creation_eye(dev: &Device) {
    for dt in DType::ALL {
        if !supported(dev, dt) {
            continue;
        }
        for n in [0usize, 1, 4] {
            let a = ok("eye", wmx::with_device(dev, || wmx::eye(n, dt)));
            let got = read_checked(&format!("eye({n}, {dt})"), &a, dt, &[n, n]);
            let want = HostArr::from_fn(&[n, n], |i| cast(Val::I((i[0] == i[1]) as i128), dt));
            assert_same(&format!("eye({n}, {dt})"), &got, &want.data, &|i| {
                format!("flat index {i}")
            });
        }
    }
}

// ------------------------------------------------------------------ elementwise

/// Every unary op (from `UnaryOp::ALL`) on every dtype: output dtype rule and
/// values against the reference.
pub fn unary_all_ops_all_dtypes(dev: &Device) {
    let mut rng = Rng::new(2);
    for &op in UnaryOp::ALL {
        let name = op.name();
        for dt in DType::ALL {
            if !supported(dev, dt) {
                continue;
            }
            let (in_dt, out_dt) = unary_dtypes(name, dt);
            let xs = unary_inputs(&mut rng, name, dt, 200);
            let x = make_ok(dev, dt, &xs, &[xs.len()]);
            let what = format!("{name}({dt})");
            if !supported(dev, out_dt) || !supported(dev, in_dt) {
                expect_err(&what, wmx::unary(op, &x), &[out_dt.name()]);
                continue;
            }
            let y = ok(&what, wmx::unary(op, &x));
            let got = read_checked(&what, &y, out_dt, &[xs.len()]);
            let want: Vec<Val> = xs
                .iter()
                .map(|&v| r::unary(name, in_dt, cast(v, in_dt)))
                .collect();
            assert_close(
                &what,
                out_dt,
                &got,
                &want,
                Tol::of(class_of(name), out_dt, 0.0),
                &|i| show(&[&xs], i),
            );
        }
    }
}

fn f(x: f64) -> Val {
    Val::F(x)
}

/// Special values with exact expected results (sign of zero included).
pub fn unary_special_values(dev: &Device) {
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    #[rustfmt::skip]
    let table: &[(&str, f64, f64)] = &[
        ("sqrt", -0.0, -0.0), ("sqrt", -1.0, nan), ("sqrt", inf, inf), ("sqrt", 4.0, 2.0),
        ("rsqrt", 0.0, inf), ("rsqrt", -0.0, -inf), ("rsqrt", inf, 0.0), ("rsqrt", 4.0, 0.5),
        ("exp", -inf, 0.0), ("exp", inf, inf), ("exp", 0.0, 1.0), ("exp", nan, nan),
        ("expm1", -inf, -1.0), ("expm1", -0.0, -0.0), ("expm1", 0.0, 0.0),
        ("log", 0.0, -inf), ("log", -0.0, -inf), ("log", -1.0, nan), ("log", 1.0, 0.0), ("log", inf, inf),
        ("log1p", -1.0, -inf), ("log1p", -0.0, -0.0), ("log1p", -2.0, nan),
        ("log2", 8.0, 3.0), ("log2", 0.0, -inf), ("log2", 0.5, -1.0),
        ("sin", -0.0, -0.0), ("sin", inf, nan), ("cos", 0.0, 1.0), ("cos", -inf, nan),
        ("tan", -0.0, -0.0), ("tanh", inf, 1.0), ("tanh", -inf, -1.0), ("tanh", -0.0, -0.0),
        ("sigmoid", -inf, 0.0), ("sigmoid", inf, 1.0), ("sigmoid", 0.0, 0.5),
        ("erf", inf, 1.0), ("erf", -inf, -1.0), ("erf", -0.0, -0.0), ("erf", nan, nan),
        ("floor", -0.5, -1.0), ("floor", -0.0, -0.0), ("floor", 2.5, 2.0), ("floor", -inf, -inf),
        ("ceil", -0.5, -0.0), ("ceil", 0.25, 1.0), ("ceil", nan, nan),
        ("round", 0.5, 0.0), ("round", 1.5, 2.0), ("round", 2.5, 2.0), ("round", -2.5, -2.0),
        ("round", -0.5, -0.0), ("round", 3.5, 4.0), ("round", -3.75, -4.0),
        ("sign", -0.0, -0.0), ("sign", 0.0, 0.0), ("sign", nan, nan), ("sign", -3.0, -1.0),
        ("sign", inf, 1.0), ("abs", -0.0, 0.0), ("abs", -inf, inf), ("abs", nan, nan),
        ("negative", 0.0, -0.0), ("negative", -0.0, 0.0), ("negative", inf, -inf),
        ("square", -3.0, 9.0), ("square", -inf, inf),
        ("isnan", nan, 1.0), ("isnan", inf, 0.0), ("isinf", -inf, 1.0), ("isinf", nan, 0.0),
        ("logical_not", nan, 0.0), ("logical_not", -0.0, 1.0), ("logical_not", 0.25, 0.0),
    ];
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        if !supported(dev, dt) {
            continue;
        }
        for &(name, x, want) in table {
            let op = *UnaryOp::ALL
                .iter()
                .find(|o| o.name() == name)
                .unwrap_or_else(|| panic!("core has no unary op {name}"));
            let a = make_ok(dev, dt, &[f(x)], &[1]);
            let what = format!("{name}({x}) in {dt}");
            let y = ok(&what, wmx::unary(op, &a));
            let got = read_ok(&y, &what);
            let want = if y.dtype() == DType::Bool {
                Val::I(want as i128)
            } else {
                f(want)
            };
            assert_same(&what, &got, &[want], &|_| x.to_string());
        }
    }
    // Accuracy near 0 ("a few f32 ulps also near 0").
    for (name, x) in [
        ("expm1", 1e-7),
        ("expm1", -3e-9),
        ("log1p", 1e-7),
        ("log1p", -2e-8),
        ("erf", 1e-7),
        ("erf", -1e-30),
        ("sin", 1e-20),
        ("tanh", 3e-6),
    ] {
        let op = *UnaryOp::ALL.iter().find(|o| o.name() == name).unwrap();
        let xv = round_to(DType::F32, x);
        let a = make_ok(dev, DType::F32, &[f(xv)], &[1]);
        let got = read_ok(&ok(name, wmx::unary(op, &a)), name);
        let want = r::unary(name, DType::F32, f(xv));
        assert_close(
            &format!("{name} near 0"),
            DType::F32,
            &got,
            &[want],
            Tol {
                ulps: 4.0,
                abs: 0.0,
                log_ulps: 0.0,
            },
            &|_| xv.to_string(),
        );
    }
    // tanh densely (its kernels select between a series and exp: both sides of the
    // switch at 0.35, the cap at 10, tiny and huge inputs): at most 3 f32 ulps, and
    // 1 ulp of f16/bf16 (their cheaper `tanh_narrow`).
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        if !supported(dev, dt) {
            continue;
        }
        let mut xs: Vec<f64> = (0..40001)
            .map(|i| round_to(dt, -12.0 + 24.0 * i as f64 / 40000.0))
            .collect();
        for e in -40..40 {
            for m in [1.0, 1.3, 1.7] {
                xs.push(round_to(dt, m * 2f64.powi(e)));
            }
        }
        for edge in [0.35f32, 10.0] {
            let b = edge.to_bits();
            xs.extend(
                [b - 2, b - 1, b, b + 1, b + 2].map(|u| round_to(dt, f32::from_bits(u) as f64)),
            );
        }
        let vals: Vec<Val> = xs.iter().map(|&x| f(x)).collect();
        let a = make_ok(dev, dt, &vals, &[vals.len()]);
        let got = read_ok(&ok("tanh sweep", wmx::tanh(&a)), "tanh sweep");
        let want: Vec<Val> = xs.iter().map(|&x| r::unary("tanh", dt, f(x))).collect();
        assert_close(
            &format!("tanh sweep {dt}"),
            dt,
            &got,
            &want,
            Tol {
                // f64: wmx's own tanh on GPUs (f64.wgsl), not a correctly rounded one.
                ulps: if matches!(dt, DType::F32 | DType::F64) {
                    3.0
                } else {
                    1.0
                },
                abs: 0.0,
                log_ulps: 0.0,
            },
            &|i| xs[i].to_string(),
        );
    }
}

/// Every binary op (from `BinaryOp::ALL`) on every pair of dtypes: promotion,
/// output dtype, values (every pair of edge values plus random pairs).
pub fn binary_all_ops_all_dtype_pairs(dev: &Device) {
    let mut rng = Rng::new(3);
    for &op in BinaryOp::ALL {
        let name = op.name();
        for da in DType::ALL {
            for db in DType::ALL {
                if !supported(dev, da) || !supported(dev, db) {
                    continue;
                }
                let extra = if da == db { 150 } else { 30 };
                let (av, bv) = binary_inputs(&mut rng, name, da, db, extra);
                let n = av.len();
                let a = make_ok(dev, da, &av, &[n]);
                let b = make_ok(dev, db, &bv, &[n]);
                let what = format!("{name}({da}, {db})");
                let Some((in_dt, out_dt)) = binary_dtypes(name, da, db) else {
                    expect_err(
                        &what,
                        wmx::binary(op, &a, &b),
                        &[name, promote(da, db).name()],
                    );
                    continue;
                };
                if !supported(dev, in_dt) || !supported(dev, out_dt) {
                    let bad = if supported(dev, in_dt) { out_dt } else { in_dt };
                    expect_err(&what, wmx::binary(op, &a, &b), &[bad.name()]);
                    continue;
                }
                let y = ok(&what, wmx::binary(op, &a, &b));
                let got = read_checked(&what, &y, out_dt, &[n]);
                let want: Vec<Val> = av
                    .iter()
                    .zip(&bv)
                    .map(|(&x, &z)| r::binary(name, in_dt, cast(x, in_dt), cast(z, in_dt)))
                    .collect();
                assert_close(
                    &what,
                    out_dt,
                    &got,
                    &want,
                    Tol::of(class_of(name), out_dt, 0.0),
                    &|i| show(&[&av, &bv], i),
                );
            }
        }
    }
}

fn run_binary(dev: &Device, name: &str, dt: DType, a: &[Val], b: &[Val]) -> (Vec<Val>, DType) {
    let op = *BinaryOp::ALL
        .iter()
        .find(|o| o.name() == name)
        .unwrap_or_else(|| panic!("core has no binary op {name}"));
    let x = make_ok(dev, dt, a, &[a.len()]);
    let y = make_ok(dev, dt, b, &[b.len()]);
    let what = format!("{name} on {dt}");
    let z = ok(&what, wmx::binary(op, &x, &y));
    (read_ok(&z, &what), z.dtype())
}

/// NaN, ±inf, −0 and division edge cases of float binary ops (exact results).
pub fn binary_float_special_values(dev: &Device) {
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    let pi = std::f64::consts::PI;
    #[rustfmt::skip]
    let table: &[(&str, f64, f64, f64)] = &[
        ("maximum", nan, 1.0, nan), ("maximum", 1.0, nan, nan), ("minimum", nan, -inf, nan),
        ("minimum", 2.0, nan, nan), ("maximum", -inf, 3.0, 3.0), ("minimum", -inf, 3.0, -inf),
        ("equal", nan, nan, 0.0), ("not_equal", nan, nan, 1.0), ("less", nan, 1.0, 0.0),
        ("greater_equal", nan, 1.0, 0.0), ("less_equal", 1.0, nan, 0.0), ("greater", inf, nan, 0.0),
        ("equal", 0.0, -0.0, 1.0), ("less", -0.0, 0.0, 0.0), ("less", -inf, inf, 1.0),
        ("remainder", -7.0, 3.0, 2.0), ("remainder", 7.0, -3.0, -2.0), ("remainder", -7.0, -3.0, -1.0),
        ("remainder", 5.5, 2.0, 1.5), ("remainder", 1.0, 0.0, nan), ("remainder", -1.0, -0.0, nan),
        ("remainder", -0.0, 3.0, 0.0), ("remainder", 6.0, 3.0, 0.0), ("remainder", -6.0, 3.0, 0.0),
        ("remainder", 6.0, -3.0, -0.0),
        ("remainder", inf, 3.0, nan), ("remainder", 2.0, inf, 2.0),
        ("floor_divide", -7.0, 2.0, -4.0), ("floor_divide", 7.0, -2.0, -4.0), ("floor_divide", 7.0, 2.0, 3.0),
        ("floor_divide", 1.0, 0.0, inf), ("floor_divide", -1.0, 0.0, -inf), ("floor_divide", 0.0, 0.0, nan),
        ("divide", 1.0, 0.0, inf), ("divide", -1.0, 0.0, -inf), ("divide", 1.0, -0.0, -inf),
        ("divide", 0.0, 0.0, nan), ("divide", inf, inf, nan), ("divide", 1.0, inf, 0.0),
        ("add", inf, -inf, nan), ("add", -0.0, -0.0, -0.0), ("add", -0.0, 0.0, 0.0),
        ("subtract", inf, inf, nan), ("subtract", 0.0, 0.0, 0.0), ("multiply", 0.0, inf, nan),
        ("multiply", -0.0, 5.0, -0.0), ("multiply", -2.0, inf, -inf),
        ("power", 0.0, 0.0, 1.0), ("power", nan, 0.0, 1.0), ("power", 1.0, nan, 1.0),
        ("power", -8.0, 0.5, nan), ("power", 0.0, -1.0, inf), ("power", -2.0, 3.0, -8.0),
        ("power", 2.0, -2.0, 0.25), ("power", -0.5, 2.0, 0.25), ("power", inf, -1.0, 0.0),
        ("arctan2", 0.0, -1.0, pi), ("arctan2", -0.0, -1.0, -pi), ("arctan2", 0.0, 0.0, 0.0),
        ("arctan2", -0.0, 0.0, -0.0), ("arctan2", 1.0, 0.0, pi / 2.0), ("arctan2", nan, 1.0, nan),
        ("logical_and", nan, 1.0, 1.0), ("logical_and", -0.0, 1.0, 0.0), ("logical_or", 0.0, nan, 1.0),
        ("logical_or", 0.0, -0.0, 0.0),
    ];
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        if !supported(dev, dt) {
            continue;
        }
        let nsz = dev.name().contains("NVIDIA");
        for &(name, x, y, want) in table {
            let (got, out) = run_binary(dev, name, dt, &[f(x)], &[f(y)]);
            let want = if out == DType::Bool {
                Val::I(want as i128)
            } else {
                f(round_to(dt, want))
            };
            let what = format!("{name}({x}, {y}) in {dt}");
            if name == "arctan2" && want.f().abs() > 1.0 {
                // π is not representable: within the transcendental tolerance.
                assert_close(
                    &what,
                    out,
                    &got,
                    &[want],
                    Tol::of(Class::Transcendental, out, 0.0),
                    &|_| String::new(),
                );
            } else if want.f() == 0.0 && nsz && name == "remainder" {
                // NVIDIA's Vulkan driver does not keep the sign of a zero result
                // (naga cannot ask it to): the value is checked, not its sign.
                assert!(got[0].f() == 0.0, "{what}: got {}, want 0", got[0]);
            } else {
                assert_same(&what, &got, &[want], &|_| String::new());
            }
        }
    }
    // floor_divide floors the rounded quotient (the CPU's and MLX's rule), also where
    // rounding reaches the next integer (1 / 0.1f = 9.99999985 rounds to 10), and
    // through divisions that are not correctly rounded (NVIDIA's).
    let tenth = 0.1f32 as f64;
    #[rustfmt::skip]
    let quotients: &[(f64, f64, f64)] = &[
        (1.0, tenth, 10.0), (-1.0, tenth, -10.0), (5.0, tenth, 50.0), (7.0, 7.0, 1.0),
        (2155165184.0, 1694.434814453125, 1271908.0), (-2155165184.0, 1694.434814453125, -1271908.0),
    ];
    for &(x, y, want) in quotients {
        let (got, _) = run_binary(dev, "floor_divide", DType::F32, &[Val::F(x)], &[Val::F(y)]);
        let what = format!("floor_divide({x}, {y}) in f32");
        assert_same(&what, &got, &[Val::F(want)], &|_| String::new());
    }
}

fn ints(xs: &[i128]) -> Vec<Val> {
    xs.iter().map(|&i| Val::I(i)).collect()
}

fn check_int_table(dev: &Device, table: &[(&str, DType, i128, i128, Val)]) {
    for &(name, dt, x, y, want) in table {
        if !supported(dev, dt) {
            continue;
        }
        let (got, _) = run_binary(dev, name, dt, &ints(&[x]), &ints(&[y]));
        assert_same(&format!("{name}({x}, {y}) in {dt}"), &got, &[want], &|_| {
            String::new()
        });
    }
}

/// Wrapping add/subtract/multiply/negative/abs/square (two's complement).
pub fn integer_overflow_wraps(dev: &Device) {
    use DType::*;
    let (i32min, i32max) = (i32::MIN as i128, i32::MAX as i128);
    let (i64min, i64max) = (i64::MIN as i128, i64::MAX as i128);
    let i = Val::I;
    check_int_table(
        dev,
        &[
            ("add", I32, i32max, 1, i(i32min)),
            ("subtract", I32, i32min, 1, i(i32max)),
            ("multiply", I32, 65536, 65536, i(0)),
            ("multiply", I32, 46341, 46341, i(-2147479015)),
            ("add", U8, 255, 1, i(0)),
            ("multiply", U8, 16, 17, i(16)),
            ("subtract", U8, 0, 1, i(255)),
            ("subtract", U32, 0, 1, i(u32::MAX as i128)),
            ("add", U32, u32::MAX as i128, 2, i(1)),
            ("add", I64, i64max, 1, i(i64min)),
            ("multiply", I64, 1 << 32, 1 << 32, i(0)),
        ],
    );
    let unary_cases: &[(&str, DType, i128, i128)] = &[
        ("negative", U8, 3, 253),
        ("negative", U32, 1, u32::MAX as i128),
        ("negative", I32, i32min, i32min),
        ("abs", I32, i32min, i32min),
        ("abs", I64, i64min, i64min),
        ("square", I32, 46341, -2147479015),
        ("square", U8, 16, 0),
        ("sign", U8, 200, 1),
        ("sign", I32, i32min, -1),
        ("negative", Bool, 1, 1),
    ];
    for &(name, dt, x, want) in unary_cases {
        if !supported(dev, dt) {
            continue;
        }
        let op = *UnaryOp::ALL.iter().find(|o| o.name() == name).unwrap();
        let a = make_ok(dev, dt, &[Val::I(x)], &[1]);
        let got = read_ok(&ok(name, wmx::unary(op, &a)), name);
        assert_same(
            &format!("{name}({x}) in {dt}"),
            &got,
            &[Val::I(want)],
            &|_| String::new(),
        );
    }
}

/// floor_divide / remainder signs, division by zero, MIN // -1; true division of ints.
pub fn integer_division_and_remainder(dev: &Device) {
    use DType::*;
    let i = Val::I;
    let m = i32::MIN as i128;
    check_int_table(
        dev,
        &[
            ("floor_divide", I32, -7, 2, i(-4)),
            ("floor_divide", I32, 7, -2, i(-4)),
            ("floor_divide", I32, -7, -2, i(3)),
            ("floor_divide", I32, 7, 2, i(3)),
            ("floor_divide", I32, -6, 2, i(-3)),
            ("floor_divide", I32, 5, 0, i(0)),
            ("floor_divide", I32, m, -1, i(m)),
            ("floor_divide", U8, 200, 7, i(28)),
            ("floor_divide", U8, 200, 0, i(0)),
            ("floor_divide", U32, u32::MAX as i128, 2, i(2147483647)),
            (
                "floor_divide",
                I64,
                i64::MIN as i128,
                -1,
                i(i64::MIN as i128),
            ),
            ("floor_divide", I64, -7, 2, i(-4)),
            ("remainder", I32, -7, 3, i(2)),
            ("remainder", I32, 7, -3, i(-2)),
            ("remainder", I32, -7, -3, i(-1)),
            ("remainder", I32, 7, 3, i(1)),
            ("remainder", I32, 7, 0, i(0)),
            ("remainder", I32, m, -1, i(0)),
            ("remainder", U8, 7, 0, i(0)),
            ("remainder", U32, 4000000000, 7, i(4000000000 % 7)),
            ("remainder", I64, -7, 3, i(2)),
        ],
    );
    // True division promotes integers to f32.
    for dt in [I32, U8, U32, I64, Bool] {
        if !supported(dev, dt) {
            continue;
        }
        let (x, y): (Vec<i128>, Vec<i128>) = if dt == Bool {
            (vec![1, 0, 1], vec![0, 0, 1])
        } else if dt.is_unsigned() {
            (vec![1, 0, 7], vec![0, 0, 2])
        } else {
            (vec![1, -1, 0, 7, -7], vec![0, 0, 0, 2, 2])
        };
        let (got, out) = run_binary(dev, "divide", dt, &ints(&x), &ints(&y));
        assert_eq!(out, F32, "divide of {dt} gives f32");
        let want: Vec<Val> = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| f(a as f64 / b as f64))
            .collect();
        assert_same(&format!("divide in {dt}"), &got, &want, &|k| {
            format!("{} / {}", x[k], y[k])
        });
    }
}

/// Integer power: squaring with wrap, negative exponents.
pub fn integer_power(dev: &Device) {
    use DType::*;
    let i = Val::I;
    check_int_table(
        dev,
        &[
            ("power", I32, 3, 4, i(81)),
            ("power", I32, 2, -1, i(0)),
            ("power", I32, 1, -5, i(1)),
            ("power", I32, -1, -3, i(-1)),
            ("power", I32, -1, -2, i(1)),
            ("power", I32, 0, 0, i(1)),
            ("power", I32, 0, -1, i(0)),
            ("power", I32, -2, 3, i(-8)),
            ("power", I32, 2, 31, i(i32::MIN as i128)),
            ("power", I32, 2, 32, i(0)),
            ("power", I32, 3, 21, i(r::int_pow(I32, 3, 21))),
            ("power", U8, 2, 9, i(0)),
            ("power", U8, 3, 5, i(243)),
            ("power", U8, 255, 2, i(1)),
            ("power", U32, 7, 12, i(r::int_pow(U32, 7, 12))),
            ("power", I64, 3, 40, i(r::int_pow(I64, 3, 40))),
            ("power", I64, -1, -7, i(-1)),
        ],
    );
    assert_eq!(r::int_pow(I32, 3, 21), wrap_i32(10460353203));
}

fn wrap_i32(v: i128) -> i128 {
    crate::val::wrap(DType::I32, v)
}

/// Bool inputs compute on 0/1 and store `!= 0`: add is or, multiply is and, …
pub fn bool_arithmetic(dev: &Device) {
    if !supported(dev, DType::Bool) {
        return;
    }
    let a = ints(&[0, 0, 1, 1]);
    let b = ints(&[0, 1, 0, 1]);
    for (name, want) in [
        ("add", [0, 1, 1, 1]),
        ("multiply", [0, 0, 0, 1]),
        ("subtract", [0, 1, 1, 0]),
        ("maximum", [0, 1, 1, 1]),
        ("minimum", [0, 0, 0, 1]),
        ("bitwise_xor", [0, 1, 1, 0]),
        ("bitwise_and", [0, 0, 0, 1]),
        ("bitwise_or", [0, 1, 1, 1]),
        ("logical_and", [0, 0, 0, 1]),
        ("equal", [1, 0, 0, 1]),
        ("less", [0, 1, 0, 0]),
    ] {
        let (got, out) = run_binary(dev, name, DType::Bool, &a, &b);
        assert_eq!(out, DType::Bool, "{name} of bools is bool");
        assert_same(&format!("{name} on bool"), &got, &ints(&want), &|k| {
            show(&[&a, &b], k)
        });
    }
    let x = make_ok(dev, DType::Bool, &ints(&[0, 1]), &[2]);
    for op in [
        UnaryOp::Negative,
        UnaryOp::Abs,
        UnaryOp::Square,
        UnaryOp::Sign,
    ] {
        let y = ok("bool unary", wmx::unary(op, &x));
        assert_eq!(y.dtype(), DType::Bool, "{op} of bool");
        assert_same(
            &format!("{op} on bool"),
            &read_ok(&y, "bool"),
            &ints(&[0, 1]),
            &|_| String::new(),
        );
    }
}

/// f16 / bf16: computed in f32, rounded to nearest even on store; overflow → inf.
pub fn half_precision_rounding(dev: &Device) {
    let e = |k: i32| 2f64.powi(k);
    #[rustfmt::skip]
    let adds: &[(DType, f64, f64, f64)] = &[
        (DType::F16, 1.0, e(-11), 1.0),
        (DType::F16, 1.0, 3.0 * e(-11), 1.0 + e(-9)),
        (DType::F16, 65504.0, 16.0, f64::INFINITY),
        (DType::F16, 65504.0, 15.0, 65504.0),
        (DType::F16, -65504.0, -32.0, f64::NEG_INFINITY),
        (DType::F16, e(-24), e(-24), e(-23)),
        (DType::BF16, 1.0, e(-8), 1.0),
        (DType::BF16, 1.0, 3.0 * e(-8), 1.0 + e(-6)),
        (DType::BF16, 256.0, 1.0, 256.0),
        (DType::BF16, 3.3895313892515355e38, 2.658_455_991_569_832e36, f64::INFINITY),
    ];
    for &(dt, x, y, want) in adds {
        if !supported(dev, dt) {
            continue;
        }
        let (got, _) = run_binary(dev, "add", dt, &[f(x)], &[f(y)]);
        assert_same(&format!("{x} + {y} in {dt}"), &got, &[f(want)], &|_| {
            String::new()
        });
    }
    #[rustfmt::skip]
    let casts: &[(DType, f64, f64)] = &[
        (DType::F16, 65519.0, 65504.0), (DType::F16, 65520.0, f64::INFINITY),
        (DType::F16, -65520.0, f64::NEG_INFINITY), (DType::F16, 1e-8, 0.0),
        (DType::F16, e(-24), e(-24)), (DType::F16, 1.5 * e(-25), e(-24)),
        (DType::F16, f64::NAN, f64::NAN), (DType::F16, -0.0, -0.0), (DType::F16, 2049.0, 2048.0),
        (DType::F16, 2051.0, 2052.0),
        (DType::BF16, 1.0 + e(-8), 1.0), (DType::BF16, 1.0 + 3.0 * e(-8), 1.0 + e(-6)),
        (DType::BF16, f32::MAX as f64, f64::INFINITY), (DType::BF16, f64::NAN, f64::NAN),
        (DType::BF16, 257.0, 256.0), (DType::BF16, 259.0, 260.0),
    ];
    if supported(dev, DType::F32) {
        for &(dt, x, want) in casts {
            if !supported(dev, dt) {
                continue;
            }
            let a = make_ok(dev, DType::F32, &[f(round_to(DType::F32, x))], &[1]);
            let got = read_ok(&ok("astype", a.astype(dt)), "astype");
            assert_same(&format!("f32 {x} as {dt}"), &got, &[f(want)], &|_| {
                String::new()
            });
        }
    }
    // f64 constants (full) round once: just above a tie must round up.
    for (dt, v) in [
        (DType::F16, 1.0 + e(-11) + e(-40)),
        (DType::F16, -(1.0 + e(-11) + e(-30))),
        (DType::BF16, 1.0 + e(-8) + e(-40)),
        (DType::BF16, e(30) + e(22) + e(-10)),
        (DType::F32, 1.0 + e(-24) + e(-60)),
    ] {
        if !supported(dev, dt) {
            continue;
        }
        let a = ok("full", wmx::with_device(dev, || wmx::full(&[1], v, dt)));
        let got = read_ok(&a, "full");
        assert_same(
            &format!("full({v:e}) as {dt}"),
            &got,
            &[cast(f(v), dt)],
            &|_| String::new(),
        );
    }
    // Integers round once (no double rounding through f64 or f32).
    for (dt, x) in [
        (DType::BF16, (1i128 << 30) + (1 << 22) + 1),
        (DType::F32, (1 << 30) + 65),
    ] {
        if supported(dev, DType::I32) && supported(dev, dt) {
            let a = make_ok(dev, DType::I32, &[Val::I(x)], &[1]);
            let got = read_ok(&ok("astype", a.astype(dt)), "astype");
            assert_same(
                &format!("i32 {x} as {dt}"),
                &got,
                &[cast(Val::I(x), dt)],
                &|_| String::new(),
            );
        }
    }
    if supported(dev, DType::I64) {
        for (dt, x) in [
            (DType::F32, (1i128 << 60) + (1 << 36) + 1),
            (DType::BF16, (1i128 << 60) + (1 << 52) + 1),
            (DType::F32, -(1i128 << 62) - (1 << 38) - 1),
            (DType::F16, 65519),
            (DType::F16, 65520),
        ] {
            if !supported(dev, dt) {
                continue;
            }
            let a = make_ok(dev, DType::I64, &[Val::I(x)], &[1]);
            let got = read_ok(&ok("astype", a.astype(dt)), "astype");
            assert_same(
                &format!("i64 {x} as {dt}"),
                &got,
                &[cast(Val::I(x), dt)],
                &|_| String::new(),
            );
        }
    }
}

/// where: cond of any dtype (nonzero and NaN are true), promotion, broadcasting.
pub fn where_select(dev: &Device) {
    let mut rng = Rng::new(4);
    let shapes: &[(&[usize], &[usize], &[usize])] = &[
        (&[3, 4], &[3, 4], &[3, 4]),
        (&[3, 1], &[1, 4], &[]),
        (&[4], &[3, 1], &[3, 4]),
        (&[], &[2, 2], &[2]),
        (&[0, 2], &[2], &[1]),
    ];
    for &(cd, xd, yd) in &[
        (DType::Bool, DType::F32, DType::F32),
        (DType::F32, DType::I32, DType::F32),
        (DType::I32, DType::U8, DType::I32),
        (DType::U8, DType::F16, DType::BF16),
        (DType::Bool, DType::I64, DType::I64),
        (DType::F16, DType::Bool, DType::Bool),
    ] {
        if ![cd, xd, yd, promote(xd, yd)]
            .iter()
            .all(|&d| supported(dev, d))
        {
            continue;
        }
        for &(cs, xs, ys) in shapes {
            let make_host = |rng: &mut Rng, d: DType, s: &[usize]| {
                let n = s.iter().product();
                let dom = if d == cd {
                    Domain::SmallInt(1)
                } else {
                    Domain::Any
                };
                let mut v = values(rng, d, n, dom);
                if d.is_float() && d == cd && n > 1 {
                    v[0] = f(f64::NAN);
                }
                HostArr::new(s, v)
            };
            let (hc, hx, hy) = (
                make_host(&mut rng, cd, cs),
                make_host(&mut rng, xd, xs),
                make_host(&mut rng, yd, ys),
            );
            let c = make_ok(dev, cd, &hc.data, cs);
            let x = make_ok(dev, xd, &hx.data, xs);
            let y = make_ok(dev, yd, &hy.data, ys);
            let what = format!("where({cd}{cs:?}, {xd}{xs:?}, {yd}{ys:?})");
            let out = ok(&what, wmx::where_(&c, &x, &y));
            let shape = bshape(&bshape(cs, xs), ys);
            let dt = promote(xd, yd);
            let got = read_checked(&what, &out, dt, &shape);
            let (bc, bx, by) = (
                hc.broadcast_to(&shape),
                hx.broadcast_to(&shape),
                hy.broadcast_to(&shape),
            );
            let want: Vec<Val> = (0..got.len())
                .map(|k| {
                    if bc.data[k].nonzero() {
                        cast(bx.data[k], dt)
                    } else {
                        cast(by.data[k], dt)
                    }
                })
                .collect();
            assert_same(&what, &got, &want, &|k| {
                show(&[&bc.data, &bx.data, &by.data], k)
            });
        }
    }
}

/// numpy broadcast of two shapes (test-side).
pub fn bshape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let da = if i + a.len() >= n {
                a[i + a.len() - n]
            } else {
                1
            };
            let db = if i + b.len() >= n {
                b[i + b.len() - n]
            } else {
                1
            };
            if da == 1 { db } else { da }
        })
        .collect()
}

/// clip with either bound, broadcasting, NaN propagation and promotion.
pub fn clip_bounds(dev: &Device) {
    let nan = f64::NAN;
    let xs: Vec<Val> = [-3.0, -0.5, 0.0, 0.7, 2.0, 9.0, nan, f64::INFINITY]
        .iter()
        .map(|&v| f(v))
        .collect();
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        if !supported(dev, dt) {
            continue;
        }
        let xs: Vec<Val> = xs.iter().map(|v| f(round_to(dt, v.f()))).collect();
        let x = make_ok(dev, dt, &xs, &[2, 4]);
        let lo = make_ok(dev, dt, &[f(-1.0)], &[]);
        let hi = make_ok(dev, dt, &[f(1.0), f(5.0), f(nan), f(0.0)], &[4]);
        let his = [1.0, 5.0, nan, 0.0];
        let clamp = |v: f64, l: Option<f64>, h: Option<f64>| {
            let mut v = v;
            if let Some(l) = l {
                v = if v.is_nan() || l.is_nan() {
                    nan
                } else {
                    v.max(l)
                };
            }
            if let Some(h) = h {
                v = if v.is_nan() || h.is_nan() {
                    nan
                } else {
                    v.min(h)
                };
            }
            v
        };
        for (l, h) in [(true, true), (true, false), (false, true), (false, false)] {
            let what = format!("clip {dt} lo={l} hi={h}");
            let out = ok(&what, wmx::clip(&x, l.then_some(&lo), h.then_some(&hi)));
            let got = read_checked(&what, &out, dt, &[2, 4]);
            let want: Vec<Val> = (0..8)
                .map(|k| f(clamp(xs[k].f(), l.then_some(-1.0), h.then_some(his[k % 4]))))
                .collect();
            assert_close(&what, dt, &got, &want, Tol::EXACT, &|k| xs[k].to_string());
        }
    }
    if supported(dev, DType::I32) && supported(dev, DType::F32) {
        let x = make_ok(dev, DType::I32, &ints(&[-5, 0, 5, 10]), &[4]);
        let lo = make_ok(dev, DType::F32, &[f(-0.5)], &[]);
        let hi = make_ok(dev, DType::I32, &ints(&[7]), &[1]);
        let out = ok("clip i32/f32", wmx::clip(&x, Some(&lo), Some(&hi)));
        let got = read_checked("clip promotes", &out, DType::F32, &[4]);
        assert_same(
            "clip i32 by f32",
            &got,
            &[f(-0.5), f(0.0), f(5.0), f(7.0)],
            &|_| String::new(),
        );
    }
}

/// astype between every pair of dtypes (SEMANTICS.md casts).
pub fn astype_all_pairs(dev: &Device) {
    let mut rng = Rng::new(5);
    for from in DType::ALL {
        if !supported(dev, from) {
            continue;
        }
        let mut xs = with_edges(&mut rng, from, 120, Domain::Any);
        if from.is_float() {
            // Values around the integer ranges and fractions to truncate.
            for v in [
                255.0,
                255.9,
                256.0,
                -0.9,
                2147483520.0,
                4294967040.0,
                -2147483648.0,
                3e9,
                -3e9,
                1e19,
                -1e19,
                9.2e18,
                1.5,
                -1.5,
                0.999,
            ] {
                xs.push(f(round_to(from, v)));
            }
        }
        let x = make_ok(dev, from, &xs, &[xs.len()]);
        for to in DType::ALL {
            let what = format!("astype {from} -> {to}");
            if !supported(dev, to) {
                expect_err(&what, x.astype(to), &[to.name()]);
                continue;
            }
            let y = ok(&what, x.astype(to));
            let got = read_checked(&what, &y, to, &[xs.len()]);
            let want: Vec<Val> = xs.iter().map(|&v| cast(v, to)).collect();
            assert_same(&what, &got, &want, &|k| xs[k].to_string());
        }
    }
}

/// axpby: ints → f32, f16 stays f16, mixed promotion, broadcasting.
pub fn axpby_dtypes_and_broadcast(dev: &Device) {
    use DType::*;
    let mut rng = Rng::new(6);
    for (dx, dy) in [
        (F32, F32),
        (I32, I32),
        (F16, F16),
        (BF16, BF16),
        (F16, BF16),
        (U8, F16),
        (Bool, Bool),
        (I32, BF16),
        (F32, F16),
    ] {
        if ![dx, dy].iter().all(|&d| supported(dev, d)) {
            continue;
        }
        let out = to_float(promote(dx, dy));
        for (sx, sy) in [
            (vec![7usize], vec![7usize]),
            (vec![3, 1], vec![4]),
            (vec![], vec![2, 3]),
            (vec![0], vec![1]),
        ] {
            for (alpha, beta) in [(2.0, 0.5), (-1.0, 1.0), (0.0, 3.0), (0.1, -0.001)] {
                let hx = HostArr::new(
                    &sx,
                    values(
                        &mut rng,
                        dx,
                        sx.iter().product(),
                        Domain::Range(-50.0, 50.0),
                    ),
                );
                let hy = HostArr::new(
                    &sy,
                    values(
                        &mut rng,
                        dy,
                        sy.iter().product(),
                        Domain::Range(-50.0, 50.0),
                    ),
                );
                let x = make_ok(dev, dx, &hx.data, &sx);
                let y = make_ok(dev, dy, &hy.data, &sy);
                let what = format!("axpby({dx}{sx:?}, {dy}{sy:?}, {alpha}, {beta})");
                let z = ok(&what, wmx::axpby(&x, &y, alpha, beta));
                let shape = bshape(&sx, &sy);
                let got = read_checked(&what, &z, out, &shape);
                let (bx, by) = (hx.broadcast_to(&shape), hy.broadcast_to(&shape));
                let terms: Vec<(f64, f64)> = (0..got.len())
                    .map(|k| {
                        (
                            alpha * cast(bx.data[k], out).f(),
                            beta * cast(by.data[k], out).f(),
                        )
                    })
                    .collect();
                let want: Vec<Val> = terms.iter().map(|&(p, q)| f(p + q)).collect();
                assert_close_with(
                    &what,
                    out,
                    &got,
                    &want,
                    &|k| Tol {
                        ulps: 1.0,
                        abs: 2f64.powi(-22) * (terms[k].0.abs() + terms[k].1.abs()),
                        log_ulps: 0.0,
                    },
                    &|k| show(&[&bx.data, &by.data], k),
                );
            }
        }
    }
}

// ------------------------------------------------------------------ reductions

fn reduce_inputs(rng: &mut Rng, name: &str, dt: DType, n: usize) -> Vec<Val> {
    match (name, dt.is_float()) {
        ("all" | "any", true) => (0..n)
            .map(|_| f(*rng.pick(&[0.0, -0.0, 0.0, f64::NAN, 1.0, 0.5, 0.0])))
            .collect(),
        ("all" | "any", false) => (0..n)
            .map(|_| {
                let v = crate::rng::value(rng, dt, Domain::Any);
                if rng.chance(0.3) { Val::I(0) } else { v }
            })
            .collect(),
        ("prod", true) => (0..n)
            .map(|_| {
                let s = if rng.chance(0.5) { -1.0 } else { 1.0 };
                f(round_to(dt, s * rng.uniform(0.7, 1.4)))
            })
            .collect(),
        ("max" | "min", true) => (0..n)
            .map(|_| {
                if rng.chance(0.03) {
                    f(*rng.pick(&[f64::INFINITY, f64::NEG_INFINITY, -0.0]))
                } else {
                    crate::rng::value(rng, dt, Domain::Any)
                }
            })
            .collect(),
        ("sum", true) => values(rng, dt, n, Domain::Range(-100.0, 100.0)),
        _ => values(rng, dt, n, Domain::Any),
    }
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

/// Every reduction (from `ReduceOp::ALL`) on every dtype over single, several,
/// all and no axes, with and without keepdims, on contiguous and transposed input.
pub fn reductions_all_ops_all_axes(dev: &Device) {
    let mut rng = Rng::new(7);
    let shape = [3usize, 4, 5];
    let axes_list: &[Option<&[isize]>] = &[
        None,
        Some(&[0]),
        Some(&[1]),
        Some(&[2]),
        Some(&[-1]),
        Some(&[0, 2]),
        Some(&[2, 0]),
        Some(&[1, -1]),
        Some(&[0, 1, 2]),
        Some(&[]),
    ];
    for &op in ReduceOp::ALL {
        let name = op.name();
        for dt in DType::ALL {
            if !supported(dev, dt) {
                continue;
            }
            let out_dt = r::reduce_dtype(name, dt);
            let xs = reduce_inputs(&mut rng, name, dt, 60);
            let host = HostArr::new(&shape, xs.clone());
            let base = make_ok(dev, dt, &xs, &shape);
            // Also through a transposed view (host: the same transpose).
            let views = [
                (base.clone(), host.clone(), "contiguous"),
                (
                    ok("transpose", base.transpose(Some(&[2, 0, 1]))),
                    host.transpose(&[2, 0, 1]),
                    "transposed",
                ),
            ];
            for (x, hx, kind) in &views {
                for axes in axes_list {
                    for keepdims in [false, true] {
                        let what = format!(
                            "{name}({dt} {kind} {:?}, axes={axes:?}, keepdims={keepdims})",
                            hx.shape
                        );
                        if !supported(dev, out_dt) {
                            expect_err(
                                &what,
                                wmx::reduce(op, x, *axes, keepdims),
                                &[out_dt.name()],
                            );
                            continue;
                        }
                        let y = ok(&what, wmx::reduce(op, x, *axes, keepdims));
                        let ax = axes_usize(*axes, 3);
                        let (_, want_t) = hx.reduce(&ax, |v| {
                            (r::reduce(name, dt, v).unwrap(), reduce_tol(name, out_dt, v))
                        });
                        let got =
                            read_checked(&what, &y, out_dt, &keep_shape(&hx.shape, &ax, keepdims));
                        let want: Vec<Val> = want_t.iter().map(|w| w.0).collect();
                        assert_close_with(&what, out_dt, &got, &want, &|k| want_t[k].1, &|k| {
                            format!("output {k}")
                        });
                    }
                }
            }
        }
    }
}

/// Empty reductions: sum 0, prod 1, all true, any false, mean NaN, logsumexp −inf,
/// max/min/argmax errors (naming the shape).
pub fn reductions_empty(dev: &Device) {
    for dt in [DType::F32, DType::I32, DType::U8, DType::Bool, DType::F16] {
        if !supported(dev, dt) {
            continue;
        }
        for shape in [vec![0usize], vec![0, 3], vec![2, 0, 2]] {
            let x = make_ok(dev, dt, &[], &shape);
            let what = |s: &str| format!("{s} of empty {dt} {shape:?}");
            for (name, want) in [("sum", 0.0), ("prod", 1.0), ("all", 1.0), ("any", 0.0)] {
                let op = *ReduceOp::ALL.iter().find(|o| o.name() == name).unwrap();
                let y = ok(&what(name), wmx::reduce(op, &x, None, false));
                let out = r::reduce_dtype(name, dt);
                let got = read_checked(&what(name), &y, out, &[]);
                assert_same(&what(name), &got, &[cast(f(want), out)], &|_| String::new());
            }
            let m = ok(&what("mean"), wmx::mean(&x, None, false));
            assert!(read_ok(&m, "mean")[0].f().is_nan(), "{}", what("mean"));
            let l = ok(&what("logsumexp"), wmx::logsumexp(&x, None, false));
            assert_same(
                &what("logsumexp"),
                &read_ok(&l, "lse"),
                &[f(f64::NEG_INFINITY)],
                &|_| String::new(),
            );
            let l = ok(&what("logsumexp"), wmx::logsumexp(&x, Some(&[0]), true));
            let mut ks = shape.clone();
            ks[0] = 1;
            let got = read_checked(&what("logsumexp keepdims"), &l, to_float(dt), &ks);
            assert!(
                got.iter().all(|v| v.f() == f64::NEG_INFINITY),
                "{}",
                what("lse")
            );
            let shape_s = format!("{shape:?}");
            expect_err(&what("max"), wmx::max(&x, None, false), &[&shape_s]);
            let zero = shape.iter().position(|&d| d == 0).unwrap() as isize;
            expect_err(
                &what("min"),
                wmx::min(&x, Some(&[zero]), false),
                &[&shape_s],
            );
            expect_err(&what("argmax"), wmx::argmax(&x, zero, false), &[&shape_s]);
        }
        // Reducing a non-empty axis of an array with an empty other axis: empty result.
        let x = make_ok(dev, dt, &[], &[3, 0]);
        let y = ok(
            "max over the non-empty axis",
            wmx::max(&x, Some(&[0]), false),
        );
        assert_eq!(read_checked("max [3,0] axis 0", &y, dt, &[0]).len(), 0);
        let s = ok("sum axis 1 of [3, 0]", wmx::sum(&x, Some(&[1]), false));
        let out = r::reduce_dtype("sum", dt);
        let got = read_checked("sum axis 1 of [3, 0]", &s, out, &[3]);
        assert_same("sum of empty rows", &got, &[cast(f(0.0), out); 3], &|_| {
            String::new()
        });
    }
}

/// NaN propagation in max/min/sum, ±inf in sums and logsumexp, first NaN wins in argmax.
pub fn reductions_nan_and_inf(dev: &Device) {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        if !supported(dev, dt) {
            continue;
        }
        let rows: &[[f64; 4]] = &[
            [1.0, nan, 3.0, 2.0],
            [nan, 5.0, nan, 1.0],
            [-inf, 2.0, inf, 0.0],
            [-inf, -inf, -inf, -inf],
            [4.0, 4.0, -1.0, 4.0],
            [-0.0, -0.0, -0.0, -0.0],
        ];
        let xs: Vec<Val> = rows.iter().flatten().map(|&v| f(v)).collect();
        let x = make_ok(dev, dt, &xs, &[rows.len(), 4]);
        let host = HostArr::new(&[rows.len(), 4], xs.clone());
        for name in ["max", "min", "sum", "prod", "all", "any"] {
            let op = *ReduceOp::ALL.iter().find(|o| o.name() == name).unwrap();
            let y = ok(name, wmx::reduce(op, &x, Some(&[1]), false));
            let got = read_ok(&y, name);
            let (_, want) = host.reduce(&[1], |v| r::reduce(name, dt, v).unwrap());
            assert_close(
                &format!("{name} rows in {dt}"),
                y.dtype(),
                &got,
                &want,
                Tol::EXACT,
                &|k| format!("{:?}", rows[k]),
            );
        }
        for name in ["argmax", "argmin"] {
            let y = if name == "argmax" {
                wmx::argmax(&x, 1, false)
            } else {
                wmx::argmin(&x, 1, false)
            };
            let y = ok(name, y);
            let got = read_checked(name, &y, DType::U32, &[rows.len()]);
            let (_, want) = host.reduce(&[1], |v| Val::I(r::arg_reduce(name, v).unwrap() as i128));
            assert_same(&format!("{name} rows in {dt}"), &got, &want, &|k| {
                format!("{:?}", rows[k])
            });
        }
        let l = ok("logsumexp", wmx::logsumexp(&x, Some(&[1]), false));
        let got = read_ok(&l, "logsumexp");
        let want = [
            f(nan),
            f(nan),
            f(inf),
            f(-inf),
            f(4.0 + (3.0 + (-5f64).exp()).ln()),
            f(-0.0 + 4f64.ln()),
        ];
        assert_close(
            &format!("logsumexp rows in {dt}"),
            dt,
            &got,
            &want,
            Tol::of(Class::Composite, dt, 4.0),
            &|k| format!("{:?}", rows[k]),
        );
    }
}

/// mean, var (ddof 0, 1, 2) and logsumexp against f64 references, every dtype.
pub fn mean_var_logsumexp(dev: &Device) {
    let mut rng = Rng::new(8);
    let shape = [4usize, 6, 5];
    for dt in DType::ALL {
        if !supported(dev, dt) {
            continue;
        }
        let out = to_float(dt);
        if !supported(dev, out) {
            continue;
        }
        let dom = if dt.is_float() {
            Domain::Range(-8.0, 12.0)
        } else {
            Domain::SmallInt(100)
        };
        let xs = values(&mut rng, dt, 120, dom);
        let host = HostArr::new(&shape, xs.clone());
        let x = make_ok(dev, dt, &xs, &shape);
        for axes in [
            None,
            Some(&[1isize][..]),
            Some(&[0, 2][..]),
            Some(&[-1][..]),
        ] {
            for keepdims in [false, true] {
                let ax = axes_usize(axes, 3);
                let ks = keep_shape(&shape, &ax, keepdims);
                let ctx = format!("{dt} axes={axes:?} keepdims={keepdims}");
                let scale = |v: &[Val]| v.iter().map(|x| x.f().abs()).fold(0.0, f64::max);
                // mean
                let y = ok("mean", wmx::mean(&x, axes, keepdims));
                let got = read_checked(&format!("mean {ctx}"), &y, out, &ks);
                let (_, want) = host.reduce(&ax, |v| {
                    let m = v.iter().map(|x| x.f()).sum::<f64>() / v.len() as f64;
                    (f(m), Tol::of(Class::Composite, out, scale(v)))
                });
                let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                assert_close_with(
                    &format!("mean {ctx}"),
                    out,
                    &got,
                    &w,
                    &|k| want[k].1,
                    &|k| format!("output {k}"),
                );
                // var
                for ddof in [0usize, 1, 2] {
                    let y = ok("var", wmx::var(&x, axes, keepdims, ddof));
                    let got = read_checked(&format!("var ddof={ddof} {ctx}"), &y, out, &ks);
                    let (_, want) = host.reduce(&ax, |v| {
                        let n = v.len() as f64;
                        let m = v.iter().map(|x| x.f()).sum::<f64>() / n;
                        let ss: f64 = v.iter().map(|x| (x.f() - m).powi(2)).sum();
                        let sq = v.iter().map(|x| x.f() * x.f()).sum::<f64>() / n;
                        (
                            f(ss / (n - ddof as f64)),
                            Tol::of(Class::Composite, out, 4.0 * sq),
                        )
                    });
                    let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                    assert_close_with(
                        &format!("var ddof={ddof} {ctx}"),
                        out,
                        &got,
                        &w,
                        &|k| want[k].1,
                        &|k| format!("output {k}"),
                    );
                }
                // logsumexp
                let y = ok("logsumexp", wmx::logsumexp(&x, axes, keepdims));
                let got = read_checked(&format!("logsumexp {ctx}"), &y, out, &ks);
                let (_, want) = host.reduce(&ax, |v| {
                    let m = v.iter().map(|x| x.f()).fold(f64::NEG_INFINITY, f64::max);
                    let s: f64 = v.iter().map(|x| (x.f() - m).exp()).sum();
                    (f(m + s.ln()), Tol::of(Class::Composite, out, scale(v)))
                });
                let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                assert_close_with(
                    &format!("logsumexp {ctx}"),
                    out,
                    &got,
                    &w,
                    &|k| want[k].1,
                    &|k| format!("output {k}"),
                );
            }
        }
    }
}

/// argmax / argmin: ties give the first index, every axis, negative axis, keepdims.
pub fn argmax_argmin(dev: &Device) {
    let mut rng = Rng::new(9);
    let shape = [3usize, 4, 5];
    for dt in DType::ALL {
        if !supported(dev, dt) {
            continue;
        }
        let xs = values(&mut rng, dt, 60, Domain::SmallInt(3));
        let host = HostArr::new(&shape, xs.clone());
        let x = make_ok(dev, dt, &xs, &shape);
        let xt = ok("transpose", x.transpose(Some(&[1, 2, 0])));
        let ht = host.transpose(&[1, 2, 0]);
        for (arr, h, kind) in [(&x, &host, "contiguous"), (&xt, &ht, "transposed")] {
            for axis in [0isize, 1, 2, -1, -3] {
                for keepdims in [false, true] {
                    for name in ["argmax", "argmin"] {
                        let what = format!("{name}({dt} {kind}, axis={axis}, keepdims={keepdims})");
                        let y = if name == "argmax" {
                            wmx::argmax(arr, axis, keepdims)
                        } else {
                            wmx::argmin(arr, axis, keepdims)
                        };
                        let y = ok(&what, y);
                        let ax = axes_usize(Some(&[axis]), 3);
                        let (_, want) =
                            h.reduce(&ax, |v| Val::I(r::arg_reduce(name, v).unwrap() as i128));
                        let got = read_checked(
                            &what,
                            &y,
                            DType::U32,
                            &keep_shape(&h.shape, &ax, keepdims),
                        );
                        assert_same(&what, &got, &want, &|k| format!("output {k}"));
                    }
                }
            }
        }
        // 1-D with the extreme at the end and ties.
        let v = make_ok(dev, dt, &xs[..7], &[7]);
        let got = read_ok(&ok("argmax", wmx::argmax(&v, 0, false)), "argmax");
        assert_same(
            "argmax 1-D",
            &got,
            &[Val::I(r::arg_reduce("argmax", &xs[..7]).unwrap() as i128)],
            &|_| format!("{:?}", &xs[..7]),
        );
    }
}

// ------------------------------------------------------------------ views

/// transpose, broadcast_to, slice (steps, negative steps, clamping), expand_dims,
/// squeeze, and chains of them: values against host index arithmetic.
pub fn views_values(dev: &Device) {
    for dt in [DType::I32, DType::F32, DType::U8, DType::F16] {
        if !supported(dev, dt) {
            continue;
        }
        let base_shape = [4usize, 5, 6];
        let xs: Vec<Val> = (0..120).map(|i| cast(Val::I(i), dt)).collect();
        let host = HostArr::new(&base_shape, xs.clone());
        let x = make_ok(dev, dt, &xs, &base_shape);
        let check = |what: &str, a: Result<Array>, h: HostArr| {
            let a = ok(what, a);
            let got = read_checked(what, &a, dt, &h.shape);
            assert_same(&format!("{what} ({dt})"), &got, &h.data, &|k| {
                format!("flat {k}")
            });
            a
        };
        check(
            "transpose None",
            x.transpose(None),
            host.transpose(&[2, 1, 0]),
        );
        check(
            "transpose [1,0,2]",
            x.transpose(Some(&[1, 0, 2])),
            host.transpose(&[1, 0, 2]),
        );
        check(
            "transpose [-1,0,1]",
            x.transpose(Some(&[-1, 0, 1])),
            host.transpose(&[2, 0, 1]),
        );
        check("t()", x.t(), host.transpose(&[2, 1, 0]));
        type S = (Option<isize>, Option<isize>, isize);
        let slices: &[&[S]] = &[
            &[(Some(1), Some(4), 2)],
            &[(None, None, -1)],
            &[(None, None, 1), (Some(-2), None, -3), (Some(1), Some(5), 2)],
            &[(Some(3), Some(0), -1), (None, None, 2), (None, None, -2)],
            &[(Some(-100), Some(100), 1), (Some(10), Some(-10), 1)],
            &[(Some(2), Some(2), 1)],
            &[(None, None, 5), (Some(4), Some(-1), -1)],
            &[
                (Some(-1), None, -1),
                (Some(0), Some(5), 4),
                (Some(5), Some(0), -5),
            ],
        ];
        for s in slices {
            let spec: Vec<wmx::Slice> = s
                .iter()
                .map(|&(a, b, c)| wmx::Slice::new(a, b, c))
                .collect();
            let v = check(&format!("slice {s:?}"), x.slice(&spec), host.slice(s));
            // A slice of the slice, and a transposed slice.
            let hv = host.slice(s);
            if hv.data.len() > 1 {
                let sp2 = [wmx::Slice::new(None, None, -1)];
                check(
                    &format!("slice {s:?} then ::-1"),
                    v.slice(&sp2),
                    hv.slice(&[(None, None, -1)]),
                );
                check(
                    &format!("slice {s:?} then transpose"),
                    v.t(),
                    hv.transpose(&[2, 1, 0]),
                );
            }
        }
        check(
            "Slice::reversed / range / ALL",
            x.slice(&[
                wmx::Slice::ALL,
                wmx::Slice::reversed(),
                wmx::Slice::range(1, 3),
            ]),
            host.slice(&[(None, None, 1), (None, None, -1), (Some(1), Some(3), 1)]),
        );
        let col = make_ok(dev, dt, &xs[..5], &[5, 1]);
        let hcol = HostArr::new(&[5, 1], xs[..5].to_vec());
        check(
            "broadcast [5,1]->[3,5,4]",
            col.broadcast_to(&[3, 5, 4]),
            hcol.broadcast_to(&[3, 5, 4]),
        );
        let s0 = make_ok(dev, dt, &xs[7..8], &[]);
        check(
            "broadcast []->[2,3]",
            s0.broadcast_to(&[2, 3]),
            HostArr::new(&[], xs[7..8].to_vec()).broadcast_to(&[2, 3]),
        );
        check(
            "broadcast [5,1]->[0,5,4]",
            col.broadcast_to(&[0, 5, 4]),
            hcol.broadcast_to(&[0, 5, 4]),
        );
        let b = ok("broadcast", col.broadcast_to(&[3, 5, 4]));
        check(
            "slice of broadcast",
            b.slice(&[wmx::Slice::new(None, None, -2), wmx::Slice::range(1, 4)]),
            hcol.broadcast_to(&[3, 5, 4])
                .slice(&[(None, None, -2), (Some(1), Some(4), 1)]),
        );
        check(
            "transpose of broadcast",
            b.transpose(Some(&[2, 0, 1])),
            hcol.broadcast_to(&[3, 5, 4]).transpose(&[2, 0, 1]),
        );
        for (axis, shape) in [
            (0isize, vec![1, 4, 5, 6]),
            (-1, vec![4, 5, 6, 1]),
            (2, vec![4, 5, 1, 6]),
        ] {
            check(
                &format!("expand_dims {axis}"),
                wmx::expand_dims(&x, axis),
                host.reshape(&shape),
            );
        }
        let e = ok("expand", wmx::expand_dims(&col, 0));
        let he = HostArr::new(&[1, 5, 1], xs[..5].to_vec());
        check("squeeze None", wmx::squeeze(&e, None), he.reshape(&[5]));
        check(
            "squeeze [0]",
            wmx::squeeze(&e, Some(&[0])),
            he.reshape(&[5, 1]),
        );
        check(
            "squeeze [-1]",
            wmx::squeeze(&e, Some(&[-1])),
            he.reshape(&[1, 5]),
        );
        // squeeze/expand_dims of a reversed view keep the reversed order.
        let rv = ok("rev", col.slice(&[wmx::Slice::reversed()]));
        let hrv = hcol.slice(&[(None, None, -1)]);
        check(
            "squeeze of reversed",
            wmx::squeeze(&rv, None),
            hrv.reshape(&[5]),
        );
        let sq = ok("sq", wmx::squeeze(&rv, None));
        check(
            "expand_dims of reversed",
            wmx::expand_dims(&sq, 0),
            hrv.reshape(&[1, 5]),
        );
    }
}

/// reshape: views of contiguous data and copies of non-viewable layouts, -1 inference.
pub fn reshape_view_and_copy(dev: &Device) {
    let dt = DType::I32;
    if !supported(dev, dt) {
        return;
    }
    let xs: Vec<Val> = (0..120).map(Val::I).collect();
    let host = HostArr::new(&[4, 5, 6], xs.clone());
    let x = make_ok(dev, dt, &xs, &[4, 5, 6]);
    let check = |what: &str, a: Result<Array>, h: HostArr| {
        let a = ok(what, a);
        let got = read_checked(what, &a, dt, &h.shape);
        assert_same(what, &got, &h.data, &|k| format!("flat {k}"));
        a
    };
    check("reshape [120]", x.reshape(&[120]), host.reshape(&[120]));
    check(
        "reshape [-1, 6]",
        x.reshape(&[-1, 6]),
        host.reshape(&[20, 6]),
    );
    check(
        "reshape [2, -1, 3, 4]",
        x.reshape(&[2, -1, 3, 4]),
        host.reshape(&[2, 5, 3, 4]),
    );
    check(
        "reshape [1, 120, 1]",
        x.reshape(&[1, 120, 1]),
        host.reshape(&[1, 120, 1]),
    );
    // Transposed: must copy.
    let t = ok("t", x.t());
    let ht = host.transpose(&[2, 1, 0]);
    check("transposed -> [120]", t.reshape(&[120]), ht.reshape(&[120]));
    check(
        "transposed -> [6, 20]",
        t.reshape(&[6, 20]),
        ht.reshape(&[6, 20]),
    );
    check(
        "transposed -> [3, 2, 5, 4]",
        t.reshape(&[3, 2, 5, 4]),
        ht.reshape(&[3, 2, 5, 4]),
    );
    // Sliced (outer dims): viewable split; inner step: needs copy.
    let s = ok("slice", x.slice(&[wmx::Slice::range(1, 3)]));
    let hs = host.slice(&[(Some(1), Some(3), 1)]);
    check(
        "slice -> [2, 30]",
        s.reshape(&[2, 30]),
        hs.reshape(&[2, 30]),
    );
    check("slice -> [-1]", s.reshape(&[-1]), hs.reshape(&[60]));
    let s2 = ok(
        "slice step",
        x.slice(&[
            wmx::Slice::ALL,
            wmx::Slice::ALL,
            wmx::Slice::new(None, None, -2),
        ]),
    );
    let hs2 = host.slice(&[(None, None, 1), (None, None, 1), (None, None, -2)]);
    check(
        "neg-step -> [4, 15]",
        s2.reshape(&[4, 15]),
        hs2.reshape(&[4, 15]),
    );
    check(
        "neg-step -> [20, 3]",
        s2.reshape(&[20, 3]),
        hs2.reshape(&[20, 3]),
    );
    // Broadcast: copy when merging a zero-stride dim.
    let col = make_ok(dev, dt, &xs[..3], &[3, 1]);
    let b = ok("b", col.broadcast_to(&[3, 4]));
    let hb = HostArr::new(&[3, 1], xs[..3].to_vec()).broadcast_to(&[3, 4]);
    check("broadcast -> [12]", b.reshape(&[12]), hb.reshape(&[12]));
    check(
        "broadcast -> [3, 2, 2]",
        b.reshape(&[3, 2, 2]),
        hb.reshape(&[3, 2, 2]),
    );
    // Round trip and empty / scalar.
    let rt = ok("rt", t.reshape(&[-1]).and_then(|a| a.reshape(&[6, 5, 4])));
    check("round trip", Ok(rt), ht.clone());
    let e = make_ok(dev, dt, &[], &[0, 3]);
    check(
        "empty -> [3, 0]",
        e.reshape(&[3, 0]),
        HostArr::new(&[3, 0], vec![]),
    );
    let sc = make_ok(dev, dt, &[Val::I(5)], &[]);
    check(
        "scalar -> [1, 1]",
        sc.reshape(&[1, 1]),
        HostArr::new(&[1, 1], vec![Val::I(5)]),
    );
    // Views of empty arrays whose slice start lies past the (empty) buffer.
    let e2 = make_ok(dev, dt, &[], &[2, 0]);
    let sl = check(
        "slice [1:] of [2, 0]",
        e2.slice(&[wmx::Slice::new(Some(1), None, 1)]),
        HostArr::new(&[1, 0], vec![]),
    );
    check(
        "reshape of that",
        sl.reshape(&[0, 5]),
        HostArr::new(&[0, 5], vec![]),
    );
    let ne = ok("negative of empty slice", wmx::negative(&sl));
    assert_eq!(read_ok(&ne, "negative of empty slice").len(), 0);
    let one = make_ok(dev, dt, &[Val::I(5)], &[1, 1]);
    check(
        "[1,1] -> []",
        one.reshape(&[]),
        HostArr::new(&[], vec![Val::I(5)]),
    );
}

/// A family of views of data with `shape`, each with its host equivalent.
fn view_family(dev: &Device, dt: DType, rng: &mut Rng) -> Vec<(String, Array, HostArr)> {
    let mut out = Vec::new();
    let xs = values(rng, dt, 4 * 6 * 5, Domain::Any);
    let h = HostArr::new(&[4, 6, 5], xs.clone());
    let x = make_ok(dev, dt, &xs, &[4, 6, 5]);
    // Every view below has shape [4, 5, 3].
    out.push((
        "transposed+sliced".into(),
        ok(
            "v",
            x.transpose(Some(&[0, 2, 1])).and_then(|v| {
                v.slice(&[
                    wmx::Slice::ALL,
                    wmx::Slice::ALL,
                    wmx::Slice::new(Some(1), None, 2),
                ])
            }),
        ),
        h.transpose(&[0, 2, 1])
            .slice(&[(None, None, 1), (None, None, 1), (Some(1), None, 2)]),
    ));
    out.push((
        "negative steps".into(),
        ok(
            "v",
            x.slice(&[
                wmx::Slice::reversed(),
                wmx::Slice::new(Some(-1), Some(0), -1),
                wmx::Slice::new(None, None, -2),
            ]),
        ),
        h.slice(&[(None, None, -1), (Some(-1), Some(0), -1), (None, None, -2)]),
    ));
    let ys = values(rng, dt, 5, Domain::Any);
    let hy = HostArr::new(&[1, 5, 1], ys.clone());
    out.push((
        "broadcast".into(),
        ok(
            "v",
            make_ok(dev, dt, &ys, &[1, 5, 1]).broadcast_to(&[4, 5, 3]),
        ),
        hy.broadcast_to(&[4, 5, 3]),
    ));
    let zs = values(rng, dt, 60, Domain::Any);
    out.push((
        "contiguous".into(),
        make_ok(dev, dt, &zs, &[4, 5, 3]),
        HostArr::new(&[4, 5, 3], zs),
    ));
    out
}

/// Ops on transposed / broadcast / sliced / negative-step inputs give the same
/// bits as on contiguous copies, and match the reference.
pub fn ops_on_views_match_contiguous(dev: &Device) {
    let mut rng = Rng::new(10);
    for dt in [DType::F32, DType::I32, DType::F16, DType::U8, DType::Bool] {
        if !supported(dev, dt) {
            continue;
        }
        let fam = view_family(dev, dt, &mut rng);
        for (na, va, ha) in &fam {
            let ca = make_ok(dev, dt, &ha.data, &ha.shape);
            // Unary.
            for &op in UnaryOp::ALL {
                let (in_dt, out_dt) = unary_dtypes(op.name(), dt);
                if !supported(dev, out_dt) {
                    continue;
                }
                let what = format!("{op}({dt} {na})");
                let gv = read_ok(&ok(&what, wmx::unary(op, va)), &what);
                let gc = read_ok(&ok(&what, wmx::unary(op, &ca)), &what);
                assert_same(&format!("{what}: view vs contiguous"), &gv, &gc, &|k| {
                    ha.data[k].to_string()
                });
                let want: Vec<Val> = ha
                    .data
                    .iter()
                    .map(|&v| r::unary(op.name(), in_dt, cast(v, in_dt)))
                    .collect();
                assert_close(
                    &what,
                    out_dt,
                    &gv,
                    &want,
                    Tol::of(class_of(op.name()), out_dt, 0.0),
                    &|k| ha.data[k].to_string(),
                );
            }
            // Binary with every other view.
            for (nb, vb, hb) in &fam {
                let cb = make_ok(dev, dt, &hb.data, &hb.shape);
                for &op in BinaryOp::ALL {
                    let Some((in_dt, out_dt)) = binary_dtypes(op.name(), dt, dt) else {
                        continue;
                    };
                    let what = format!("{op}({dt} {na}, {nb})");
                    let gv = read_ok(&ok(&what, wmx::binary(op, va, vb)), &what);
                    let gc = read_ok(&ok(&what, wmx::binary(op, &ca, &cb)), &what);
                    assert_same(&format!("{what}: views vs contiguous"), &gv, &gc, &|k| {
                        show(&[&ha.data, &hb.data], k)
                    });
                    let want: Vec<Val> = ha
                        .data
                        .iter()
                        .zip(&hb.data)
                        .map(|(&x, &y)| r::binary(op.name(), in_dt, cast(x, in_dt), cast(y, in_dt)))
                        .collect();
                    assert_close(
                        &what,
                        out_dt,
                        &gv,
                        &want,
                        Tol::of(class_of(op.name()), out_dt, 0.0),
                        &|k| show(&[&ha.data, &hb.data], k),
                    );
                }
            }
            // Reductions, casts and where on the view.
            for axes in [None, Some(&[1isize][..]), Some(&[0, 2][..])] {
                let ax = axes_usize(axes, 3);
                for name in ["sum", "max"] {
                    let op = *ReduceOp::ALL.iter().find(|o| o.name() == name).unwrap();
                    let what = format!("{name}({dt} {na}, {axes:?})");
                    let out = r::reduce_dtype(name, dt);
                    let gv = read_ok(&ok(&what, wmx::reduce(op, va, axes, false)), &what);
                    let (_, want) = ha.reduce(&ax, |v| {
                        (r::reduce(name, dt, v).unwrap(), reduce_tol(name, out, v))
                    });
                    let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                    assert_close_with(&what, out, &gv, &w, &|k| want[k].1, &|k| {
                        format!("output {k}")
                    });
                }
            }
            for to in [DType::F32, DType::I32, DType::Bool] {
                if !supported(dev, to) {
                    continue;
                }
                let gv = read_ok(&ok("astype", va.astype(to)), "astype");
                let want: Vec<Val> = ha.data.iter().map(|&v| cast(v, to)).collect();
                assert_same(&format!("astype {dt} {na} -> {to}"), &gv, &want, &|k| {
                    ha.data[k].to_string()
                });
            }
            let c = ok("cond", wmx::greater(va, &fam[3].1));
            let w = ok("where", wmx::where_(&c, va, &fam[2].1));
            let gv = read_ok(&w, "where");
            let want: Vec<Val> = (0..gv.len())
                .map(|k| {
                    let cond = r::binary("greater", dt, ha.data[k], fam[3].2.data[k]);
                    if cond.nonzero() {
                        ha.data[k]
                    } else {
                        fam[2].2.data[k]
                    }
                })
                .collect();
            assert_same(&format!("where on {na} ({dt})"), &gv, &want, &|k| {
                ha.data[k].to_string()
            });
        }
    }
}

// ------------------------------------------------------------------ shapes

/// Empty, 0-d, 1-element and odd sizes through unary, binary (with a broadcast
/// scalar), reductions and casts.
pub fn edge_shapes(dev: &Device) {
    let mut rng = Rng::new(12);
    let shapes: &[&[usize]] = &[
        &[],
        &[0],
        &[1],
        &[3],
        &[1000],
        &[4099],
        &[0, 3],
        &[3, 0],
        &[2, 0, 2],
        &[1, 1, 1],
        &[7, 1, 9],
    ];
    for dt in [DType::F32, DType::I32, DType::F16, DType::U8] {
        if !supported(dev, dt) {
            continue;
        }
        for &shape in shapes {
            let n: usize = shape.iter().product();
            let xs = values(&mut rng, dt, n, Domain::Range(-100.0, 100.0));
            let x = make_ok(dev, dt, &xs, shape);
            let s = values(&mut rng, dt, 1, Domain::Range(-100.0, 100.0));
            let sc = make_ok(dev, dt, &s, &[]);
            let ctx = format!("{dt} {shape:?}");
            // negative, exp
            for (op, name) in [(UnaryOp::Negative, "negative"), (UnaryOp::Exp, "exp")] {
                let (in_dt, out) = unary_dtypes(name, dt);
                let y = ok(name, wmx::unary(op, &x));
                let got = read_checked(&format!("{name} {ctx}"), &y, out, shape);
                let want: Vec<Val> = xs
                    .iter()
                    .map(|&v| r::unary(name, in_dt, cast(v, in_dt)))
                    .collect();
                assert_close(
                    &format!("{name} {ctx}"),
                    out,
                    &got,
                    &want,
                    Tol::of(class_of(name), out, 0.0),
                    &|k| xs[k].to_string(),
                );
            }
            // x + scalar and scalar - x
            for (swap, name) in [(false, "add"), (true, "subtract")] {
                let op = *BinaryOp::ALL.iter().find(|o| o.name() == name).unwrap();
                let y = if swap {
                    wmx::binary(op, &sc, &x)
                } else {
                    wmx::binary(op, &x, &sc)
                };
                let y = ok(name, y);
                let got = read_checked(&format!("{name} {ctx}"), &y, dt, shape);
                let want: Vec<Val> = xs
                    .iter()
                    .map(|&v| {
                        if swap {
                            r::binary(name, dt, s[0], v)
                        } else {
                            r::binary(name, dt, v, s[0])
                        }
                    })
                    .collect();
                assert_close(
                    &format!("{name} scalar {ctx}"),
                    dt,
                    &got,
                    &want,
                    Tol::of(Class::Arith, dt, 0.0),
                    &|k| xs[k].to_string(),
                );
            }
            // x + x (same node twice)
            let y = ok("add self", wmx::add(&x, &x));
            let got = read_checked(&format!("x + x {ctx}"), &y, dt, shape);
            let want: Vec<Val> = xs.iter().map(|&v| r::binary("add", dt, v, v)).collect();
            assert_close(
                &format!("x + x {ctx}"),
                dt,
                &got,
                &want,
                Tol::of(Class::Arith, dt, 0.0),
                &|k| xs[k].to_string(),
            );
            // sum over everything and over axis 0
            let out = r::reduce_dtype("sum", dt);
            let y = ok("sum", wmx::sum(&x, None, false));
            let got = read_checked(&format!("sum {ctx}"), &y, out, &[]);
            let want = r::reduce("sum", dt, &xs).unwrap();
            assert_close(
                &format!("sum {ctx}"),
                out,
                &got,
                &[want],
                reduce_tol("sum", out, &xs),
                &|_| String::new(),
            );
            if !shape.is_empty() {
                let h = HostArr::new(shape, xs.clone());
                let y = ok("sum0", wmx::sum(&x, Some(&[0]), true));
                let (_, want) = h.reduce(&[0], |v| {
                    (r::reduce("sum", dt, v).unwrap(), reduce_tol("sum", out, v))
                });
                let got = read_checked(
                    &format!("sum axis 0 {ctx}"),
                    &y,
                    out,
                    &keep_shape(shape, &[0], true),
                );
                let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                assert_close_with(
                    &format!("sum axis 0 {ctx}"),
                    out,
                    &got,
                    &w,
                    &|k| want[k].1,
                    &|k| format!("output {k}"),
                );
                if shape[0] > 0 {
                    let y = ok("max0", wmx::max(&x, Some(&[0]), false));
                    let (_, want) = h.reduce(&[0], |v| r::reduce("max", dt, v).unwrap());
                    let got = read_checked(&format!("max axis 0 {ctx}"), &y, dt, &shape[1..]);
                    assert_same(&format!("max axis 0 {ctx}"), &got, &want, &|k| {
                        format!("output {k}")
                    });
                }
            }
            if supported(dev, DType::F32) {
                let y = ok("astype", x.astype(DType::F32));
                let got = read_checked(&format!("astype {ctx}"), &y, DType::F32, shape);
                let want: Vec<Val> = xs.iter().map(|&v| cast(v, DType::F32)).collect();
                assert_same(&format!("astype f32 {ctx}"), &got, &want, &|k| {
                    xs[k].to_string()
                });
            }
        }
    }
}

/// One large case (2^20 + 3 elements): add and sum, f32 and i32.
pub fn big_add_and_sum(dev: &Device) {
    let n = (1usize << 20) + 3;
    let mut rng = Rng::new(13);
    for dt in [DType::F32, DType::I32] {
        if !supported(dev, dt) {
            continue;
        }
        let dom = if dt == DType::F32 {
            Domain::Range(-1.0, 1.0)
        } else {
            Domain::Any
        };
        let xs = values(&mut rng, dt, n, dom);
        let ys = values(&mut rng, dt, n, dom);
        let x = make_ok(dev, dt, &xs, &[n]);
        let y = make_ok(dev, dt, &ys, &[n]);
        let z = ok("big add", wmx::add(&x, &y));
        let got = read_checked("big add", &z, dt, &[n]);
        let want: Vec<Val> = xs
            .iter()
            .zip(&ys)
            .map(|(&a, &b)| r::binary("add", dt, a, b))
            .collect();
        assert_close(
            &format!("big add {dt}"),
            dt,
            &got,
            &want,
            Tol::of(Class::Arith, dt, 0.0),
            &|k| show(&[&xs, &ys], k),
        );
        let s = ok("big sum", wmx::sum(&x, None, false));
        let got = read_checked("big sum", &s, dt, &[]);
        let want = r::reduce("sum", dt, &xs).unwrap();
        assert_close(
            &format!("big sum {dt}"),
            dt,
            &got,
            &[want],
            reduce_tol("sum", dt, &xs),
            &|_| String::new(),
        );
        // Row sums of a [1025, 1023] view of (almost) the same data.
        let m = ok(
            "reshape",
            wmx::slice(&x, &[wmx::Slice::range(0, 1025 * 1023)])
                .and_then(|v| v.reshape(&[1025, 1023])),
        );
        let h = HostArr::new(&[1025, 1023], xs[..1025 * 1023].to_vec());
        let rs = ok("row sums", wmx::sum(&m, Some(&[1]), false));
        let (_, want) = h.reduce(&[1], |v| {
            (r::reduce("sum", dt, v).unwrap(), reduce_tol("sum", dt, v))
        });
        let got = read_checked("big row sums", &rs, dt, &[1025]);
        let w: Vec<Val> = want.iter().map(|p| p.0).collect();
        assert_close_with(
            &format!("big row sums {dt}"),
            dt,
            &got,
            &w,
            &|k| want[k].1,
            &|k| format!("row {k}"),
        );
    }
}

// ------------------------------------------------------------------ graph

/// A node used by several consumers is computed once and every consumer is right.
pub fn graph_shared_subgraph(dev: &Device) {
    let dt = DType::F32;
    let mut rng = Rng::new(14);
    let xs = values(&mut rng, dt, 100, Domain::Range(-3.0, 3.0));
    let a = make_ok(dev, dt, &xs, &[100]);
    let x = ok("exp", wmx::exp(&a));
    let one = make_ok(dev, dt, &[f(1.0)], &[]);
    let two = make_ok(dev, dt, &[f(2.0)], &[]);
    let y1 = ok("y1", wmx::add(&x, &one));
    let y2 = ok("y2", wmx::multiply(&x, &two));
    let y3 = ok("y3", wmx::sqrt(&x));
    let d = ok("diamond", wmx::subtract(&y1, &y2));
    assert!(!x.is_evaluated());
    ok(
        "eval",
        wmx::eval(&[y1.clone(), y2.clone(), y3.clone(), d.clone()]),
    );
    assert!(
        x.is_evaluated(),
        "a shared input held by the user is kept evaluated"
    );
    let ex: Vec<f64> = xs.iter().map(|v| round_to(dt, v.f().exp())).collect();
    let t = Tol::of(Class::Transcendental, dt, 0.0);
    let comp = |what: &str, a: &Array, g: &dyn Fn(f64) -> f64, tol: Tol| {
        let got = read_ok(a, what);
        let want: Vec<Val> = ex.iter().map(|&e| f(g(e))).collect();
        assert_close(what, dt, &got, &want, tol, &|k| xs[k].to_string());
    };
    let t2 = Tol {
        ulps: 8.0,
        abs: 0.0,
        log_ulps: 0.0,
    };
    comp("exp(x)", &x, &|e| e, t);
    comp("exp(x) + 1", &y1, &|e| e + 1.0, t2);
    comp("exp(x) * 2", &y2, &|e| e * 2.0, t2);
    comp("sqrt(exp(x))", &y3, &|e| e.sqrt(), t2);
    comp(
        "(e+1) - 2e",
        &d,
        &|e| (e + 1.0) - 2.0 * e,
        Tol {
            ulps: 8.0,
            abs: 1e-5,
            log_ulps: 0.0,
        },
    );
    // A consumer made after the shared node was evaluated reuses its data.
    let z = ok("z", wmx::add(&x, &x));
    comp("exp(x) + exp(x)", &z, &|e| 2.0 * e, t2);
    // Evaluating the same array twice and evaluating an evaluated array is fine.
    ok("eval again", wmx::eval(&[z.clone(), z.clone()]));
    ok("eval data", a.eval());
}

/// A 200 000-node chain of adds is built, evaluated and dropped on a 2 MiB stack,
/// and a pending chain is dropped without evaluation.
pub fn graph_long_chain(dev: &Device) {
    let dev = dev.clone();
    let h = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let dt = DType::I32;
            let n = 200_000;
            let one = make_ok(&dev, dt, &[Val::I(1)], &[]);
            let mut a = make_ok(&dev, dt, &ints(&[0, 10, -5]), &[3]);
            for _ in 0..n {
                a = ok("add", wmx::add(&a, &one));
            }
            assert!(!a.is_evaluated());
            let got = read_ok(&a, "long chain");
            assert_same("200 000 adds", &got, &ints(&[n, n + 10, n - 5]), &|_| {
                String::new()
            });
            drop(a);
            // A pending chain dropped without eval.
            let mut b = make_ok(&dev, dt, &ints(&[0]), &[1]);
            for _ in 0..n {
                b = ok("add", wmx::add(&b, &one));
            }
            drop(b);
        })
        .expect("spawn");
    h.join()
        .expect("the long chain must not overflow a 2 MiB stack");
}

/// Ops build graph nodes; nothing is computed before eval or a read.
pub fn lazy_until_read(dev: &Device) {
    let a = make_ok(dev, DType::F32, &[f(1.0), f(2.0), f(3.0)], &[3]);
    assert!(a.is_evaluated(), "data is evaluated");
    let b = ok("exp", wmx::exp(&a));
    let c = ok("add", wmx::add(&b, &b));
    let v = ok("transpose", c.t());
    let z = ok(
        "zeros",
        wmx::with_device(dev, || wmx::zeros(&[2], DType::F32)),
    );
    for (name, x) in [("exp", &b), ("add", &c), ("view", &v), ("zeros", &z)] {
        assert!(!x.is_evaluated(), "{name} was computed before eval");
        assert!(x.buffer().is_none(), "{name} has a buffer before eval");
        assert!(x.primitive().is_some(), "{name} has no primitive");
        assert_eq!(x.device(), dev, "{name} on the wrong device");
    }
    assert_eq!(c.inputs().len(), 2);
    // A read evaluates implicitly.
    let got = ok("to_vec", v.to_vec::<f32>());
    let want: Vec<f32> = [1.0f32, 2.0, 3.0].iter().map(|x| 2.0 * x.exp()).collect();
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 4.0 * f32::EPSILON * w,
            "{got:?} vs {want:?}"
        );
    }
    assert!(v.is_evaluated() && c.is_evaluated() && b.is_evaluated());
    assert!(c.primitive().is_none() && c.inputs().is_empty());
    assert!(!z.is_evaluated(), "an unrelated array stays pending");
    assert_eq!(
        ok(
            "item",
            wmx::sum(&z, None, false).and_then(|s| s.item::<f32>())
        ),
        0.0
    );
}

/// `Display`: numpy-style, with the dtype; `Debug` names shape and dtype.
pub fn display_format(dev: &Device) {
    let mk = |vals: &[Val], dt: DType, shape: &[usize]| make_ok(dev, dt, vals, shape);
    let cases: Vec<(Array, &str)> = vec![
        (
            mk(&ints(&[1, 2, 3]), DType::I32, &[3]),
            "array([1, 2, 3], dtype=i32)",
        ),
        (
            mk(&ints(&[1, 0]), DType::Bool, &[2]),
            "array([true, false], dtype=bool)",
        ),
        (
            mk(
                &[f(0.5), f(f64::NAN), f(f64::NEG_INFINITY), f(1.0)],
                DType::F32,
                &[4],
            ),
            "array([0.5, nan, -inf, 1.0], dtype=f32)",
        ),
        (
            mk(&[f(round_to(DType::F32, 0.1))], DType::F32, &[1]),
            "array([0.1], dtype=f32)",
        ),
        (
            mk(&ints(&[1, 2, 3, 4]), DType::I32, &[2, 2]),
            "array([[1, 2],\n       [3, 4]], dtype=i32)",
        ),
        (mk(&ints(&[7]), DType::I32, &[]), "array(7, dtype=i32)"),
        (
            mk(&ints(&(0..10).collect::<Vec<_>>()), DType::U8, &[10]),
            "array([0, 1, 2, ..., 7, 8, 9], dtype=u8)",
        ),
        (mk(&[], DType::F32, &[0]), "array([], dtype=f32)"),
        (
            mk(&ints(&(0..28).collect::<Vec<_>>()), DType::I32, &[2, 7, 2]),
            "array([[[0, 1],\n        [2, 3],\n        [4, 5],\n        ...,\n        [8, 9],\n        [10, 11],\n        [12, 13]],\n       [[14, 15],\n        [16, 17],\n        [18, 19],\n        ...,\n        [22, 23],\n        [24, 25],\n        [26, 27]]], dtype=i32)",
        ),
    ];
    for (a, want) in cases {
        assert_eq!(format!("{a}"), want, "Display of {a:?}");
    }
    // 200 000 dimensions print without overflowing the stack.
    let deep = mk(&ints(&[5]), DType::I32, &vec![1; 200_000]);
    let text = format!("{deep}");
    assert_eq!(
        text.len(),
        "array(".len() + 2 * 200_000 + 1 + ", dtype=i32)".len()
    );
    assert!(
        text.starts_with("array([[[") && text.contains("[5]"),
        "{}",
        &text[..40]
    );
    let p = ok("exp", wmx::exp(&mk(&[f(0.0)], DType::F32, &[1])));
    let dbg = format!("{p:?}");
    assert!(
        dbg.contains("[1]") && dbg.contains("f32") && dbg.contains("evaluated=false"),
        "{dbg}"
    );
    assert_eq!(
        format!("{p}"),
        "array([1.0], dtype=f32)",
        "Display evaluates"
    );
}

// ------------------------------------------------------------------ errors

/// Invalid arguments give `Err` whose message carries the offending values.
pub fn errors_carry_values(dev: &Device) {
    let dt = DType::F32;
    let x = make_ok(
        dev,
        dt,
        &values(&mut Rng::new(15), dt, 6, Domain::Any),
        &[2, 3],
    );
    let y = make_ok(
        dev,
        dt,
        &values(&mut Rng::new(16), dt, 4, Domain::Any),
        &[4],
    );
    expect_err(
        "add [2,3] + [4]",
        wmx::add(&x, &y),
        &["add", "[2, 3]", "[4]"],
    );
    expect_err("where shapes", wmx::where_(&x, &x, &y), &["where", "[4]"]);
    expect_err(
        "axpby shapes",
        wmx::axpby(&x, &y, 1.0, 1.0),
        &["axpby", "[2, 3]", "[4]"],
    );
    expect_err(
        "broadcast_to",
        x.broadcast_to(&[4, 3]),
        &["broadcast_to", "[2, 3]", "[4, 3]"],
    );
    expect_err(
        "broadcast_to fewer dims",
        x.broadcast_to(&[3]),
        &["[2, 3]", "[3]"],
    );
    expect_err(
        "sum axis 2",
        wmx::sum(&x, Some(&[2]), false),
        &["axis 2", "2 dimensions", "sum"],
    );
    expect_err(
        "sum axis -3",
        wmx::sum(&x, Some(&[-3]), false),
        &["axis -3", "2 dimensions"],
    );
    expect_err(
        "sum repeated axis",
        wmx::sum(&x, Some(&[1, 1]), false),
        &["axis 1", "sum"],
    );
    expect_err(
        "max repeated axis",
        wmx::max(&x, Some(&[0, -2]), false),
        &["axis -2"],
    );
    expect_err(
        "mean bad axis",
        wmx::mean(&x, Some(&[5]), false),
        &["axis 5"],
    );
    expect_err(
        "var bad axis",
        wmx::var(&x, Some(&[5]), false, 0),
        &["axis 5"],
    );
    expect_err(
        "logsumexp bad axis",
        wmx::logsumexp(&x, Some(&[-4]), false),
        &["axis -4"],
    );
    expect_err(
        "argmax bad axis",
        wmx::argmax(&x, 2, false),
        &["axis 2", "argmax"],
    );
    expect_err(
        "transpose repeated",
        x.transpose(Some(&[0, 0])),
        &["axis 0", "transpose"],
    );
    expect_err(
        "transpose wrong count",
        x.transpose(Some(&[0])),
        &["[0]", "2"],
    );
    expect_err(
        "expand_dims",
        wmx::expand_dims(&x, 4),
        &["axis 4", "3 dimensions"],
    );
    expect_err(
        "squeeze non-1",
        wmx::squeeze(&x, Some(&[1])),
        &["axis 1", "size 3"],
    );
    expect_err(
        "bitwise on f32",
        wmx::bitwise_and(&x, &x),
        &["bitwise_and", "f32"],
    );
    expect_err(
        "reshape wrong size",
        x.reshape(&[4]),
        &["[2, 3]", "6", "[4]"],
    );
    expect_err(
        "reshape -1 not dividing",
        x.reshape(&[-1, 4]),
        &["[2, 3]", "[-1, 4]"],
    );
    expect_err("reshape two -1", x.reshape(&[-1, -1]), &["[-1, -1]"]);
    expect_err(
        "slice step 0",
        x.slice(&[wmx::Slice::new(None, None, 0)]),
        &["step 0", "axis 0"],
    );
    expect_err(
        "slice too many",
        x.slice(&[wmx::Slice::ALL, wmx::Slice::ALL, wmx::Slice::ALL]),
        &["3 slices", "2 dimensions"],
    );
    expect_err(
        "from_slice length",
        Array::from_slice_on(&[1.0f32; 5], &[2, 3], dev),
        &["5 values", "[2, 3]"],
    );
    expect_err(
        "from_bytes length",
        Array::from_bytes_on(vec![0; 5], &[2], DType::F32, dev),
        &["5 bytes", "[2]", "f32"],
    );
    expect_err("to_vec wrong type", x.to_vec::<i32>(), &["f32", "i32"]);
    expect_err(
        "item wrong type",
        make_ok(dev, dt, &[f(1.0)], &[1]).item::<u8>(),
        &["f32", "u8"],
    );
    expect_err("item of many", x.item::<f32>(), &["[2, 3]", "6 elements"]);
    expect_err(
        "item of empty",
        make_ok(dev, dt, &[], &[0]).item::<f32>(),
        &["[0]", "0 elements"],
    );
    let e = make_ok(dev, dt, &[], &[0, 3]);
    expect_err(
        "max of empty axis",
        wmx::max(&e, Some(&[0]), false),
        &["max", "[0, 3]"],
    );
    expect_err(
        "min of empty",
        wmx::min(&e, None, false),
        &["min", "[0, 3]"],
    );
    expect_err(
        "argmin of empty axis",
        wmx::argmin(&e, 0, false),
        &["argmin", "[0, 3]"],
    );
    expect_err(
        "arange step 0",
        wmx::with_device(dev, || wmx::arange(0.0, 1.0, 0.0, dt)),
        &["step=0"],
    );
    // Operators panic with the shapes.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| &x + &y));
    let msg = r.expect_err("operator + of mismatched shapes panics");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("[2, 3]") && msg.contains("[4]"),
        "panic message {msg:?}"
    );
}

/// Every dtype either works on the device or fails with an error naming it, for
/// creation, casts, and ops whose output would be of that dtype.
pub fn device_dtype_support(dev: &Device) {
    assert!(supported(dev, DType::F32), "every device supports f32");
    assert!(
        supported(dev, DType::Bool) && supported(dev, DType::I32) && supported(dev, DType::U32)
    );
    let x = make_ok(dev, DType::F32, &[f(1.5), f(-2.0)], &[2]);
    for dt in DType::ALL {
        if supported(dev, dt) {
            let a = ok("astype", x.astype(dt));
            let got = read_ok(&a, "astype");
            assert_same(
                &format!("f32 -> {dt}"),
                &got,
                &[cast(f(1.5), dt), cast(f(-2.0), dt)],
                &|_| String::new(),
            );
            continue;
        }
        let what = format!("{dt} on {dev}");
        if let Err(e) = dev.check_dtype(dt) {
            assert!(
                e.to_string().contains(dt.name()),
                "{what}: check_dtype error {e} names the dtype"
            );
        }
        check_unsupported(dev, dt);
        expect_err(&what, x.astype(dt), &[dt.name()]);
        expect_err(
            &what,
            wmx::with_device(dev, || wmx::full(&[2], 1.0, dt)),
            &[dt.name()],
        );
        expect_err(
            &what,
            wmx::with_device(dev, || wmx::arange(0.0, 3.0, 1.0, dt)),
            &[dt.name()],
        );
        expect_err(
            &what,
            wmx::with_device(dev, || wmx::eye(2, dt)),
            &[dt.name()],
        );
    }
    // u32 with i32 promotes to i64.
    let u = make_ok(dev, DType::U32, &ints(&[1]), &[1]);
    let i = make_ok(dev, DType::I32, &ints(&[-1]), &[1]);
    let what = "u32 + i32 (promotes to i64)";
    if supported(dev, DType::I64) {
        let s = ok(what, wmx::add(&u, &i));
        assert_same(
            what,
            &read_checked(what, &s, DType::I64, &[1]),
            &ints(&[0]),
            &|_| String::new(),
        );
    } else {
        expect_err(what, wmx::add(&u, &i), &["i64"]);
    }
}

mod compile;
mod custom;
mod index;
mod linalg;
mod nn;
mod random;
mod robust;
mod scan;
mod sort;
mod transforms;
pub use compile::*;
pub use custom::*;
pub use index::*;
pub use linalg::*;
pub use nn::*;
pub use random::*;
pub use robust::*;
pub use scan::*;
pub use sort::*;
pub use transforms::*;

/// f64's library functions densely over their ranges (on GPUs they are wmx's own
/// software functions, `f64.wgsl`): argument-reduction boundaries, huge and tiny
/// inputs, erfinv near ±1, power and arctan2 on grids; the f64 tolerance column.
pub fn f64_library_sweep(dev: &Device) {
    let dt = DType::F64;
    if !supported(dev, dt) {
        return;
    }
    let lin = |lo: f64, hi: f64, n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
            .collect()
    };
    let logs = |lo: i32, hi: i32| -> Vec<f64> {
        (lo..=hi)
            .flat_map(|e| [1.0, 1.37, 1.9999].map(|m| m * 10f64.powi(e)))
            .collect()
    };
    let near = |c: f64| -> Vec<f64> {
        (1..=20)
            .flat_map(|k| {
                (-3i64..=3)
                    .map(move |d| f64::from_bits(((k as f64) * c).to_bits().wrapping_add(d as u64)))
            })
            .collect()
    };
    let mut pos = logs(-300, 300);
    pos.extend(lin(0.5, 2.0, 301));
    pos.extend([5e-324, 2.2250738585072014e-308, f64::MAX]);
    let mut trig = lin(-20.0, 20.0, 4001);
    trig.extend(near(std::f64::consts::FRAC_PI_2));
    trig.extend(near(std::f64::consts::FRAC_PI_4));
    trig.extend(logs(-300, 5));
    let mut inv: Vec<f64> = lin(-0.999, 0.999, 2001);
    inv.extend((1..=52).flat_map(|e| {
        let q = 2f64.powi(-e);
        [1.0 - q, q - 1.0, 0.5 + q]
    }));
    let table: Vec<(&str, Vec<f64>)> = vec![
        ("exp", lin(-745.0, 709.7, 4001)),
        ("expm1", [lin(-40.0, 10.0, 2001), logs(-300, -1)].concat()),
        ("log", pos.clone()),
        ("log2", pos.clone()),
        ("log1p", [lin(-0.999, 3.0, 2001), logs(-300, 300)].concat()),
        ("sin", trig.clone()),
        ("cos", trig.clone()),
        ("tan", trig),
        ("tanh", lin(-25.0, 25.0, 4001)),
        ("sigmoid", lin(-740.0, 40.0, 4001)),
        ("erf", [lin(-6.5, 6.5, 4001), logs(-300, -1)].concat()),
        ("erfinv", inv),
    ];
    for (name, xs) in table {
        let op = *UnaryOp::ALL.iter().find(|o| o.name() == name).unwrap();
        let vals: Vec<Val> = xs.iter().map(|&x| f(x)).collect();
        let a = make_ok(dev, dt, &vals, &[vals.len()]);
        let what = format!("{name} sweep f64");
        let got = read_ok(&ok(&what, wmx::unary(op, &a)), &what);
        let want: Vec<Val> = xs.iter().map(|&x| r::unary(name, dt, f(x))).collect();
        let tol = Tol::of(crate::tol::class_of(name), dt, 0.0);
        assert_close(&what, dt, &got, &want, tol, &|i| xs[i].to_string());
    }
    for name in ["power", "arctan2"] {
        let op = *BinaryOp::ALL.iter().find(|o| o.name() == name).unwrap();
        let grid: [f64; 19] = [
            -1e300, -1e10, -7.0, -2.0, -1.5, -1.0, -0.3, -0.0, 0.0, 1e-300, 0.3, 0.999, 1.0, 1.001,
            2.0, 3.5, 10.0, 1e10, 1e300,
        ];
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for &x in &grid {
            for &y in &grid {
                xs.push(x);
                ys.push(if name == "power" {
                    y.clamp(-60.0, 60.0)
                } else {
                    y
                });
            }
        }
        let vx: Vec<Val> = xs.iter().map(|&x| f(x)).collect();
        let vy: Vec<Val> = ys.iter().map(|&y| f(y)).collect();
        let a = make_ok(dev, dt, &vx, &[vx.len()]);
        let b = make_ok(dev, dt, &vy, &[vy.len()]);
        let what = format!("{name} grid f64");
        let got = read_ok(&ok(&what, wmx::binary(op, &a, &b)), &what);
        let want: Vec<Val> = (0..xs.len())
            .map(|i| r::binary(name, dt, vx[i], vy[i]))
            .collect();
        let tol = Tol::of(crate::tol::class_of(name), dt, 0.0);
        assert_close(&what, dt, &got, &want, tol, &|i| {
            format!("{}, {}", xs[i], ys[i])
        });
    }
}
