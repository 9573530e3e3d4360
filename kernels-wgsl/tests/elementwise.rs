//! GPU tests of the elementwise families against f64/CPU references written here.
//! Every (op, dtype) runs on sizes 0, 1, 3, 1000 with contiguous, offset, negative,
//! transposed, strided, scalar and row-broadcast inputs; big sizes run on a subset.
//!
//! Tolerances: integer, bool, comparison, copy and select results are exact. Float
//! results are compared with a relative tolerance of one unit in the last place of
//! the output dtype (f16 2^-10, bf16 2^-7, f32 1.2e-7) plus the op's own f32 error
//! (transcendentals 1e-5 relative / 1e-6 absolute, tan 1e-4); NaN must match NaN and
//! infinities must match exactly.

mod common;
use common::*;
use wmx_kernels::{Batch, BinaryOp, Contig, DType, Error, Kernels, Strided, UnaryOp, Wgpu, Window};
use wmx_reference::reference;
use wmx_reference::tol::Class;
use wmx_reference::val::Val;

const GUARD: u8 = 0xA5;

/// One recorded check: output buffer, expected values, tolerance.
struct Case {
    label: String,
    out: wgpu::Buffer,
    dtype: DType,
    want: Vec<f64>,
    atol: f64,
    rtol: f64,
    skip: Vec<bool>,
}

/// Output buffer prefilled with a guard pattern (bytes past the output must survive).
fn out_buffer(k: &Kernels, n: usize, d: DType) -> wgpu::Buffer {
    let bytes = (n * d.size()).div_ceil(16) * 16 + 16;
    k.upload(&vec![GUARD; bytes]).unwrap()
}

fn finish(k: &Kernels, batch: Batch<Wgpu>, cases: Vec<Case>) {
    k.submit(batch).unwrap();
    for c in cases {
        let n = c.want.len();
        let all = k.read_blocking(&c.out, 0, c.out.size()).unwrap();
        let got = decode(&all[..n * c.dtype.size()], c.dtype);
        let skip = &c.skip;
        assert_close(&c.label, &got, &c.want, c.atol, c.rtol, &|i| {
            skip.get(i).copied().unwrap_or(false)
        });
        assert!(
            all[n * c.dtype.size()..].iter().all(|b| *b == GUARD),
            "{}: bytes past the output changed",
            c.label
        );
    }
}

fn shape_for(n: usize) -> Vec<usize> {
    if n == 1000 { vec![40, 25] } else { vec![n] }
}

const SMALL: [usize; 4] = [0, 1, 3, 1000];
const BIG: [usize; 2] = [(1 << 20) + 3, 65535 * 256 + 3];

// ---------------------------------------------------------------- references

/// The shared reference (`wmx_reference`) of a binary op on inputs of `d`, rounded
/// to the output dtype as a kernel stores it.
fn ref_binary(op: &str, d: DType, a: f64, b: f64) -> f64 {
    let (_, od) = reference::binary_dtypes(op, d, d).expect("an op defined on d");
    stored(reference::binary(op, d, val(a, d), val(b, d)), od)
}

/// The shared reference of a unary op on an input of `d`, rounded to the output
/// dtype.
fn ref_unary(op: &str, d: DType, a: f64) -> f64 {
    let (_, od) = reference::unary_dtypes(op, d);
    stored(reference::unary(op, d, val(a, d)), od)
}

fn stored(v: Val, d: DType) -> f64 {
    match v {
        Val::I(i) => i as f64,
        Val::F(x) => round_to(x, d),
    }
}

/// (atol, rtol) for a float op's result in dtype `d`, by the op's accuracy class
/// in the shared reference.
fn tol(op: &str, d: DType) -> (f64, f64) {
    if !d.is_float() {
        return (0.0, 0.0);
    }
    let (a, r) = match reference::class_of(op) {
        // Large near its poles, in f32.
        _ if op == "tan" => (1e-5, 1e-4),
        Class::Divide | Class::Transcendental | Class::Power => (1e-6, 1e-5),
        _ => (0.0, 0.0),
    };
    (a, r + ulp(d))
}

