//! Views: transposes, broadcasts, slices and reshapes read in place, and every op on
//! them against its contiguous copy.

use super::*;

/// transpose, broadcast_to, slice (steps, negative steps, clamping), expand_dims,
/// squeeze, and chains of them: values against host index arithmetic.
pub fn views_values(dev: &Device) {
    for dt in [DType::I32, DType::F32, DType::U8, DType::F16] {
        if !supported(dev, dt) {
            continue;
        }
        let base_shape = [4usize, 5, 6];
        let xs: Vec<Val> = (0..120).map(|i| cast(Val::I(i), dt)).collect();
        let host = HostArr::new(&base_shape, xs.clone());
        let x = make_ok(dev, dt, &xs, &base_shape);
        let check = |what: &str, a: Result<Array>, h: HostArr| {
            let a = ok(what, a);
            let got = read_checked(what, &a, dt, &h.shape);
            assert_same(&format!("{what} ({dt})"), &got, &h.data, &|k| {
                format!("flat {k}")
            });
            a
        };
        check(
            "transpose None",
            x.transpose(None),
            host.transpose(&[2, 1, 0]),
        );
        check(
            "transpose [1,0,2]",
            x.transpose(Some(&[1, 0, 2])),
            host.transpose(&[1, 0, 2]),
        );
        check(
            "transpose [-1,0,1]",
            x.transpose(Some(&[-1, 0, 1])),
            host.transpose(&[2, 0, 1]),
        );
        check("t()", x.t(), host.transpose(&[2, 1, 0]));
        type S = (Option<isize>, Option<isize>, isize);
        let slices: &[&[S]] = &[
            &[(Some(1), Some(4), 2)],
            &[(None, None, -1)],
            &[(None, None, 1), (Some(-2), None, -3), (Some(1), Some(5), 2)],
            &[(Some(3), Some(0), -1), (None, None, 2), (None, None, -2)],
            &[(Some(-100), Some(100), 1), (Some(10), Some(-10), 1)],
            &[(Some(2), Some(2), 1)],
            &[(None, None, 5), (Some(4), Some(-1), -1)],
            &[
                (Some(-1), None, -1),
                (Some(0), Some(5), 4),
                (Some(5), Some(0), -5),
            ],
        ];
        for s in slices {
            let spec: Vec<wmx::Slice> = s
                .iter()
                .map(|&(a, b, c)| wmx::Slice::new(a, b, c))
                .collect();
            let v = check(&format!("slice {s:?}"), x.slice(&spec), host.slice(s));
            // A slice of the slice, and a transposed slice.
            let hv = host.slice(s);
            if hv.data.len() > 1 {
                let sp2 = [wmx::Slice::new(None, None, -1)];
                check(
                    &format!("slice {s:?} then ::-1"),
                    v.slice(&sp2),
                    hv.slice(&[(None, None, -1)]),
                );
                check(
                    &format!("slice {s:?} then transpose"),
                    v.t(),
                    hv.transpose(&[2, 1, 0]),
                );
            }
        }
        check(
            "Slice::reversed / range / ALL",
            x.slice(&[
                wmx::Slice::ALL,
                wmx::Slice::reversed(),
                wmx::Slice::range(1, 3),
            ]),
            host.slice(&[(None, None, 1), (None, None, -1), (Some(1), Some(3), 1)]),
        );
        let col = make_ok(dev, dt, &xs[..5], &[5, 1]);
        let hcol = HostArr::new(&[5, 1], xs[..5].to_vec());
        check(
            "broadcast [5,1]->[3,5,4]",
            col.broadcast_to(&[3, 5, 4]),
            hcol.broadcast_to(&[3, 5, 4]),
        );
        let s0 = make_ok(dev, dt, &xs[7..8], &[]);
        check(
            "broadcast []->[2,3]",
            s0.broadcast_to(&[2, 3]),
            HostArr::new(&[], xs[7..8].to_vec()).broadcast_to(&[2, 3]),
        );
        check(
            "broadcast [5,1]->[0,5,4]",
            col.broadcast_to(&[0, 5, 4]),
            hcol.broadcast_to(&[0, 5, 4]),
        );
        let b = ok("broadcast", col.broadcast_to(&[3, 5, 4]));
        check(
            "slice of broadcast",
            b.slice(&[wmx::Slice::new(None, None, -2), wmx::Slice::range(1, 4)]),
            hcol.broadcast_to(&[3, 5, 4])
                .slice(&[(None, None, -2), (Some(1), Some(4), 1)]),
        );
        check(
            "transpose of broadcast",
            b.transpose(Some(&[2, 0, 1])),
            hcol.broadcast_to(&[3, 5, 4]).transpose(&[2, 0, 1]),
        );
        for (axis, shape) in [
            (0isize, vec![1, 4, 5, 6]),
            (-1, vec![4, 5, 6, 1]),
            (2, vec![4, 5, 1, 6]),
        ] {
            check(
                &format!("expand_dims {axis}"),
                wmx::expand_dims(&x, axis),
                host.reshape(&shape),
            );
        }
        let e = ok("expand", wmx::expand_dims(&col, 0));
        let he = HostArr::new(&[1, 5, 1], xs[..5].to_vec());
        check("squeeze None", wmx::squeeze(&e, None), he.reshape(&[5]));
        check(
            "squeeze [0]",
            wmx::squeeze(&e, Some(&[0])),
            he.reshape(&[5, 1]),
        );
        check(
            "squeeze [-1]",
            wmx::squeeze(&e, Some(&[-1])),
            he.reshape(&[1, 5]),
        );
        // squeeze/expand_dims of a reversed view keep the reversed order.
        let rv = ok("rev", col.slice(&[wmx::Slice::reversed()]));
        let hrv = hcol.slice(&[(None, None, -1)]);
        check(
            "squeeze of reversed",
            wmx::squeeze(&rv, None),
            hrv.reshape(&[5]),
        );
        let sq = ok("sq", wmx::squeeze(&rv, None));
        check(
            "expand_dims of reversed",
            wmx::expand_dims(&sq, 0),
            hrv.reshape(&[1, 5]),
        );
    }
}

