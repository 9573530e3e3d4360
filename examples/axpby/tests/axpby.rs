//! The Axpby extension on the CPU and on WebGPU (lavapipe in CI) against f64
//! references and the composed `alpha * x + beta * y`.

use wmx::ext::CustomPrimitive;
use wmx::{Array, DType, Device, Slice, bf16, f16};
use wmx_axpby::{Axpby, axpby};

const A: f64 = 1.75;
const B: f64 = -0.5;

/// The CPU and the GPU; no adapter is a failure unless `WMX_ALLOW_NO_GPU=1`.
fn devices() -> Vec<Device> {
    let mut d = vec![Device::cpu()];
    match wmx::webgpu::open() {
        Ok(g) => d.push(g),
        Err(e) if std::env::var("WMX_ALLOW_NO_GPU").as_deref() == Ok("1") => {
            eprintln!("no GPU ({e}); GPU half skipped because WMX_ALLOW_NO_GPU=1")
        }
        Err(e) => panic!("no GPU adapter: {e} (install mesa-vulkan-drivers)"),
    }
    d
}

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 8.0 - 4.0
        })
        .collect()
}

fn read(a: &Array) -> Vec<f64> {
    let f = wmx::astype(a, DType::F32).unwrap();
    f.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| *v as f64)
        .collect()
}

/// Elementwise closeness, relative to the magnitude of `alpha x` and `beta y`.
fn close(what: &str, got: &[f64], want: &[f64], mag: &[f64], ulp: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for i in 0..got.len() {
        assert!(
            (got[i] - want[i]).abs() <= ulp * (mag[i] + 1e-30),
            "{what}[{i}]: {} vs {}",
            got[i],
            want[i]
        );
    }
}

/// `x` and `y` (any views) against the f64 formula and the composed ops.
fn check(what: &str, x: &Array, y: &Array, ulp: f64) {
    let z = axpby(x, y, A, B).unwrap();
    let shape = wmx::ext::layout::broadcast_shapes("t", x.shape(), y.shape()).unwrap();
    assert_eq!(z.shape(), &shape[..], "{what}");
    let xb = read(&wmx::broadcast_to(x, &shape).unwrap());
    let yb = read(&wmx::broadcast_to(y, &shape).unwrap());
    let want: Vec<f64> = xb.iter().zip(&yb).map(|(x, y)| A * x + B * y).collect();
    let mag: Vec<f64> = xb
        .iter()
        .zip(&yb)
        .map(|(x, y)| (A * x).abs() + (B * y).abs())
        .collect();
    close(what, &read(&z), &want, &mag, ulp);
    let on = |v: f64| wmx::with_device(x.device(), || wmx::scalar(v, z.dtype())).unwrap();
    let composed = wmx::add(
        &wmx::multiply(x, &on(A)).unwrap(),
        &wmx::multiply(y, &on(B)).unwrap(),
    )
    .unwrap();
    close(
        &format!("{what} vs composed"),
        &read(&z),
        &read(&composed),
        &mag,
        3.0 * ulp,
    );
}

