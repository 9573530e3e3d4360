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
