//! Arrays past the device's storage-binding limit (128 MiB on lavapipe; on a
//! device with more, run with `WMX_MAX_BINDING=134217728`) and views
//! of 2^32 elements, computed on the GPU in pieces: elementwise ops, copies, casts,
//! creation, random draws (against the CPU's, bit for bit), concatenation, scans
//! (along rows, and along lines past a binding in blocks),
//! sorts, row ops (softmax, layer_norm), matmul (by a large A or a large B), gathers, slice updates and scatters against host values, and reductions against f64 host
//! references; what cannot be cut is an
//! `Err` naming the limit, never a panic or a wrong answer.

use wmx_core::{self as wmx, DType, Device, Slice, f16};

fn gpu() -> Option<Device> {
    wmx_tests::gpu::device(wmx_webgpu::open)
}

fn binding_limit(dev: &Device) -> u64 {
    let be = wmx_webgpu::backend(dev).expect("a WebGPU device");
    be.kernels().caps().max_storage_binding
}

/// 36 000 x 1000 f32 (144 MB): past lavapipe's 128 MiB binding.
const ROWS: usize = 36_000;
const COLS: usize = 1000;
const N: usize = ROWS * COLS;

/// `got` within `rtol` of the f64 reference `want`.
fn assert_close(got: f32, want: f64, rtol: f64, what: &str) {
    assert!(
        (got as f64 - want).abs() <= rtol * want.abs(),
        "{what}: {got} vs {want}"
    );
}