/// reshape: views of contiguous data and copies of non-viewable layouts, -1 inference.
pub fn reshape_view_and_copy(dev: &Device) {
    let dt = DType::I32;
    if !supported(dev, dt) {
        return;
    }
    let xs: Vec<Val> = (0..120).map(Val::I).collect();
    let host = HostArr::new(&[4, 5, 6], xs.clone());
    let x = make_ok(dev, dt, &xs, &[4, 5, 6]);
    let check = |what: &str, a: Result<Array>, h: HostArr| {
        let a = ok(what, a);
        let got = read_checked(what, &a, dt, &h.shape);
        assert_same(what, &got, &h.data, &|k| format!("flat {k}"));
        a
    };
    check("reshape [120]", x.reshape(&[120]), host.reshape(&[120]));
    check(
        "reshape [-1, 6]",
        x.reshape(&[-1, 6]),
        host.reshape(&[20, 6]),
    );
    check(
        "reshape [2, -1, 3, 4]",
        x.reshape(&[2, -1, 3, 4]),
        host.reshape(&[2, 5, 3, 4]),
    );
    check(
        "reshape [1, 120, 1]",
        x.reshape(&[1, 120, 1]),
        host.reshape(&[1, 120, 1]),
    );
    // Transposed: must copy.
    let t = ok("t", x.t());
    let ht = host.transpose(&[2, 1, 0]);
    check("transposed -> [120]", t.reshape(&[120]), ht.reshape(&[120]));
    check(
        "transposed -> [6, 20]",
        t.reshape(&[6, 20]),
        ht.reshape(&[6, 20]),
    );
    check(
        "transposed -> [3, 2, 5, 4]",
        t.reshape(&[3, 2, 5, 4]),
        ht.reshape(&[3, 2, 5, 4]),
    );
    // Sliced (outer dims): viewable split; inner step: needs copy.
    let s = ok("slice", x.slice(&[wmx::Slice::range(1, 3)]));
    let hs = host.slice(&[(Some(1), Some(3), 1)]);
    check(
        "slice -> [2, 30]",
        s.reshape(&[2, 30]),
        hs.reshape(&[2, 30]),
    );
    check("slice -> [-1]", s.reshape(&[-1]), hs.reshape(&[60]));
    let s2 = ok(
        "slice step",
        x.slice(&[
            wmx::Slice::ALL,
            wmx::Slice::ALL,
            wmx::Slice::new(None, None, -2),
        ]),
    );
    let hs2 = host.slice(&[(None, None, 1), (None, None, 1), (None, None, -2)]);
    check(
        "neg-step -> [4, 15]",
        s2.reshape(&[4, 15]),
        hs2.reshape(&[4, 15]),
    );
    check(
        "neg-step -> [20, 3]",
        s2.reshape(&[20, 3]),
        hs2.reshape(&[20, 3]),
    );
    // Broadcast: copy when merging a zero-stride dim.
    let col = make_ok(dev, dt, &xs[..3], &[3, 1]);
    let b = ok("b", col.broadcast_to(&[3, 4]));
    let hb = HostArr::new(&[3, 1], xs[..3].to_vec()).broadcast_to(&[3, 4]);
    check("broadcast -> [12]", b.reshape(&[12]), hb.reshape(&[12]));
    check(
        "broadcast -> [3, 2, 2]",
        b.reshape(&[3, 2, 2]),
        hb.reshape(&[3, 2, 2]),
    );
    // Round trip and empty / scalar.
    let rt = ok("rt", t.reshape(&[-1]).and_then(|a| a.reshape(&[6, 5, 4])));
    check("round trip", Ok(rt), ht.clone());
    let e = make_ok(dev, dt, &[], &[0, 3]);
    check(
        "empty -> [3, 0]",
        e.reshape(&[3, 0]),
        HostArr::new(&[3, 0], vec![]),
    );
    let sc = make_ok(dev, dt, &[Val::I(5)], &[]);
    check(
        "scalar -> [1, 1]",
        sc.reshape(&[1, 1]),
        HostArr::new(&[1, 1], vec![Val::I(5)]),
    );
    // Views of empty arrays whose slice start lies past the (empty) buffer.
    let e2 = make_ok(dev, dt, &[], &[2, 0]);
    let sl = check(
        "slice [1:] of [2, 0]",
        e2.slice(&[wmx::Slice::new(Some(1), None, 1)]),
        HostArr::new(&[1, 0], vec![]),
    );
    check(
        "reshape of that",
        sl.reshape(&[0, 5]),
        HostArr::new(&[0, 5], vec![]),
    );
    let ne = ok("negative of empty slice", wmx::negative(&sl));
    assert_eq!(read_ok(&ne, "negative of empty slice").len(), 0);
    let one = make_ok(dev, dt, &[Val::I(5)], &[1, 1]);
    check(
        "[1,1] -> []",
        one.reshape(&[]),
        HostArr::new(&[], vec![Val::I(5)]),
    );
}

