//! Dispatch counts of what the planner folds, on a WebGPU device of this test's
//! own (the conformance suite's tests share theirs, so their counts mix). With no
//! adapter the test fails, unless `WMX_ALLOW_NO_GPU=1`.

use wmx_core::{self as wmx, Array, DType, Device, Mode};

fn gpu() -> Option<Device> {
    wmx_tests::gpu::device(wmx_webgpu::open)
}

/// Dispatches `f` makes in `mode`, its result evaluated.
fn dispatches(dev: &Device, mode: Mode, f: impl FnOnce() -> wmx::Result<Array>) -> u64 {
    let be = wmx_webgpu::backend(dev).expect("a WebGPU device");
    dev.backend().synchronize().unwrap();
    let before = be.stats().dispatches;
    wmx::with_mode(mode, || f()?.eval()).unwrap();
    dev.backend().synchronize().unwrap();
    be.stats().dispatches - before
}

#[test]
fn scales_and_sums_fold_into_products() {
    let Some(dev) = gpu() else { return };
    let (a, b) = wmx::with_device(&dev, || {
        let a = wmx::random::normal(&wmx::random::key(1)?, &[2, 9, 16], 0.0, 1.0, DType::F32)?;
        let b = wmx::random::normal(&wmx::random::key(2)?, &[2, 16, 7], 0.0, 1.0, DType::F32)?;
        wmx::eval(&[a.clone(), b.clone()])?;
        Ok::<_, wmx::Error>((a, b))
    })
    .unwrap();
    // Both scales fold (the small fill of each factor is made on the host): the
    // product alone in the default mode, three kernels op by op.
    let scaled = || Ok(&wmx::matmul(&(&a * 0.5), &b)? * 3.0);
    let default = dispatches(&dev, Mode::Compiled, scaled);
    let lazy = dispatches(&dev, Mode::Lazy, scaled);
    assert_eq!((default, lazy), (1, 3), "a product scaled on both sides");
    // A product plus an array of its shape: the array is the product's addend.
    let c = wmx::with_device(&dev, || wmx::ones(&[2, 9, 7], DType::F32)).unwrap();
    let sum = || Ok(&wmx::matmul(&a, &b)? + &c);
    assert_eq!(dispatches(&dev, Mode::Compiled, sum), 1, "a @ b + c");
    // A product something else holds keeps its multiply.
    let held = wmx::with_device(&dev, || wmx::matmul(&a, &b)).unwrap();
    let kept = dispatches(&dev, Mode::Compiled, || Ok(&held * 3.0));
    assert_eq!(kept, 2, "a held product and its multiply");
    // A compiled function folds its trace the same way.
    let f = wmx::compile(|x: &[Array]| Ok(vec![&wmx::matmul(&(&x[0] * 0.5), &x[1])? * 3.0]));
    let call = || Ok(f.call(&[a.clone(), b.clone()])?.remove(0));
    let traced = dispatches(&dev, Mode::Compiled, call);
    assert_eq!(traced, 1, "a compiled scaled product");
}
