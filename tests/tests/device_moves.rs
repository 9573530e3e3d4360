//! The device-mixing rule (docs/SEMANTICS.md, "Devices"): an op on arrays of two
//! devices runs on its first input's device and reads the others through the host,
//! counted by `implicit_moves`; `set_implicit_moves(false)` makes that an `Err`
//! naming both devices, except inside `with_device`; `to_device` always moves and
//! is not counted. One test: the switch is process-wide. On lavapipe in CI; no
//! adapter fails unless `WMX_ALLOW_NO_GPU=1`.

use wmx_core::{self as wmx, Array, Device};

#[test]
fn implicit_moves_are_counted_or_refused() {
    let Some(gpu) = wmx_tests::gpu::device(wmx_webgpu::open) else {
        return;
    };
    let cpu = Device::cpu();
    let a = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &gpu).unwrap();
    let b = Array::from_slice_on(&[10.0f32, 20.0, 30.0], &[3], &cpu).unwrap();

    // Allowed (the default): runs on a's device, b read through the host, counted.
    let before = wmx::implicit_moves();
    let s = wmx::add(&a, &b).unwrap();
    assert_eq!(s.device(), &gpu);
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![11.0, 22.0, 33.0]);
    let after = wmx::implicit_moves();
    assert_eq!(after.count - before.count, 1, "one input moved");
    assert_eq!(after.bytes - before.bytes, 12, "three f32 moved");
    // An explicit move is not counted.
    let m = wmx::add(&a, &b.to_device(&gpu).unwrap()).unwrap();
    assert_eq!(m.to_vec::<f32>().unwrap(), vec![11.0, 22.0, 33.0]);
    assert_eq!(wmx::implicit_moves(), after, "to_device is not implicit");
    // Nor when compiled mode fuses the add: the move keeps its own node.
    let f = wmx::with_mode(wmx::Mode::Compiled, || {
        let x = wmx::add(&a, &b.to_device(&gpu)?)?;
        let y = wmx::multiply(&x, &a)?;
        y.to_vec::<f32>()
    });
    assert_eq!(f.unwrap(), vec![11.0, 44.0, 99.0]);
    assert_eq!(
        wmx::implicit_moves(),
        after,
        "fused: to_device is not implicit"
    );

    // Forbidden: an Err naming both devices, at the op.
    wmx::set_implicit_moves(false);
    let e = wmx::add(&a, &b).unwrap_err().to_string();
    let e2 = wmx::where_(&wmx::greater(&b, &b).unwrap(), &b, &a)
        .unwrap_err()
        .to_string();
    // Still fine: an explicit move, or the device asked for with with_device.
    let ok1 = wmx::add(&a, &b.to_device(&gpu).unwrap()).map(|x| x.to_vec::<f32>());
    let ok2 = wmx::with_device(&gpu, || wmx::add(&a, &b)).map(|x| x.to_vec::<f32>());
    wmx::set_implicit_moves(true);
    for msg in [&e, &e2] {
        assert!(
            msg.contains("two devices") && msg.contains("cpu") && msg.contains("webgpu"),
            "{msg}"
        );
    }
    assert_eq!(ok1.unwrap().unwrap(), vec![11.0, 22.0, 33.0]);
    assert_eq!(ok2.unwrap().unwrap(), vec![11.0, 22.0, 33.0]);

    // linalg: decompositions without a GPU kernel (eigh) run on the CPU, their
    // input moved down (counted) and the result back on the GPU; with moves off,
    // an Err naming the op. Cholesky in f32 has kernels: no move.
    let m = Array::from_slice_on(&[4.0f32, 1.0, 1.0, 3.0], &[2, 2], &gpu).unwrap();
    let before = wmx::implicit_moves();
    let w = wmx::linalg::eigvalsh(&m).unwrap();
    assert_eq!(w.device(), &gpu, "eigvalsh's result comes back to the GPU");
    let v = w.to_vec::<f32>().unwrap();
    let r5 = 5f32.sqrt();
    assert!(
        (v[0] - (7.0 - r5) / 2.0).abs() < 1e-5 && (v[1] - (7.0 + r5) / 2.0).abs() < 1e-5,
        "{v:?}"
    );
    assert!(
        wmx::implicit_moves().count > before.count,
        "eigh's input moved to the CPU"
    );
    let before = wmx::implicit_moves();
    let l = wmx::linalg::cholesky(&m, false)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(
        (l[0] - 2.0).abs() < 1e-6 && (l[2] - 0.5).abs() < 1e-6,
        "{l:?}"
    );
    assert_eq!(wmx::implicit_moves(), before, "cholesky ran on the GPU");
    wmx::set_implicit_moves(false);
    let e = wmx::linalg::eigvalsh(&m)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    let chol = wmx::linalg::cholesky(&m, false).and_then(|x| x.to_vec::<f32>());
    wmx::set_implicit_moves(true);
    for needle in ["linalg.eigh", "CPU", "implicit moves are off", "to_device"] {
        assert!(e.contains(needle), "{e}");
    }
    assert_eq!(chol.unwrap(), l, "cholesky needs no move");
}
