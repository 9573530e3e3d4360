//! A host allocation that fails is an `Err` with the byte count at the op, never
//! an abort; other arrays stay readable and later allocations work. The checks run
//! in a child process under `ulimit -v`, so the machine is never at risk.

use std::process::Command;
use wmx_core::{self as wmx, Array, DType, Device};

const CHILD: &str = "WMX_OOM_CHILD";
/// The child's address-space limit, in KiB (3 GiB).
const LIMIT_KIB: u64 = 3 << 20;

#[test]
fn cpu_allocation_failure_is_an_error() {
    if std::env::var(CHILD).is_ok() {
        return child();
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {LIMIT_KIB} && exec \"$0\" --exact cpu_allocation_failure_is_an_error --nocapture --test-threads=1"
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
    assert!(o.contains("out-of-memory checks passed"), "{o}\n{e}");
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
    // What existed stays readable; ordinary work goes on.
    assert_eq!(kept.to_vec::<f32>().unwrap()[999], 999.0);
    let s = wmx::sum(&on(&|| wmx::ones(&[1 << 20], DType::F32)), None, false).unwrap();
    assert_eq!(s.item::<f32>().unwrap(), (1 << 20) as f32);
    println!("out-of-memory checks passed");
}
