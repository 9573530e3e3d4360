//! The conformance suite on the CPU backend.

wmx_tests::conformance_tests!(cpu, wmx_core::Device::cpu());

/// Every case listed in `cases::ALL` is also a test (the macro and the list agree).
#[test]
fn case_list_is_complete() {
    let names: Vec<&str> = wmx_tests::cases::ALL.iter().map(|c| c.0).collect();
    assert!(names.len() >= 30, "{names:?}");
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "duplicate case names");
}

/// Cases make some arrays on the default device: in this binary it must be the
/// CPU (no GPU backend registered), or the "CPU" run would mix in the GPU. Linking
/// the `wmx` facade into the cases registers its GPU backend; they use the
/// backend crates directly instead.
#[test]
fn default_device_is_the_cpu() {
    assert!(!wmx_core::gpu_backend_registered());
    assert_eq!(wmx_core::default_device().unwrap(), wmx_core::Device::cpu());
}
