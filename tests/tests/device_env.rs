//! `WMX_DEVICE` selection. This file is its own test process with a single test,
//! so changing the environment cannot race other tests.

use wmx_core::{Device, default_device};

#[test]
fn wmx_device_env_var() {
    // SAFETY: the only test of this process; no other thread reads the environment.
    unsafe { std::env::set_var("WMX_DEVICE", "tpu") };
    let e = default_device().expect_err("WMX_DEVICE=tpu must be rejected");
    let msg = e.to_string();
    assert!(
        msg.contains("\"tpu\"")
            && msg.contains("cpu")
            && msg.contains("gpu")
            && msg.contains("metal"),
        "message {msg:?} names the bad value and the valid ones"
    );
    // Off Apple, `WMX_DEVICE=metal` is an Err saying why (wmx-metal is Apple-only
    // and not linked), and does not stick either.
    #[cfg(not(target_vendor = "apple"))]
    {
        unsafe { std::env::set_var("WMX_DEVICE", "metal") };
        let e = default_device().expect_err("no Metal backend off Apple");
        assert!(e.to_string().contains("Apple"), "{e}");
        assert!(Device::metal().is_err());
    }
    // A rejected value does not stick: a valid one is then accepted.
    unsafe { std::env::set_var("WMX_DEVICE", "cpu") };
    let d = default_device().expect("WMX_DEVICE=cpu");
    assert_eq!(d, Device::cpu());
    // The choice is made once: later changes do not move the default.
    unsafe { std::env::set_var("WMX_DEVICE", "tpu") };
    assert_eq!(default_device().expect("cached"), Device::cpu());
    unsafe { std::env::remove_var("WMX_DEVICE") };
}