/// A family of views of data with `shape`, each with its host equivalent.
fn view_family(dev: &Device, dt: DType, rng: &mut Rng) -> Vec<(String, Array, HostArr)> {
    let mut out = Vec::new();
    let xs = values(rng, dt, 4 * 6 * 5, Domain::Any);
    let h = HostArr::new(&[4, 6, 5], xs.clone());
    let x = make_ok(dev, dt, &xs, &[4, 6, 5]);
    // Every view below has shape [4, 5, 3].
    out.push((
        "transposed+sliced".into(),
        ok(
            "v",
            x.transpose(Some(&[0, 2, 1])).and_then(|v| {
                v.slice(&[
                    wmx::Slice::ALL,
                    wmx::Slice::ALL,
                    wmx::Slice::new(Some(1), None, 2),
                ])
            }),
        ),
        h.transpose(&[0, 2, 1])
            .slice(&[(None, None, 1), (None, None, 1), (Some(1), None, 2)]),
    ));
    out.push((
        "negative steps".into(),
        ok(
            "v",
            x.slice(&[
                wmx::Slice::reversed(),
                wmx::Slice::new(Some(-1), Some(0), -1),
                wmx::Slice::new(None, None, -2),
            ]),
        ),
        h.slice(&[(None, None, -1), (Some(-1), Some(0), -1), (None, None, -2)]),
    ));
    let ys = values(rng, dt, 5, Domain::Any);
    let hy = HostArr::new(&[1, 5, 1], ys.clone());
    out.push((
        "broadcast".into(),
        ok(
            "v",
            make_ok(dev, dt, &ys, &[1, 5, 1]).broadcast_to(&[4, 5, 3]),
        ),
        hy.broadcast_to(&[4, 5, 3]),
    ));
    let zs = values(rng, dt, 60, Domain::Any);
    out.push((
        "contiguous".into(),
        make_ok(dev, dt, &zs, &[4, 5, 3]),
        HostArr::new(&[4, 5, 3], zs),
    ));
    out
}

