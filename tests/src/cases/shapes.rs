//! Edge shapes (empty, scalar, odd sizes, long and wide) and arrays past the
//! kernels' grid limits.

use super::*;

/// Empty, 0-d, 1-element and odd sizes through unary, binary (with a broadcast
/// scalar), reductions and casts.
pub fn edge_shapes(dev: &Device) {
    let mut rng = Rng::new(12);
    let shapes: &[&[usize]] = &[
        &[],
        &[0],
        &[1],
        &[3],
        &[1000],
        &[4099],
        &[0, 3],
        &[3, 0],
        &[2, 0, 2],
        &[1, 1, 1],
        &[7, 1, 9],
    ];
    for dt in [DType::F32, DType::I32, DType::F16, DType::U8] {
        if !supported(dev, dt) {
            continue;
        }
        for &shape in shapes {
            let n: usize = shape.iter().product();
            let xs = values(&mut rng, dt, n, Domain::Range(-100.0, 100.0));
            let x = make_ok(dev, dt, &xs, shape);
            let s = values(&mut rng, dt, 1, Domain::Range(-100.0, 100.0));
            let sc = make_ok(dev, dt, &s, &[]);
            let ctx = format!("{dt} {shape:?}");
            // negative, exp
            for (op, name) in [(UnaryOp::Negative, "negative"), (UnaryOp::Exp, "exp")] {
                let (in_dt, out) = unary_dtypes(name, dt);
                let y = ok(name, wmx::unary(op, &x));
                let got = read_checked(&format!("{name} {ctx}"), &y, out, shape);
                let want: Vec<Val> = xs
                    .iter()
                    .map(|&v| r::unary(name, in_dt, cast(v, in_dt)))
                    .collect();
                assert_close(
                    &format!("{name} {ctx}"),
                    out,
                    &got,
                    &want,
                    Tol::of(class_of(name), out, 0.0),
                    &|k| xs[k].to_string(),
                );
            }
            // x + scalar and scalar - x
            for (swap, name) in [(false, "add"), (true, "subtract")] {
                let op = *BinaryOp::ALL.iter().find(|o| o.name() == name).unwrap();
                let y = if swap {
                    wmx::binary(op, &sc, &x)
                } else {
                    wmx::binary(op, &x, &sc)
                };
                let y = ok(name, y);
                let got = read_checked(&format!("{name} {ctx}"), &y, dt, shape);
                let want: Vec<Val> = xs
                    .iter()
                    .map(|&v| {
                        if swap {
                            r::binary(name, dt, s[0], v)
                        } else {
                            r::binary(name, dt, v, s[0])
                        }
                    })
                    .collect();
                assert_close(
                    &format!("{name} scalar {ctx}"),
                    dt,
                    &got,
                    &want,
                    Tol::of(Class::Arith, dt, 0.0),
                    &|k| xs[k].to_string(),
                );
            }
            // x + x (same node twice)
            let y = ok("add self", wmx::add(&x, &x));
            let got = read_checked(&format!("x + x {ctx}"), &y, dt, shape);
            let want: Vec<Val> = xs.iter().map(|&v| r::binary("add", dt, v, v)).collect();
            assert_close(
                &format!("x + x {ctx}"),
                dt,
                &got,
                &want,
                Tol::of(Class::Arith, dt, 0.0),
                &|k| xs[k].to_string(),
            );
            // sum over everything and over axis 0
            let out = r::reduce_dtype("sum", dt);
            let y = ok("sum", wmx::sum(&x, None, false));
            let got = read_checked(&format!("sum {ctx}"), &y, out, &[]);
            let want = r::reduce("sum", dt, &xs).unwrap();
            assert_close(
                &format!("sum {ctx}"),
                out,
                &got,
                &[want],
                reduce_tol("sum", out, &xs),
                &|_| String::new(),
            );
            if !shape.is_empty() {
                let h = HostArr::new(shape, xs.clone());
                let y = ok("sum0", wmx::sum(&x, Some(&[0]), true));
                let (_, want) = h.reduce(&[0], |v| {
                    (r::reduce("sum", dt, v).unwrap(), reduce_tol("sum", out, v))
                });
                let got = read_checked(
                    &format!("sum axis 0 {ctx}"),
                    &y,
                    out,
                    &keep_shape(shape, &[0], true),
                );
                let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                assert_close_with(
                    &format!("sum axis 0 {ctx}"),
                    out,
                    &got,
                    &w,
                    &|k| want[k].1,
                    &|k| format!("output {k}"),
                );
                if shape[0] > 0 {
                    let y = ok("max0", wmx::max(&x, Some(&[0]), false));
                    let (_, want) = h.reduce(&[0], |v| r::reduce("max", dt, v).unwrap());
                    let got = read_checked(&format!("max axis 0 {ctx}"), &y, dt, &shape[1..]);
                    assert_same(&format!("max axis 0 {ctx}"), &got, &want, &|k| {
                        format!("output {k}")
                    });
                }
            }
            if supported(dev, DType::F32) {
                let y = ok("astype", x.astype(DType::F32));
                let got = read_checked(&format!("astype {ctx}"), &y, DType::F32, shape);
                let want: Vec<Val> = xs.iter().map(|&v| cast(v, DType::F32)).collect();
                assert_same(&format!("astype f32 {ctx}"), &got, &want, &|k| {
                    xs[k].to_string()
                });
            }
        }
    }
}