fn unary_data(op: &str) -> Data {
    match op {
        "exp" | "expm1" => Data::Range(-20.0, 20.0),
        "sin" | "cos" | "tan" => Data::Range(-10.0, 10.0),
        "tanh" | "sigmoid" | "erf" => Data::Range(-12.0, 12.0),
        "erfinv" => Data::Range(-1.1, 1.1),
        "sqrt" | "rsqrt" | "log" | "log2" => Data::Range(-1.0, 30.0),
        "log1p" => Data::Range(-1.5, 5.0),
        _ => Data::Eighths,
    }
}

const FLOATS_AND_INTS: [DType; 8] = DTYPES;

// ---------------------------------------------------------------- binary

fn binary_cases(
    k: &Kernels,
    op: BinaryOp,
    d: DType,
    sizes: &[usize],
    lays: &[(Lay, Lay)],
    seed: u64,
) {
    let mut rng = Rng(seed);
    let mut batch = Batch::new();
    let mut cases = Vec::new();
    let od = if op.outputs_bool() { DType::Bool } else { d };
    for &n in sizes {
        let shape = shape_for(n);
        for &(la, lb) in lays {
            let a = Input::new(k, &mut rng, d, &shape, la, Data::Eighths, true);
            let b = Input::new(k, &mut rng, d, &shape, lb, Data::Eighths, true);
            let out = out_buffer(k, n, od);
            k.binary(
                &mut batch,
                op,
                &a.view(),
                &b.view(),
                &Contig {
                    buffer: &out,
                    window: None,
                    dtype: od,
                    shape: &shape,
                },
            )
            .unwrap();
            let want: Vec<f64> = a
                .vals
                .iter()
                .zip(&b.vals)
                .map(|(x, y)| ref_binary(op.name(), d, *x, *y))
                .collect();
            let skip = a
                .vals
                .iter()
                .zip(&b.vals)
                .map(|(x, y)| {
                    op == BinaryOp::Arctan2
                        && ((*x == 0.0 && *y == 0.0) || (x.is_infinite() && y.is_infinite()))
                })
                .collect();
            let (atol, rtol) = if od == DType::Bool {
                (0.0, 0.0)
            } else {
                tol(op.name(), d)
            };
            cases.push(Case {
                label: format!("binary {op} {d} n={n} {la:?}/{lb:?}"),
                out,
                dtype: od,
                want,
                atol,
                rtol,
                skip,
            });
        }
    }
    finish(k, batch, cases);
}

const BINARY_LAYS: [(Lay, Lay); 8] = [
    (Lay::Contig, Lay::Contig),
    (Lay::Scalar, Lay::Contig),
    (Lay::Contig, Lay::Scalar),
    (Lay::Scalar, Lay::Scalar),
    (Lay::Offset(3), Lay::Offset(16)),
    (Lay::Neg, Lay::Trans),
    (Lay::Step2, Lay::BcastRow),
    (Lay::Trans, Lay::Contig),
];

#[test]
fn binary_all_ops_all_dtypes() {
    let Some(k) = k() else { return };
    for (i, &op) in BinaryOp::ALL.iter().enumerate() {
        for d in FLOATS_AND_INTS {
            if op.supports(d) && k.supports(d) {
                binary_cases(k, op, d, &SMALL, &BINARY_LAYS, 1000 + i as u64);
            }
        }
    }
}

#[test]
fn binary_big_sizes() {
    let Some(k) = k() else { return };
    for d in DTYPES {
        if k.supports(d) {
            let op = if d == DType::Bool {
                BinaryOp::LogicalOr
            } else {
                BinaryOp::Add
            };
            binary_cases(
                k,
                op,
                d,
                &BIG[..1],
                &[(Lay::Contig, Lay::Contig), (Lay::Neg, Lay::Scalar)],
                7,
            );
        }
    }
    binary_cases(
        k,
        BinaryOp::Less,
        DType::F32,
        &BIG[..1],
        &[(Lay::Contig, Lay::Offset(1))],
        8,
    );
    // More than 65535 workgroups of the general kernel: a 2-D grid.
    binary_cases(
        k,
        BinaryOp::Multiply,
        DType::F32,
        &BIG[1..],
        &[(Lay::Neg, Lay::Contig)],
        9,
    );
}

