//! Property tests (proptest): random shapes (rank 0–4, dims 0–5), random views,
//! broadcasts, reshapes and reductions against the reference, on the CPU and on the
//! WebGPU backend (lavapipe in CI; no adapter fails unless `WMX_ALLOW_NO_GPU=1`).
//! `WMX_PROPTEST_CASES` overrides the number of cases per property.

use proptest::prelude::*;
use wmx_tests::props;

use wmx_tests::gpu::devices;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: wmx_tests::props::cases(96),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..=5, 0..=4)
}

/// Two shapes that broadcast: `b` drops leading dims of `a` and sets some to 1;
/// `a` may set some of its own to 1 too.
fn broadcast_pair() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (shape(), any::<u64>()).prop_map(|(s, bits)| {
        let drop = (bits % (s.len() as u64 + 1)) as usize;
        let b: Vec<usize> = s[drop..]
            .iter()
            .enumerate()
            .map(|(i, &d)| if bits >> (8 + i) & 1 == 1 { 1 } else { d })
            .collect();
        let a: Vec<usize> = s
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if bits >> (20 + i) & 1 == 1 && i >= drop && b[i - drop] != 1 {
                    1
                } else {
                    d
                }
            })
            .collect();
        if bits >> 40 & 1 == 1 { (b, a) } else { (a, b) }
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn binary_on_views_matches_contiguous_and_reference(s in shape(), seed in any::<u64>()) {
        for d in devices() {
            props::binary_on_views(&d, &s, seed);
        }
    }

    #[test]
    fn broadcast_binary_matches_reference((a, b) in broadcast_pair(), seed in any::<u64>()) {
        for d in devices() {
            props::broadcast_binary(&d, &a, &b, seed);
        }
    }

    #[test]
    fn reshape_round_trips(s in shape(), seed in any::<u64>()) {
        for d in devices() {
            props::reshape_round_trip(&d, &s, seed);
        }
    }

    #[test]
    fn reductions_over_random_axes(s in shape(), seed in any::<u64>()) {
        for d in devices() {
            props::reduce_random_axes(&d, &s, seed);
        }
    }

    #[test]
    fn grad_on_random_views_and_broadcasts((a, b) in broadcast_pair(), seed in any::<u64>()) {
        for d in devices() {
            props::grad_on_views_and_broadcasts(&d, &a, &b, seed);
        }
    }
}

/// A case proptest found: floor_divide(1012, 7.0531055e-4), whose exact quotient
/// (1434828.954) rounds to the integer 1434829 in f32; lavapipe floors to 1434828,
/// within WGSL's 2.5-ulp bound on division.
#[test]
fn floor_divide_of_a_quotient_next_to_an_integer() {
    for d in devices() {
        props::broadcast_binary(&d, &[1, 1], &[3, 4, 2], 7263915683114473396);
    }
}
