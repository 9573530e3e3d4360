//! The conveniences of the Rust API (CPU): every owned/borrowed form of the
//! operators, scalars on either side, compound assignment and negation give the
//! function forms' bits; methods generated from the op tables equal the functions;
//! an invalid operator panics at the caller's line with the shapes in the message;
//! converting reads follow the cast rules.

use wmx_core::{self as wmx, Array, DType, Result};

fn bits(a: &Array) -> Vec<u8> {
    a.to_bytes().expect("read")
}

fn same(what: &str, got: &Array, want: &Array) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(bits(got), bits(want), "{what}: values");
}

type Fun = fn(&Array, &Array) -> Result<Array>;

#[test]
fn every_operator_form_equals_the_function() {
    let a = Array::from_slice(&[1.5f32, -2.0, 3.25, 0.5, -7.0, 9.0], &[2, 3]).unwrap();
    let b = Array::from_slice(&[0.25f32, 4.0, -1.5], &[3]).unwrap();
    let ai = Array::from_slice(&[7i32, -9, 12, 5, 0, -3], &[2, 3]).unwrap();
    let bi = Array::from_slice(&[3i32, 4, -5], &[3]).unwrap();
    macro_rules! forms {
        ($name:literal, $f:expr, $op:tt, $aop:tt, $x:expr, $y:expr) => {{
            let (x, y): (&Array, &Array) = (&$x, &$y);
            let f: Fun = $f;
            let want = f(x, y).unwrap();
            same(concat!($name, " &a &b"), &(x $op y), &want);
            same(concat!($name, " a &b"), &(x.clone() $op y), &want);
            same(concat!($name, " &a b"), &(x $op y.clone()), &want);
            same(concat!($name, " a b"), &(x.clone() $op y.clone()), &want);
            let mut c = x.clone();
            c $aop y;
            same(concat!($name, " a op= &b"), &c, &want);
            let mut c = x.clone();
            c $aop y.clone();
            same(concat!($name, " a op= b"), &c, &want);
        }};
    }
    forms!("add", wmx::add, +, +=, a, b);
    forms!("subtract", wmx::subtract, -, -=, a, b);
    forms!("multiply", wmx::multiply, *, *=, a, b);
    forms!("divide", wmx::divide, /, /=, a, b);
    forms!("remainder", wmx::remainder, %, %=, a, b);
    forms!("add i32", wmx::add, +, +=, ai, bi);
    forms!("remainder i32", wmx::remainder, %, %=, ai, bi);
    forms!("and", wmx::bitwise_and, &, &=, ai, bi);
    forms!("or", wmx::bitwise_or, |, |=, ai, bi);
    forms!("xor", wmx::bitwise_xor, ^, ^=, ai, bi);

    // Scalars: right and left, every scalar type, weak typing kept.
    let two = |x: &Array| wmx::scalar_like(x, 2.0).unwrap();
    same(
        "a - 2.0",
        &(&a - 2.0),
        &wmx::subtract(&a, &two(&a)).unwrap(),
    );
    same(
        "2.0 - a",
        &(2.0 - &a),
        &wmx::subtract(&two(&a), &a).unwrap(),
    );
    same(
        "2.0 / a",
        &(2.0 / a.clone()),
        &wmx::divide(&two(&a), &a).unwrap(),
    );
    same(
        "a * 2 (i32)",
        &(&a * 2),
        &wmx::multiply(&a, &two(&a)).unwrap(),
    );
    same(
        "ai * 2",
        &(&ai * 2),
        &wmx::multiply(&ai, &two(&ai)).unwrap(),
    );
    assert_eq!((&ai * 2).dtype(), DType::I32, "an integer scalar keeps i32");
    assert_eq!(
        (&a * 2).exp().unwrap().dtype(),
        DType::F32,
        "literals infer"
    );
    assert_eq!(
        (&ai * 0.5).dtype(),
        DType::F32,
        "a fraction promotes to f32"
    );
    same(
        "2 - ai",
        &(2 - &ai),
        &wmx::subtract(&two(&ai), &ai).unwrap(),
    );
    same(
        "2 % ai",
        &(2 % ai.clone()),
        &wmx::remainder(&two(&ai), &ai).unwrap(),
    );
    let mut c = ai.clone();
    c *= 2;
    c += 1;
    c -= 1;
    same("compound scalars", &c, &(&ai * 2));
    let mut d = a.clone();
    d /= 2.0;
    same("a /= 2.0", &d, &(&a / 2.0));
    same("-a", &(-&a), &wmx::negative(&a).unwrap());
    same("-a owned", &(-a.clone()), &wmx::negative(&a).unwrap());
    // a += b rebinds a: the old array is unchanged.
    let keep = a.clone();
    let mut e = a.clone();
    e += &b;
    same("old value kept", &keep, &a);
}