// ---------------------------------------------------------------- unary

fn unary_cases(
    k: &Kernels,
    op: UnaryOp,
    d: DType,
    sizes: &[usize],
    lays: &[Lay],
    data: Data,
    seed: u64,
) {
    let mut rng = Rng(seed);
    let mut batch = Batch::new();
    let mut cases = Vec::new();
    let od = if op.outputs_bool() { DType::Bool } else { d };
    for &n in sizes {
        let shape = shape_for(n);
        for &la in lays {
            let a = Input::new(k, &mut rng, d, &shape, la, data, true);
            let out = out_buffer(k, n, od);
            k.unary(
                &mut batch,
                op,
                &a.view(),
                &Contig {
                    buffer: &out,
                    window: None,
                    dtype: od,
                    shape: &shape,
                },
            )
            .unwrap();
            let want = a.vals.iter().map(|x| ref_unary(op.name(), d, *x)).collect();
            let (atol, rtol) = tol(op.name(), od);
            cases.push(Case {
                label: format!("unary {op} {d} n={n} {la:?} {data:?}"),
                out,
                dtype: od,
                want,
                atol,
                rtol,
                skip: vec![],
            });
        }
    }
    finish(k, batch, cases);
}

const UNARY_LAYS: [Lay; 6] = [
    Lay::Contig,
    Lay::Scalar,
    Lay::Offset(5),
    Lay::Neg,
    Lay::Trans,
    Lay::BcastRow,
];

#[test]
fn unary_all_ops_all_dtypes() {
    let Some(k) = k() else { return };
    for (i, &op) in UnaryOp::ALL.iter().enumerate() {
        for d in DTYPES {
            if op.supports(d) && k.supports(d) {
                unary_cases(
                    k,
                    op,
                    d,
                    &SMALL,
                    &UNARY_LAYS,
                    unary_data(op.name()),
                    2000 + i as u64,
                );
            }
        }
    }
}

/// exp on every f16 and bf16 value (they use the driver's exp in f32, `exp_narrow`):
/// each result is the correctly rounded one or its neighbour (1 ulp), NaN for NaN.
#[test]
fn exp_narrow_every_value() {
    let Some(k) = k() else { return };
    for d in [DType::F16, DType::BF16] {
        if !k.supports(d) {
            continue;
        }
        let bits: Vec<u8> = (0..=u16::MAX).flat_map(|b| b.to_le_bytes()).collect();
        let vals = decode(&bits, d);
        let x = k.upload(&bits).unwrap();
        let out = out_buffer(k, vals.len(), d);
        let shape = [vals.len()];
        let mut batch = Batch::new();
        let view = Strided {
            buffer: &x,
            window: None,
            dtype: d,
            shape: &shape,
            strides: &[1],
            offset: 0,
        };
        let o = Contig {
            buffer: &out,
            window: None,
            dtype: d,
            shape: &shape,
        };
        k.unary(&mut batch, UnaryOp::Exp, &view, &o).unwrap();
        k.submit(batch).unwrap();
        let got = k.read_blocking(&out, 0, bits.len() as u64).unwrap();
        let (mut off_by_one, mut worst) = (0, 0.0f64);
        for (i, v) in vals.iter().enumerate() {
            let want = round_to(v.exp(), d);
            let g = u16::from_le_bytes([got[2 * i], got[2 * i + 1]]);
            let w = u16::from_le_bytes(encode(&[want], d).try_into().unwrap());
            if v.is_nan() {
                assert!(
                    decode(&g.to_le_bytes(), d)[0].is_nan(),
                    "{d} exp({v}) not NaN"
                );
                continue;
            }
            if g != w {
                // Finite positive results: adjacent bit patterns are adjacent values.
                assert!(
                    want.is_finite() && g.abs_diff(w) == 1,
                    "{d} exp({v}): got bits {g:#06x}, want {w:#06x} ({want})"
                );
                off_by_one += 1;
                worst = worst.max(v.abs());
            }
        }
        println!("{d} exp: {off_by_one} of 65536 results 1 ulp off (largest |x| {worst})");
    }
}

