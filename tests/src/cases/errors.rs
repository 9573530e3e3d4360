//! Errors: bad input is an `Err` naming the op and its values; dtypes a device lacks.

use super::*;

/// Invalid arguments give `Err` whose message carries the offending values.
pub fn errors_carry_values(dev: &Device) {
    let dt = DType::F32;
    let x = make_ok(
        dev,
        dt,
        &values(&mut Rng::new(15), dt, 6, Domain::Any),
        &[2, 3],
    );
    let y = make_ok(
        dev,
        dt,
        &values(&mut Rng::new(16), dt, 4, Domain::Any),
        &[4],
    );
    // u32 indices cannot count along an axis of 2^32 elements: an Err, not a wrap.
    let one = make_ok(dev, dt, &[Val::F(1.0)], &[1]);
    let long = ok("broadcast", one.broadcast_to(&[1 << 32]));
    expect_err(
        "argmax 2^32",
        long.argmax(0, false),
        &["argmax", "4294967296"],
    );
    expect_err(
        "argsort 2^32",
        wmx::argsort(&long, None),
        &["argsort", "4294967296"],
    );
    let key = ok("key", wmx::with_device(dev, || wmx::random::key(1)));
    expect_err(
        "permutation 2^32",
        wmx::random::permutation(&key, 1 << 32),
        &["4294967296"],
    );
    // A batch mismatch shows both operands whole.
    let p = make_ok(dev, dt, &vec![Val::F(1.0); 12], &[2, 2, 3]);
    let q = make_ok(dev, dt, &vec![Val::F(1.0); 45], &[5, 3, 3]);
    expect_err(
        "matmul batch",
        wmx::matmul(&p, &q),
        &["matmul", "[2, 2, 3]", "[5, 3, 3]", "batch"],
    );
    expect_err(
        "add [2,3] + [4]",
        wmx::add(&x, &y),
        &["add", "[2, 3]", "[4]"],
    );
    expect_err("where shapes", wmx::where_(&x, &x, &y), &["where", "[4]"]);
    expect_err(
        "axpby shapes",
        wmx::axpby(&x, &y, 1.0, 1.0),
        &["axpby", "[2, 3]", "[4]"],
    );
    expect_err(
        "broadcast_to",
        x.broadcast_to(&[4, 3]),
        &["broadcast_to", "[2, 3]", "[4, 3]"],
    );
    expect_err(
        "broadcast_to fewer dims",
        x.broadcast_to(&[3]),
        &["[2, 3]", "[3]"],
    );
    expect_err(
        "sum axis 2",
        wmx::sum(&x, Some(&[2]), false),
        &["axis 2", "2 dimensions", "sum"],
    );
    expect_err(
        "sum axis -3",
        wmx::sum(&x, Some(&[-3]), false),
        &["axis -3", "2 dimensions"],
    );
    expect_err(
        "sum repeated axis",
        wmx::sum(&x, Some(&[1, 1]), false),
        &["repeated axis 1", "sum"],
    );
    expect_err(
        "max repeated axis",
        wmx::max(&x, Some(&[0, -2]), false),
        &["repeated axis -2"],
    );
    expect_err(
        "mean bad axis",
        wmx::mean(&x, Some(&[5]), false),
        &["axis 5"],
    );
    expect_err(
        "var bad axis",
        wmx::var(&x, Some(&[5]), false, 0),
        &["axis 5"],
    );
    expect_err(
        "logsumexp bad axis",
        wmx::logsumexp(&x, Some(&[-4]), false),
        &["axis -4"],
    );
    expect_err(
        "argmax bad axis",
        wmx::argmax(&x, 2, false),
        &["axis 2", "argmax"],
    );
    expect_err(
        "transpose repeated",
        x.transpose(Some(&[0, 0])),
        &["repeated axis 0", "transpose"],
    );
    expect_err(
        "transpose wrong count",
        x.transpose(Some(&[0])),
        &["[0]", "2"],
    );
    expect_err(
        "expand_dims",
        wmx::expand_dims(&x, 4),
        &["axis 4", "3 dimensions"],
    );
    expect_err(
        "squeeze non-1",
        wmx::squeeze(&x, Some(&[1])),
        &["axis 1", "size 3"],
    );
    expect_err(
        "bitwise on f32",
        wmx::bitwise_and(&x, &x),
        &["bitwise_and", "f32"],
    );
    expect_err(
        "reshape wrong size",
        x.reshape(&[4]),
        &["[2, 3]", "6", "[4]"],
    );
    expect_err(
        "reshape -1 not dividing",
        x.reshape(&[-1, 4]),
        &["[2, 3]", "[-1, 4]"],
    );
    expect_err("reshape two -1", x.reshape(&[-1, -1]), &["[-1, -1]"]);
    expect_err(
        "slice step 0",
        x.slice(&[wmx::Slice::new(None, None, 0)]),
        &["step 0", "axis 0"],
    );
    expect_err(
        "slice too many",
        x.slice(&[wmx::Slice::ALL, wmx::Slice::ALL, wmx::Slice::ALL]),
        &["3 slices", "2 dimensions"],
    );
    expect_err(
        "from_slice length",
        Array::from_slice_on(&[1.0f32; 5], &[2, 3], dev),
        &["5 values", "[2, 3]"],
    );
    expect_err(
        "from_bytes length",
        Array::from_bytes_on(vec![0; 5], &[2], DType::F32, dev),
        &["5 bytes", "[2]", "f32"],
    );
    expect_err("to_vec wrong type", x.to_vec::<i32>(), &["f32", "i32"]);
    expect_err(
        "item wrong type",
        make_ok(dev, dt, &[f(1.0)], &[1]).item::<u8>(),
        &["f32", "u8"],
    );
    expect_err("item of many", x.item::<f32>(), &["[2, 3]", "6 elements"]);
    expect_err(
        "item of empty",
        make_ok(dev, dt, &[], &[0]).item::<f32>(),
        &["[0]", "0 elements"],
    );
    let e = make_ok(dev, dt, &[], &[0, 3]);
    expect_err(
        "max of empty axis",
        wmx::max(&e, Some(&[0]), false),
        &["max", "[0, 3]"],
    );
    expect_err(
        "min of empty",
        wmx::min(&e, None, false),
        &["min", "[0, 3]"],
    );
    expect_err(
        "argmin of empty axis",
        wmx::argmin(&e, 0, false),
        &["argmin", "[0, 3]"],
    );
    expect_err(
        "arange step 0",
        wmx::with_device(dev, || wmx::arange(0.0, 1.0, 0.0, dt)),
        &["step=0"],
    );
    // Operators panic with the shapes.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| &x + &y));
    let msg = r.expect_err("operator + of mismatched shapes panics");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("[2, 3]") && msg.contains("[4]"),
        "panic message {msg:?}"
    );
}