/// Ops on transposed / broadcast / sliced / negative-step inputs give the same
/// bits as on contiguous copies, and match the reference.
pub fn ops_on_views_match_contiguous(dev: &Device) {
    let mut rng = Rng::new(10);
    for dt in [DType::F32, DType::I32, DType::F16, DType::U8, DType::Bool] {
        if !supported(dev, dt) {
            continue;
        }
        let fam = view_family(dev, dt, &mut rng);
        for (na, va, ha) in &fam {
            let ca = make_ok(dev, dt, &ha.data, &ha.shape);
            // Unary.
            for &op in UnaryOp::ALL {
                let (in_dt, out_dt) = unary_dtypes(op.name(), dt);
                if !supported(dev, out_dt) {
                    continue;
                }
                let what = format!("{op}({dt} {na})");
                let gv = read_ok(&ok(&what, wmx::unary(op, va)), &what);
                let gc = read_ok(&ok(&what, wmx::unary(op, &ca)), &what);
                assert_same(&format!("{what}: view vs contiguous"), &gv, &gc, &|k| {
                    ha.data[k].to_string()
                });
                let want: Vec<Val> = ha
                    .data
                    .iter()
                    .map(|&v| r::unary(op.name(), in_dt, cast(v, in_dt)))
                    .collect();
                assert_close(
                    &what,
                    out_dt,
                    &gv,
                    &want,
                    Tol::of(class_of(op.name()), out_dt, 0.0),
                    &|k| ha.data[k].to_string(),
                );
            }
            // Binary with every other view.
            for (nb, vb, hb) in &fam {
                // The same view twice is one contiguous copy: `x / x` reads one
                // value, which a compiler may fold (to exactly 1) where two
                // arrays could only be divided (NVIDIA's quotient: 0.99999994).
                let cb = if nb == na {
                    ca.clone()
                } else {
                    make_ok(dev, dt, &hb.data, &hb.shape)
                };
                for &op in BinaryOp::ALL {
                    let Some((in_dt, out_dt)) = binary_dtypes(op.name(), dt, dt) else {
                        continue;
                    };
                    let what = format!("{op}({dt} {na}, {nb})");
                    let gv = read_ok(&ok(&what, wmx::binary(op, va, vb)), &what);
                    let gc = read_ok(&ok(&what, wmx::binary(op, &ca, &cb)), &what);
                    assert_same(&format!("{what}: views vs contiguous"), &gv, &gc, &|k| {
                        show(&[&ha.data, &hb.data], k)
                    });
                    let want: Vec<Val> = ha
                        .data
                        .iter()
                        .zip(&hb.data)
                        .map(|(&x, &y)| r::binary(op.name(), in_dt, cast(x, in_dt), cast(y, in_dt)))
                        .collect();
                    assert_close(
                        &what,
                        out_dt,
                        &gv,
                        &want,
                        Tol::of(class_of(op.name()), out_dt, 0.0),
                        &|k| show(&[&ha.data, &hb.data], k),
                    );
                }
            }
            // Reductions, casts and where on the view.
            for axes in [None, Some(&[1isize][..]), Some(&[0, 2][..])] {
                let ax = axes_usize(axes, 3);
                for name in ["sum", "max"] {
                    let op = *ReduceOp::ALL.iter().find(|o| o.name() == name).unwrap();
                    let what = format!("{name}({dt} {na}, {axes:?})");
                    let out = r::reduce_dtype(name, dt);
                    let gv = read_ok(&ok(&what, wmx::reduce(op, va, axes, false)), &what);
                    let (_, want) = ha.reduce(&ax, |v| {
                        (r::reduce(name, dt, v).unwrap(), reduce_tol(name, out, v))
                    });
                    let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                    assert_close_with(&what, out, &gv, &w, &|k| want[k].1, &|k| {
                        format!("output {k}")
                    });
                }
            }
            for to in [DType::F32, DType::I32, DType::Bool] {
                if !supported(dev, to) {
                    continue;
                }
                let gv = read_ok(&ok("astype", va.astype(to)), "astype");
                let want: Vec<Val> = ha.data.iter().map(|&v| cast(v, to)).collect();
                assert_same(&format!("astype {dt} {na} -> {to}"), &gv, &want, &|k| {
                    ha.data[k].to_string()
                });
            }
            let c = ok("cond", wmx::greater(va, &fam[3].1));
            let w = ok("where", wmx::where_(&c, va, &fam[2].1));
            let gv = read_ok(&w, "where");
            let want: Vec<Val> = (0..gv.len())
                .map(|k| {
                    let cond = r::binary("greater", dt, ha.data[k], fam[3].2.data[k]);
                    if cond.nonzero() {
                        ha.data[k]
                    } else {
                        fam[2].2.data[k]
                    }
                })
                .collect();
            assert_same(&format!("where on {na} ({dt})"), &gv, &want, &|k| {
                ha.data[k].to_string()
            });
        }
    }
}