/// expm1, log1p, erf, tanh, sin keep relative accuracy near 0.
#[test]
fn unary_near_zero_accuracy() {
    let Some(k) = k() else { return };
    use UnaryOp::*;
    for op in [Expm1, Log1p, Erf, Tanh, Sin, Sigmoid] {
        unary_cases(
            k,
            op,
            DType::F32,
            &[1000],
            &[Lay::Contig],
            Data::Range(-1e-3, 1e-3),
            5,
        );
    }
}

#[test]
fn unary_big_sizes() {
    let Some(k) = k() else { return };
    for d in DTYPES {
        if k.supports(d) {
            let op = if d == DType::Bool {
                UnaryOp::LogicalNot
            } else {
                UnaryOp::Abs
            };
            unary_cases(
                k,
                op,
                d,
                &BIG[..1],
                &[Lay::Contig, Lay::Trans],
                Data::Eighths,
                3,
            );
        }
    }
    unary_cases(
        k,
        UnaryOp::Exp,
        DType::F32,
        &BIG[..1],
        &[Lay::Offset(1)],
        Data::Range(-5.0, 5.0),
        4,
    );
}

// ---------------------------------------------------------------- copy / cast

/// Cast rules: integers to narrower integers wrap; floats truncate and saturate.
fn cast_ref(x: f64, from: DType, to: DType) -> f64 {
    if !from.is_float() && !to.is_float() {
        wrap(x as i128, to)
    } else {
        round_to(x, to)
    }
}

fn copy_cases(k: &Kernels, from: DType, to: DType, sizes: &[usize], lays: &[Lay], seed: u64) {
    let mut rng = Rng(seed);
    let mut batch = Batch::new();
    let mut cases = Vec::new();
    for &n in sizes {
        let shape = shape_for(n);
        for &la in lays {
            // Wide float data exercises saturation (float -> int) and overflow (-> f16).
            let data = if to.is_float() {
                Data::Eighths
            } else {
                Data::Range(-1e10, 1e10)
            };
            let a = Input::new(k, &mut rng, from, &shape, la, data, true);
            let out = out_buffer(k, n, to);
            k.copy(
                &mut batch,
                &a.view(),
                &Contig {
                    buffer: &out,
                    window: None,
                    dtype: to,
                    shape: &shape,
                },
            )
            .unwrap();
            let want = a.vals.iter().map(|x| cast_ref(*x, from, to)).collect();
            // Integers above 2^24 reach bf16 through f32 (two roundings): one ulp.
            let rtol = if to == DType::BF16 && !from.is_float() {
                ulp(to)
            } else {
                0.0
            };
            cases.push(Case {
                label: format!("copy {from}->{to} n={n} {la:?}"),
                out,
                dtype: to,
                want,
                atol: 0.0,
                rtol,
                skip: vec![],
            });
        }
    }
    finish(k, batch, cases);
}

#[test]
fn copy_all_dtype_pairs() {
    let Some(k) = k() else { return };
    for (i, from) in DTYPES.iter().enumerate() {
        for (j, to) in DTYPES.iter().enumerate() {
            if k.supports(*from) && k.supports(*to) {
                copy_cases(
                    k,
                    *from,
                    *to,
                    &SMALL,
                    &[
                        Lay::Contig,
                        Lay::Offset(7),
                        Lay::Trans,
                        Lay::Neg,
                        Lay::Scalar,
                    ],
                    (i * 10 + j) as u64,
                );
            }
        }
    }
}

/// The default device converts f16 in hardware where its probe passed; the fallback
/// device keeps the software conversions (the browser's path): both give the same
/// correctly rounded results.
#[test]
fn f16_software_and_hardware_conversions() {
    let Some(k) = k() else { return };
    let Some(kf) = k_fallback() else { return };
    assert!(
        !kf.target().f16,
        "the fallback device converts f16 in software"
    );
    eprintln!(
        "default device f16 conversions in hardware: {}",
        k.target().f16
    );
    for dev in [k, kf] {
        if !dev.supports(DType::F16) {
            continue;
        }
        for (i, from) in DTYPES.iter().enumerate() {
            copy_cases(
                dev,
                *from,
                DType::F16,
                &SMALL,
                &[Lay::Contig, Lay::Trans],
                300 + i as u64,
            );
            copy_cases(
                dev,
                DType::F16,
                *from,
                &SMALL,
                &[Lay::Contig, Lay::Neg],
                310 + i as u64,
            );
        }
        binary_cases(dev, BinaryOp::Add, DType::F16, &SMALL, &BINARY_LAYS, 320);
        unary_cases(
            dev,
            UnaryOp::Exp,
            DType::F16,
            &SMALL,
            &UNARY_LAYS,
            unary_data("exp"),
            321,
        );
    }
}

