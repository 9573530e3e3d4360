//! Out of memory is an `Err` with the byte count at the op, never an abort or an
//! invalid buffer reused: on the host (CPU backend) and on the GPU (lavapipe, whose
//! device memory is host memory). Earlier arrays stay readable and the same
//! allocation works again once arrays are dropped. The checks run in child
//! processes under `ulimit -v`, so the machine is never at risk.

use wmx_core::{self as wmx, Array, DType, Device};
use wmx_tests::gpu::in_memory_limited_child;

#[test]
fn cpu_allocation_failure_is_an_error() {
    if std::env::var("WMX_OOM_CHILD").is_ok() {
        return child();
    }
    // 3 GiB of address space.
    in_memory_limited_child(
        "cpu_allocation_failure_is_an_error",
        "WMX_OOM_CHILD",
        3 << 20,
        "out-of-memory checks passed",
    );
}

#[test]
fn gpu_out_of_memory_is_an_error_and_recovers() {
    if std::env::var("WMX_GPU_OOM_CHILD").is_ok() {
        return gpu_child();
    }
    // 3 GiB of address space: lavapipe itself takes ~1.5.
    in_memory_limited_child(
        "gpu_out_of_memory_is_an_error_and_recovers",
        "WMX_GPU_OOM_CHILD",
        3 << 20,
        "gpu out-of-memory checks passed",
    );
}

/// After an out of memory, a large array the program holds stays readable in
/// parts: reading one element copies that element, not the whole buffer (which
/// failed where the buffer was larger than the memory left).
#[test]
fn cpu_held_arrays_stay_readable_after_out_of_memory() {
    if std::env::var("WMX_HELD_CHILD").is_ok() {
        return held_child();
    }
    // 1.5 GiB of address space, a 1 GiB array held.
    in_memory_limited_child(
        "cpu_held_arrays_stay_readable_after_out_of_memory",
        "WMX_HELD_CHILD",
        3 << 19,
        "held arrays read",
    );
}

fn held_child() {
    let dev = Device::cpu();
    let on = |f: &dyn Fn() -> wmx::Result<Array>| wmx::with_device(&dev, f).unwrap();
    let big = on(&|| wmx::arange(0.0, (1 << 28) as f64, 1.0, DType::F32));
    big.eval().unwrap();
    let more = on(&|| wmx::zeros(&[1 << 28], DType::F32));
    let e = more.eval().unwrap_err().to_string();
    assert!(e.contains("out of memory"), "{e}");
    let one = wmx::slice(&big, &[wmx::Slice::range(12345, 12346)]).unwrap();
    assert_eq!(one.to_vec::<f32>().unwrap(), vec![12345.0]);
    assert_eq!(
        big.reshape(&[1 << 14, 1 << 14])
            .unwrap()
            .t()
            .unwrap()
            .shape(),
        &[1 << 14, 1 << 14]
    );
    println!("held arrays read");
}

/// An array past one buffer (16 GiB, segments of 2 GiB on lavapipe) whose segments
/// the device cannot all allocate: an `Err` with the byte count, the segments taken
/// so far given back, and the device goes on working. (The refusal's clean-up
/// locked the pool its caller still held: a deadlock.)
#[test]
fn gpu_segmented_allocation_failure_is_an_error() {
    if std::env::var("WMX_GPU_SEG_OOM_CHILD").is_ok() {
        return gpu_segments_child();
    }
    // 10 GiB of address space: four or five segments, not eight.
    in_memory_limited_child(
        "gpu_segmented_allocation_failure_is_an_error",
        "WMX_GPU_SEG_OOM_CHILD",
        10 << 20,
        "segmented out-of-memory checks passed",
    );
}

fn gpu_segments_child() {
    let Some(dev) = wmx_tests::gpu::device(wmx_webgpu::open) else {
        return;
    };
    let on = |f: &dyn Fn() -> wmx::Result<Array>| wmx::with_device(&dev, f).unwrap();
    let big = on(&|| wmx::zeros(&[4 << 30], DType::F32));
    let e = big.eval().unwrap_err().to_string();
    assert!(e.contains("out of memory"), "{e}");
    drop(big);
    let s = wmx::sum(&on(&|| wmx::ones(&[1 << 20], DType::F32)), None, false).unwrap();
    assert_eq!(s.item::<f32>().unwrap(), (1 << 20) as f32);
    println!("segmented out-of-memory checks passed");
}

