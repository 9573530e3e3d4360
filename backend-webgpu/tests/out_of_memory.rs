//! GPU out of memory: an `Err` that says so with the byte count, no invalid buffer
//! in the pool, earlier results readable, and the same allocation working again
//! once arrays are dropped. Runs in a child process under `ulimit -v`, which bounds
//! lavapipe's (host) memory, so the machine is never at risk.

mod common;
use std::process::Command;
use wmx_core::{Array, DType};

const CHILD: &str = "WMX_GPU_OOM_CHILD";
/// The child's address-space limit, in KiB (3 GiB: lavapipe itself takes ~1.5).
const LIMIT_KIB: u64 = 3 << 20;

#[test]
fn gpu_out_of_memory_is_an_error_and_recovers() {
    if std::env::var(CHILD).is_ok() {
        return child();
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {LIMIT_KIB} && exec \"$0\" --exact gpu_out_of_memory_is_an_error_and_recovers --nocapture --test-threads=1"
        ))
        .arg(&exe)
        .env(CHILD, "1")
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "child failed ({:?}):\n{o}\n{e}",
        out.status
    );
    assert!(o.contains("gpu out-of-memory checks passed"), "{o}\n{e}");
}

fn child() {
    let Some((dev, be)) = common::gpu() else {
        return;
    };
    let first = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    let first = wmx_core::exp(&first).unwrap();
    first.eval().unwrap();
    // 96 MiB arrays until the device refuses one (the limit allows ~40).
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
    // Dropping arrays frees their memory: the same allocation works again.
    held.truncate(held.len() / 2);
    be.clear_cache();
    let again = wmx_core::with_device(&dev, || wmx_core::full(&[n], 7.0, DType::F32)).unwrap();
    again.eval().unwrap();
    let s = wmx_core::sum(
        &wmx_core::slice(&again, &[wmx_core::Slice::range(0, 8)]).unwrap(),
        None,
        false,
    )
    .unwrap();
    assert_eq!(s.item::<f32>().unwrap(), 56.0);
    println!("gpu out-of-memory checks passed");
}
