//! Convolution and pooling against f64 host loops written from the definitions
//! (a convolution gathers, a transposed one scatters), on random data of every
//! float dtype: strides, asymmetric and oversized padding, kernel and input
//! dilation, groups up to depthwise, flips, 1-D to 3-D, batch 0, channels-first,
//! sliced and broadcast views; pooling with padding, dilation, ceil mode and both
//! divisors, NaN and integers; adaptive pooling and sliding windows; errors;
//! gradients against central differences, jvp and vmap; and PyTorch goldens
//! (`tests/goldens/torch_conv.py`) for the layouts PyTorch users bring.

use super::goldens::Goldens;
use crate::host::indices;
use crate::rng::Rng;
use crate::val::{Val, make_ok, read_ok, round_to};
use wmx_core::nn::{self, Layer};
use wmx_core::{self as wmx, Array, ConvOptions, DType, Device, PoolOptions, Result};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

fn arr(dev: &Device, dt: DType, v: &[f64], shape: &[usize]) -> Array {
    let vals: Vec<Val> = v.iter().map(|&x| Val::F(x)).collect();
    make_ok(dev, dt, &vals, shape)
}

fn f64s(a: &Array, what: &str) -> Vec<f64> {
    read_ok(a, what).into_iter().map(Val::f).collect()
}

fn rand(rng: &mut Rng, dt: DType, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| round_to(dt, rng.uniform(-2.0, 2.0)))
        .collect()
}

/// Row-major offset of `idx` in `shape`.
fn at(shape: &[usize], idx: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |o, (&i, &s)| o * s + i)
}

/// A convolution in the reference's terms: shapes and per-axis settings.
#[derive(Clone, Debug)]
struct Conv {
    x: Vec<usize>,
    w: Vec<usize>,
    stride: Vec<usize>,
    lo: Vec<i64>,
    hi: Vec<i64>,
    kdil: Vec<usize>,
    idil: Vec<usize>,
    groups: usize,
    flip: bool,
}

impl Conv {
    fn new(x: &[usize], w: &[usize]) -> Conv {
        let d = x.len() - 2;
        Conv {
            x: x.to_vec(),
            w: w.to_vec(),
            stride: vec![1; d],
            lo: vec![0; d],
            hi: vec![0; d],
            kdil: vec![1; d],
            idil: vec![1; d],
            groups: 1,
            flip: false,
        }
    }

    fn out_shape(&self) -> Vec<usize> {
        let d = self.x.len() - 2;
        let mut s = vec![self.x[0]];
        for i in 0..d {
            let len = self.x[1 + i] as i64;
            let dil = if len == 0 {
                0
            } else {
                (len - 1) * self.idil[i] as i64 + 1
            };
            let ext = (self.w[1 + i] as i64 - 1) * self.kdil[i] as i64 + 1;
            s.push(((dil + self.lo[i] + self.hi[i] - ext) / self.stride[i] as i64 + 1) as usize);
        }
        s.push(self.w[0]);
        s
    }

    fn options(&self) -> ConvOptions {
        ConvOptions {
            stride: self.stride.clone(),
            padding: self
                .lo
                .iter()
                .zip(&self.hi)
                .map(|(&a, &b)| (a as usize, b as usize))
                .collect(),
            kernel_dilation: self.kdil.clone(),
            input_dilation: self.idil.clone(),
            groups: self.groups,
            flip: self.flip,
        }
    }
}

/// The convolution by its definition: each output gathers `x` at
/// `o * stride + k * kdil - lo` of the dilated input (zero off the grid).
fn conv_ref(x: &[f64], w: &[f64], c: &Conv) -> Vec<f64> {
    let d = c.x.len() - 2;
    let out = c.out_shape();
    let (cin, cout) = (c.x[d + 1], c.w[0]);
    let (cg, og) = (cin / c.groups, cout / c.groups);
    let kernel = &c.w[1..=d];
    let mut y = vec![0.0; out.iter().product()];
    for o in indices(&out) {
        let g = o[d + 1] / og;
        let mut acc = 0.0;
        'tap: for k in indices(kernel) {
            let mut src = vec![o[0]];
            for i in 0..d {
                let q = (o[1 + i] * c.stride[i] + k[i] * c.kdil[i]) as i64 - c.lo[i];
                let len = c.x[1 + i] as i64;
                if q < 0 || q % c.idil[i] as i64 != 0 || q / c.idil[i] as i64 >= len {
                    continue 'tap;
                }
                src.push((q / c.idil[i] as i64) as usize);
            }
            let mut kk: Vec<usize> = k.clone();
            if c.flip {
                for i in 0..d {
                    kk[i] = kernel[i] - 1 - k[i];
                }
            }
            for ci in 0..cg {
                let mut xi = src.clone();
                xi.push(g * cg + ci);
                let mut wi = vec![o[d + 1]];
                wi.extend(&kk);
                wi.push(ci);
                acc += x[at(&c.x, &xi)] * w[at(&c.w, &wi)];
            }
        }
        y[at(&out, &o)] = acc;
    }
    y
}

/// `|got - want|` within the dtype's accumulated rounding of `scale` (the
/// reference on absolute values).
fn close_to(what: &str, got: &[f64], want: &[f64], scale: &[f64], dt: DType) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let eps = match dt {
        DType::F64 => 1e-12,
        DType::F32 => 2e-6,
        DType::F16 => 2f64.powi(-9),
        _ => 2f64.powi(-6),
    };
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        assert!(
            (g - w).abs() <= eps * (s + w.abs()) + 1e-12,
            "{what}: element {i}: got {g}, want {w} (scale {s})"
        );
    }
}

fn abs(v: &[f64]) -> Vec<f64> {
    v.iter().map(|x| x.abs()).collect()
}

fn float_dtypes(dev: &Device) -> Vec<DType> {
    [DType::F32, DType::F16, DType::BF16, DType::F64]
        .into_iter()
        .filter(|&dt| super::supported(dev, dt))
        .collect()
}