#[test]
fn reductions_of_2_pow_32_broadcast_elements_are_exact() {
    let Some(dev) = gpu() else { return };
    wmx::with_device(&dev, || {
        let ones = wmx::broadcast_to(&wmx::ones(&[1], DType::F32)?, &[1 << 32])?;
        assert_eq!(wmx::sum(&ones, None, false)?.item::<f32>()?, 4294967296.0);
        // The two boolean reductions whose answer an empty (wrapped) count would
        // change: each pass over 2^32 elements takes minutes on lavapipe.
        let t = wmx::broadcast_to(&wmx::scalar(1.0, DType::Bool)?, &[1 << 32])?;
        assert!(wmx::any(&t, None, false)?.item::<bool>()?);
        let f = wmx::broadcast_to(&wmx::scalar(0.0, DType::Bool)?, &[1 << 32])?;
        assert!(!wmx::all(&f, None, false)?.item::<bool>()?);
        // 2^20 rows of 2^12: rows in pieces of 2^30 elements each.
        let b = wmx::broadcast_to(
            &wmx::arange(0.0, 4096.0, 1.0, DType::F32)?,
            &[1 << 20, 4096],
        )?;
        let cols = wmx::max(&b, Some(&[0]), false)?.to_vec::<f32>()?;
        assert_eq!(cols.len(), 4096);
        assert!(cols.iter().enumerate().all(|(i, &v)| v == i as f32));
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn arrays_past_the_binding_limit_compute_in_pieces() {
    let Some(dev) = gpu() else { return };
    assert!(
        (N * 4) as u64 > binding_limit(&dev),
        "the test needs an array larger than one binding"
    );
    wmx::with_device(&dev, || {
        // Creation (arange, full) and elementwise with a broadcast scalar.
        let x = wmx::arange(0.0, N as f64, 1.0, DType::F32)?;
        let y = wmx::add(
            &wmx::multiply(&x, &wmx::scalar(2.0, DType::F32)?)?,
            &wmx::full(&[N], 1.0, DType::F32)?,
        )?;
        let yv = y.to_vec::<f32>()?;
        for i in [0, 1, 12_345_677, N / 2, N - 2, N - 1] {
            let want = 2.0 * (i as f32) + 1.0;
            assert_eq!(yv[i], want, "y[{i}]");
        }
        assert!(
            yv.iter()
                .enumerate()
                .all(|(i, &v)| v == 2.0 * (i as f32) + 1.0)
        );
        drop(yv);
        // A slice with an unaligned start, through a binary op with a row broadcast.
        let m = wmx::reshape(&x, &[ROWS as isize, COLS as isize])?;
        let row = wmx::arange(0.0, COLS as f64, 1.0, DType::F32)?;
        let s = wmx::slice(
            &m,
            &[
                Slice::range(3, ROWS as isize),
                Slice::range(1, COLS as isize),
            ],
        )?;
        let rowv = wmx::slice(&row, &[Slice::range(1, COLS as isize)])?;
        let d = wmx::subtract(&s, &rowv)?.to_vec::<f32>()?;
        let w = COLS - 1;
        for (k, v) in d.iter().enumerate().step_by(997) {
            let (r, c) = (k / w + 3, k % w + 1);
            assert_eq!(*v, (r * COLS + c) as f32 - c as f32, "d[{k}]");
        }
        // Row sums (whole rows in pieces), column sums (partials over row blocks),
        // the full sum and max, argmax along rows: against f64.
        let rs = wmx::sum(&m, Some(&[1]), false)?.to_vec::<f32>()?;
        for r in (0..ROWS).step_by(71) {
            let want: f64 = (0..COLS).map(|c| (r * COLS + c) as f32 as f64).sum();
            assert_close(rs[r], want, 1e-6, &format!("row {r}"));
        }
        let cs = wmx::sum(&m, Some(&[0]), false)?.to_vec::<f32>()?;
        for c in (0..COLS).step_by(37) {
            let want: f64 = (0..ROWS).map(|r| (r * COLS + c) as f32 as f64).sum();
            assert_close(cs[c], want, 1e-5, &format!("col {c}"));
        }
        let total: f64 = (0..N).map(|i| i as f32 as f64).sum();
        assert_close(
            wmx::sum(&x, None, false)?.item::<f32>()?,
            total,
            1e-5,
            "sum",
        );
        assert_eq!(wmx::max(&x, None, false)?.item::<f32>()?, (N - 1) as f32);
        assert_eq!(wmx::min(&m, None, false)?.item::<f32>()?, 0.0);
        let am = wmx::argmax(&wmx::negative(&m)?, 1, false)?.to_vec::<u32>()?;
        assert!(am.iter().all(|&i| i == 0));
        // A NaN propagates through the partials of a column max (select in pieces).
        let at = wmx::equal(&m, &wmx::scalar((5 * COLS + 7) as f64, DType::F32)?)?;
        let nan = wmx::scalar(f64::NAN, DType::F32)?;
        let cm = wmx::max(&wmx::where_(&at, &nan, &m)?, Some(&[0]), false)?.to_vec::<f32>()?;
        for (c, v) in cm.iter().enumerate() {
            if c == 7 {
                assert!(v.is_nan());
            } else {
                assert_eq!(*v, ((ROWS - 1) * COLS + c) as f32);
            }
        }
        // A small view of the large buffer works for any op (one window).
        let tail = wmx::slice(&x, &[Slice::range(N as isize - 5, N as isize)])?;
        let cum = wmx::cumsum(&tail, None, false, true)?.to_vec::<f32>()?;
        let n = N as f32;
        assert_eq!(
            cum[4],
            (n - 5.0) + (n - 4.0) + (n - 3.0) + (n - 2.0) + (n - 1.0)
        );
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn sixteen_bit_and_bool_arrays_past_the_limit() {
    let Some(dev) = gpu() else { return };
    wmx::with_device(&dev, || {
        // 80M f16 (160 MB): a cast writing windows of 16-bit words.
        let n = 9766 * 8192usize;
        let src = wmx::arange(0.0, 4096.0, 0.5, DType::F32)?;
        let big = wmx::reshape(&wmx::broadcast_to(&src, &[n / 8192, 8192])?, &[n as isize])?;
        let h = wmx::astype(&big, DType::F16)?;
        let hv = h.to_vec::<f16>()?;
        assert_eq!(hv.len(), n);
        assert!(
            hv.iter()
                .enumerate()
                .all(|(i, &v)| v == f16::from_f32((i % 8192) as f32 * 0.5))
        );
        drop(hv);
        assert_eq!(
            wmx::max(&h, None, false)?.item::<f16>()?,
            f16::from_f32(4095.5)
        );
        // 160M bools past the limit; count of trues by a u32 sum.
        let rows = 2 * n / 8192;
        let wide = wmx::broadcast_to(&src, &[rows, 8192])?;
        let b = wmx::greater(&wide, &wmx::scalar(2047.75, DType::F32)?)?;
        let count = wmx::sum(&b, None, false)?.item::<u32>()?;
        assert_eq!(count as usize, rows * 4096);
        let per_row = wmx::sum(&b, Some(&[1]), false)?.to_vec::<u32>()?;
        assert!(per_row.iter().all(|&c| c == 4096));
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn transposes_compute_and_single_piece_ops_refuse() {
    let Some(dev) = gpu() else { return };
    let side = 6000usize; // 144 MB of f32
    wmx::with_device(&dev, || {
        let x = wmx::reshape(
            &wmx::arange(0.0, (side * side) as f64, 1.0, DType::F32)?,
            &[side as isize, side as isize],
        )?;
        x.eval()?;
        // A transpose alone keeps its layout through an elementwise op (computed in
        // pieces of the underlying buffer)...
        let t = wmx::negative(&wmx::transpose(&x, None)?)?;
        let corner = wmx::slice(&t, &[Slice::range(1, 3), Slice::range(0, 2)])?;
        let c = corner.to_vec::<f32>()?;
        assert_eq!(c, [-1.0, -(side as f32 + 1.0), -2.0, -(side as f32 + 2.0)]);
        // ...and beside a row-major operand too.
        let mixed = wmx::add(&x, &wmx::transpose(&x, None)?)?;
        let c = wmx::slice(&mixed, &[Slice::range(1, 3), Slice::range(0, 2)])?.to_vec::<f32>()?;
        let w = side as f32;
        assert_eq!(c, [w + 1.0, 2.0 * (w + 1.0), 2.0 * w + 2.0, 3.0 * w + 3.0]);
        // Ops that compute in one piece say so.
        let e = wmx::matmul(&x, &x)?.eval().unwrap_err().to_string();
        assert!(e.contains("larger than one binding"), "{e}");
        // The input is intact and still computes.
        let s = wmx::slice(&x, &[Slice::range(side as isize - 1, side as isize)])?;
        let last = wmx::max(&s, None, false)?.item::<f32>()?;
        assert_eq!(last, (side * side - 1) as f32);
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn random_draws_past_the_binding_limit_are_drawn_in_parts() {
    let Some(dev) = gpu() else { return };
    // Odd, so the last word of the key's block is the unpaired one; 144 MB of u32.
    let n = 36_000_001usize;
    assert!((n * 4) as u64 > binding_limit(&dev));
    let draw = |d: &Device| {
        wmx::with_device(d, || {
            let key = wmx::random::key(7)?;
            let bits = wmx::random::bits(&key, &[n])?.to_vec::<u32>()?;
            let u = wmx::random::uniform(&key, &[n], -1.0, 1.0, DType::F32)?;
            // Words past the first part, read through a slice on the device.
            let tail = wmx::slice(&u, &[Slice::range(n as isize - 5, n as isize)])?;
            Ok::<_, wmx::Error>((bits, tail.to_vec::<f32>()?))
        })
        .unwrap()
    };
    let (gpu_bits, gpu_tail) = draw(&dev);
    let (cpu_bits, cpu_tail) = draw(&Device::cpu());
    // Compared part by part, so a failure names where.
    for (i, (g, c)) in gpu_bits
        .chunks(1 << 20)
        .zip(cpu_bits.chunks(1 << 20))
        .enumerate()
    {
        assert!(g == c, "bits differ in block {i} of 2^20 words");
    }
    assert_eq!(gpu_bits.len(), n);
    assert_eq!(gpu_tail, cpu_tail);
}

#[test]
fn concatenation_past_the_binding_limit_is_placed_in_pieces() {
    let Some(dev) = gpu() else { return };
    let limit = binding_limit(&dev) as usize;
    wmx::with_device(&dev, || {
        // Along the first axis: one row, cut along the axis across both inputs
        // (20M + 17M f32, 148 MB).
        let (na, nb) = (20_000_003usize, 17_000_001usize);
        assert!((na + nb) * 4 > limit);
        let a = wmx::arange(0.0, na as f64, 1.0, DType::F32)?;
        let b = wmx::arange(0.0, nb as f64, 1.0, DType::F32)?;
        let c = wmx::concatenate(&[&a, &wmx::negative(&b)?], 0)?.to_vec::<f32>()?;
        assert_eq!(c.len(), na + nb);
        let want = |i: usize| if i < na { i as f32 } else { -((i - na) as f32) };
        let bad = (0..c.len()).find(|&i| c[i] != want(i));
        assert_eq!(bad, None, "first wrong element");
        drop(c);
        // Along the last axis: pieces of whole rows; one input a transpose (copied
        // row-major first), one a row broadcast. 6000 x (3000 + 3001) f32, 144 MB.
        let (r, w) = (6000usize, 3000usize);
        let t = wmx::transpose(
            &wmx::reshape(
                &wmx::arange(0.0, (r * w) as f64, 1.0, DType::F32)?,
                &[w as isize, r as isize],
            )?,
            None,
        )?;
        let row = wmx::broadcast_to(&wmx::arange(0.0, 3001.0, 1.0, DType::F32)?, &[r, 3001])?;
        let c = wmx::concatenate(&[&t, &row], 1)?;
        assert_eq!(c.shape(), [r, w + 3001]);
        let cv = c.to_vec::<f32>()?;
        let cols = w + 3001;
        let want = |i: usize, j: usize| {
            if j < w {
                (j * r + i) as f32
            } else {
                (j - w) as f32
            }
        };
        let bad = (0..r * cols).find(|&x| cv[x] != want(x / cols, x % cols));
        assert_eq!(
            bad.map(|x| (x / cols, x % cols)),
            None,
            "first wrong element"
        );
        drop(cv);
        // f16 along the first axis (two words per element, an odd split).
        let h = wmx::full(&[40_000_001], 1.5, DType::F16)?;
        let g = wmx::full(&[30_000_000], -2.0, DType::F16)?;
        let hv = wmx::concatenate(&[&h, &g], 0)?.to_vec::<f16>()?;
        assert!(hv[..40_000_001].iter().all(|&v| v == f16::from_f32(1.5)));
        assert!(hv[40_000_001..].iter().all(|&v| v == f16::from_f32(-2.0)));
        // A row larger than a binding beside more than one row cannot be cut: an Err.
        let wide = wmx::broadcast_to(&wmx::scalar(1.0, DType::F32)?, &[2, limit / 4])?;
        let e = wmx::concatenate(&[&wide, &wide], 1)?.eval().unwrap_err();
        assert!(e.to_string().contains("row"), "{e}");
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn scans_and_sorts_of_rows_past_the_binding_limit() {
    let Some(dev) = gpu() else { return };
    assert!((N * 4) as u64 > binding_limit(&dev));
    wmx::with_device(&dev, || {
        // x[i, j] = (i + j) % 7 - 3: cumulative sums stay small integers (exact in f32).
        let i = wmx::reshape(
            &wmx::arange(0.0, ROWS as f64, 1.0, DType::F32)?,
            &[ROWS as isize, 1],
        )?;
        let j = wmx::arange(0.0, COLS as f64, 1.0, DType::F32)?;
        let x = wmx::subtract(
            &wmx::remainder(&wmx::add(&i, &j)?, &wmx::scalar(7.0, DType::F32)?)?,
            &wmx::scalar(3.0, DType::F32)?,
        )?;
        let val = |r: usize, c: usize| ((r + c) % 7) as f64 - 3.0;
        let c = wmx::cumsum(&x, Some(1), false, true)?.to_vec::<f32>()?;
        for r in [0, 1, 17_000, ROWS - 1] {
            let mut acc = 0.0;
            for col in 0..COLS {
                acc += val(r, col);
                assert_eq!(c[r * COLS + col] as f64, acc, "cumsum [{r}, {col}]");
            }
        }
        drop(c);
        // Sorting each row: the order of (r + c) % 7 is known; argsort is stable.
        let s = wmx::argsort(&x, Some(1))?.to_vec::<u32>()?;
        for r in [0, 3, 20_001, ROWS - 1] {
            let mut want: Vec<u32> = (0..COLS as u32).collect();
            want.sort_by(|&a, &b| val(r, a as usize).total_cmp(&val(r, b as usize)));
            assert_eq!(&s[r * COLS..(r + 1) * COLS], &want[..], "argsort row {r}");
        }
        drop(s);
        // Along the first axis each line is the whole array: blocks of rows scanned,
        // their totals' exclusive scan added, then the rows after the last block.
        for reverse in [false, true] {
            let c = wmx::cumsum(&x, Some(0), reverse, true)?.to_vec::<f32>()?;
            for col in [0, 1, 500, COLS - 1] {
                let mut acc = 0.0;
                for k in 0..ROWS {
                    let r = if reverse { ROWS - 1 - k } else { k };
                    acc += val(r, col);
                    assert_eq!(
                        c[r * COLS + col] as f64,
                        acc,
                        "cumsum [{r}, {col}] reverse {reverse}"
                    );
                }
            }
        }
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn row_ops_past_the_binding_limit() {
    let Some(dev) = gpu() else { return };
    assert!((N * 4) as u64 > binding_limit(&dev));
    wmx::with_device(&dev, || {
        // x[i, j] = (i + 2j) % 11 - 5; weight and bias per column.
        let i = wmx::reshape(
            &wmx::arange(0.0, ROWS as f64, 1.0, DType::F32)?,
            &[ROWS as isize, 1],
        )?;
        let j = wmx::arange(0.0, COLS as f64, 1.0, DType::F32)?;
        let x = wmx::subtract(
            &wmx::remainder(
                &wmx::add(&i, &wmx::multiply(&j, &wmx::scalar(2.0, DType::F32)?)?)?,
                &wmx::scalar(11.0, DType::F32)?,
            )?,
            &wmx::scalar(5.0, DType::F32)?,
        )?;
        let val = |r: usize, c: usize| ((r + 2 * c) % 11) as f64 - 5.0;
        let w = wmx::add(
            &wmx::multiply(&j, &wmx::scalar(0.001, DType::F32)?)?,
            &wmx::scalar(0.5, DType::F32)?,
        )?;
        let b = wmx::multiply(&j, &wmx::scalar(-0.002, DType::F32)?)?;
        let (wv, bv) = (w.to_vec::<f32>()?, b.to_vec::<f32>()?);
        let ln = wmx::layer_norm(&x, Some(&w), Some(&b), 1e-5)?.to_vec::<f32>()?;
        let sm = wmx::softmax(&x, &[-1])?.to_vec::<f32>()?;
        for r in [0, 1, 17_000, ROWS - 1] {
            let row: Vec<f64> = (0..COLS).map(|c| val(r, c)).collect();
            let mean = row.iter().sum::<f64>() / COLS as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / COLS as f64;
            let m = row.iter().copied().fold(f64::MIN, f64::max);
            let se: f64 = row.iter().map(|v| (v - m).exp()).sum();
            for c in 0..COLS {
                let want = (row[c] - mean) / (var + 1e-5).sqrt() * wv[c] as f64 + bv[c] as f64;
                let got = ln[r * COLS + c] as f64;
                assert!(
                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "layer_norm [{r}, {c}]: {got} vs {want}"
                );
                assert_close(sm[r * COLS + c], (row[c] - m).exp() / se, 1e-5, "softmax");
            }
        }
        drop((ln, sm));
        // Over the first axis: rows of 36 000 (moved last by a copy), in pieces too.
        let s0 = wmx::softmax(&x, &[0])?.to_vec::<f32>()?;
        for c in [0, 1, COLS - 1] {
            let col: Vec<f64> = (0..ROWS).map(|r| val(r, c)).collect();
            let m = col.iter().copied().fold(f64::MIN, f64::max);
            let se: f64 = col.iter().map(|v| (v - m).exp()).sum();
            for r in [0, 5, 20_000, ROWS - 1] {
                assert_close(
                    s0[r * COLS + c],
                    (col[r] - m).exp() / se,
                    1e-5,
                    "softmax axis 0",
                );
            }
        }
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn matmul_of_rows_past_the_binding_limit() {
    let Some(dev) = gpu() else { return };
    assert!((N * 4) as u64 > binding_limit(&dev));
    // Small integers: every product and sum is exact in f32.
    let av = |i: usize, k: usize| ((i + 3 * k) % 5) as f64 - 2.0;
    let bv = |k: usize, j: usize| ((2 * k + j) % 3) as f64 - 1.0;
    wmx::with_device(&dev, || {
        let i = wmx::reshape(
            &wmx::arange(0.0, ROWS as f64, 1.0, DType::F32)?,
            &[ROWS as isize, 1],
        )?;
        let kk = wmx::arange(0.0, COLS as f64, 1.0, DType::F32)?;
        let five = wmx::scalar(5.0, DType::F32)?;
        let a = wmx::subtract(
            &wmx::remainder(
                &wmx::add(&i, &wmx::multiply(&kk, &wmx::scalar(3.0, DType::F32)?)?)?,
                &five,
            )?,
            &wmx::scalar(2.0, DType::F32)?,
        )?;
        let n = 8usize;
        let b_host: Vec<f32> = (0..COLS * n).map(|x| bv(x / n, x % n) as f32).collect();
        let b = wmx::Array::from_slice(&b_host, &[COLS, n])?;
        let want = |r: usize, j: usize| (0..COLS).map(|k| av(r, k) * bv(k, j)).sum::<f64>();
        // A (144 MB) in pieces of rows; the output is small.
        let y = wmx::matmul(&a, &b)?.to_vec::<f32>()?;
        for r in [0, 1, 9_999, 20_000, ROWS - 1] {
            for j in 0..n {
                assert_eq!(y[r * n + j] as f64, want(r, j), "A @ B [{r}, {j}]");
            }
        }
        // Batched (3 x 12000 rows): B differs per batch (times 1, 2, 3), C per row
        // (m + j, broadcast over the batch), through addmm.
        let m = ROWS / 3;
        let a3 = wmx::reshape(&a, &[3, m as isize, COLS as isize])?;
        let scale = wmx::reshape(&wmx::arange(1.0, 4.0, 1.0, DType::F32)?, &[3, 1, 1])?;
        let b3 = wmx::multiply(&b, &scale)?;
        let rows = wmx::reshape(
            &wmx::arange(0.0, m as f64, 1.0, DType::F32)?,
            &[m as isize, 1],
        )?;
        let c = wmx::add(&rows, &wmx::arange(0.0, n as f64, 1.0, DType::F32)?)?;
        let y3 = wmx::addmm(&c, &a3, &b3, 1.0, 2.0)?;
        assert_eq!(y3.shape(), [3, m, n]);
        let y3 = y3.to_vec::<f32>()?;
        for r in [0, 11_999, 12_000, 30_001, ROWS - 1] {
            let (bi, mi) = (r / m, r % m);
            for j in 0..n {
                let got = y3[r * n + j] as f64;
                let w = (bi + 1) as f64 * want(r, j) + 2.0 * (mi + j) as f64;
                assert_eq!(got, w, "addmm [{bi}, {mi}, {j}]");
            }
        }
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn matmul_by_a_weight_past_the_binding_limit() {
    let Some(dev) = gpu() else { return };
    assert!((N * 4) as u64 > binding_limit(&dev));
    wmx::with_device(&dev, || {
        // w[r, c] = (7r + c) % 13 - 6 (36 000 x 1000), x[i, c] = (i + c) % 5 - 2:
        // products of small integers, exact in f32.
        let r = wmx::reshape(
            &wmx::arange(0.0, ROWS as f64, 1.0, DType::F32)?,
            &[ROWS as isize, 1],
        )?;
        let c = wmx::arange(0.0, COLS as f64, 1.0, DType::F32)?;
        let w = wmx::subtract(
            &wmx::remainder(
                &wmx::add(&wmx::multiply(&r, &wmx::scalar(7.0, DType::F32)?)?, &c)?,
                &wmx::scalar(13.0, DType::F32)?,
            )?,
            &wmx::scalar(6.0, DType::F32)?,
        )?;
        w.eval()?;
        let xv: Vec<f32> = (0..3 * COLS)
            .map(|k| ((k / COLS + k % COLS) % 5) as f32 - 2.0)
            .collect();
        let x = wmx::Array::from_slice(&xv, &[3, COLS])?;
        let wv = |r: usize, c: usize| ((7 * r + c) % 13) as f32 - 6.0;
        let dot =
            |i: usize, r: usize| -> f32 { (0..COLS).map(|c| xv[i * COLS + c] * wv(r, c)).sum() };
        // x @ w.t(): B is a transposed view, cut into blocks of w's rows.
        let y = wmx::matmul(&x, &w.t()?)?.to_vec::<f32>()?;
        assert_eq!(y.len(), 3 * ROWS);
        for i in 0..3 {
            for r in [0, 1, 17_000, 33_554, ROWS - 1] {
                assert_eq!(y[i * ROWS + r], dot(i, r), "x @ w.t() [{i}, {r}]");
            }
        }
        // With a bias (addmm): 1.5 (x @ w.t()) - 2 bias, the bias per column.
        let bias = wmx::arange(0.0, ROWS as f64, 1.0, DType::F32)?;
        let z = wmx::addmm(&bias, &x, &w.t()?, 1.5, -2.0)?.to_vec::<f32>()?;
        for i in 0..3 {
            for r in [0, 20_000, ROWS - 1] {
                let want = 1.5 * dot(i, r) - 2.0 * r as f32;
                assert_eq!(z[i * ROWS + r], want, "addmm [{i}, {r}]");
            }
        }
        // Row-major w (each column block spans all of it): partial products over
        // ranges of K, summed. x2[i, r] = (i + 2r) % 3 - 1.
        let x2v: Vec<f32> = (0..3 * ROWS)
            .map(|k| ((k / ROWS + 2 * (k % ROWS)) % 3) as f32 - 1.0)
            .collect();
        let x2 = wmx::Array::from_slice(&x2v, &[3, ROWS])?;
        let dot2 =
            |i: usize, c: usize| -> f32 { (0..ROWS).map(|r| x2v[i * ROWS + r] * wv(r, c)).sum() };
        let y2 = wmx::matmul(&x2, &w)?.to_vec::<f32>()?;
        let bias2 = wmx::arange(0.0, COLS as f64, 1.0, DType::F32)?;
        let z2 = wmx::addmm(&bias2, &x2, &w, 0.5, 3.0)?.to_vec::<f32>()?;
        for i in 0..3 {
            for c in [0, 1, 500, COLS - 1] {
                assert_eq!(y2[i * COLS + c], dot2(i, c), "x2 @ w [{i}, {c}]");
                let want = 0.5 * dot2(i, c) + 3.0 * c as f32;
                assert_eq!(z2[i * COLS + c], want, "addmm over K parts [{i}, {c}]");
            }
        }
        drop((w, y2, z2));
        // f16 (summed in f32, rounded once): w16[r, j] = (r % 13 + j) % 13 - 6,
        // 40 000 x 2000 (160 MB), computed in f16 (exact); x16 picks the rows
        // r = i (mod 2000), so each output sums 20 small integers.
        let (rows16, cols16) = (40_000usize, 2000usize);
        let r13 = wmx::remainder(
            &wmx::reshape(
                &wmx::arange(0.0, rows16 as f64, 1.0, DType::F32)?,
                &[rows16 as isize, 1],
            )?,
            &wmx::scalar(13.0, DType::F32)?,
        )?;
        let h = |a: &wmx::Array| wmx::astype(a, DType::F16);
        let j16 = wmx::arange(0.0, cols16 as f64, 1.0, DType::F16)?;
        let w16 = wmx::subtract(
            &wmx::remainder(&wmx::add(&h(&r13)?, &j16)?, &wmx::scalar(13.0, DType::F16)?)?,
            &wmx::scalar(6.0, DType::F16)?,
        )?;
        let x16v: Vec<f32> = (0..2 * rows16)
            .map(|k| f32::from(k % rows16 % cols16 == k / rows16))
            .collect();
        let x16 = h(&wmx::Array::from_slice(&x16v, &[2, rows16])?)?;
        let y16 = wmx::astype(&wmx::matmul(&x16, &w16)?, DType::F32)?.to_vec::<f32>()?;
        for i in 0..2 {
            for j in [0, 7, cols16 - 1] {
                let want: f32 = (0..rows16)
                    .filter(|r| r % cols16 == i)
                    .map(|r| ((r % 13 + j) % 13) as f32 - 6.0)
                    .sum();
                assert_eq!(y16[i * cols16 + j], want, "f16 x16 @ w16 [{i}, {j}]");
            }
        }
        // A vector @ the large matrix (the vector-matrix kernel, per part).
        let v16 = wmx::slice(&x16, &[Slice::range(1, 2), Slice::ALL])?;
        let v16 = wmx::reshape(&v16, &[rows16 as isize])?;
        let yv = wmx::astype(&wmx::matmul(&v16, &w16)?, DType::F32)?.to_vec::<f32>()?;
        assert_eq!(yv.len(), cols16);
        for j in [0, 7, cols16 - 1] {
            assert_eq!(yv[j], y16[cols16 + j], "f16 vector @ w16 [{j}]");
        }
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn gathers_past_the_binding_limit() {
    let Some(dev) = gpu() else { return };
    assert!((N * 4) as u64 > binding_limit(&dev));
    wmx::with_device(&dev, || {
        // x[r, c] = 10 r + c (5 columns); indices[r, j] = (r + j) % 7 - 1, so -1
        // reads the last column and 5 is out of range (NaN).
        let xr = wmx::reshape(
            &wmx::arange(0.0, ROWS as f64, 1.0, DType::F32)?,
            &[ROWS as isize, 1],
        )?;
        let x = wmx::add(
            &wmx::multiply(&xr, &wmx::scalar(10.0, DType::F32)?)?,
            &wmx::arange(0.0, 5.0, 1.0, DType::F32)?,
        )?;
        let ir = wmx::reshape(
            &wmx::arange(0.0, ROWS as f64, 1.0, DType::I32)?,
            &[ROWS as isize, 1],
        )?;
        let ij = wmx::arange(0.0, COLS as f64, 1.0, DType::I32)?;
        let idx = wmx::subtract(
            &wmx::remainder(&wmx::add(&ir, &ij)?, &wmx::scalar(7.0, DType::I32)?)?,
            &wmx::scalar(1.0, DType::I32)?,
        )?;
        let g = wmx::take_along_axis(&x, &idx, Some(1))?.to_vec::<f32>()?;
        assert_eq!(g.len(), N);
        for r in [0, 1, 18_000, 33_554, ROWS - 1] {
            for j in [0, 1, 5, 499, COLS - 1] {
                let i = (r + j) % 7;
                let got = g[r * COLS + j];
                let col = match i {
                    0 => Some(4),
                    6 => None,
                    i => Some(i - 1),
                };
                match col {
                    Some(c) => assert_eq!(got, (10 * r + c) as f32, "[{r}, {j}]"),
                    None => assert!(got.is_nan(), "[{r}, {j}] out of range: {got}"),
                }
            }
        }
        drop(g);
        // Rows of a table past a binding (an embedding lookup): the table is read
        // part by part along the axis. t[r, c] = (r * 7 + c) % 1009, exact in f32.
        let tr = wmx::reshape(
            &wmx::arange(0.0, ROWS as f64, 1.0, DType::F32)?,
            &[ROWS as isize, 1],
        )?;
        let tc = wmx::arange(0.0, COLS as f64, 1.0, DType::F32)?;
        let table = wmx::remainder(
            &wmx::add(&wmx::multiply(&tr, &wmx::scalar(7.0, DType::F32)?)?, &tc)?,
            &wmx::scalar(1009.0, DType::F32)?,
        )?;
        table.eval()?;
        let picks: [i64; 8] = [5, 35_999, -1, 17_000, 0, 36_000, 20_001, -36_000];
        let pi: Vec<i32> = picks.iter().map(|&p| p as i32).collect();
        let pa = wmx::Array::from_slice(&pi, &[picks.len()])?;
        let rows = wmx::take(&table, &pa, Some(0))?.to_vec::<f32>()?;
        assert_eq!(rows.len(), picks.len() * COLS);
        for (k, &p) in picks.iter().enumerate() {
            let r = if p < 0 { p + ROWS as i64 } else { p };
            for c in [0, 1, 500, COLS - 1] {
                let got = rows[k * COLS + c];
                if (0..ROWS as i64).contains(&r) {
                    let want = ((r as usize * 7 + c) % 1009) as f32;
                    assert_eq!(got, want, "take row {p}, column {c}");
                } else {
                    assert!(got.is_nan(), "take row {p} is out of range: {got}");
                }
            }
        }
        // Along the last axis, a part is not a box of the table: an Err naming it.
        let e = wmx::take(&table, &pa, Some(1))?.eval().unwrap_err();
        assert!(e.to_string().contains("pieces"), "{e}");
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn slice_updates_of_a_base_past_the_binding_limit() {
    let Some(dev) = gpu() else { return };
    assert!((N * 4) as u64 > binding_limit(&dev));
    wmx::with_device(&dev, || {
        let base = wmx::reshape(
            &wmx::arange(0.0, N as f64, 1.0, DType::F32)?,
            &[ROWS as isize, COLS as isize],
        )?;
        // Rows 5, 12, ... (across the pieces' boundaries), columns 998, 995, ... 5.
        let (rs, cs) = (
            Slice::new(Some(5), Some(35_000), 7),
            Slice::new(Some(998), Some(2), -3),
        );
        let (nr, nc) = ((35_000 - 5usize).div_ceil(7), (998 - 2usize).div_ceil(3));
        let ur = wmx::reshape(
            &wmx::arange(0.0, nr as f64, 1.0, DType::F32)?,
            &[nr as isize, 1],
        )?;
        let uc = wmx::arange(0.0, nc as f64, 1.0, DType::F32)?;
        // u[i, j] = -(1000 i + j) - 1: every value distinct from the base's.
        let u = wmx::negative(&wmx::add(
            &wmx::add(&wmx::multiply(&ur, &wmx::scalar(1000.0, DType::F32)?)?, &uc)?,
            &wmx::scalar(1.0, DType::F32)?,
        )?)?;
        let y = wmx::slice_update(&base, &u, &[rs, cs])?.to_vec::<f32>()?;
        let want = |r: usize, c: usize| {
            let in_r = (5..35_000).contains(&r) && (r - 5).is_multiple_of(7);
            let in_c = (3..=998).contains(&c) && (998 - c).is_multiple_of(3);
            if in_r && in_c {
                -(((r - 5) / 7 * 1000 + (998 - c) / 3) as f32) - 1.0
            } else {
                (r * COLS + c) as f32
            }
        };
        let bad = (0..N).find(|&x| y[x] != want(x / COLS, x % COLS));
        assert_eq!(
            bad.map(|x| (x / COLS, x % COLS)),
            None,
            "first wrong element"
        );
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}

#[test]
fn scatters_into_a_base_past_the_binding_limit() {
    let Some(dev) = gpu() else { return };
    assert!((N * 4) as u64 > binding_limit(&dev));
    wmx::with_device(&dev, || {
        let base = wmx::zeros(&[ROWS, COLS], DType::F32)?;
        // Row r sets columns r % 500, 500 + 7r % 499 and -1 (the last): distinct.
        let cols = |r: usize| [r % 500, 500 + 7 * r % 499, COLS - 1];
        let idx: Vec<i32> = (0..ROWS)
            .flat_map(|r| [(r % 500) as i32, (500 + 7 * r % 499) as i32, -1])
            .collect();
        let vals: Vec<f32> = (0..ROWS)
            .flat_map(|r| [r as f32 + 0.5, r as f32 + 0.25, -(r as f32)])
            .collect();
        let idx = wmx::Array::from_slice(&idx, &[ROWS, 3])?;
        let vals = wmx::Array::from_slice(&vals, &[ROWS, 3])?;
        let y = wmx::put_along_axis(&base, &idx, &vals, 1)?.to_vec::<f32>()?;
        let bad = (0..ROWS).find(|&r| {
            let row = &y[r * COLS..(r + 1) * COLS];
            let c = cols(r);
            let want = [r as f32 + 0.5, r as f32 + 0.25, -(r as f32)];
            let set = (0..3).all(|k| row[c[k]] == want[k]);
            let rest = (0..COLS).filter(|j| !c.contains(j)).all(|j| row[j] == 0.0);
            !(set && rest)
        });
        assert_eq!(bad, None, "first wrong row");
        drop(y);
        // Along the first axis (an embedding's gradient): each row of the base is
        // past no binding, but no box of whole rows fits one either, so pieces cut
        // the axis and take the updates whose index falls in them. Duplicates add;
        // -1 is the last row, 36 000 is dropped, -36 000 is row 0.
        let picks: [i32; 8] = [5, 35_999, -1, 17_000, 5, 36_000, 20_001, -36_000];
        let upd = |k: usize, c: usize| ((k + 1) * (c % 3 + 1)) as f32;
        let uv: Vec<f32> = (0..picks.len())
            .flat_map(|k| (0..COLS).map(move |c| upd(k, c)))
            .collect();
        let u = wmx::Array::from_slice(&uv, &[picks.len(), COLS])?;
        let pa = wmx::Array::from_slice(&picks, &[picks.len()])?;
        let g = wmx::scatter_add(&base, &pa, &u, 0)?.to_vec::<f32>()?;
        let rows: [(usize, &[usize]); 7] = [
            (0, &[7]),
            (1, &[]),
            (5, &[0, 4]),
            (17_000, &[3]),
            (20_001, &[6]),
            (30_000, &[]),
            (ROWS - 1, &[1, 2]),
        ];
        for (r, ks) in rows {
            for c in [0, 1, 2, 500, COLS - 1] {
                let want: f32 = ks.iter().map(|&k| upd(k, c)).sum();
                assert_eq!(g[r * COLS + c], want, "scatter_add row {r}, column {c}");
            }
        }
        Ok::<(), wmx::Error>(())
    })
    .unwrap();
}
