//! A compiled function that captures a changing scalar (a learning rate, a step
//! count) compiles a bounded number of fused pipelines: the first few values of a
//! program are literals in its WGSL, later ones parameter words of one pipeline (a
//! new literal each step kept a pipeline each, 0.5 MB a step on lavapipe). Results
//! against f64 in both forms, alone and feeding a reduction. On a real adapter
//! (lavapipe in CI).

use wmx_core::{self as wmx, Array};

mod common;
use common::gpu;

#[test]
fn a_changing_captured_scalar_compiles_a_bounded_number_of_pipelines() {
    let Some((dev, be)) = gpu() else { return };
    let xs: Vec<f32> = (0..1000).map(|i| i as f32 * 0.25 - 100.0).collect();
    let x = Array::from_slice_on(&xs, &[1000], &dev).unwrap();
    let mut counts = Vec::new();
    for step in 0..16 {
        let lr = 0.1 + step as f64 * 0.37;
        let shift = -(step as f64);
        // A fresh compile each step, as a training loop might write it; a second
        // output reduces the same values (the fused prologue of a reduction).
        let f = wmx::compile(move |a: &[Array]| {
            let y = &wmx::axpby(&a[0], &wmx::exp(&(&a[0] * 0.01))?, lr, 2.0)? + shift;
            let s = wmx::sum(&y, None, false)?;
            Ok(vec![y, s])
        });
        let out = wmx::with_device(&dev, || f.call(std::slice::from_ref(&x))).unwrap();
        let got = out[0].to_vec::<f32>().unwrap();
        let mut total = 0.0;
        for (i, (&g, &v)) in got.iter().zip(&xs).enumerate() {
            let v = v as f64;
            let want = lr * v + 2.0 * (v * 0.01).exp() + shift;
            total += want;
            assert!(
                (g as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
                "step {step}, element {i}: {g} vs {want}"
            );
        }
        // The sum alone: its first pass computes the values as it reads them.
        let g = wmx::compile(move |a: &[Array]| {
            let y = &wmx::axpby(&a[0], &wmx::exp(&(&a[0] * 0.01))?, lr, 2.0)? + shift;
            Ok(vec![wmx::sum(&y, None, false)?])
        });
        let sums = wmx::with_device(&dev, || g.call(std::slice::from_ref(&x))).unwrap();
        for s in [&out[1], &sums[0]] {
            let s = s.to_vec::<f32>().unwrap()[0] as f64;
            assert!(
                (s - total).abs() <= 1e-4 * total.abs().max(1000.0),
                "step {step}: sum {s} vs {total}"
            );
        }
        counts.push(be.kernels().fused_pipeline_count());
    }
    assert!(counts[0] >= 1, "the function ran fused: {counts:?}");
    // Literal pipelines for the first values, then one parameter form each.
    let last = *counts.last().unwrap();
    assert!(
        counts[8..].iter().all(|&c| c == last),
        "pipelines kept growing: {counts:?}"
    );
    assert!(last <= 2 * (4 + 1), "pipelines per step: {counts:?}");
}