#[test]
fn values_on_every_layout_and_dtype() {
    for dev in devices() {
        let (r, c) = (37, 53);
        let x = Array::from_slice_on(&data(r * c, 1), &[r, c], &dev).unwrap();
        let y = Array::from_slice_on(&data(r * c, 2), &[r, c], &dev).unwrap();
        let row = Array::from_slice_on(&data(c, 3), &[c], &dev).unwrap();
        let f32ulp = 2f64.powi(-23);
        check(&format!("contiguous on {dev}"), &x, &y, f32ulp);
        check(&format!("broadcast row on {dev}"), &x, &row, f32ulp);
        let s = wmx::scalar(3.0, DType::F32)
            .unwrap()
            .to_device(&dev)
            .unwrap();
        check(&format!("scalar y on {dev}"), &x, &s, f32ulp);
        let xt = wmx::transpose(&x, None).unwrap();
        let yt = wmx::transpose(&y, None).unwrap();
        check(&format!("transposed on {dev}"), &xt, &yt, f32ulp);
        let xs = wmx::slice(
            &x,
            &[
                Slice::new(Some(30), Some(2), -3),
                Slice::new(Some(1), None, 2),
            ],
        )
        .unwrap();
        let ys = wmx::slice(
            &y,
            &[
                Slice::new(Some(3), Some(31), 3),
                Slice::new(None, Some(52), 2),
            ],
        )
        .unwrap();
        check(&format!("sliced on {dev}"), &xs, &ys, f32ulp);
        // Sizes and offsets that take the GPU's vec4 path, and ones that miss it.
        let x4 = Array::from_slice_on(&data(36 * 52, 8), &[36, 52], &dev).unwrap();
        let y4 = Array::from_slice_on(&data(36 * 52, 9), &[36, 52], &dev).unwrap();
        check(&format!("vec4 on {dev}"), &x4, &y4, f32ulp);
        let flat = Array::from_slice_on(&data(2001, 10), &[2001], &dev).unwrap();
        let at1 = wmx::slice(&flat, &[Slice::new(Some(1), None, 1)]).unwrap();
        let at0 = wmx::slice(&flat, &[Slice::new(None, Some(2000), 1)]).unwrap();
        check(&format!("offset 1 on {dev}"), &at1, &at0, f32ulp);
        if dev.check_dtype(DType::F16).is_ok() {
            let h = |a: &Array| wmx::astype(a, DType::F16).unwrap();
            check(
                &format!("f16 vec4 on {dev}"),
                &h(&x4),
                &h(&y4),
                2f64.powi(-10),
            );
        }
        // Scalars and empty arrays.
        check(&format!("0-d on {dev}"), &s, &s, f32ulp);
        let e = wmx::zeros(&[0, 5], DType::F32)
            .unwrap()
            .to_device(&dev)
            .unwrap();
        assert_eq!(
            axpby(&e, &e, A, B).unwrap().to_vec::<f32>().unwrap(),
            Vec::<f32>::new()
        );
        // Integers promote to f32; i32 with u8 too.
        let xi = Array::from_slice_on(&[1i32, -2, 300], &[3], &dev).unwrap();
        let yu = wmx::astype(
            &Array::from_slice_on(&[7i32, 8, 9], &[3], &dev).unwrap(),
            DType::U8,
        )
        .unwrap();
        let z = axpby(&xi, &yu, A, B).unwrap();
        assert_eq!(z.dtype(), DType::F32);
        assert_eq!(read(&z), vec![A - 3.5, -2.0 * A - 4.0, 300.0 * A - 4.5]);
        // f16: one rounding of the f32 result (where the device holds f16).
        if dev.check_dtype(DType::F16).is_ok() {
            let xh = wmx::astype(&x, DType::F16).unwrap();
            let yh = wmx::astype(&row, DType::F16).unwrap();
            assert_eq!(axpby(&xh, &yh, A, B).unwrap().dtype(), DType::F16);
            check(&format!("f16 broadcast on {dev}"), &xh, &yh, 2f64.powi(-10));
            check(
                &format!("f16 contiguous on {dev}"),
                &xh,
                &wmx::astype(&y, DType::F16).unwrap(),
                2f64.powi(-10),
            );
            // f16 with f32 promotes to f32.
            assert_eq!(axpby(&xh, &y, A, B).unwrap().dtype(), DType::F32);
        }
        // bf16: the CPU's general path; a clear Err on the GPU.
        if dev.check_dtype(DType::BF16).is_ok() {
            let xb = wmx::astype(&x, DType::BF16).unwrap();
            let z = axpby(&xb, &xb, A, B);
            if dev.kind() == wmx::DeviceKind::Cpu {
                check("bf16 on cpu", &xb, &xb, 2f64.powi(-7));
            } else {
                let e = z.and_then(|z| z.eval()).unwrap_err().to_string();
                assert!(e.contains("axpby") && e.contains("bf16"), "{e}");
            }
        }
        let _ = (bf16::ONE, f16::ONE);
    }
}