#[test]
fn methods_equal_functions() {
    let a = Array::from_slice(&[0.5f32, -1.25, 2.0, 0.75], &[2, 2]).unwrap();
    let b = Array::from_slice(&[1.5f32, 0.25], &[2]).unwrap();
    for op in wmx::UnaryOp::ALL {
        let f = wmx::unary(*op, &a).unwrap();
        let m = match op.name() {
            "exp" => a.exp(),
            "abs" => a.abs(),
            "square" => a.square(),
            "tanh" => a.tanh(),
            "erfinv" => a.erfinv(),
            "logical_not" => a.logical_not(),
            "isnan" => a.isnan(),
            _ => continue,
        }
        .unwrap();
        same(op.name(), &m, &f);
    }
    same(
        "maximum",
        &a.maximum(&b).unwrap(),
        &wmx::maximum(&a, &b).unwrap(),
    );
    same("power", &a.power(&b).unwrap(), &wmx::power(&a, &b).unwrap());
    same("less", &a.less(&b).unwrap(), &wmx::less(&a, &b).unwrap());
    same(
        "std",
        &a.std(Some(&[1]), false, 1).unwrap(),
        &wmx::sqrt(&wmx::var(&a, Some(&[1]), false, 1).unwrap()).unwrap(),
    );
    same(
        "prod",
        &a.prod(None, false).unwrap(),
        &wmx::prod(&a, None, false).unwrap(),
    );
    let s: f32 = a.std(None, false, 0).unwrap().item().unwrap();
    let v = [0.5f64, -1.25, 2.0, 0.75];
    let m = v.iter().sum::<f64>() / 4.0;
    let want = (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 4.0).sqrt();
    assert!((s as f64 - want).abs() < 1e-6, "std {s}, want {want}");
    // isclose / allclose / array_equal, numpy's rules.
    let x = Array::from_slice(&[1.0f32, f32::NAN, f32::INFINITY, 1.0], &[4]).unwrap();
    let y = Array::from_slice(&[1.0f32 + 1e-6, f32::NAN, f32::INFINITY, 1.1], &[4]).unwrap();
    let c: Vec<bool> = wmx::isclose(&x, &y, 1e-5, 1e-8, false)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_eq!(c, [true, false, true, false]);
    let c: Vec<bool> = x.isclose(&y, 1e-5, 1e-8, true).unwrap().to_vec().unwrap();
    assert_eq!(c, [true, true, true, false]);
    assert!(
        !x.allclose(&y, 1e-5, 1e-8, true)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    assert!(
        x.allclose(&x, 0.0, 0.0, true)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    assert!(
        !x.array_equal(&x).unwrap().item::<bool>().unwrap(),
        "NaN is unequal"
    );
    assert!(a.array_equal(&a).unwrap().item::<bool>().unwrap());
    assert!(
        !a.array_equal(&b).unwrap().item::<bool>().unwrap(),
        "shapes differ"
    );
}

#[test]
fn an_invalid_operator_panics_at_the_callers_line() {
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let b = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let s = seen.clone();
    let old = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let l = info.location().map(|l| (l.file().to_string(), l.line()));
        *s.lock().unwrap() = Some((l, info.to_string()));
    }));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| &a + &b));
    let f = Array::from_slice(&[1.5f32], &[1]).unwrap();
    let scalar_line = line!() + 1;
    let r2 = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f ^ 3));
    std::panic::set_hook(old);
    assert!(r.is_err() && r2.is_err(), "both operators must panic");
    let (loc, msg) = seen.lock().unwrap().clone().expect("a panic was seen");
    // The last panic seen is the scalar one.
    let (file, l) = loc.expect("a location");
    assert!(
        file.ends_with("operators.rs") && file.contains("tests"),
        "{file}"
    );
    assert_eq!(l, scalar_line, "the panic points at the caller's line");
    assert!(msg.contains("bitwise_xor") && msg.contains("f32"), "{msg}");
}

#[test]
fn converting_reads() {
    let x = Array::from_slice(&[1.75f32, -2.5, 300.0, f32::NAN], &[4]).unwrap();
    assert_eq!(
        x.to_vec_as::<f64>().unwrap()[..3],
        [1.75, -2.5, 300.0],
        "f32 to f64 exactly"
    );
    // astype's rules: truncation toward zero, saturation, NaN to 0.
    assert_eq!(x.to_vec_as::<i32>().unwrap(), vec![1, -2, 300, 0]);
    assert_eq!(x.to_vec_as::<u8>().unwrap(), vec![1, 0, 255, 0]);
    assert_eq!(x.to_vec_as::<bool>().unwrap(), vec![true, true, true, true]);
    let m = Array::from_slice(&[true, false], &[2]).unwrap();
    assert_eq!(m.to_vec_as::<f32>().unwrap(), vec![1.0, 0.0]);
    let h = x.astype(DType::F16).unwrap();
    assert_eq!(h.to_vec_as::<f64>().unwrap()[2], 300.0);
    let one = Array::from_slice(&[7u32], &[1]).unwrap();
    assert_eq!(one.item_as::<f64>().unwrap(), 7.0);
    assert_eq!(one.item_as::<wmx::f16>().unwrap(), wmx::f16::from_f32(7.0));
    let e = x.item_as::<f64>().unwrap_err().to_string();
    assert!(e.contains("item_as") && e.contains("[4]"), "{e}");
}

#[test]
fn nested_literals() {
    let a = wmx::array(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap();
    assert_eq!(a.shape(), &[2, 3]);
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    let v = wmx::array(&vec![vec![1i32, 2], vec![3, 4]]).unwrap();
    assert_eq!((v.shape(), v.dtype()), (&[2usize, 2][..], DType::I32));
    let s = wmx::array(&2.5f32).unwrap();
    assert_eq!((s.shape(), s.item::<f32>().unwrap()), (&[][..], 2.5));
    let c = wmx::array(&[[[true]]]).unwrap();
    assert_eq!(c.shape(), &[1, 1, 1]);
    let e = wmx::array(&vec![vec![1.0f32, 2.0], vec![3.0]])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ragged") && e.contains("[1]") && e.contains("[2]"),
        "{e}"
    );
    let empty: Vec<f32> = vec![];
    assert_eq!(wmx::array(&empty).unwrap().shape(), &[0]);
}
