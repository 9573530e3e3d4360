//! Elementwise ops: every unary and binary op on every dtype (pair), special values,
//! integer wrap and division, bool arithmetic, half-precision rounding, where, clip,
//! casts, axpby, and f64's library functions over their ranges.

use super::*;

/// Every unary op (from `UnaryOp::ALL`) on every dtype: output dtype rule and
/// values against the reference.
pub fn unary_all_ops_all_dtypes(dev: &Device) {
    let mut rng = Rng::new(2);
    for &op in UnaryOp::ALL {
        let name = op.name();
        for dt in DType::REAL {
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
        for da in DType::REAL {
            for db in DType::REAL {
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
    // 64-bit dividends past one word by divisors of 16 bits, of one word, and of
    // two: the three paths of the GPU's long division.
    let floor = |a: i128, b: i128| a.div_euclid(b) - i128::from(b < 0 && a.rem_euclid(b) != 0);
    let dividends: [i128; 6] = [
        i64::MAX as i128,
        i64::MIN as i128,
        -(1i128 << 40) - 7,
        (1 << 33) + 5,
        12_345_678_901_234,
        -98_765_432_109_876,
    ];
    let divisors: [i128; 10] = [
        1,
        -1,
        3,
        -1000,
        65_535,
        65_536,
        -65_537,
        (1 << 31) + 11,
        -(1 << 32) + 1,
        (1 << 32) + 3,
    ];
    let mut table = Vec::new();
    for &a in &dividends {
        for &b in &divisors {
            let q = floor(a, b);
            // i64::MIN // -1 wraps, as numpy's.
            let q = q as i64 as i128;
            table.push(("floor_divide", I64, a, b, i(q)));
            table.push(("remainder", I64, a, b, i(a - floor(a, b) * b)));
            let (ua, ub) = (a.rem_euclid(1 << 64), b.rem_euclid(1 << 64));
            table.push(("floor_divide", U64, ua, ub, i(ua / ub)));
            table.push(("remainder", U64, ua, ub, i(ua % ub)));
        }
    }
    check_int_table(dev, &table);
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
    for from in DType::REAL {
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
        for to in DType::REAL {
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