/// Every dtype either works on the device or fails with an error naming it, for
/// creation, casts, and ops whose output would be of that dtype.
pub fn device_dtype_support(dev: &Device) {
    assert!(supported(dev, DType::F32), "every device supports f32");
    assert!(
        supported(dev, DType::Bool) && supported(dev, DType::I32) && supported(dev, DType::U32)
    );
    let x = make_ok(dev, DType::F32, &[f(1.5), f(-2.0)], &[2]);
    for dt in DType::REAL {
        if supported(dev, dt) {
            let a = ok("astype", x.astype(dt));
            let got = read_ok(&a, "astype");
            assert_same(
                &format!("f32 -> {dt}"),
                &got,
                &[cast(f(1.5), dt), cast(f(-2.0), dt)],
                &|_| String::new(),
            );
            continue;
        }
        let what = format!("{dt} on {dev}");
        if let Err(e) = dev.check_dtype(dt) {
            assert!(
                e.to_string().contains(dt.name()),
                "{what}: check_dtype error {e} names the dtype"
            );
        }
        check_unsupported(dev, dt);
        expect_err(&what, x.astype(dt), &[dt.name()]);
        expect_err(
            &what,
            wmx::with_device(dev, || wmx::full(&[2], 1.0, dt)),
            &[dt.name()],
        );
        expect_err(
            &what,
            wmx::with_device(dev, || wmx::arange(0.0, 3.0, 1.0, dt)),
            &[dt.name()],
        );
        expect_err(
            &what,
            wmx::with_device(dev, || wmx::eye(2, dt)),
            &[dt.name()],
        );
    }
    // u32 with i32 promotes to i64.
    let u = make_ok(dev, DType::U32, &ints(&[1]), &[1]);
    let i = make_ok(dev, DType::I32, &ints(&[-1]), &[1]);
    let what = "u32 + i32 (promotes to i64)";
    if supported(dev, DType::I64) {
        let s = ok(what, wmx::add(&u, &i));
        assert_same(
            what,
            &read_checked(what, &s, DType::I64, &[1]),
            &ints(&[0]),
            &|_| String::new(),
        );
    } else {
        expect_err(what, wmx::add(&u, &i), &["i64"]);
    }
}
