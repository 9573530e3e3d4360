//! Hostile shapes and arguments: an `Err` naming the problem or a correct result,
//! never a panic, a hang or a wrong answer. The huge counts come from broadcast
//! views and shapes that are never allocated, so they need no memory.

use super::{expect_err, ok};
use wmx_core::{self as wmx, Array, DType, Device, DeviceKind, Slice};

/// Element counts that overflow, byte sizes past `isize::MAX`, counts past the GPU
/// kernels' 32-bit indexing, creation from impossible ranges, slices with extreme
/// steps and bool bytes other than 0 and 1.
pub fn huge_shapes_and_hostile_arguments(dev: &Device) {
    let on = |f: &dyn Fn() -> wmx::Result<Array>| wmx::with_device(dev, f);
    let big = 1usize << 32;
    // Counts that wrap usize: refused where the shape is made.
    expect_err(
        "ones 2^32 x 2^32",
        on(&|| wmx::ones(&[big, big], DType::F32)),
        &["[4294967296, 4294967296]", "isize::MAX"],
    );
    expect_err(
        "ones 2^62 of f32",
        on(&|| wmx::ones(&[1 << 62], DType::F32)),
        &["4611686018427387904"],
    );
    expect_err(
        "from_slice with a wrapping shape",
        Array::from_slice_on(&[1.0f32, 2.0], &[(1 << 63) + 1, 2], dev),
        &["from_slice", "isize::MAX"],
    );
    let s = ok("scalar", on(&|| wmx::scalar(1.0, DType::F32)));
    expect_err(
        "broadcast to usize::MAX x 2",
        wmx::broadcast_to(&s, &[usize::MAX, 2]),
        &["broadcast_to"],
    );
    let e = ok("empty", on(&|| wmx::zeros(&[0], DType::F32)));
    expect_err(
        "reshape to a shape whose count wraps to 0",
        wmx::reshape(&e, &[1 << 40, 1 << 40, 1 << 40]),
        &["reshape"],
    );
    // A zero dimension makes any other dimension harmless.
    let z = ok("zero dim", on(&|| wmx::zeros(&[0, big, big], DType::F32)));
    assert_eq!(ok("read", z.to_vec::<f32>()), Vec::<f32>::new());
    expect_err(
        "arange to 1e30",
        on(&|| wmx::arange(0.0, 1e30, 1.0, DType::F32)),
        &["isize::MAX"],
    );
    expect_err(
        "linspace of usize::MAX",
        on(&|| wmx::linspace(0.0, 1.0, usize::MAX, DType::F32)),
        &["isize::MAX"],
    );
    // 2^32 elements seen through a broadcast view: the GPU sums them in pieces
    // (tests/tests/large.rs checks the values; they take seconds on lavapipe). An
    // output past one buffer is held in segments (tests/segments.rs); one of 4 TiB,
    // past the device's memory, is an Err naming its size, never a wrapped count.
    let ones = ok("ones", on(&|| wmx::ones(&[1], DType::F32)));
    let wide = ok("broadcast", wmx::broadcast_to(&ones, &[big]));
    assert_eq!(wide.size(), big);
    if dev.kind() == DeviceKind::Gpu {
        let huge = ok("broadcast", wmx::broadcast_to(&ones, &[1 << 40]));
        let r = wmx::exp(&huge);
        expect_err(
            "exp",
            r.and_then(|a| a.eval().map(|_| a)),
            &["4398046511104", "out of memory"],
        );
        // A large view under the limit still sums right (2^26: quick on lavapipe).
        let rows = ok("b2", wmx::broadcast_to(&ones, &[1 << 13, 1 << 13]));
        let total = ok("sum", wmx::sum(&rows, None, false));
        assert_eq!(ok("read", total.to_vec::<f32>()), vec![(1u64 << 26) as f32]);
    }
    // Slices stepping by isize::MAX or MIN take one element, as numpy does.
    let x = ok(
        "x",
        Array::from_slice_on(&[1.0f32, 2.0, 3.0, 4.0, 5.0], &[5], dev),
    );
    for (step, want) in [
        (isize::MAX, 1.0f32),
        (isize::MIN, 5.0),
        (isize::MAX - 1, 1.0),
        (-isize::MAX, 5.0),
    ] {
        let v = ok("slice", wmx::slice(&x, &[Slice::new(None, None, step)]));
        assert_eq!(ok("read", v.to_vec::<f32>()), vec![want], "step {step}");
    }
    let m = ok(
        "m",
        wmx::reshape(
            &ok("arange", on(&|| wmx::arange(0.0, 12.0, 1.0, DType::F32))),
            &[3, 4],
        ),
    );
    let v = ok(
        "slice 2-d",
        wmx::slice(
            &m,
            &[
                Slice::new(Some(1), None, isize::MAX),
                Slice::new(None, None, isize::MIN),
            ],
        ),
    );
    assert_eq!(v.shape(), &[1, 1]);
    assert_eq!(ok("read", v.to_vec::<f32>()), vec![7.0]);
    // Bool bytes are 0 or 1.
    expect_err(
        "bool bytes",
        Array::from_bytes_on(vec![0, 2, 255, 1], &[4], DType::Bool, dev),
        &["bool byte 1 is 2"],
    );
    let b = ok(
        "bools",
        Array::from_bytes_on(vec![0, 1, 1, 0], &[4], DType::Bool, dev),
    );
    let total = ok(
        "sum",
        wmx::sum(&ok("astype", wmx::astype(&b, DType::F32)), None, false),
    );
    assert_eq!(ok("item", total.item::<f32>()), 2.0);
}
