//! Arrays larger than one buffer, held in segments (`backend-webgpu/src/segments.rs`),
//! on a device whose limits are lowered to a 1 MiB binding and 4 MiB buffers
//! (`Kernels::with_limits`), so arrays of a few MB take the path a 5 GiB array
//! takes on an NVIDIA GPU. Every result is checked against host values computed
//! here; the ops that do not take segmented arrays give an `Err` naming the limit.

use std::sync::Arc;
use wmx_core::{self as wmx, Array, DType, Device, Slice, f16};
use wmx_webgpu::{Kernels, RequestOptions, WebGpuBackend};

const BINDING: u64 = 1 << 20;
const BUFFER: u64 = 4 << 20;

fn open_small() -> wmx::Result<Device> {
    let k = pollster::block_on(Kernels::request(&RequestOptions::default()))
        .map_err(|e| wmx::Error::NoDevice(e.to_string()))?
        .with_limits(BINDING, BUFFER)
        .map_err(|e| wmx::Error::NoDevice(e.to_string()))?;
    Ok(Device::new(Arc::new(WebGpuBackend::from_kernels(k))))
}

fn gpu() -> Option<Device> {
    let dev = wmx_tests::gpu::device(open_small)?;
    let caps = wmx_webgpu::backend(&dev).unwrap().kernels().caps().clone();
    assert_eq!(
        (caps.max_storage_binding, caps.max_buffer),
        (BINDING, BUFFER)
    );
    Some(dev)
}

/// A value per index that is exact in f32 and varies within and across segments.
fn val(i: usize) -> f32 {
    ((i * 7919) % 100_003) as f32 - 50_000.0
}

fn host(n: usize) -> Vec<f32> {
    (0..n).map(val).collect()
}

fn assert_close(got: f32, want: f64, rtol: f64, what: &str) {
    assert!(
        (got as f64 - want).abs() <= rtol * want.abs().max(1.0),
        "{what}: {got} vs {want}"
    );
}

fn segments_of(a: &Array) -> u64 {
    (a.size() * a.dtype().size()) as u64 / BUFFER
}