#[test]
fn gradients_jvp_and_vmap() {
    for dev in devices() {
        let (r, c) = (5, 8);
        let xs = data(r * c, 4);
        let ws = data(r * c, 5);
        let x = Array::from_slice_on(&xs, &[r, c], &dev).unwrap();
        let y = Array::from_slice_on(&data(c, 6), &[c], &dev).unwrap();
        let w = Array::from_slice_on(&ws, &[r, c], &dev).unwrap();
        // loss = sum(axpby(x, y) * w): d/dx = alpha w, d/dy = beta * column sums of w.
        let g = wmx::grad(
            |a: &[Array]| {
                Ok(vec![wmx::sum(
                    &wmx::multiply(&axpby(&a[0], &a[1], A, B)?, &w)?,
                    None,
                    false,
                )?])
            },
            &[0, 1],
        )(&[x.clone(), y.clone()])
        .unwrap();
        let gx: Vec<f64> = ws.iter().map(|w| A * *w as f64).collect();
        let gy: Vec<f64> = (0..c)
            .map(|j| B * (0..r).map(|i| ws[i * c + j] as f64).sum::<f64>())
            .collect();
        let ones = vec![1.0; r * c];
        close(&format!("d/dx on {dev}"), &read(&g[0]), &gx, &ones, 1e-6);
        close(
            &format!("d/dy on {dev}"),
            &read(&g[1]),
            &gy,
            &ones[..c],
            1e-5,
        );
        // jvp with tangents (1, 0) then (0, 1).
        let tx = wmx::ones_like(&x).unwrap();
        let (_, t) = wmx::jvp(
            |a: &[Array]| Ok(vec![axpby(&a[0], &a[1], A, B)?]),
            &[x.clone(), y.clone()],
            &[tx, wmx::zeros_like(&y).unwrap()],
        )
        .unwrap();
        assert!(read(&t[0]).iter().all(|v| *v == A), "jvp x on {dev}");
        // vmap over the rows of x with y shared, against a loop.
        let v = wmx::vmap(
            |a: &[Array]| Ok(vec![axpby(&a[0], &a[1], A, B)?]),
            &[Some(0), None],
            &[0],
        )(&[x.clone(), y.clone()])
        .unwrap();
        assert_eq!(v[0].shape(), &[r, c]);
        let want = read(&axpby(&x, &y, A, B).unwrap());
        assert_eq!(read(&v[0]), want, "vmap on {dev}");
        // Both batched, along different axes.
        let xt = wmx::transpose(&x, None).unwrap();
        let v = wmx::vmap(
            |a: &[Array]| Ok(vec![axpby(&a[0], &a[1], A, B)?]),
            &[Some(1), Some(0)],
            &[0],
        )(&[xt, x.clone()])
        .unwrap();
        assert_eq!(
            read(&v[0]),
            read(&axpby(&x, &x, A, B).unwrap()),
            "vmap both on {dev}"
        );
    }
    assert!(
        Axpby {
            alpha: 1.0,
            beta: 2.0
        }
        .is_equivalent(&Axpby {
            alpha: 1.0,
            beta: 2.0
        })
    );
    assert!(
        !Axpby {
            alpha: 1.0,
            beta: 2.0
        }
        .is_equivalent(&Axpby {
            alpha: 1.0,
            beta: 3.0
        })
    );
}

#[test]
fn gpu_batching_and_big_grids() {
    let Some(dev) = devices()
        .into_iter()
        .find(|d| d.kind() == wmx::DeviceKind::Gpu)
    else {
        return;
    };
    let be = wmx::webgpu::backend(&dev).unwrap();
    // More than 65535 workgroups of 256: the grid folds into y.
    let n = 65_535 * 256 + 1_000;
    let x = wmx::arange(0.0, n as f64, 1.0, DType::F32)
        .unwrap()
        .to_device(&dev)
        .unwrap();
    let z = axpby(&x, &x, 1.0, 1.0).unwrap().to_vec::<f32>().unwrap();
    for i in [0, 1, 65_535 * 256 - 1, 65_535 * 256, n - 1] {
        assert_eq!(z[i], 2.0 * i as f32, "{i}");
    }
    // A chain of 40 evaluates in one submit, without a download.
    let mut y = Array::from_slice_on(&data(4096, 7), &[4096], &dev).unwrap();
    y.eval().unwrap();
    dev.synchronize().unwrap();
    let s0 = be.stats();
    for _ in 0..40 {
        y = axpby(&y, &y, 0.5, 0.5).unwrap();
    }
    y.eval().unwrap();
    dev.synchronize().unwrap();
    let s1 = be.stats();
    assert_eq!(s1.submits - s0.submits, 1);
    assert_eq!(s1.downloads, s0.downloads);
    let want: Vec<f64> = data(4096, 7).iter().map(|v| *v as f64).collect();
    close("chain", &read(&y), &want, &vec![1.0; 4096], 1e-6);
}