fn conv_cases() -> Vec<Conv> {
    let mut v = vec![];
    let mut c = Conv::new(&[2, 9, 3], &[4, 3, 3]);
    (c.lo, c.hi) = (vec![1], vec![1]);
    v.push(c);
    // Stride past the kernel, asymmetric padding, dilation 2, two groups.
    let mut c = Conv::new(&[1, 10, 4], &[6, 2, 2]);
    (c.stride, c.hi, c.kdil, c.groups) = (vec![3], vec![2], vec![2], 2);
    v.push(c);
    // A 1-wide depthwise kernel.
    let mut c = Conv::new(&[3, 7, 5], &[5, 1, 1]);
    c.groups = 5;
    v.push(c);
    // Padding past the kernel, dilation 3, flipped.
    let mut c = Conv::new(&[2, 5, 2], &[3, 3, 2]);
    (c.lo, c.hi, c.kdil, c.flip) = (vec![4], vec![4], vec![3], true);
    v.push(c);
    // Batch 0.
    v.push(Conv::new(&[0, 6, 2], &[3, 3, 2]));
    // Input dilation.
    let mut c = Conv::new(&[2, 6, 3], &[2, 3, 3]);
    (c.idil, c.lo, c.hi) = (vec![2], vec![2], vec![1]);
    v.push(c);
    let mut c = Conv::new(&[2, 7, 6, 3], &[4, 3, 3, 3]);
    (c.stride, c.lo, c.hi) = (vec![2, 1], vec![1, 0], vec![1, 2]);
    v.push(c);
    // Depthwise with a channel multiplier of 2, dilation 2.
    let mut c = Conv::new(&[1, 9, 8, 6], &[12, 3, 3, 1]);
    (c.groups, c.kdil, c.lo, c.hi) = (6, vec![2, 2], vec![2, 2], vec![2, 2]);
    v.push(c);
    let mut c = Conv::new(&[2, 5, 5, 4], &[6, 2, 3, 2]);
    (c.groups, c.stride) = (2, vec![3, 2]);
    v.push(c);
    // Depthwise, one filter per channel: stride, padding, dilation.
    let mut c = Conv::new(&[2, 7, 6, 4], &[4, 3, 3, 1]);
    (c.groups, c.stride, c.lo, c.hi, c.kdil) = (4, vec![2, 1], vec![1, 1], vec![1, 0], vec![1, 2]);
    v.push(c);
    let mut c = Conv::new(&[1, 3, 4, 5, 3], &[3, 2, 3, 2, 1]);
    (c.groups, c.lo, c.hi) = (3, vec![0, 1, 1], vec![1, 1, 0]);
    v.push(c);
    // Depthwise over whole vec4s of words (f32 and 16-bit channel rows of 8 and 16),
    // odd lengths (partial blocks of four positions), stride, padding past the
    // kernel, dilation; 12 channels are whole vec4s in f32 only.
    let mut c = Conv::new(&[2, 7, 9, 8], &[8, 3, 3, 1]);
    (c.groups, c.lo, c.hi) = (8, vec![1, 1], vec![1, 1]);
    v.push(c);
    let mut c = Conv::new(&[1, 6, 11, 16], &[16, 3, 2, 1]);
    (c.groups, c.stride, c.lo, c.hi, c.kdil) = (16, vec![1, 2], vec![3, 1], vec![0, 2], vec![2, 3]);
    v.push(c);
    let mut c = Conv::new(&[3, 13, 12], &[12, 5, 1]);
    (c.groups, c.lo, c.hi, c.flip) = (12, vec![2], vec![2], true);
    v.push(c);
    // Channel rows of whole vec4s in every dtype (the GPU's vec4 columns).
    let mut c = Conv::new(&[2, 5, 6, 16], &[4, 3, 2, 16]);
    (c.stride, c.lo, c.hi) = (vec![2, 1], vec![1, 0], vec![1, 1]);
    v.push(c);
    // More f32 weights than the GPU kernel stages in workgroup memory (33 taps x 64).
    let mut c = Conv::new(&[1, 40, 64], &[64, 33, 1]);
    (c.groups, c.lo, c.hi) = (64, vec![16], vec![16]);
    v.push(c);
    // One pixel, a 1x1 kernel.
    v.push(Conv::new(&[1, 1, 1, 3], &[2, 1, 1, 3]));
    let mut c = Conv::new(&[1, 4, 5, 3, 2], &[3, 2, 3, 2, 2]);
    (c.stride, c.lo, c.hi) = (vec![1, 2, 1], vec![1, 1, 0], vec![0, 1, 1]);
    v.push(c);
    v
}

/// `conv_general` on every case and float dtype, with the input given
/// channels-first (through `to_channels_last`), sliced and broadcast as well.
pub fn conv_values(dev: &Device) {
    let mut rng = Rng::new(0xc0);
    for dt in float_dtypes(dev) {
        for c in conv_cases() {
            let what = format!("conv_general {c:?} {dt}");
            let (nx, nw) = (c.x.iter().product(), c.w.iter().product());
            let (x, w) = (rand(&mut rng, dt, nx), rand(&mut rng, dt, nw));
            let want = conv_ref(&x, &w, &c);
            let scale = conv_ref(&abs(&x), &abs(&w), &c);
            let (xa, wa) = (arr(dev, dt, &x, &c.x), arr(dev, dt, &w, &c.w));
            let y = ok(&what, wmx::conv_general(&xa, &wa, &c.options()));
            assert_eq!(y.shape(), c.out_shape().as_slice(), "{what}: shape");
            assert_eq!(y.dtype(), dt, "{what}: dtype");
            close_to(&what, &f64s(&y, &what), &want, &scale, dt);
            if dt != DType::F32 {
                continue;
            }
            // Channels-first storage seen through a view.
            let d = c.x.len() - 2;
            let mut perm = vec![0];
            perm.push(d + 1);
            perm.extend(1..=d);
            let mut cf_shape: Vec<usize> = perm.iter().map(|&p| c.x[p]).collect();
            let mut cf = vec![0.0; nx];
            for i in indices(&c.x) {
                let j: Vec<usize> = perm.iter().map(|&p| i[p]).collect();
                cf[at(&cf_shape, &j)] = x[at(&c.x, &i)];
            }
            let view = ok(&what, wmx::to_channels_last(&arr(dev, dt, &cf, &cf_shape)));
            let y = ok(&what, wmx::conv_general(&view, &wa, &c.options()));
            close_to(
                &format!("{what}, channels-first input"),
                &f64s(&y, &what),
                &want,
                &scale,
                dt,
            );
            // Every other element of a twice-as-long axis 1.
            if c.x[1] > 0 {
                cf_shape = c.x.clone();
                cf_shape[1] = 2 * c.x[1];
                let mut big = vec![9.0; nx * 2];
                for i in indices(&c.x) {
                    let mut j = i.clone();
                    j[1] *= 2;
                    big[at(&cf_shape, &j)] = x[at(&c.x, &i)];
                }
                let mut s = vec![wmx::Slice::ALL; 2];
                s[1] = wmx::Slice::new(None, None, 2);
                let view = ok(&what, arr(dev, dt, &big, &cf_shape).slice(&s));
                let y = ok(&what, wmx::conv_general(&view, &wa, &c.options()));
                close_to(
                    &format!("{what}, sliced input"),
                    &f64s(&y, &what),
                    &want,
                    &scale,
                    dt,
                );
            }
        }
    }
    // One image broadcast over a batch of 3.
    let c = Conv::new(&[3, 6, 5, 2], &[3, 2, 2, 2]);
    let one = rand(&mut rng, DType::F32, 6 * 5 * 2);
    let w = rand(&mut rng, DType::F32, 24);
    let x: Vec<f64> = (0..3).flat_map(|_| one.clone()).collect();
    let xb = ok(
        "broadcast",
        arr(dev, DType::F32, &one, &[1, 6, 5, 2]).broadcast_to(&[3, 6, 5, 2]),
    );
    let y = ok(
        "broadcast",
        wmx::conv2d(
            &xb,
            &arr(dev, DType::F32, &w, &c.w),
            [1, 1],
            [0, 0],
            [1, 1],
            1,
        ),
    );
    let (want, scale) = (conv_ref(&x, &w, &c), conv_ref(&abs(&x), &abs(&w), &c));
    close_to(
        "conv2d of a broadcast input",
        &f64s(&y, "b"),
        &want,
        &scale,
        DType::F32,
    );
}