#[test]
fn uploads_reads_creation_and_elementwise_ops_span_segments() {
    let Some(dev) = gpu() else { return };
    wmx::with_device(&dev, || {
        // 3 000 017 f32: three segments (12 MB), read back whole.
        let n = 3_000_017;
        let xs = host(n);
        let x = Array::from_slice(&xs, &[n])?;
        assert!(segments_of(&x) >= 2);
        assert_eq!(x.to_vec::<f32>()?, xs);
        // Elementwise with a second segmented array and a scalar; a cast to f16
        // (two segments of output); a comparison to bool.
        let y = wmx::arange(0.0, n as f64, 1.0, DType::F32)?;
        let z = wmx::add(&wmx::multiply(&x, &wmx::scalar(3.0, DType::F32)?)?, &y)?;
        let zv = z.to_vec::<f32>()?;
        assert!(
            zv.iter()
                .enumerate()
                .all(|(i, &v)| v == 3.0 * xs[i] + i as f32)
        );
        let h = wmx::astype(&x, DType::F16)?.to_vec::<f16>()?;
        assert!(
            h.iter()
                .enumerate()
                .all(|(i, &v)| v == f16::from_f32(xs[i]))
        );
        let big = 9_000_011; // bool output of 9 MB: three segments
        let w = wmx::arange(0.0, big as f64, 1.0, DType::F32)?;
        let odd = wmx::greater(
            &wmx::remainder(&w, &wmx::scalar(3.0, DType::F32)?)?,
            &wmx::scalar(0.5, DType::F32)?,
        )?;
        let ov = odd.to_vec::<bool>()?;
        assert_eq!(ov.len(), big);
        assert!(ov.iter().enumerate().all(|(i, &v)| v == (i % 3 != 0)));
        // full and zeros of segmented sizes.
        let f = wmx::full(&[n], 2.5, DType::F32)?.to_vec::<f32>()?;
        assert!(f.iter().all(|&v| v == 2.5));
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn broadcasts_slices_and_transposes_of_segmented_arrays() {
    let Some(dev) = gpu() else { return };
    wmx::with_device(&dev, || {
        // Rows of 3 f32 (12 bytes): no power-of-two boundary falls between rows,
        // so pieces at a boundary are bridged.
        let rows = 1_000_003;
        let xs = host(rows * 3);
        let x = Array::from_slice(&xs, &[rows, 3])?;
        let bias = Array::from_slice(&[1.0f32, -2.0, 0.5], &[3])?;
        let s = wmx::add(&x, &bias)?.to_vec::<f32>()?;
        let b = [1.0f32, -2.0, 0.5];
        assert!(s.iter().enumerate().all(|(i, &v)| v == xs[i] + b[i % 3]));
        // A column broadcast the other way: [rows, 1] against [rows, 3].
        let col = wmx::slice(&x, &[Slice::ALL, Slice::range(1, 2)])?;
        let d = wmx::subtract(&x, &col)?.to_vec::<f32>()?;
        assert!(
            d.iter()
                .enumerate()
                .all(|(i, &v)| v == xs[i] - xs[i / 3 * 3 + 1])
        );
        // Every other row from the end (a negative stride across segments).
        let rev = wmx::slice(&x, &[Slice::new(None, None, -2), Slice::ALL])?;
        let rv = wmx::negative(&rev)?.to_vec::<f32>()?;
        assert_eq!(rv.len(), rows.div_ceil(2) * 3);
        for (k, &v) in rv.iter().enumerate() {
            let r = rows - 1 - 2 * (k / 3);
            assert_eq!(v, -xs[r * 3 + k % 3], "rev[{k}]");
        }
        // A transpose made contiguous: both the input and the output segmented.
        let (r, c) = (600, 2001);
        let ms = host(r * c);
        let m = Array::from_slice(&ms, &[r, c])?;
        let t = wmx::contiguous(&wmx::transpose(&m, None)?)?.to_vec::<f32>()?;
        for j in 0..c {
            for i in 0..r {
                assert_eq!(t[j * r + i], ms[i * c + j], "t[{j}, {i}]");
            }
        }
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn reductions_of_segmented_arrays_match_f64() {
    let Some(dev) = gpu() else { return };
    wmx::with_device(&dev, || {
        let (r, c) = (1500, 2003);
        let xs = host(r * c);
        let m = Array::from_slice(&xs, &[r, c])?;
        let total: f64 = xs.iter().map(|&v| v as f64).sum();
        assert_close(
            wmx::sum(&m, None, false)?.item::<f32>()?,
            total,
            1e-5,
            "sum",
        );
        let max = xs.iter().cloned().fold(f32::MIN, f32::max);
        assert_eq!(wmx::max(&m, None, false)?.item::<f32>()?, max);
        let rs = wmx::sum(&m, Some(&[1]), false)?.to_vec::<f32>()?;
        for (i, &v) in rs.iter().enumerate() {
            let want: f64 = xs[i * c..(i + 1) * c].iter().map(|&v| v as f64).sum();
            assert_close(v, want, 1e-5, &format!("row {i}"));
        }
        let cm = wmx::min(&m, Some(&[0]), false)?.to_vec::<f32>()?;
        for (j, &v) in cm.iter().enumerate() {
            let want = (0..r).map(|i| xs[i * c + j]).fold(f32::MAX, f32::min);
            assert_eq!(v, want, "col {j}");
        }
        let am = wmx::argmax(&m, 1, false)?.to_vec::<u32>()?;
        for (i, &v) in am.iter().enumerate().step_by(7) {
            let row = &xs[i * c..(i + 1) * c];
            let want = (0..c).fold(0, |b, j| if row[j] > row[b] { j } else { b });
            assert_eq!(v as usize, want, "argmax row {i}");
        }
        // A segmented output: pairs summed, 2 000 003 of them out of 16 MB.
        let n = 2_000_003;
        let ps = host(n * 2);
        let p = Array::from_slice(&ps, &[n, 2])?;
        let pv = wmx::sum(&p, Some(&[1]), false)?.to_vec::<f32>()?;
        assert!(
            pv.iter()
                .enumerate()
                .all(|(i, &v)| v == ps[2 * i] + ps[2 * i + 1])
        );
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn random_draws_and_compiled_reductions_span_segments() {
    let Some(dev) = gpu() else { return };
    let n = 3_000_001;
    let key = wmx::random::key(11).unwrap();
    let on = |d: &Device| {
        wmx::with_device(d, || {
            let u = wmx::random::uniform(&key, &[n], -1.0, 1.0, DType::F32)?;
            u.to_vec::<f32>()
        })
    };
    let (g, c) = (on(&dev).unwrap(), on(&Device::cpu()).unwrap());
    assert!(g == c, "uniform draws differ from the CPU's");
    // A compiled function whose elementwise part is fused into a reduction: the
    // fused kernel computes in pieces, then the reduction.
    wmx::with_device(&dev, || {
        let xs = host(n);
        let x = Array::from_slice(&xs, &[n])?;
        let f = wmx::compile::compile(|a: &[Array]| {
            let sq = wmx::multiply(&a[0], &a[0])?;
            Ok(vec![wmx::sum(&wmx::add(&sq, &a[0])?, None, false)?])
        });
        let got = f.call(&[x])?[0].item::<f32>()?;
        let want: f64 = xs.iter().map(|&v| (v * v + v) as f64).sum();
        assert_close(got, want, 1e-5, "compiled sum");
        // A kernel storing several outputs (a parameter and its moment) whose
        // output passes a binding, though its inputs do not: each output on its
        // own, then joined; and arrays past one buffer, in pieces.
        for n in [200_003, 1_100_000] {
            let xs = host(n);
            let x = Array::from_slice(&xs, &[n])?;
            let g = (&x * 1e-4).astype(DType::F32)?;
            let f = wmx::compile::compile(|a: &[Array]| {
                let m = wmx::add(&wmx::multiply(&a[1], &a[1])?, &a[0])?;
                let p = wmx::subtract(&a[0], &wmx::multiply(&m, &a[1])?)?;
                Ok(vec![p, m])
            });
            let out = f.call(&[x, g])?;
            let (p, m) = (out[0].to_vec::<f32>()?, out[1].to_vec::<f32>()?);
            for i in (0..n).step_by(997).chain([n - 1]) {
                let (x, g) = (xs[i] as f64, (xs[i] * 1e-4) as f64);
                let mw = g * g + x;
                assert_close(m[i], mw, 1e-6, "stored moment");
                assert_close(p[i], x - mw * g, 1e-5, "stored parameter");
            }
        }
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn row_ops_scans_and_sorts_along_rows_of_segmented_arrays() {
    let Some(dev) = gpu() else { return };
    wmx::with_device(&dev, || {
        let (r, c) = (1500, 2003);
        let xs: Vec<f32> = (0..r * c).map(|i| val(i) / 50_000.0).collect();
        let m = Array::from_slice(&xs, &[r, c])?;
        let cum = wmx::cumsum(&m, Some(1), false, true)?.to_vec::<f32>()?;
        let order = wmx::argsort(&m, Some(1))?.to_vec::<u32>()?;
        let sorted = wmx::sort(&m, Some(1))?.to_vec::<f32>()?;
        let sm = wmx::softmax(&m, &[1])?.to_vec::<f32>()?;
        for i in (0..r).step_by(13) {
            let row = &xs[i * c..(i + 1) * c];
            let mut acc = 0.0f64;
            for j in 0..c {
                acc += row[j] as f64;
                assert_close(cum[i * c + j], acc, 1e-4, &format!("cumsum[{i}, {j}]"));
            }
            let mut want: Vec<u32> = (0..c as u32).collect();
            want.sort_by(|&a, &b| row[a as usize].total_cmp(&row[b as usize]));
            assert_eq!(&order[i * c..(i + 1) * c], &want[..], "argsort row {i}");
            let values: Vec<f32> = want.iter().map(|&j| row[j as usize]).collect();
            assert_eq!(&sorted[i * c..(i + 1) * c], &values[..], "sorted row {i}");
            let mx = row.iter().cloned().fold(f32::MIN, f32::max) as f64;
            let z: f64 = row.iter().map(|&v| (v as f64 - mx).exp()).sum();
            for j in 0..c {
                let want = (row[j] as f64 - mx).exp() / z;
                assert!(
                    (sm[i * c + j] as f64 - want).abs() <= 1e-6 * want + 1e-9,
                    "softmax[{i}, {j}]"
                );
            }
        }
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

/// Values in {-1, 0, 1}: every prefix sum of 3 million is exact in f32.
fn steps(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + i / 3) % 3) as f32 - 1.0)
        .collect()
}

/// The scan of `xs` along a line of `len` positions with `inner` lanes, as f64.
fn scan_ref(
    xs: &[f32],
    len: usize,
    inner: usize,
    f: fn(f64, f64) -> f64,
    id: f64,
    reverse: bool,
    inclusive: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; xs.len()];
    for o in 0..xs.len() / (len * inner) {
        for c in 0..inner {
            let mut acc = id;
            for k in 0..len {
                let j = if reverse { len - 1 - k } else { k };
                let at = (o * len + j) * inner + c;
                let v = xs[at] as f64;
                if inclusive {
                    acc = f(acc, v);
                    out[at] = acc;
                } else {
                    out[at] = acc;
                    acc = f(acc, v);
                }
            }
        }
    }
    out
}

#[test]
fn scans_along_lines_past_a_binding_and_one_buffer() {
    let Some(dev) = gpu() else { return };
    wmx::with_device(&dev, || {
        // 3 000 017 f32 positions in one line: 12 MB, past the 1 MiB binding and
        // three segments; blocks of 2^16 and a tail of 50 001.
        let n = 3_000_017;
        let xs = steps(n);
        let x = Array::from_slice(&xs, &[n])?;
        for (reverse, inclusive) in [(false, true), (true, true), (false, false), (true, false)] {
            let got = wmx::cumsum(&x, Some(0), reverse, inclusive)?.to_vec::<f32>()?;
            let want = scan_ref(&xs, n, 1, |a, b| a + b, 0.0, reverse, inclusive);
            assert!(
                got.iter().zip(&want).all(|(g, w)| *g as f64 == *w),
                "cumsum reverse {reverse} inclusive {inclusive}"
            );
        }
        let got = wmx::cummax(&x, Some(0), true, true)?.to_vec::<f32>()?;
        let want = scan_ref(&xs, n, 1, f64::max, f64::NEG_INFINITY, true, true);
        assert!(
            got.iter().zip(&want).all(|(g, w)| *g as f64 == *w),
            "cummax"
        );
        // f16 (accumulated in f32, rounded once) and i32.
        let h =
            wmx::cumsum(&wmx::astype(&x, DType::F16)?, Some(0), false, true)?.to_vec::<f16>()?;
        let want = scan_ref(&xs, n, 1, |a, b| a + b, 0.0, false, true);
        assert!(
            h.iter().zip(&want).all(|(g, w)| *g == f16::from_f64(*w)),
            "f16 cumsum"
        );
        let i =
            wmx::cumsum(&wmx::astype(&x, DType::I32)?, Some(0), true, false)?.to_vec::<i32>()?;
        let want = scan_ref(&xs, n, 1, |a, b| a + b, 0.0, true, false);
        assert!(
            i.iter().zip(&want).all(|(g, w)| *g as f64 == *w),
            "i32 cumsum"
        );
        // Along the middle axis of [2, 500 001, 3] (lanes after the axis, rows before).
        let (len, inner) = (500_001, 3);
        let ms = steps(2 * len * inner);
        let m = Array::from_slice(&ms, &[2, len, inner])?;
        let got = wmx::cumsum(&m, Some(1), false, true)?.to_vec::<f32>()?;
        let want = scan_ref(&ms, len, inner, |a, b| a + b, 0.0, false, true);
        assert!(
            got.iter().zip(&want).all(|(g, w)| *g as f64 == *w),
            "cumsum axis 1"
        );
        let got = wmx::cumsum(&m, Some(1), true, false)?.to_vec::<f32>()?;
        let want = scan_ref(&ms, len, inner, |a, b| a + b, 0.0, true, false);
        assert!(
            got.iter().zip(&want).all(|(g, w)| *g as f64 == *w),
            "reverse exclusive axis 1"
        );
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn small_views_of_segmented_arrays_work_with_every_op_and_the_rest_is_an_err() {
    let Some(dev) = gpu() else { return };
    wmx::with_device(&dev, || {
        let n = 3_000_017;
        let xs = host(n);
        let x = Array::from_slice(&xs, &[n])?;
        // A view across the first boundary (bridged) through an op that reads
        // its input in one piece: a scan.
        let at = (BUFFER / 4) as usize - 5;
        let v = wmx::slice(&x, &[Slice::range(at as isize, at as isize + 10)])?;
        let cum = wmx::cumsum(&v, None, false, true)?.to_vec::<f32>()?;
        let mut acc = 0.0f32;
        for (k, &got) in cum.iter().enumerate() {
            acc += xs[at + k];
            assert_eq!(got, acc, "cumsum[{k}]");
        }
        // Within the last segment: a sort.
        let tail = wmx::slice(&x, &[Slice::range(n as isize - 100, n as isize)])?;
        let mut want = xs[n - 100..].to_vec();
        want.sort_by(f32::total_cmp);
        assert_eq!(wmx::sort(&tail, None)?.to_vec::<f32>()?, want);
        // Concatenation of segmented arrays, along the only axis.
        let both = wmx::concatenate(&[&x, &wmx::negative(&x)?], 0)?.to_vec::<f32>()?;
        assert_eq!(both.len(), 2 * n);
        assert!(both[..n] == xs[..] && both[n..].iter().zip(&xs).all(|(a, b)| *a == -b));
        // Along the second axis of [rows, 3] and [rows, 1] (a bridge at each boundary).
        let rows = 1_000_003;
        let a = wmx::reshape(
            &wmx::slice(&x, &[Slice::range(0, 3 * rows as isize)])?,
            &[rows as isize, 3],
        )?;
        let b = wmx::reshape(
            &wmx::slice(&x, &[Slice::range(0, rows as isize)])?,
            &[rows as isize, 1],
        )?;
        let ab = wmx::concatenate(&[&a, &b], 1)?.to_vec::<f32>()?;
        for r in 0..rows {
            let got = &ab[4 * r..4 * r + 4];
            let want = [xs[3 * r], xs[3 * r + 1], xs[3 * r + 2], xs[r]];
            assert_eq!(got, want, "row {r}");
        }
        // Matmul of a segmented A (pieces of its rows) into a segmented output whose
        // rows of 12 bytes straddle the boundaries (bridged).
        let w = Array::from_slice(&[1.0f32, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0], &[3, 3])?;
        let aw = wmx::matmul(&a, &w)?.to_vec::<f32>()?;
        for r in 0..rows {
            let (p, q, t) = (xs[3 * r], xs[3 * r + 1], xs[3 * r + 2]);
            assert_eq!(
                &aw[3 * r..3 * r + 3],
                &[p, q + t, p + q][..],
                "matmul row {r}"
            );
        }
        // A slice update of a segmented base (by an update that fits a binding):
        // every third element of 30 000 across the first boundary.
        let at = (BUFFER / 4) as usize - 15_001;
        let upd = wmx::full(&[10_000], 7.5, DType::F32)?;
        let slice = Slice::new(Some(at as isize), Some(at as isize + 30_000), 3);
        let sv = wmx::slice_update(&x, &upd, &[slice])?.to_vec::<f32>()?;
        for (i, &v) in sv.iter().enumerate() {
            let hit = i >= at && i < at + 30_000 && (i - at).is_multiple_of(3);
            assert_eq!(v, if hit { 7.5 } else { xs[i] }, "slice_update [{i}]");
        }
        // Scatter-add into a segmented base (an embedding's gradient): rows on both
        // sides of the first boundary (row 349 525 holds it), one of them twice.
        let rows_at = [0usize, 349_524, 349_525, 349_526, rows - 1, 349_525];
        let ids: Vec<u32> = rows_at.iter().map(|&r| r as u32).collect();
        let idx = Array::from_slice(&ids, &[6])?;
        let upd = wmx::full(&[6, 3], 0.5, DType::F32)?;
        let sa = wmx::scatter_add(&a, &idx, &upd, 0)?.to_vec::<f32>()?;
        let mut want = xs[..3 * rows].to_vec();
        for &r in &rows_at {
            for c in 0..3 {
                want[3 * r + c] += 0.5;
            }
        }
        assert!(sa == want, "scatter_add into a segmented base");
        // A gather from a segmented table (parts of it along the axis, each taking
        // the indices that fall in it), on both sides of a boundary.
        let picks = [
            0u32,
            5,
            (BUFFER / 4) as u32 - 1,
            (BUFFER / 4) as u32,
            n as u32 - 1,
        ];
        let idx = Array::from_slice(&picks, &[5])?;
        let got = wmx::take(&x, &idx, Some(0))?.to_vec::<f32>()?;
        let want: Vec<f32> = picks.iter().map(|&i| xs[i as usize]).collect();
        assert_eq!(got, want, "take from a segmented table");
        // Matmul by a segmented B, transposed (x @ w.t(): parts of its rows) and
        // row-major (x @ w: partial products over parts of K).
        let (nr, kc) = (200_000, 6);
        let wt = wmx::reshape(
            &wmx::slice(&x, &[Slice::range(0, (nr * kc) as isize)])?,
            &[nr as isize, kc as isize],
        )?;
        let v = Array::from_slice(&[1.0f32, 2.0, 0.0, 0.0, 0.0, -1.0], &[1, kc])?;
        let vw = wmx::matmul(&v, &wmx::transpose(&wt, None)?)?.to_vec::<f32>()?;
        for (r, &got) in vw.iter().enumerate() {
            let w = &xs[kc * r..kc * r + kc];
            assert_eq!(got, w[0] + 2.0 * w[1] - w[5], "x @ w.t() [{r}]");
        }
        let u = wmx::ones(&[1, nr], DType::F32)?;
        let uw = wmx::matmul(&u, &wt)?.to_vec::<f32>()?;
        for c in 0..kc {
            let want: f64 = (0..nr).map(|r| xs[kc * r + c] as f64).sum();
            let tol = 1e-6 * (nr as f64) * 5e4;
            assert!(
                (uw[c] as f64 - want).abs() <= tol,
                "x @ w [{c}]: {} vs {want}",
                uw[c]
            );
        }
        // A gather whose table and indices are both past a binding, of different
        // shapes: an Err naming the limit.
        let many = wmx::zeros(&[400_000], DType::U32)?;
        let e = wmx::take(&x, &many, Some(0))
            .and_then(|c| c.to_vec::<f32>())
            .unwrap_err()
            .to_string();
        assert!(e.contains("larger than one"), "{e}");
        // The array stays usable after the Err.
        assert_eq!(
            wmx::max(&x, None, false)?.item::<f32>()?,
            xs.iter().cloned().fold(f32::MIN, f32::max)
        );
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

/// Fused attention whose keys and values are past the 1 MiB binding: an `Err`
/// naming the limit at the read (the kernel binds whole arrays), and the same
/// call under the limit works.
#[test]
fn attention_past_a_binding_is_an_err_naming_the_limit() {
    let Some(dev) = gpu() else { return };
    wmx::with_device(&dev, || {
        let (lk, d) = (4096usize, 128usize); // 2 MiB of f32 keys
        let q = wmx::full(&[1, 1, 1, d], 0.01, DType::F32)?;
        let kv = |n: usize| wmx::full(&[1, 1, n, d], 0.5, DType::F32);
        let mask = wmx::AttentionMask::None;
        let e = wmx::scaled_dot_product_attention(&q, &kv(lk)?, &kv(lk)?, None, mask)
            .and_then(|o| o.to_vec::<f32>())
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_storage_buffer_binding_size"), "{e}");
        let o = wmx::scaled_dot_product_attention(&q, &kv(512)?, &kv(512)?, None, mask)?;
        assert!(o.to_vec::<f32>()?.iter().all(|&v| (v - 0.5).abs() < 1e-6));
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}