#[test]
fn copy_big_sizes() {
    let Some(k) = k() else { return };
    for d in DTYPES {
        if k.supports(d) {
            copy_cases(k, d, d, &BIG[..1], &[Lay::Trans, Lay::Offset(1)], 11);
        }
    }
    copy_cases(k, DType::F32, DType::BF16, &BIG[..1], &[Lay::Contig], 12);
    copy_cases(k, DType::U8, DType::F32, &BIG[1..], &[Lay::Neg], 13);
}

/// Same-dtype copies move bits: NaN payloads and signalling NaNs survive.
#[test]
fn copy_keeps_nan_bits() {
    let Some(k) = k() else { return };
    let bits: [u16; 4] = [0x7c01, 0xfe12, 0x7fff, 0x0001];
    let src = k.upload(bytemuck::cast_slice(&bits)).unwrap();
    for d in [DType::F16, DType::BF16] {
        if !k.supports(d) {
            continue;
        }
        let out = k.create_buffer(8, None).unwrap();
        let mut b = Batch::new();
        let x = Strided {
            buffer: &src,
            window: None,
            dtype: d,
            shape: &[4],
            strides: &[1],
            offset: 0,
        };
        k.copy(
            &mut b,
            &x,
            &Contig {
                buffer: &out,
                window: None,
                dtype: d,
                shape: &[4],
            },
        )
        .unwrap();
        k.submit(b).unwrap();
        assert_eq!(
            k.read_blocking(&out, 0, 8).unwrap(),
            bytemuck::cast_slice::<u16, u8>(&bits)
        );
    }
}

// ---------------------------------------------------------------- select, fill, arange, axpby

#[test]
fn select_all_dtypes() {
    let Some(k) = k() else { return };
    for d in DTYPES {
        if !k.supports(d) {
            continue;
        }
        let mut rng = Rng(21);
        let mut batch = Batch::new();
        let mut cases = Vec::new();
        let sizes: Vec<usize> = SMALL
            .iter()
            .copied()
            .chain(if d == DType::F32 {
                vec![BIG[0]]
            } else {
                vec![]
            })
            .collect();
        for n in sizes {
            let shape = shape_for(n);
            for (lc, lx, ly) in [
                (Lay::Contig, Lay::Contig, Lay::Contig),
                (Lay::Scalar, Lay::Contig, Lay::Scalar),
                (Lay::Trans, Lay::Offset(5), Lay::Neg),
                (Lay::Contig, Lay::BcastRow, Lay::Step2),
            ] {
                let c = Input::new(k, &mut rng, DType::Bool, &shape, lc, Data::Eighths, false);
                let x = Input::new(k, &mut rng, d, &shape, lx, Data::Eighths, true);
                let y = Input::new(k, &mut rng, d, &shape, ly, Data::Eighths, true);
                let out = out_buffer(k, n, d);
                k.select(
                    &mut batch,
                    &c.view(),
                    &x.view(),
                    &y.view(),
                    &Contig {
                        buffer: &out,
                        window: None,
                        dtype: d,
                        shape: &shape,
                    },
                )
                .unwrap();
                let want = (0..n)
                    .map(|i| {
                        if c.vals[i] != 0.0 {
                            x.vals[i]
                        } else {
                            y.vals[i]
                        }
                    })
                    .collect();
                cases.push(Case {
                    label: format!("select {d} n={n} {lc:?}"),
                    out,
                    dtype: d,
                    want,
                    atol: 0.0,
                    rtol: 0.0,
                    skip: vec![],
                });
            }
        }
        finish(k, batch, cases);
    }
}