/// The transposed convolution by its definition: each input element scatters
/// `x * w` to `i * stride - padding + k * dilation` (positions off the output
/// dropped).
fn conv_transpose_ref(
    x: &[f64],
    xs: &[usize],
    w: &[f64],
    ws: &[usize],
    (stride, padding, dil, op, groups): (&[usize], &[usize], &[usize], &[usize], usize),
) -> (Vec<f64>, Vec<usize>) {
    let d = xs.len() - 2;
    let (cin, cout) = (xs[d + 1], ws[0]);
    let (cg, og) = (cin / groups, cout / groups);
    let mut out = vec![xs[0]];
    for i in 0..d {
        out.push(
            (xs[1 + i] - 1) * stride[i] + dil[i] * (ws[1 + i] - 1) + op[i] + 1 - 2 * padding[i],
        );
    }
    out.push(cout);
    let mut y = vec![0.0; out.iter().product()];
    for xi in indices(xs) {
        let (c, g) = (xi[d + 1], xi[d + 1] / cg);
        for k in indices(&ws[1..=d]) {
            let mut pos = vec![xi[0]];
            let mut inside = true;
            for i in 0..d {
                let p = (xi[1 + i] * stride[i] + k[i] * dil[i]) as i64 - padding[i] as i64;
                inside &= p >= 0 && p < out[1 + i] as i64;
                pos.push(p.max(0) as usize);
            }
            if !inside {
                continue;
            }
            for o in 0..og {
                let mut yi = pos.clone();
                yi.push(g * og + o);
                let mut wi = vec![g * og + o];
                wi.extend(&k);
                wi.push(c % cg);
                y[at(&out, &yi)] += x[at(xs, &xi)] * w[at(ws, &wi)];
            }
        }
    }
    (y, out)
}

type TransposeCase = (Vec<usize>, Vec<usize>, [Vec<usize>; 4], usize);

/// `conv_transpose_general` and its 1-3-D forms against the scatter loop,
/// padding past the kernel (a crop) and output padding included.
pub fn conv_transpose_values(dev: &Device) {
    let mut rng = Rng::new(0x7c);
    let cases: Vec<TransposeCase> = vec![
        (
            vec![2, 5, 3],
            vec![4, 3, 3],
            [vec![2], vec![1], vec![1], vec![1]],
            1,
        ),
        (
            vec![1, 4, 3, 4],
            vec![6, 3, 2, 2],
            [vec![2, 3], vec![0, 1], vec![2, 1], vec![1, 0]],
            2,
        ),
        (
            vec![1, 8, 2],
            vec![2, 2, 2],
            [vec![3], vec![3], vec![1], vec![0]],
            1,
        ),
        (
            vec![1, 2, 3, 2, 2],
            vec![2, 2, 2, 2, 2],
            [vec![2; 3], vec![0; 3], vec![1; 3], vec![1, 0, 0]],
            1,
        ),
        (
            vec![0, 3, 2],
            vec![2, 2, 2],
            [vec![1], vec![0], vec![1], vec![0]],
            1,
        ),
    ];
    for dt in float_dtypes(dev) {
        for (xs, ws, [s, p, dl, op], groups) in &cases {
            let what = format!(
                "conv_transpose x {xs:?} w {ws:?} {s:?} {p:?} {dl:?} {op:?} g{groups} {dt}"
            );
            let x = rand(&mut rng, dt, xs.iter().product());
            let w = rand(&mut rng, dt, ws.iter().product());
            let geo = (&s[..], &p[..], &dl[..], &op[..], *groups);
            let (want, shape) = conv_transpose_ref(&x, xs, &w, ws, geo);
            let (scale, _) = conv_transpose_ref(&abs(&x), xs, &abs(&w), ws, geo);
            let (xa, wa) = (arr(dev, dt, &x, xs), arr(dev, dt, &w, ws));
            let y = ok(
                &what,
                match xs.len() {
                    3 => wmx::conv_transpose1d(&xa, &wa, s[0], p[0], dl[0], op[0], *groups),
                    4 => wmx::conv_transpose2d(
                        &xa,
                        &wa,
                        [s[0], s[1]],
                        [p[0], p[1]],
                        [dl[0], dl[1]],
                        [op[0], op[1]],
                        *groups,
                    ),
                    _ => wmx::conv_transpose_general(&xa, &wa, s, p, dl, op, *groups),
                },
            );
            assert_eq!(y.shape(), shape.as_slice(), "{what}: shape");
            close_to(&what, &f64s(&y, &what), &want, &scale, dt);
        }
    }
}

/// How a pooling reference reads each window.
#[derive(Clone, Debug)]
struct Pool {
    kernel: Vec<usize>,
    opts: PoolOptions,
}

/// Max or average pooling by its definition, window by window.
fn pool_ref(x: &[f64], xs: &[usize], p: &Pool, max: bool) -> (Vec<f64>, Vec<usize>) {
    let d = p.kernel.len();
    let o = &p.opts;
    let get = |v: &[usize], i: usize, dflt: usize| {
        if v.is_empty() {
            dflt
        } else {
            v[if v.len() == 1 { 0 } else { i }]
        }
    };
    let stride: Vec<usize> = (0..d).map(|i| get(&o.stride, i, p.kernel[i])).collect();
    let pad: Vec<usize> = (0..d).map(|i| get(&o.padding, i, 0)).collect();
    let dil: Vec<usize> = (0..d).map(|i| get(&o.dilation, i, 1)).collect();
    let mut out = vec![xs[0]];
    for i in 0..d {
        let ext = (p.kernel[i] - 1) * dil[i] + 1;
        let span = xs[1 + i] + 2 * pad[i];
        let mut n = if o.ceil_mode {
            (span - ext).div_ceil(stride[i]) + 1
        } else {
            (span - ext) / stride[i] + 1
        };
        if o.ceil_mode && (n - 1) * stride[i] >= xs[1 + i] + pad[i] {
            n -= 1;
        }
        out.push(n);
    }
    out.push(xs[d + 1]);
    let mut y = vec![0.0; out.iter().product()];
    for oi in indices(&out) {
        let (mut best, mut total, mut count) = (f64::NEG_INFINITY, 0.0, 0usize);
        for k in indices(&p.kernel) {
            let mut src = vec![oi[0]];
            let (mut inside, mut padded) = (true, true);
            for i in 0..d {
                let q = (oi[1 + i] * stride[i] + k[i] * dil[i]) as i64 - pad[i] as i64;
                let len = xs[1 + i] as i64;
                inside &= q >= 0 && q < len;
                padded &= q < len + pad[i] as i64;
                src.push(q.clamp(0, len - 1) as usize);
            }
            src.push(oi[d + 1]);
            if inside {
                let v = x[at(xs, &src)];
                best = if v.is_nan() || best.is_nan() {
                    f64::NAN
                } else {
                    best.max(v)
                };
                total += v;
            }
            count += usize::from(if o.count_include_pad { padded } else { inside });
        }
        y[at(&out, &oi)] = if max { best } else { total / count as f64 };
    }
    (y, out)
}

fn pool_cases() -> Vec<(Vec<usize>, Pool)> {
    let p = |kernel: &[usize],
             stride: &[usize],
             padding: &[usize],
             dilation: &[usize],
             ceil: bool,
             incl: bool| Pool {
        kernel: kernel.to_vec(),
        opts: PoolOptions {
            stride: stride.to_vec(),
            padding: padding.to_vec(),
            dilation: dilation.to_vec(),
            ceil_mode: ceil,
            count_include_pad: incl,
        },
    };
    vec![
        (
            vec![2, 7, 6, 3],
            p(&[3, 2], &[2], &[1], &[1, 2], true, true),
        ),
        (
            vec![2, 7, 6, 3],
            p(&[3, 3], &[2, 2], &[1, 1], &[], true, false),
        ),
        (vec![1, 9, 2], p(&[4], &[3], &[2], &[], false, true)),
        (vec![2, 8, 8, 1], p(&[2, 2], &[], &[], &[], false, true)),
        (
            vec![1, 5, 4, 6, 2],
            p(&[2, 3, 2], &[2, 1, 3], &[1, 1, 0], &[], true, false),
        ),
        (vec![0, 5, 3], p(&[2], &[1], &[], &[], false, true)),
    ]
}

