//! GPU tests of scatter_add's two ways of adding: one atomic add per update (32-bit
//! integers; f32 where the adapter has float atomics) and the compare-exchange loop
//! (every other dtype; f32 on the fallback device, as in browsers). Sums are
//! checked against f64: integers exactly, floats within the rounding of any order
//! of additions (n ulps of the largest partial sum).

mod common;
use common::*;
use wmx_kernels::{Batch, Contig, DType, Kernels, ScatterOp};

/// `bins` zeros (or a base) plus `n` updates at random indices (some negative,
/// some out of range and dropped), both ways of adding when the device has them.
fn scatter_add_case(k: &Kernels, d: DType, n: usize, bins: usize, seed: u64) {
    let mut rng = Rng(seed);
    let base = Input::new(
        k,
        &mut rng,
        d,
        &[bins],
        Lay::Offset(3),
        Data::Eighths,
        false,
    );
    let upd = Input::new(
        k,
        &mut rng,
        d,
        &[n],
        Lay::Neg,
        Data::Range(-4.0, 4.0),
        false,
    );
    let ids: Vec<f64> = (0..n)
        .map(|_| rng.below(bins as u64 + 8) as f64 - 4.0)
        .collect();
    let idx = Input {
        buf: k.upload(&encode(&ids, DType::I32)).unwrap(),
        dtype: DType::I32,
        shape: vec![n],
        strides: vec![1],
        offset: 0,
        vals: ids.clone(),
    };
    let mut want = base.vals.clone();
    let mut mag: Vec<f64> = base.vals.iter().map(|v| v.abs()).collect();
    let mut count = vec![1usize; bins];
    for (&i, &u) in ids.iter().zip(&upd.vals) {
        let i = if i < 0.0 { i + bins as f64 } else { i };
        if (0.0..bins as f64).contains(&i) {
            want[i as usize] += u;
            mag[i as usize] += u.abs();
            count[i as usize] += 1;
        }
    }
    let out = k.create_buffer((bins * d.size()) as u64, None).unwrap();
    let mut batch = Batch::new();
    k.scatter(
        &mut batch,
        ScatterOp::Add,
        &base.view(),
        &idx.view(),
        &upd.view(),
        0,
        &Contig {
            buffer: &out,
            window: None,
            dtype: d,
            shape: &[bins],
        },
    )
    .unwrap();
    k.submit(batch).unwrap();
    let got = decode(
        &k.read_blocking(&out, 0, (bins * d.size()) as u64).unwrap(),
        d,
    );
    for (b, (g, w)) in got.iter().zip(&want).enumerate() {
        let tol = if d.is_float() {
            count[b] as f64 * ulp(d) * mag[b]
        } else {
            0.0
        };
        let w = if d.is_float() {
            *w
        } else {
            wrap(*w as i128, d)
        };
        assert!(
            (g - w).abs() <= tol,
            "scatter_add {d} of {n} into {bins} (atomic f32: {}): bin {b} got {g} want {w}",
            k.target().atomic_f32
        );
    }
}

fn all_cases(k: &Kernels) {
    for d in [
        DType::F32,
        DType::I32,
        DType::U32,
        DType::F16,
        DType::BF16,
        DType::U8,
    ] {
        // Few bins (long chains of updates on one word), many bins, odd sizes.
        scatter_add_case(k, d, 20_000, 7, 1);
        scatter_add_case(k, d, 70_001, 4099, 2);
        scatter_add_case(k, d, 1, 1, 3);
    }
}

#[test]
fn scatter_add_with_atomic_adds() {
    let Some(k) = k() else { return };
    eprintln!(
        "float atomics: {} ({})",
        k.target().atomic_f32,
        k.caps().adapter_name
    );
    all_cases(k);
}

#[test]
fn scatter_add_by_compare_exchange() {
    let Some(k) = k_fallback() else { return };
    assert!(!k.target().atomic_f32);
    all_cases(k);
}