#[test]
fn fill_and_arange_all_dtypes() {
    let Some(k) = k() else { return };
    for d in DTYPES {
        if !k.supports(d) {
            continue;
        }
        let mut batch = Batch::new();
        let mut cases = Vec::new();
        for n in [0usize, 1, 3, 5, 17, 1000, BIG[0]] {
            for v in [2.5, -3.75, 1e10, f64::NAN] {
                let out = out_buffer(k, n, d);
                k.fill(
                    &mut batch,
                    &Contig {
                        buffer: &out,
                        window: None,
                        dtype: d,
                        shape: &[n],
                    },
                    v,
                )
                .unwrap();
                cases.push(Case {
                    label: format!("fill {d} {v} n={n}"),
                    out,
                    dtype: d,
                    want: vec![round_to(v, d); n],
                    atol: 0.0,
                    rtol: 0.0,
                    skip: vec![],
                });
            }
            let (start, step) = if d == DType::Bool {
                (-2.0, 1.0)
            } else {
                (3.0, 2.0)
            };
            let out = out_buffer(k, n, d);
            k.arange(
                &mut batch,
                &Contig {
                    buffer: &out,
                    window: None,
                    dtype: d,
                    shape: &[n],
                },
                start,
                step,
            )
            .unwrap();
            let want = (0..n)
                .map(|i| {
                    if d.is_float() {
                        round_to((start + i as f64 * step) as f32 as f64, d)
                    } else {
                        wrap((start as i128) + i as i128 * step as i128, d)
                    }
                })
                .collect();
            let rtol = if d.is_float() { ulp(d) + 2e-7 } else { 0.0 };
            cases.push(Case {
                label: format!("arange {d} n={n}"),
                out,
                dtype: d,
                want,
                atol: 0.0,
                rtol,
                skip: vec![],
            });
        }
        finish(k, batch, cases);
    }
}

#[test]
fn axpby_float_dtypes() {
    let Some(k) = k() else { return };
    for d in [DType::F32, DType::F16, DType::BF16] {
        if !k.supports(d) {
            continue;
        }
        let mut rng = Rng(31);
        let mut batch = Batch::new();
        let mut cases = Vec::new();
        let (alpha, beta) = (1.5, -0.25);
        for &n in SMALL.iter().chain(&BIG[..1]) {
            let shape = shape_for(n);
            for (la, lb) in [
                (Lay::Contig, Lay::Contig),
                (Lay::Trans, Lay::Scalar),
                (Lay::Offset(3), Lay::Neg),
            ] {
                let x = Input::new(k, &mut rng, d, &shape, la, Data::Range(-10.0, 10.0), true);
                let y = Input::new(k, &mut rng, d, &shape, lb, Data::Range(-10.0, 10.0), true);
                let out = out_buffer(k, n, d);
                k.axpby(
                    &mut batch,
                    &x.view(),
                    &y.view(),
                    alpha,
                    beta,
                    &Contig {
                        buffer: &out,
                        window: None,
                        dtype: d,
                        shape: &shape,
                    },
                )
                .unwrap();
                let want = (0..n)
                    .map(|i| round_to(alpha * x.vals[i] + beta * y.vals[i], d))
                    .collect();
                cases.push(Case {
                    label: format!("axpby {d} n={n} {la:?}"),
                    out,
                    dtype: d,
                    want,
                    atol: 1e-5,
                    rtol: ulp(d) + 1e-6,
                    skip: vec![],
                });
            }
        }
        finish(k, batch, cases);
    }
}