fn child() {
    let dev = Device::cpu();
    let on = |f: &dyn Fn() -> wmx::Result<Array>| wmx::with_device(&dev, f).unwrap();
    let kept = on(&|| wmx::arange(0.0, 1000.0, 1.0, DType::F32));
    kept.eval().unwrap();
    let cases: [(&str, Array, u64); 3] = [
        (
            "zeros of 16 GiB",
            on(&|| wmx::zeros(&[1 << 32], DType::F32)),
            1 << 34,
        ),
        // 2^40 bools compared, then 4 TiB of f32.
        ("eye(2^20)", on(&|| wmx::eye(1 << 20, DType::F32)), 1 << 40),
        // A reduction whose output is 16 GiB, over a view that costs nothing (its
        // f64 accumulators, 32 GiB, fail first).
        (
            "sum to 16 GiB",
            on(&|| {
                let b = wmx::broadcast_to(&wmx::ones(&[1], DType::F32)?, &[1 << 32, 2])?;
                wmx::sum(&b, Some(&[1]), false)
            }),
            1 << 35,
        ),
    ];
    for (what, a, bytes) in cases {
        let e = a.eval().unwrap_err().to_string();
        assert!(e.contains("out of memory"), "{what}: {e}");
        assert!(e.contains(&format!("{bytes} bytes")), "{what}: {e}");
        assert!(!a.is_evaluated(), "{what}");
    }
    // Reading a view of 2^32 elements copies 16 GiB to the host: an Err too, and
    // printing it says so.
    let wide = wmx::broadcast_to(&on(&|| wmx::ones(&[1], DType::F32)), &[1 << 32]).unwrap();
    let e = wide.to_vec::<f32>().unwrap_err().to_string();
    assert!(
        e.contains("out of memory") && e.contains("17179869184 bytes"),
        "{e}"
    );
    let shown = format!("{wide}");
    assert!(
        shown.contains("<error:") && shown.contains("out of memory"),
        "{shown}"
    );
    // What existed stays readable; ordinary work goes on.
    assert_eq!(kept.to_vec::<f32>().unwrap()[999], 999.0);
    let s = wmx::sum(&on(&|| wmx::ones(&[1 << 20], DType::F32)), None, false).unwrap();
    assert_eq!(s.item::<f32>().unwrap(), (1 << 20) as f32);
    println!("out-of-memory checks passed");
}

fn gpu_child() {
    let Some(dev) = wmx_tests::gpu::device(wmx_webgpu::open) else {
        return;
    };
    let be = wmx_webgpu::backend(&dev).expect("a WebGPU device");
    let first = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    let first = wmx_core::exp(&first).unwrap();
    first.eval().unwrap();
    // The kernel the check after the refusal runs (a sum of a slice), compiled now:
    // lavapipe compiles a pipeline with LLVM, which aborts the process when no
    // address space is left for its code (`LLVM ERROR: Unable to allocate section
    // memory`), a limit of the driver rather than of wmx's out-of-memory handling.
    let warm = Array::from_slice_on(&[1.0f32; 8], &[8], &dev).unwrap();
    let warm = wmx_core::slice(&warm, &[wmx_core::Slice::range(0, 4)]).unwrap();
    let warm = wmx_core::sum(&warm, None, false).unwrap();
    assert_eq!(warm.item::<f32>().unwrap(), 4.0);
    // 96 MiB arrays until the device refuses one (the limit allows ~15).
    let n = 24 << 20;
    let mut held = Vec::new();
    let err = loop {
        assert!(
            held.len() < 200,
            "no out-of-memory error after {} arrays",
            held.len()
        );
        let a = wmx_core::with_device(&dev, || wmx_core::full(&[n], held.len() as f64, DType::F32))
            .unwrap();
        match a.eval() {
            Ok(()) => held.push(a),
            Err(e) => break e.to_string(),
        }
    };
    println!("refused after {} arrays: {err}", held.len());
    assert!(err.contains("out of memory"), "{err}");
    assert!(err.contains(&format!("{} bytes", n * 4)), "{err}");
    // Earlier results are intact.
    assert_eq!(first.to_vec::<f32>().unwrap()[1], 2.0f32.exp());
    let last = held.last().unwrap();
    let k = held.len() - 1;
    let s = wmx_core::sum(
        &wmx_core::slice(last, &[wmx_core::Slice::range(0, 4)]).unwrap(),
        None,
        false,
    )
    .unwrap();
    assert_eq!(s.item::<f32>().unwrap(), 4.0 * k as f32);
    // Every held array can be read at its end (its own bytes, no copy on the device).
    for (k, a) in held.iter().enumerate() {
        let tail = wmx_core::slice(a, &[wmx_core::Slice::range(n as isize - 3, n as isize)]);
        assert_eq!(
            tail.unwrap().to_vec::<f32>().unwrap(),
            vec![k as f32; 3],
            "held array {k}"
        );
    }
    // Dropping arrays frees their memory: the same allocation works again, with no
    // call to clear the cache first.
    held.truncate(held.len() / 2);
    let again = wmx_core::with_device(&dev, || wmx_core::full(&[n], 7.0, DType::F32)).unwrap();
    again.eval().unwrap();
    let s = wmx_core::sum(
        &wmx_core::slice(&again, &[wmx_core::Slice::range(0, 8)]).unwrap(),
        None,
        false,
    )
    .unwrap();
    assert_eq!(s.item::<f32>().unwrap(), 56.0);
    // With room on the host again (lavapipe's device memory is host memory), the
    // held arrays read back whole, through a bounded staging buffer.
    drop(again);
    be.clear_cache();
    for (k, a) in held.iter().enumerate() {
        let v = a.to_vec::<f32>().unwrap();
        assert!(
            v.len() == n && v[0] == k as f32 && v[n - 1] == k as f32,
            "held array {k}"
        );
    }
    println!("gpu out-of-memory checks passed");
}
