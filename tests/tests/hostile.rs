//! The promise under hostile input, as a property: random op sequences over random
//! shapes — some huge (2^31, 2^32, 2^40, near usize::MAX), some empty — with
//! extreme axes, slices and reshapes, on the CPU and the GPU. Every op returns `Ok`
//! or an `Err`, never panics; a result small enough to compute is computed, and
//! when both devices give one they agree. `WMX_PROPTEST_CASES` sets the count.

use proptest::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};
use wmx_core::{self as wmx, Array, DType, Device, Slice};

use wmx_tests::gpu::devices;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: wmx_tests::props::cases(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const DIMS: &[usize] = &[
    0,
    1,
    2,
    3,
    5,
    1 << 31,
    1 << 32,
    1 << 40,
    usize::MAX / 2,
    usize::MAX,
];
const INTS: &[isize] = &[0, 1, -1, 2, -2, 3, 7, isize::MAX, isize::MIN, 1 << 40];

fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..=5, 1 => prop::sample::select(DIMS)]
}
fn int() -> impl Strategy<Value = isize> {
    prop_oneof![4 => -3isize..=3, 1 => prop::sample::select(INTS)]
}
fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim(), 0..=4)
}

#[derive(Debug, Clone)]
enum Op {
    BroadcastTo(Vec<usize>),
    Reshape(Vec<isize>),
    Slice(Vec<(Option<isize>, Option<isize>, isize)>),
    Sum(Option<isize>),
    Add,
    Exp,
    Transpose,
    Concat(isize),
    Astype(DType),
    ExpandDims(isize),
    Take(isize),
    Pad(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let dtypes = prop::sample::select(vec![
        DType::F32,
        DType::I32,
        DType::Bool,
        DType::F16,
        DType::U8,
    ]);
    let sl = (prop::option::of(int()), prop::option::of(int()), int());
    prop_oneof![
        shape().prop_map(Op::BroadcastTo),
        prop::collection::vec(int(), 0..=4).prop_map(Op::Reshape),
        prop::collection::vec(sl, 0..=3).prop_map(Op::Slice),
        prop::option::of(int()).prop_map(Op::Sum),
        Just(Op::Add),
        Just(Op::Exp),
        Just(Op::Transpose),
        int().prop_map(Op::Concat),
        dtypes.prop_map(Op::Astype),
        int().prop_map(Op::ExpandDims),
        int().prop_map(Op::Take),
        dim().prop_map(Op::Pad),
    ]
}

fn apply(x: &Array, op: &Op) -> wmx::Result<Array> {
    match op {
        Op::BroadcastTo(s) => wmx::broadcast_to(x, s),
        Op::Reshape(s) => wmx::reshape(x, s),
        Op::Slice(s) => {
            let s: Vec<Slice> = s.iter().map(|&(a, b, c)| Slice::new(a, b, c)).collect();
            wmx::slice(x, &s)
        }
        Op::Sum(a) => match a {
            Some(a) => wmx::sum(x, Some(&[*a]), false),
            None => wmx::sum(x, None, false),
        },
        Op::Add => wmx::add(x, x),
        Op::Exp => wmx::exp(x),
        Op::Transpose => wmx::transpose(x, None),
        Op::Concat(a) => wmx::concatenate(&[x, x], *a),
        Op::Astype(d) => wmx::astype(x, *d),
        Op::ExpandDims(a) => wmx::expand_dims(x, *a),
        Op::Take(i) => {
            let idx = wmx::with_device(x.device(), || {
                Array::from_slice_on(&[*i as i32, 0], &[2], x.device())
            })?;
            wmx::take(x, &idx, Some(0))
        }
        Op::Pad(w) => wmx::pad(x, &[(*w, 1)], wmx::PadMode::Constant(2.0)),
    }
}

/// Runs the sequence on `dev`: the values when every array stayed small enough to
/// compute (at most 2^20 elements each), `None` otherwise or on an `Err`.
fn run(dev: &Device, start: &[usize], ops: &[Op]) -> Option<Vec<f64>> {
    let mut x = wmx::with_device(dev, || {
        wmx::broadcast_to(&wmx::scalar(1.5, DType::F32)?, start)
    })
    .ok()?;
    let mut small = x.size() <= 1 << 20;
    for op in ops {
        x = apply(&x, op).ok()?;
        small &= x.size() <= 1 << 20;
    }
    if !small {
        return None;
    }
    // Computed: Ok with values, or an Err (a dtype or limit of the device).
    x.eval().ok()?;
    wmx::astype(&x, DType::F32)
        .ok()?
        .to_vec::<f32>()
        .ok()
        .map(|v| v.iter().map(|&a| a as f64).collect())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ops_on_hostile_shapes_never_panic(start in shape(), ops in prop::collection::vec(op(), 1..=5)) {
        let mut results = Vec::new();
        for dev in devices() {
            let r = catch_unwind(AssertUnwindSafe(|| run(&dev, &start, &ops)));
            prop_assert!(r.is_ok(), "panic on {dev} for start {start:?}, ops {ops:?}");
            results.push(r.unwrap());
        }
        if let [Some(a), Some(b)] = &results[..] {
            prop_assert_eq!(a.len(), b.len());
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let same = x == y
                    || (x.is_nan() && y.is_nan())
                    || (x - y).abs() <= 1e-3 * (1.0 + x.abs());
                prop_assert!(same, "[{i}] cpu {x} vs gpu {y}; start {start:?}, ops {ops:?}");
            }
        }
    }
}