/// `max_pool` and `avg_pool` against the window loop on every float dtype (NaN
/// and infinities in the max case), and `max_pool` on i32.
pub fn pool_values(dev: &Device) {
    let mut rng = Rng::new(0x900);
    for dt in float_dtypes(dev) {
        for (xs, p) in pool_cases() {
            let what = format!("pool {xs:?} {p:?} {dt}");
            let mut x = rand(&mut rng, dt, xs.iter().product());
            let xa = arr(dev, dt, &x, &xs);
            let (want, shape) = pool_ref(&x, &xs, &p, false);
            let y = ok(&what, wmx::avg_pool(&xa, &p.kernel, &p.opts));
            assert_eq!(y.shape(), shape.as_slice(), "{what}: avg shape");
            close_to(
                &format!("avg {what}"),
                &f64s(&y, &what),
                &want,
                &vec![2.0; want.len()],
                dt,
            );
            if x.len() > 5 {
                (x[1], x[3], x[4]) = (f64::NAN, f64::INFINITY, f64::NEG_INFINITY);
            }
            let xa = arr(dev, dt, &x, &xs);
            let (want, _) = pool_ref(&x, &xs, &p, true);
            let y = ok(&what, wmx::max_pool(&xa, &p.kernel, &p.opts));
            let got = f64s(&y, &what);
            assert_eq!(y.shape(), shape.as_slice(), "{what}: max shape");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g == w || (g.is_nan() && w.is_nan()),
                    "max {what}: element {i}: got {g}, want {w}"
                );
            }
        }
    }
    let (xs, p) = &pool_cases()[0];
    let x: Vec<f64> = (0..xs.iter().product())
        .map(|_| rng.int_in(-1000, 1000) as f64)
        .collect();
    let xa = make_ok(
        dev,
        DType::I32,
        &x.iter().map(|&v| Val::I(v as i128)).collect::<Vec<_>>(),
        xs,
    );
    let y = ok("max_pool i32", wmx::max_pool(&xa, &p.kernel, &p.opts));
    assert_eq!(y.dtype(), DType::I32);
    assert_eq!(
        f64s(&y, "i32"),
        pool_ref(&x, xs, p, true).0,
        "max_pool of i32"
    );
}

/// `adaptive_avg_pool` (even and uneven windows, global) and
/// `sliding_window_view` against index loops.
pub fn adaptive_pool_and_windows(dev: &Device) {
    let mut rng = Rng::new(0xada);
    for (xs, o) in [
        (vec![2usize, 7, 5, 3], vec![3usize, 2]),
        (vec![1, 6, 8, 2], vec![3, 8]),
        (vec![2, 5, 4, 3], vec![1, 1]),
        (vec![1, 10, 2], vec![4]),
    ] {
        let what = format!("adaptive_avg_pool {xs:?} -> {o:?}");
        let x = rand(&mut rng, DType::F32, xs.iter().product());
        let d = o.len();
        let mut out = vec![xs[0]];
        out.extend(&o);
        out.push(xs[d + 1]);
        let mut want = vec![0.0; out.iter().product()];
        for oi in indices(&out) {
            let ranges: Vec<(usize, usize)> = (0..d)
                .map(|i| {
                    (
                        oi[1 + i] * xs[1 + i] / o[i],
                        ((oi[1 + i] + 1) * xs[1 + i]).div_ceil(o[i]),
                    )
                })
                .collect();
            let win: Vec<usize> = ranges.iter().map(|r| r.1 - r.0).collect();
            let mut acc = 0.0;
            for k in indices(&win) {
                let mut src = vec![oi[0]];
                src.extend((0..d).map(|i| ranges[i].0 + k[i]));
                src.push(oi[d + 1]);
                acc += x[at(&xs, &src)];
            }
            want[at(&out, &oi)] = acc / win.iter().product::<usize>() as f64;
        }
        let y = ok(
            &what,
            wmx::adaptive_avg_pool(&arr(dev, DType::F32, &x, &xs), &o),
        );
        assert_eq!(y.shape(), out.as_slice(), "{what}: shape");
        close_to(
            &what,
            &f64s(&y, &what),
            &want,
            &vec![2.0; want.len()],
            DType::F32,
        );
    }
    let x: Vec<f64> = (0..20).map(|v| v as f64).collect();
    let xa = arr(dev, DType::F32, &x, &[4, 5]);
    let y = ok("windows", wmx::sliding_window_view(&xa, &[2, 3], None));
    assert_eq!(y.shape(), &[3, 3, 2, 3], "sliding_window_view shape");
    let mut want = vec![];
    for i in indices(&[3, 3, 2, 3]) {
        want.push(x[(i[0] + i[2]) * 5 + i[1] + i[3]]);
    }
    assert_eq!(
        f64s(&y, "windows"),
        want,
        "sliding_window_view of [4, 5] by [2, 3]"
    );
    let y = ok("windows", wmx::sliding_window_view(&xa, &[2], Some(&[-1])));
    assert_eq!(y.shape(), &[4, 4, 2]);
    let want: Vec<f64> = indices(&[4, 4, 2])
        .iter()
        .map(|i| x[i[0] * 5 + i[1] + i[2]])
        .collect();
    assert_eq!(
        f64s(&y, "windows"),
        want,
        "sliding_window_view along the last axis"
    );
}