/// In place: `x = x + y` reading and writing one buffer.
#[test]
fn in_place_binary() {
    let Some(k) = k() else { return };
    let xs: Vec<f32> = (0..1003).map(|i| i as f32).collect();
    let x = k.upload(bytemuck::cast_slice(&xs)).unwrap();
    let mut b = Batch::new();
    let v = Strided {
        buffer: &x,
        window: None,
        dtype: DType::F32,
        shape: &[1003],
        strides: &[1],
        offset: 0,
    };
    let two = k.upload(bytemuck::cast_slice(&[2.0f32])).unwrap();
    let s = Strided {
        buffer: &two,
        window: None,
        dtype: DType::F32,
        shape: &[1003],
        strides: &[0],
        offset: 0,
    };
    k.binary(
        &mut b,
        BinaryOp::Multiply,
        &v,
        &s,
        &Contig {
            buffer: &x,
            window: None,
            dtype: DType::F32,
            shape: &[1003],
        },
    )
    .unwrap();
    k.submit(b).unwrap();
    let got: Vec<f32> = bytemuck::cast_slice(&k.read_blocking(&x, 0, 4012).unwrap()).to_vec();
    assert!(got.iter().enumerate().all(|(i, v)| *v == 2.0 * i as f32));
    // A shifted view of the output buffer cannot be computed in place.
    let shifted = Strided {
        window: None,
        offset: 1,
        shape: &[1000],
        ..v
    };
    let mut b = Batch::new();
    let e = k.unary(
        &mut b,
        UnaryOp::Negative,
        &shifted,
        &Contig {
            buffer: &x,
            window: None,
            dtype: DType::F32,
            shape: &[1000],
        },
    );
    assert!(matches!(e, Err(Error::Shape(_))), "{e:?}");
}

