//! A panic in a custom primitive's code is that op's `Err`, with the panic's
//! message, and nothing on stderr (it printed a full backtrace beside the `Err`);
//! other panics still print.

use std::sync::Arc;
use wmx_core::{self as wmx, Array, CpuOutput, CustomPrimitive, DType, Device, View};

#[derive(Debug)]
struct Boom;

impl CustomPrimitive for Boom {
    fn name(&self) -> &str {
        "boom"
    }
    fn eval_cpu(
        &self,
        _: &[View<'_, wmx::cpu::CpuBuffer>],
        _: &mut CpuOutput<'_>,
    ) -> wmx::Result<()> {
        panic!("the user's code blew up")
    }
}

fn child() {
    let x = Array::from_slice_on(&[1.0f32], &[1], &Device::cpu()).unwrap();
    let y = wmx::custom(Arc::new(Boom), &[x], &[1], DType::F32).unwrap();
    let e = y.eval().unwrap_err().to_string();
    println!("err: {e}");
    // A panic of the program's own still goes to the hook.
    let r = std::panic::catch_unwind(|| panic!("the program's own panic"));
    assert!(r.is_err());
}

#[test]
fn a_panicking_custom_primitive_is_a_quiet_err() {
    if std::env::var("WMX_QUIET_CHILD").is_ok() {
        return child();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_panicking_custom_primitive_is_a_quiet_err"])
        .args(["--nocapture", "--test-threads=1"])
        .env("WMX_QUIET_CHILD", "1")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{o}\n{e}");
    assert!(
        o.contains("err: ") && o.contains("the user's code blew up"),
        "{o}"
    );
    assert!(!e.contains("the user's code blew up"), "printed: {e}");
    assert!(e.contains("the program's own panic"), "{e}");
}