/// Bad input is an `Err` naming what is wrong.
pub fn conv_errors(dev: &Device) {
    let z = |s: &[usize]| ok("zeros", wmx::with_device(dev, || wmx::zeros(s, DType::F32)));
    let e = super::expect_err;
    let (x, w) = (z(&[1, 8, 8, 4]), z(&[6, 3, 3, 4]));
    let o = ConvOptions::default();
    e(
        "rank",
        wmx::conv_general(&z(&[8, 4]), &z(&[6, 4]), &o),
        &["rank"],
    );
    e(
        "ranks differ",
        wmx::conv_general(&x, &z(&[6, 3, 4]), &o),
        &["rank"],
    );
    e(
        "conv2d of 1-D",
        wmx::conv2d(&z(&[1, 8, 4]), &z(&[6, 3, 4]), [1, 1], [0, 0], [1, 1], 1),
        &["rank 4"],
    );
    e(
        "groups",
        wmx::conv_general(
            &x,
            &w,
            &ConvOptions {
                groups: 3,
                ..o.clone()
            },
        ),
        &["groups"],
    );
    e(
        "groups 0",
        wmx::conv_general(
            &x,
            &w,
            &ConvOptions {
                groups: 0,
                ..o.clone()
            },
        ),
        &["groups"],
    );
    e(
        "channels",
        wmx::conv_general(&x, &z(&[6, 3, 3, 3]), &o),
        &["4 channels"],
    );
    e(
        "kernel too large",
        wmx::conv_general(&x, &z(&[6, 9, 3, 4]), &o),
        &["spans 9"],
    );
    e(
        "stride 0",
        wmx::conv_general(
            &x,
            &w,
            &ConvOptions {
                stride: vec![0],
                ..o.clone()
            },
        ),
        &["stride"],
    );
    e(
        "3 strides",
        wmx::conv_general(
            &x,
            &w,
            &ConvOptions {
                stride: vec![1, 1, 1],
                ..o.clone()
            },
        ),
        &["3 values"],
    );
    let xi = ok(
        "ints",
        wmx::with_device(dev, || wmx::zeros(&[1, 8, 8, 4], DType::I32)),
    );
    e("ints", wmx::conv_general(&xi, &xi, &o), &["i32"]);
    e(
        "kernel 0",
        wmx::conv_general(&x, &z(&[6, 0, 3, 4]), &o),
        &["length 0"],
    );
    e(
        "output padding",
        wmx::conv_transpose2d(&x, &w, [2, 2], [0, 0], [1, 1], [2, 0], 1),
        &["output_padding 2"],
    );
    e(
        "pool padding",
        wmx::max_pool(
            &x,
            &[2, 2],
            &PoolOptions {
                padding: vec![2],
                ..Default::default()
            },
        ),
        &["half"],
    );
    e(
        "pool rank",
        wmx::avg_pool(&x, &[2], &PoolOptions::default()),
        &["rank 3"],
    );
    e(
        "pool kernel 0",
        wmx::max_pool(&x, &[2, 0], &PoolOptions::default()),
        &["kernel"],
    );
    e(
        "pool too large",
        wmx::max_pool(&x, &[9, 2], &PoolOptions::default()),
        &["spans 9"],
    );
    e(
        "avg of ints",
        wmx::avg_pool(&xi, &[2, 2], &PoolOptions::default()),
        &["i32"],
    );
    e(
        "adaptive 0",
        wmx::adaptive_avg_pool(&x, &[0, 2]),
        &["output size"],
    );
    e(
        "window",
        wmx::sliding_window_view(&x, &[9], Some(&[1])),
        &["window of 9"],
    );
    e(
        "torch weight",
        wmx::conv_weight_from_torch(&z(&[6, 4]), false, 1),
        &["kernel"],
    );
}

/// Gradients of `sum(f(x, w) * g)` against central differences of the f64
/// references, jvp likewise, and vmap over weights and over inputs against a loop.
/// The central difference of `at` along element `k` of `v`.
fn fd(v: &[f64], k: usize, at: &dyn Fn(&[f64]) -> f64) -> f64 {
    let h = 1e-6;
    let (mut p, mut m) = (v.to_vec(), v.to_vec());
    p[k] += h;
    m[k] -= h;
    (at(&p) - at(&m)) / (2.0 * h)
}

/// vjp of input and weight, jvp, and vmap over weights and over inputs of `c`.
fn grads_of_case(dev: &Device, rng: &mut Rng, c: &Conv) {
    let dt = DType::F32;
    let (nx, nw) = (c.x.iter().product::<usize>(), c.w.iter().product::<usize>());
    let (x, w) = (rand(rng, dt, nx), rand(rng, dt, nw));
    let out = c.out_shape();
    let g = rand(rng, dt, out.iter().product());
    let loss = |x: &[f64], w: &[f64]| -> f64 {
        conv_ref(x, w, c).iter().zip(&g).map(|(a, b)| a * b).sum()
    };
    let ga = arr(dev, dt, &g, &out);
    let opts = c.options();
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        let y = wmx::conv_general(&a[0], &a[1], &opts)?;
        Ok(vec![wmx::sum(&wmx::multiply(&y, &ga)?, None, false)?])
    };
    let (xa, wa) = (arr(dev, dt, &x, &c.x), arr(dev, dt, &w, &c.w));
    let grads = ok(
        "conv grads",
        wmx::grad(f, &[0, 1])(&[xa.clone(), wa.clone()]),
    );
    let h = 1e-6;
    let want_x: Vec<f64> = (0..nx).map(|k| fd(&x, k, &|v| loss(v, &w))).collect();
    let want_w: Vec<f64> = (0..nw).map(|k| fd(&w, k, &|v| loss(&x, v))).collect();
    let big = |n| vec![8.0; n];
    close_to(
        "conv vjp of x",
        &f64s(&grads[0], "dx"),
        &want_x,
        &big(nx),
        dt,
    );
    close_to(
        "conv vjp of w",
        &f64s(&grads[1], "dw"),
        &want_w,
        &big(nw),
        dt,
    );
    let (tx, tw) = (rand(rng, dt, nx), rand(rng, dt, nw));
    let (_, tan) = ok(
        "conv jvp",
        wmx::jvp(
            f,
            &[xa.clone(), wa.clone()],
            &[arr(dev, dt, &tx, &c.x), arr(dev, dt, &tw, &c.w)],
        ),
    );
    let along = |s: f64| {
        let xs: Vec<f64> = x.iter().zip(&tx).map(|(a, b)| a + s * b).collect();
        let ws: Vec<f64> = w.iter().zip(&tw).map(|(a, b)| a + s * b).collect();
        loss(&xs, &ws)
    };
    let want = (along(h) - along(-h)) / (2.0 * h);
    close_to("conv jvp", &f64s(&tan[0], "jvp"), &[want], &[64.0], dt);
    // vmap over three weights, the input shared.
    let ws = rand(rng, dt, 3 * nw);
    let mut wshape = vec![3];
    wshape.extend(&c.w);
    let per =
        |a: &[Array]| -> Result<Vec<Array>> { Ok(vec![wmx::conv_general(&a[0], &a[1], &opts)?]) };
    let got = ok(
        "conv vmap",
        wmx::vmap(per, &[None, Some(0)], &[0])(&[xa.clone(), arr(dev, dt, &ws, &wshape)]),
    );
    let want: Vec<f64> = (0..3)
        .flat_map(|i| conv_ref(&x, &ws[i * nw..(i + 1) * nw], c))
        .collect();
    close_to(
        "conv vmap over weights",
        &f64s(&got[0], "vmap"),
        &want,
        &vec![16.0; want.len()],
        dt,
    );
    // vmap over two inputs, the weight shared (the columns batch with the images).
    let xs2 = rand(rng, dt, 2 * nx);
    let mut xshape = vec![2];
    xshape.extend(&c.x);
    let got = ok(
        "conv vmap",
        wmx::vmap(per, &[Some(0), None], &[0])(&[arr(dev, dt, &xs2, &xshape), wa.clone()]),
    );
    let want: Vec<f64> = (0..2)
        .flat_map(|i| conv_ref(&xs2[i * nx..(i + 1) * nx], &w, c))
        .collect();
    close_to(
        "conv vmap over inputs",
        &f64s(&got[0], "vmap"),
        &want,
        &vec![16.0; want.len()],
        dt,
    );
}