/// One large case (2^20 + 3 elements): add and sum, f32 and i32.
pub fn big_add_and_sum(dev: &Device) {
    let n = (1usize << 20) + 3;
    let mut rng = Rng::new(13);
    for dt in [DType::F32, DType::I32] {
        if !supported(dev, dt) {
            continue;
        }
        let dom = if dt == DType::F32 {
            Domain::Range(-1.0, 1.0)
        } else {
            Domain::Any
        };
        let xs = values(&mut rng, dt, n, dom);
        let ys = values(&mut rng, dt, n, dom);
        let x = make_ok(dev, dt, &xs, &[n]);
        let y = make_ok(dev, dt, &ys, &[n]);
        let z = ok("big add", wmx::add(&x, &y));
        let got = read_checked("big add", &z, dt, &[n]);
        let want: Vec<Val> = xs
            .iter()
            .zip(&ys)
            .map(|(&a, &b)| r::binary("add", dt, a, b))
            .collect();
        assert_close(
            &format!("big add {dt}"),
            dt,
            &got,
            &want,
            Tol::of(Class::Arith, dt, 0.0),
            &|k| show(&[&xs, &ys], k),
        );
        let s = ok("big sum", wmx::sum(&x, None, false));
        let got = read_checked("big sum", &s, dt, &[]);
        let want = r::reduce("sum", dt, &xs).unwrap();
        assert_close(
            &format!("big sum {dt}"),
            dt,
            &got,
            &[want],
            reduce_tol("sum", dt, &xs),
            &|_| String::new(),
        );
        // Row sums of a [1025, 1023] view of (almost) the same data.
        let m = ok(
            "reshape",
            wmx::slice(&x, &[wmx::Slice::range(0, 1025 * 1023)])
                .and_then(|v| v.reshape(&[1025, 1023])),
        );
        let h = HostArr::new(&[1025, 1023], xs[..1025 * 1023].to_vec());
        let rs = ok("row sums", wmx::sum(&m, Some(&[1]), false));
        let (_, want) = h.reduce(&[1], |v| {
            (r::reduce("sum", dt, v).unwrap(), reduce_tol("sum", dt, v))
        });
        let got = read_checked("big row sums", &rs, dt, &[1025]);
        let w: Vec<Val> = want.iter().map(|p| p.0).collect();
        assert_close_with(
            &format!("big row sums {dt}"),
            dt,
            &got,
            &w,
            &|k| want[k].1,
            &|k| format!("row {k}"),
        );
    }
}

/// `tril`/`triu` of batched, non-square matrices for diagonals below, on and above
/// the main one, against a host loop; `clamp` with numbers (infinite bounds, NaN
/// kept, integer dtypes); errors.
pub fn tril_triu_clamp(dev: &Device) {
    let (b, r, c) = (2usize, 3usize, 5usize);
    let v: Vec<f32> = (0..b * r * c).map(|i| i as f32 + 1.0).collect();
    let x = ok("x", Array::from_slice_on(&v, &[b, r, c], dev));
    for k in [-2isize, -1, 0, 1, 3, 7] {
        for lower in [true, false] {
            let what = format!("{} k={k}", if lower { "tril" } else { "triu" });
            let got = ok(&what, if lower { x.tril(k) } else { x.triu(k) });
            let got: Vec<f32> = ok(&what, got.to_vec());
            for (e, (&g, &w)) in got.iter().zip(&v).enumerate() {
                let (i, j) = ((e / c) % r, e % c);
                let keep = if lower {
                    j as isize <= i as isize + k
                } else {
                    j as isize >= i as isize + k
                };
                assert_eq!(g, if keep { w } else { 0.0 }, "{what}: element {e}");
            }
        }
    }
    let one = ok("1-d", Array::from_slice_on(&[1.0f32, 2.0], &[2], dev));
    super::expect_err("tril of 1-d", wmx::tril(&one, 0), &["2 or more"]);
    let y = ok(
        "y",
        Array::from_slice_on(&[-3.0f32, 0.5, f32::NAN, 9.0], &[4], dev),
    );
    let got: Vec<f32> = ok("clamp", y.clamp(-1.0, 2.0).and_then(|a| a.to_vec()));
    assert_eq!(&got[..2], &[-1.0, 0.5]);
    assert!(got[2].is_nan() && got[3] == 2.0, "{got:?}");
    let got: Vec<f32> = ok(
        "clamp",
        y.clamp(f64::NEG_INFINITY, 0.0).and_then(|a| a.to_vec()),
    );
    assert_eq!((got[0], got[1], got[3]), (-3.0, 0.0, 0.0));
    let n = ok("ints", Array::from_slice_on(&[-5i32, 3, 10], &[3], dev));
    let got = ok("clamp ints", n.clamp(0.0, 4.0));
    assert_eq!(got.dtype(), DType::I32);
    assert_eq!(ok("clamp ints", got.to_vec::<i32>()), vec![0, 3, 4]);
    super::expect_err("clamp bounds", wmx::clamp(&y, 2.0, 1.0), &["ordered"]);
}