#[test]
fn errors_are_reported() {
    let Some(k) = k() else { return };
    let buf = k.create_buffer(64, None).unwrap();
    let v = Strided {
        buffer: &buf,
        window: None,
        dtype: DType::F32,
        shape: &[4],
        strides: &[1],
        offset: 0,
    };
    let out = Contig {
        buffer: &buf,
        window: None,
        dtype: DType::F32,
        shape: &[4],
    };
    let mut b = Batch::new();
    let other = k.create_buffer(64, None).unwrap();
    let o2 = Contig {
        buffer: &other,
        window: None,
        dtype: DType::F32,
        shape: &[4],
    };
    assert!(matches!(
        k.binary(&mut b, BinaryOp::BitwiseAnd, &v, &v, &o2),
        Err(Error::OpNotDefined { .. })
    ));
    assert!(matches!(
        k.unary(
            &mut b,
            UnaryOp::Sqrt,
            &Strided {
                window: None,
                dtype: DType::I32,
                ..v
            },
            &o2
        ),
        Err(Error::OpNotDefined { .. })
    ));
    // Reading past the end of the buffer.
    let far = Strided {
        window: None,
        offset: 100,
        ..v
    };
    assert!(matches!(
        k.unary(&mut b, UnaryOp::Abs, &far, &o2),
        Err(Error::Shape(_))
    ));
    let neg = Strided {
        window: None,
        strides: &[-1],
        offset: 2,
        ..v
    };
    assert!(matches!(
        k.unary(&mut b, UnaryOp::Abs, &neg, &o2),
        Err(Error::Shape(_))
    ));
    // Wrong output dtype for a comparison.
    assert!(matches!(
        k.binary(&mut b, BinaryOp::Less, &v, &v, &o2),
        Err(Error::Shape(_))
    ));
    let _ = out;
    // Larger than the device allows.
    let too_big = k.caps().max_buffer + 1;
    let e = k.create_buffer(too_big, None).unwrap_err();
    assert!(matches!(e, Error::BufferTooLarge { .. }), "{e}");
    assert!(
        e.to_string()
            .contains(&too_big.div_ceil(16).saturating_mul(16).to_string())
            || e.to_string().contains("bytes")
    );
    if !k.caps().f16 {
        let h = Strided {
            window: None,
            dtype: DType::F16,
            ..v
        };
        let e = k
            .unary(
                &mut b,
                UnaryOp::Abs,
                &h,
                &Contig {
                    window: None,
                    dtype: DType::F16,
                    ..o2
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("f16"), "{e}");
    }
    assert!(b.is_empty());
}

#[test]
fn unaligned_read() {
    let Some(k) = k() else { return };
    let data: Vec<u8> = (0..100u8).collect();
    let buf = k.upload(&data).unwrap();
    assert_eq!(k.read_blocking(&buf, 3, 7).unwrap(), &data[3..10]);
    assert_eq!(k.read_blocking(&buf, 97, 3).unwrap(), &data[97..100]);
    assert!(k.read_blocking(&buf, 0, 0).unwrap().is_empty());
}

/// Windows bind part of a buffer: offsets count from the window's start, the
/// output's window is written and nothing around it; a misplaced window and a
/// buffer past the binding limit bound whole are errors.
#[test]
fn windows_bind_parts_of_buffers() {
    let Some(k) = k() else { return };
    let n = 4096usize;
    let data: Vec<f32> = (0..n).map(|i| i as f32 - 1000.0).collect();
    let x = k.upload(bytemuck::cast_slice(&data)).unwrap();
    let out = out_buffer(k, n, DType::F32);
    let align = k.window_align();
    // Elements 100.. of a window starting at byte 2 * align, 300 of them, written
    // from byte align of the output.
    let start = 2 * align;
    let xin = Strided {
        buffer: &x,
        window: Some(Window { start, len: 4096 }),
        dtype: DType::F32,
        shape: &[300],
        strides: &[1],
        offset: 100,
    };
    let o = Contig {
        buffer: &out,
        window: Some(Window {
            start: align,
            len: 1200,
        }),
        dtype: DType::F32,
        shape: &[300],
    };
    let mut b = Batch::new();
    k.unary(&mut b, UnaryOp::Abs, &xin, &o).unwrap();
    k.submit(b).unwrap();
    let all = k.read_blocking(&out, 0, out.size()).unwrap();
    let first = (align / 4) as usize;
    let got: &[f32] = bytemuck::cast_slice(&all[first * 4..(first + 300) * 4]);
    for (i, v) in got.iter().enumerate() {
        let want = data[(start / 4) as usize + 100 + i].abs();
        assert_eq!(*v, want, "[{i}]");
    }
    assert!(all[..first * 4].iter().all(|&b| b == GUARD));
    assert!(all[(first + 300) * 4..].iter().all(|&b| b == GUARD));
    // A view past its window's end.
    let long = Strided {
        shape: &[1100],
        ..xin
    };
    let mut b = Batch::new();
    assert!(
        k.unary(
            &mut b,
            UnaryOp::Abs,
            &long,
            &Contig {
                shape: &[1100],
                window: None,
                ..o
            }
        )
        .is_err()
    );
    // A start off the alignment.
    let off = Strided {
        window: Some(Window {
            start: 4,
            len: 4096,
        }),
        ..xin
    };
    let e = k.unary(&mut b, UnaryOp::Abs, &off, &o).unwrap_err();
    assert!(e.to_string().contains("multiple of"), "{e}");
    // A buffer past the binding limit cannot be bound whole.
    let limit = k.caps().max_storage_binding;
    if limit < k.caps().max_buffer && limit <= 1 << 30 {
        let big = k.create_buffer(limit + 16, None).unwrap();
        let whole = Strided {
            buffer: &big,
            window: None,
            ..xin
        };
        let e = k.unary(&mut b, UnaryOp::Abs, &whole, &o).unwrap_err();
        assert!(matches!(e, Error::BufferTooLarge { .. }), "{e}");
        assert!(e.to_string().contains("Window"), "{e}");
    }
}

/// `Caps::loop_budget` tells the truth: a user kernel counting to 100 000 in one
/// loop gets there, except on an adapter with a budget, where its loop stops early
/// (Mesa's llvmpipe, CI's lavapipe) and the count says so.
#[test]
fn the_loop_budget_is_detected() {
    let Some(k) = k() else { return };
    let source = "
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(1)
fn main() {
    var n = 0u;
    for (var i = 0u; i < p[0]; i++) { n += 1u; }
    y[0] = n;
}";
    let pipe = k
        .user_pipeline(&wmx_kernels::UserModule {
            label: "count",
            source,
            entry: "main",
            outputs: 1,
            inputs: 0,
        })
        .unwrap();
    let out = k.create_buffer(16, None).unwrap();
    let mut b = Batch::new();
    b.dispatch_user(&pipe, &[&out], &[100_000], [1, 1, 1])
        .unwrap();
    k.submit(b).unwrap();
    let got = u32::from_le_bytes(
        k.read_blocking(&out, 0, 4).unwrap()[..4]
            .try_into()
            .unwrap(),
    );
    match k.caps().loop_budget {
        Some(budget) => assert!(got <= budget, "{got} iterations past a budget of {budget}"),
        None => assert_eq!(got, 100_000, "{}", k.caps().adapter_name),
    }
}