/// A weight gradient long enough (M = 2116 output positions) to be split along its
/// rows into chunks and a rest, in f32 and 16-bit, against f64 sums.
fn split_weight_grad(dev: &Device, rng: &mut Rng) {
    let mut c = Conv::new(&[1, 46, 46, 24], &[256, 3, 3, 24]);
    (c.lo, c.hi) = (vec![1, 1], vec![1, 1]);
    let (h, cin, cout) = (46usize, 24usize, 256usize);
    for dt in [DType::F32, DType::F16]
        .into_iter()
        .filter(|&d| super::supported(dev, d))
    {
        let x = rand(rng, dt, h * h * cin);
        let g = rand(rng, dt, h * h * cout);
        let w = rand(rng, dt, cout * 9 * cin);
        // Every 97th weight (each sums over every chunk and the rest).
        let picked: Vec<usize> = (0..w.len()).step_by(97).collect();
        let (mut want, mut scale) = (vec![0.0; picked.len()], vec![0.0; picked.len()]);
        for (r, &e) in picked.iter().enumerate() {
            let (n, kh, kw, ch) = (e / (9 * cin), e / (3 * cin) % 3, e / cin % 3, e % cin);
            for (i, j) in (0..h * h).map(|p| (p / h, p % h)) {
                let (si, sj) = ((i + kh) as isize - 1, (j + kw) as isize - 1);
                if si >= 0 && sj >= 0 && si < h as isize && sj < h as isize {
                    let v = g[(i * h + j) * cout + n] * x[(si as usize * h + sj as usize) * cin + ch];
                    want[r] += v;
                    scale[r] += v.abs();
                }
            }
        }
        let (xa, ga) = (arr(dev, dt, &x, &c.x), arr(dev, dt, &g, &c.out_shape()));
        let opts = c.options();
        let f = |w: &Array| {
            wmx::sum(
                &wmx::multiply(&wmx::conv_general(&xa, w, &opts)?, &ga)?,
                None,
                false,
            )
        };
        let what = format!("split weight gradient {dt}");
        let got = f64s(&ok(&what, wmx::grad1(f)(&arr(dev, dt, &w, &c.w))), &what);
        let got: Vec<f64> = picked.iter().map(|&e| got[e]).collect();
        close_to(&what, &got, &want, &scale, dt);
    }
}

pub fn grad_conv(dev: &Device) {
    let mut rng = Rng::new(0x6c);
    split_weight_grad(dev, &mut rng);
    let dt = DType::F32;
    let mut c = Conv::new(&[2, 5, 4, 4], &[6, 3, 2, 2]);
    (c.groups, c.stride, c.lo, c.hi, c.kdil) = (2, vec![2, 1], vec![1, 0], vec![1, 1], vec![1, 2]);
    // Depthwise, one filter per channel (its own kernels).
    let mut dw = Conv::new(&[2, 6, 5, 3], &[3, 3, 2, 1]);
    (dw.groups, dw.stride, dw.lo, dw.hi, dw.kdil) =
        (3, vec![2, 1], vec![1, 1], vec![1, 0], vec![1, 2]);
    // Channel rows of whole vec4s (the GPU's vec4 kernels).
    let mut dw8 = Conv::new(&[2, 5, 7, 8], &[8, 3, 3, 1]);
    (dw8.groups, dw8.stride, dw8.lo, dw8.hi, dw8.kdil) =
        (8, vec![1, 2], vec![1, 2], vec![1, 0], vec![2, 1]);
    // Input dilation on the last axis: no linear read index forward or in the
    // weights' gradient; its transpose at stride 1 steps by the dilation.
    let mut dwi = Conv::new(&[1, 4, 5, 8], &[8, 2, 3, 1]);
    (dwi.groups, dwi.stride, dwi.lo, dwi.hi, dwi.idil) =
        (8, vec![2, 1], vec![1, 2], vec![0, 1], vec![1, 2]);
    // Unit stride and dilation on the last axis (inputs shared by neighbours).
    let mut dws = Conv::new(&[1, 4, 9, 8], &[8, 3, 3, 1]);
    (dws.groups, dws.lo, dws.hi) = (8, vec![1, 1], vec![1, 1]);
    for case in [&c, &dw, &dw8, &dwi, &dws] {
        grads_of_case(dev, &mut rng, case);
    }
    // Per-example weight gradients of the depthwise convolution (vmap of grad over
    // the batch) against one gradient per example.
    {
        let nx: usize = dw.x.iter().product();
        let x = rand(&mut rng, dt, nx);
        let w = rand(&mut rng, dt, dw.w.iter().product());
        let out = dw.out_shape();
        let g = rand(&mut rng, dt, out.iter().product());
        let (xa, ga, wa) = (
            arr(dev, dt, &x, &dw.x),
            arr(dev, dt, &g, &out),
            arr(dev, dt, &w, &dw.w),
        );
        let opts = dw.options();
        let one = |a: &[Array]| -> Result<Vec<Array>> {
            let (x1, g1) = (wmx::expand_dims(&a[0], 0)?, wmx::expand_dims(&a[1], 0)?);
            let loss = |w: &Array| {
                wmx::sum(
                    &wmx::multiply(&wmx::conv_general(&x1, w, &opts)?, &g1)?,
                    None,
                    false,
                )
            };
            Ok(vec![wmx::grad1(loss)(&a[2])?])
        };
        let got = ok(
            "per-example",
            wmx::vmap(one, &[Some(0), Some(0), None], &[0])(&[xa.clone(), ga.clone(), wa.clone()]),
        );
        for i in 0..dw.x[0] as isize {
            let pick = |a: &Array| {
                ok(
                    "pick",
                    wmx::squeeze(
                        &ok("pick", a.slice(&[wmx::Slice::range(i, i + 1)])),
                        Some(&[0]),
                    ),
                )
            };
            let want = ok("one", one(&[pick(&xa), pick(&ga), wa.clone()]));
            let got_i = pick(&got[0]);
            close_to(
                "per-example depthwise weight gradient",
                &f64s(&got_i, "vmap"),
                &f64s(&want[0], "loop"),
                &vec![8.0; w.len()],
                dt,
            );
        }
    }

    // Second order through the depthwise weights' gradient: d/dx of |dL/dw|^2.
    {
        let (nx, nw) = (
            dw.x.iter().product::<usize>(),
            dw.w.iter().product::<usize>(),
        );
        let x = rand(&mut rng, dt, nx);
        let w = rand(&mut rng, dt, nw);
        let out = dw.out_shape();
        let g = rand(&mut rng, dt, out.iter().product());
        let ga = arr(dev, dt, &g, &out);
        let opts = dw.options();
        let wa = arr(dev, dt, &w, &dw.w);
        let norm = |x: &Array| -> Result<Array> {
            let inner = |w: &Array| {
                wmx::sum(
                    &wmx::multiply(&wmx::conv_general(x, w, &opts)?, &ga)?,
                    None,
                    false,
                )
            };
            let dwt = wmx::grad1(inner)(&wa)?;
            wmx::sum(&wmx::multiply(&dwt, &dwt)?, None, false)
        };
        let got = ok("second order", wmx::grad1(norm)(&arr(dev, dt, &x, &dw.x)));
        let norm_ref = |x: &[f64]| -> f64 {
            (0..nw)
                .map(|k| {
                    let mut e = vec![0.0; nw];
                    e[k] = 1.0;
                    let d: f64 = conv_ref(x, &e, &dw)
                        .iter()
                        .zip(&g)
                        .map(|(a, b)| a * b)
                        .sum();
                    d * d
                })
                .sum()
        };
        let want: Vec<f64> = (0..nx).map(|k| fd(&x, k, &norm_ref)).collect();
        close_to(
            "d/dx |dL/dw|^2, depthwise",
            &f64s(&got, "second"),
            &want,
            &vec![256.0; nx],
            dt,
        );
    }
    // A weight gradient over 2107 output positions: summed from row chunks (split-K)
    // and a one-row tail.
    let tall = Conv::new(&[1, 50, 44, 2], &[3, 2, 2, 2]);
    let (nx, nw) = (
        tall.x.iter().product::<usize>(),
        tall.w.iter().product::<usize>(),
    );
    let (x, w) = (rand(&mut rng, dt, nx), rand(&mut rng, dt, nw));
    let out = tall.out_shape();
    let g = rand(&mut rng, dt, out.iter().product());
    let (xa, ga) = (arr(dev, dt, &x, &tall.x), arr(dev, dt, &g, &out));
    let opts = tall.options();
    let f = |w: &Array| {
        wmx::sum(
            &wmx::multiply(&wmx::conv_general(&xa, w, &opts)?, &ga)?,
            None,
            false,
        )
    };
    let got = ok("tall dW", wmx::grad1(f)(&arr(dev, dt, &w, &tall.w)));
    let loss = |v: &[f64]| -> f64 {
        conv_ref(&x, v, &tall)
            .iter()
            .zip(&g)
            .map(|(a, b)| a * b)
            .sum()
    };
    let want: Vec<f64> = (0..nw).map(|k| fd(&w, k, &loss)).collect();
    close_to(
        "weight gradient over 2107 positions",
        &f64s(&got, "dw"),
        &want,
        &vec![400.0; nw],
        dt,
    );

    // The input gradient in 16-bit dtypes, channels in whole words (4) and not (3).
    let mut c3 = Conv::new(&[1, 5, 4, 3], &[2, 3, 3, 3]);
    (c3.stride, c3.lo, c3.hi) = (vec![2, 1], vec![1, 1], vec![1, 0]);
    let mut dw4 = Conv::new(&[1, 5, 6, 4], &[4, 3, 3, 1]);
    (dw4.groups, dw4.lo, dw4.hi) = (4, vec![1, 1], vec![1, 1]);
    // 16-bit channel rows of one vec4 (8) and two (16).
    let mut dw16 = Conv::new(&[2, 4, 6, 16], &[16, 2, 3, 1]);
    (dw16.groups, dw16.stride, dw16.lo, dw16.hi) = (16, vec![2, 1], vec![1, 1], vec![0, 1]);
    for dt in [DType::F16, DType::BF16]
        .into_iter()
        .filter(|&d| super::supported(dev, d))
    {
        let mut c8 = Conv::new(&[1, 5, 4, 8], &[3, 3, 3, 8]);
        (c8.stride, c8.lo, c8.hi) = (vec![1, 2], vec![1, 1], vec![1, 0]);
        for c in [&c, &c3, &c8, &dw4, &dw8, &dw16] {
            let what = format!("grad of conv_general {c:?} {dt}");
            let (nx, nw) = (c.x.iter().product::<usize>(), c.w.iter().product::<usize>());
            let (x, w) = (rand(&mut rng, dt, nx), rand(&mut rng, dt, nw));
            let out = c.out_shape();
            let g = rand(&mut rng, dt, out.iter().product());
            let ga = arr(dev, dt, &g, &out);
            let opts = c.options();
            let f = |a: &[Array]| -> Result<Vec<Array>> {
                let y = wmx::conv_general(&a[0], &a[1], &opts)?;
                Ok(vec![wmx::sum(&wmx::multiply(&y, &ga)?, None, false)?])
            };
            let inputs = [arr(dev, dt, &x, &c.x), arr(dev, dt, &w, &c.w)];
            let got = ok(&what, wmx::grad(f, &[0, 1])(&inputs));
            let loss = |x: &[f64], w: &[f64]| -> f64 {
                conv_ref(x, w, c).iter().zip(&g).map(|(a, b)| a * b).sum()
            };
            let want: Vec<f64> = (0..nx).map(|k| fd(&x, k, &|v| loss(v, &w))).collect();
            close_to(&what, &f64s(&got[0], &what), &want, &vec![16.0; nx], dt);
            let want: Vec<f64> = (0..nw).map(|k| fd(&w, k, &|v| loss(&x, v))).collect();
            let what = format!("{what}, weights");
            close_to(&what, &f64s(&got[1], &what), &want, &vec![64.0; nw], dt);
        }
    }

    // Pooling: max (no ties in random data) and average with every option.
    for (xs, p) in pool_cases().into_iter().take(2) {
        let n: usize = xs.iter().product();
        let x = rand(&mut rng, dt, n);
        let (y, shape) = pool_ref(&x, &xs, &p, true);
        let g = rand(&mut rng, dt, y.len());
        let ga = arr(dev, dt, &g, &shape);
        for max in [true, false] {
            let what = format!("grad of {} pool {p:?}", if max { "max" } else { "avg" });
            let loss = |v: &[f64]| -> f64 {
                pool_ref(v, &xs, &p, max)
                    .0
                    .iter()
                    .zip(&g)
                    .map(|(a, b)| a * b)
                    .sum()
            };
            let pf = |a: &Array| -> Result<Array> {
                let y = if max {
                    wmx::max_pool(a, &p.kernel, &p.opts)?
                } else {
                    wmx::avg_pool(a, &p.kernel, &p.opts)?
                };
                wmx::sum(&wmx::multiply(&y, &ga)?, None, false)
            };
            let got = ok(&what, wmx::grad1(pf)(&arr(dev, dt, &x, &xs)));
            let want: Vec<f64> = (0..n).map(|k| fd(&x, k, &loss)).collect();
            close_to(&what, &f64s(&got, &what), &want, &vec![4.0; n], dt);
            // jvp: the derivative along a random direction (padding reads no tangent).
            let t = rand(&mut rng, dt, n);
            let (_, tan) = ok(
                &what,
                wmx::jvp(
                    |a: &[Array]| Ok(vec![pf(&a[0])?]),
                    &[arr(dev, dt, &x, &xs)],
                    &[arr(dev, dt, &t, &xs)],
                ),
            );
            let along =
                |s: f64| loss(&x.iter().zip(&t).map(|(a, b)| a + s * b).collect::<Vec<_>>());
            let want = (along(1e-6) - along(-1e-6)) / 2e-6;
            close_to(
                &format!("{what}: jvp"),
                &f64s(&tan[0], &what),
                &[want],
                &[64.0],
                dt,
            );
        }
    }
}

