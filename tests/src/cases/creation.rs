//! Creating arrays: from slices and scalars, full/zeros/ones, arange, linspace, eye.

use super::*;

/// from_slice / from_vec / from_bytes_on and reading back, every dtype, several shapes.
pub fn creation_from_slice_round_trip(dev: &Device) {
    let mut rng = Rng::new(1);
    for dt in DType::REAL {
        if !supported(dev, dt) {
            check_unsupported(dev, dt);
            continue;
        }
        for shape in [vec![], vec![0], vec![7], vec![2, 3, 4], vec![1, 1, 40]] {
            let n: usize = shape.iter().product();
            let vals = with_edges(&mut rng, dt, n, Domain::Any);
            let a = make_ok(dev, dt, &vals, &shape);
            assert_eq!(a.device(), dev, "array created on {dev}");
            assert!(a.is_evaluated(), "data arrays are evaluated");
            let got = read_checked(&format!("round trip {dt} {shape:?}"), &a, dt, &shape);
            assert_same(&format!("round trip {dt} {shape:?}"), &got, &vals, &|i| {
                show(&[&vals], i)
            });
            assert_eq!(a.nbytes(), n * dt.size());
            let bytes = ok("to_bytes", a.to_bytes());
            let b = ok(
                "from_bytes_on",
                Array::from_bytes_on(bytes.clone(), &shape, dt, dev),
            );
            assert_eq!(ok("to_bytes", b.to_bytes()), bytes, "bytes round trip {dt}");
        }
    }
    let a = ok(
        "from_vec",
        wmx::with_device(dev, || Array::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[3, 2])),
    );
    assert_eq!(a.device(), dev);
    assert_eq!(ok("to_vec", a.to_vec::<i32>()), vec![1, 2, 3, 4, 5, 6]);
    let f = ok("to_vec_f64", a.to_vec_f64());
    assert_eq!(f, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

/// `wmx::scalar`, `Array::scalar`, item.
pub fn creation_scalar(dev: &Device) {
    for dt in DType::REAL {
        if !supported(dev, dt) {
            continue;
        }
        for v in [0.0, -1.0, 2.5, 300.0, f64::NAN] {
            let a = ok("scalar", wmx::with_device(dev, || wmx::scalar(v, dt)));
            assert_eq!(a.device(), dev);
            let want = cast(Val::F(v), dt);
            let got = read_checked(&format!("scalar({v}, {dt})"), &a, dt, &[]);
            assert_same(&format!("scalar({v}, {dt})"), &got, &[want], &|_| {
                v.to_string()
            });
        }
    }
    let a = ok(
        "Array::scalar",
        wmx::with_device(dev, || Array::scalar(3.5f32)),
    );
    assert_eq!((a.shape(), a.ndim(), a.size()), (&[][..], 0, 1));
    assert_eq!(ok("item", a.item::<f32>()), 3.5);
    let b = ok(
        "Array::scalar",
        wmx::with_device(dev, || Array::scalar(true)),
    );
    assert!(ok("item", b.item::<bool>()));
}

/// zeros / ones / full with values that must be cast (truncation, saturation,
/// NaN → 0, f16 overflow → inf).
pub fn creation_full_zeros_ones(dev: &Device) {
    for dt in DType::REAL {
        if !supported(dev, dt) {
            continue;
        }
        for shape in [vec![], vec![0], vec![5], vec![2, 3]] {
            let n: usize = shape.iter().product();
            let z = ok("zeros", wmx::with_device(dev, || wmx::zeros(&shape, dt)));
            let o = ok("ones", wmx::with_device(dev, || wmx::ones(&shape, dt)));
            assert_eq!(z.device(), dev);
            for (a, v) in [(z, 0.0), (o, 1.0)] {
                let got = read_checked("zeros/ones", &a, dt, &shape);
                assert_same("zeros/ones", &got, &vec![cast(Val::F(v), dt); n], &|_| {
                    format!("{v} as {dt}")
                });
            }
        }
        for v in [
            2.7,
            -1.0,
            -3.9,
            f64::NAN,
            70000.0,
            65519.0,
            1e10,
            -1e10,
            -0.0,
            0.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            255.5,
        ] {
            let a = ok("full", wmx::with_device(dev, || wmx::full(&[2, 2], v, dt)));
            let got = read_checked(&format!("full({v}, {dt})"), &a, dt, &[2, 2]);
            assert_same(
                &format!("full(value {v}) as {dt}"),
                &got,
                &[cast(Val::F(v), dt); 4],
                &|_| v.to_string(),
            );
        }
    }
}

/// arange: positive, negative and fractional steps, empty ranges, int dtypes, errors.
pub fn creation_arange(dev: &Device) {
    let cases: &[(f64, f64, f64)] = &[
        (0.0, 10.0, 1.0),
        (5.0, 0.0, -1.0),
        (0.0, 1.0, 0.1),
        (0.0, 0.0, 1.0),
        (3.0, 1.0, 1.0),
        (1.0, 3.0, -1.0),
        (-1.0, -10.0, -2.5),
        (0.5, 3.0, 1.0),
        (-3.0, 3.0, 0.75),
        (0.0, 2050.0, 1.0),
        (0.0, 300.0, 7.0),
    ];
    for &(start, stop, step) in cases {
        let n = ((stop - start) / step).ceil().max(0.0) as usize;
        for dt in DType::REAL {
            if !supported(dev, dt) {
                continue;
            }
            let what = format!("arange({start}, {stop}, {step}, {dt})");
            let a = ok(
                &what,
                wmx::with_device(dev, || wmx::arange(start, stop, step, dt)),
            );
            let got = read_checked(&what, &a, dt, &[n]);
            let want: Vec<Val> = (0..n)
                .map(|i| cast(Val::F(start + i as f64 * step), dt))
                .collect();
            assert_close(
                &what,
                dt,
                &got,
                &want,
                Tol::of(Class::Arith, dt, 0.0),
                &|i| format!("i={i}"),
            );
        }
    }
    for (start, stop, step) in [
        (0.0, 5.0, 0.0),
        (0.0, f64::NAN, 1.0),
        (0.0, 1.0, f64::INFINITY),
    ] {
        expect_err(
            "arange with a bad step",
            wmx::with_device(dev, || wmx::arange(start, stop, step, DType::F32)),
            &[&format!("step={step}")],
        );
    }
}

/// linspace: endpoints included, num 0 and 1, descending, integer dtypes.
pub fn creation_linspace(dev: &Device) {
    for (start, stop, num) in [
        (0.0, 1.0, 5usize),
        (1.0, 0.0, 3),
        (2.0, 7.0, 0),
        (2.0, 7.0, 1),
        (0.0, 10.0, 11),
        (-1.0, 1.0, 100),
    ] {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::I32] {
            if !supported(dev, dt) {
                continue;
            }
            let what = format!("linspace({start}, {stop}, {num}, {dt})");
            let a = ok(
                &what,
                wmx::with_device(dev, || wmx::linspace(start, stop, num, dt)),
            );
            let got = read_checked(&what, &a, dt, &[num]);
            let want: Vec<Val> = (0..num)
                .map(|i| {
                    let v = if i + 1 == num && num > 1 {
                        stop
                    } else {
                        start + i as f64 * (stop - start) / (num.max(2) - 1) as f64
                    };
                    cast(Val::F(v), dt)
                })
                .collect();
            assert_close(
                &what,
                dt,
                &got,
                &want,
                // GPUs compute start + i·step in f32: the product's rounding is
                // relative to the range's magnitude, not to the (possibly smaller) result.
                Tol {
                    abs: if dt.is_float() {
                        crate::val::ulp(dt, start.abs().max(stop.abs()))
                    } else {
                        0.0
                    },
                    ..Tol::of(Class::Arith, dt, 0.0)
                },
                &|i| format!("i={i}"),
            );
        }
    }
}

/// eye for every dtype, n = 0, 1, 4.
pub fn creation_eye(dev: &Device) {
    for dt in DType::REAL {
        if !supported(dev, dt) {
            continue;
        }
        for n in [0usize, 1, 4] {
            let a = ok("eye", wmx::with_device(dev, || wmx::eye(n, dt)));
            let got = read_checked(&format!("eye({n}, {dt})"), &a, dt, &[n, n]);
            let want = HostArr::from_fn(&[n, n], |i| cast(Val::I((i[0] == i[1]) as i128), dt));
            assert_same(&format!("eye({n}, {dt})"), &got, &want.data, &|i| {
                format!("flat index {i}")
            });
        }
    }
}