static TORCH: Goldens = Goldens::new(include_str!("../../goldens/torch_conv.txt"));

fn sum_times(y: &Array, g: &Array) -> Result<Array> {
    wmx::sum(&wmx::multiply(y, g)?, None, false)
}

/// PyTorch's convolutions, transposed convolutions and poolings on NCHW arrays
/// converted with `to_channels_last` / `conv_weight_from_torch`, outputs and
/// gradients; and the nn layers holding PyTorch's weights.
pub fn conv_match_torch(dev: &Device) {
    let t = |name: &str| TORCH.arr(dev, name);
    let cl = |name: &str| ok(name, wmx::to_channels_last(&t(name)));
    let cf = |a: &Array| ok("to_channels_first", wmx::to_channels_first(a));
    let check = |what: &str, got: &Array, name: &str| TORCH.check(what, got, name, 1e-5, 2e-5);
    type Op<'a> = Box<dyn Fn(&Array, &Array) -> Result<Array> + 'a>;
    let convs: Vec<(&str, bool, usize, Op)> = vec![
        (
            "conv2d",
            false,
            2,
            Box::new(|x, w| wmx::conv2d(x, w, [2, 1], [1, 2], [1, 2], 2)),
        ),
        (
            "conv1d_depthwise",
            false,
            3,
            Box::new(|x, w| wmx::conv1d(x, w, 2, 1, 2, 3)),
        ),
        (
            "conv3d",
            false,
            1,
            Box::new(|x, w| wmx::conv3d(x, w, [1, 2, 1], [1, 0, 1], [1; 3], 1)),
        ),
        (
            "conv_transpose2d",
            true,
            2,
            Box::new(|x, w| wmx::conv_transpose2d(x, w, [2, 3], [1, 0], [1, 1], [1, 2], 2)),
        ),
        (
            "conv_transpose1d",
            true,
            1,
            Box::new(|x, w| wmx::conv_transpose1d(x, w, 3, 4, 2, 2, 1)),
        ),
    ];
    for (name, transposed, groups, op) in &convs {
        let x = cl(&format!("{name}.in0"));
        let wt = t(&format!("{name}.in1"));
        let w = ok(name, wmx::conv_weight_from_torch(&wt, *transposed, *groups));
        let has_bias = TORCH.get_opt(&format!("{name}.in2")).is_some();
        let g = cl(&format!("{name}.g"));
        let f = |a: &[Array]| -> Result<Vec<Array>> {
            let mut y = op(&a[0], &a[1])?;
            if has_bias {
                y = wmx::add(&y, &a[2])?;
            }
            Ok(vec![sum_times(&y, &g)?, y])
        };
        let mut inputs = vec![x, w];
        if has_bias {
            inputs.push(t(&format!("{name}.in2")));
        }
        let argnums: Vec<usize> = (0..inputs.len()).collect();
        let (outs, grads) = ok(name, wmx::value_and_grad(f, &argnums)(&inputs));
        check(name, &cf(&outs[1]), &format!("{name}.y"));
        check(&format!("{name} dx"), &cf(&grads[0]), &format!("{name}.d0"));
        // wmx's weight gradient back in PyTorch's layout: the inverse permutation.
        let dw = &grads[1];
        let dw_torch = if *transposed {
            let k = dw.ndim() - 2;
            let (o, i) = (dw.shape()[0], dw.shape()[k + 1]);
            let mut s = vec![*groups as isize, (o / groups) as isize];
            s.extend(dw.shape()[1..=k].iter().map(|&v| v as isize));
            s.push(i as isize);
            let r = ok(name, dw.reshape(&s));
            // [g, og, k..., ig] -> [g, ig, og, k...]
            let mut perm: Vec<isize> = vec![0, k as isize + 2, 1];
            perm.extend(2..2 + k as isize);
            let r = ok(name, r.transpose(Some(&perm)));
            let mut s = vec![(*groups * i) as isize, (o / groups) as isize];
            s.extend(dw.shape()[1..=k].iter().map(|&v| v as isize));
            ok(name, r.reshape(&s))
        } else {
            ok(name, wmx::moveaxis(dw, -1, 1))
        };
        check(&format!("{name} dw"), &dw_torch, &format!("{name}.d1"));
        if has_bias {
            check(&format!("{name} db"), &grads[2], &format!("{name}.d2"));
        }
    }
    let pool = |kernel: &[usize],
                stride: &[usize],
                padding: &[usize],
                dilation: &[usize],
                ceil: bool,
                incl: bool| {
        let opts = PoolOptions {
            stride: stride.to_vec(),
            padding: padding.to_vec(),
            dilation: dilation.to_vec(),
            ceil_mode: ceil,
            count_include_pad: incl,
        };
        (kernel.to_vec(), opts)
    };
    type PoolCase<'a> = (&'a str, bool, (Vec<usize>, PoolOptions));
    let pools: Vec<PoolCase> = vec![
        (
            "max_pool2d",
            true,
            pool(&[3, 2], &[2], &[1], &[1, 2], true, true),
        ),
        (
            "max_pool3d",
            true,
            pool(&[2, 2, 2], &[2, 1, 2], &[], &[], true, true),
        ),
        (
            "avg_pool2d",
            false,
            pool(&[3, 3], &[2], &[1], &[], true, true),
        ),
        (
            "avg_pool2d_excl",
            false,
            pool(&[3, 3], &[2], &[1], &[], true, false),
        ),
        (
            "avg_pool1d",
            false,
            pool(&[4], &[3], &[2], &[], false, true),
        ),
    ];
    for (name, max, (kernel, opts)) in &pools {
        let x = cl(&format!("{name}.in0"));
        let g = cl(&format!("{name}.g"));
        let f = |x: &Array| -> Result<Array> {
            let y = if *max {
                wmx::max_pool(x, kernel, opts)?
            } else {
                wmx::avg_pool(x, kernel, opts)?
            };
            sum_times(&y, &g)
        };
        let y = ok(
            name,
            if *max {
                wmx::max_pool(&x, kernel, opts)
            } else {
                wmx::avg_pool(&x, kernel, opts)
            },
        );
        check(name, &cf(&y), &format!("{name}.y"));
        check(
            &format!("{name} dx"),
            &cf(&ok(name, wmx::grad1(f)(&x))),
            &format!("{name}.d0"),
        );
    }
    let x = cl("adaptive_avg_pool2d.in0");
    let g = cl("adaptive_avg_pool2d.g");
    let y = ok("adaptive", wmx::adaptive_avg_pool(&x, &[3, 2]));
    check("adaptive_avg_pool2d", &cf(&y), "adaptive_avg_pool2d.y");
    let dx = ok(
        "adaptive",
        wmx::grad1(|x: &Array| sum_times(&wmx::adaptive_avg_pool(x, &[3, 2])?, &g))(&x),
    );
    check("adaptive_avg_pool2d dx", &cf(&dx), "adaptive_avg_pool2d.d0");

    // The layers, holding PyTorch's weights.
    let conv = ok(
        "Conv2d",
        nn::Conv2d::from_torch(
            &t("conv2d.in1"),
            Some(t("conv2d.in2")),
            nn::ConvConfig {
                stride: [2, 1],
                padding: [1, 2],
                dilation: [1, 2],
                groups: 2,
                ..Default::default()
            },
        ),
    );
    check(
        "nn::Conv2d",
        &cf(&ok("Conv2d", conv.forward(&cl("conv2d.in0")))),
        "conv2d.y",
    );
    let convt = ok(
        "ConvTranspose2d",
        nn::ConvTranspose2d::from_torch(
            &t("conv_transpose2d.in1"),
            Some(t("conv_transpose2d.in2")),
            nn::ConvConfig {
                stride: [2, 3],
                padding: [1, 0],
                output_padding: [1, 2],
                groups: 2,
                ..Default::default()
            },
        ),
    );
    check(
        "nn::ConvTranspose2d",
        &cf(&ok(
            "ConvTranspose2d",
            convt.forward(&cl("conv_transpose2d.in0")),
        )),
        "conv_transpose2d.y",
    );
    let mp = nn::MaxPool2d::new([3, 2])
        .stride([2, 2])
        .padding([1, 1])
        .dilation([1, 2])
        .ceil_mode(true);
    check(
        "nn::MaxPool2d",
        &cf(&ok("MaxPool2d", mp.forward(&cl("max_pool2d.in0")))),
        "max_pool2d.y",
    );
    let ap = nn::AvgPool2d::new([3, 3])
        .stride([2, 2])
        .padding([1, 1])
        .ceil_mode(true)
        .count_include_pad(false);
    check(
        "nn::AvgPool2d",
        &cf(&ok("AvgPool2d", ap.forward(&cl("avg_pool2d_excl.in0")))),
        "avg_pool2d_excl.y",
    );
    let ad = nn::AdaptiveAvgPool2d::new([3, 2]);
    check(
        "nn::AdaptiveAvgPool2d",
        &cf(&ok("adaptive", ad.forward(&x))),
        "adaptive_avg_pool2d.y",
    );
}
