//! Property checks, parameterised by device, shape and a seed (proptest drives
//! them in `tests/properties.rs`; a GPU test file can drive them the same way).
//! Everything random beyond the shape comes from the seed, so a failure shrinks
//! to a small shape and reproduces from the printed seed.

use crate::cases::{bshape, ok, supported};
use crate::host::HostArr;
use crate::reference::{self as r, binary_dtypes};
use crate::rng::{Domain, Rng, values};
use crate::tol::{Class, Tol, assert_close_with, assert_same, class_of};
use crate::val::{Val, cast, make_ok, read_ok};
use wmx_core::{self as wmx, Array, BinaryOp, DType, Device};

const DTYPES: [DType; 6] = [
    DType::F32,
    DType::I32,
    DType::U8,
    DType::Bool,
    DType::F16,
    DType::BF16,
];

fn pick_dtype(dev: &Device, rng: &mut Rng) -> DType {
    loop {
        let d = *rng.pick(&DTYPES);
        if supported(dev, d) {
            return d;
        }
    }
}

/// A random view with shape `shape` (transposed, sliced with steps incl.
/// negative, broadcast, or contiguous), with its host equivalent.
pub fn random_view(
    dev: &Device,
    dt: DType,
    shape: &[usize],
    rng: &mut Rng,
) -> (String, Array, HostArr) {
    random_view_in(dev, dt, shape, rng, Domain::Any)
}

/// [`random_view`] with values from `domain`.
pub fn random_view_in(
    dev: &Device,
    dt: DType,
    shape: &[usize],
    rng: &mut Rng,
    domain: Domain,
) -> (String, Array, HostArr) {
    let nd = shape.len();
    let kind = rng.below(4);
    match kind {
        0 => {
            // Transpose of data laid out in a permuted order.
            let mut perm: Vec<usize> = (0..nd).collect();
            for i in (1..nd).rev() {
                perm.swap(i, rng.below(i as u64 + 1) as usize);
            }
            // base.transpose(perm) has `shape`: base.shape[perm[k]] = shape[k].
            let mut bshape = vec![0; nd];
            for k in 0..nd {
                bshape[perm[k]] = shape[k];
            }
            let n = bshape.iter().product();
            let h = HostArr::new(&bshape, values(rng, dt, n, domain));
            let a = make_ok(dev, dt, &h.data, &bshape);
            let p: Vec<isize> = perm.iter().map(|&p| p as isize).collect();
            (
                format!("transpose {perm:?} of {bshape:?}"),
                ok("transpose", a.transpose(Some(&p))),
                h.transpose(&perm),
            )
        }
        1 => {
            // Slice with a random step (possibly negative) from a larger array.
            let steps: Vec<isize> = (0..nd)
                .map(|_| *rng.pick(&[1isize, 2, 3, -1, -2]))
                .collect();
            let offs: Vec<usize> = (0..nd).map(|_| rng.below(2) as usize).collect();
            let bshape: Vec<usize> = (0..nd)
                .map(|d| shape[d] * steps[d].unsigned_abs() + offs[d] + rng.below(2) as usize)
                .collect();
            let specs: Vec<(Option<isize>, Option<isize>, isize)> = (0..nd)
                .map(|d| {
                    let s = steps[d];
                    let n = shape[d] as isize;
                    if n == 0 {
                        (Some(0), Some(0), s)
                    } else if s > 0 {
                        let start = offs[d] as isize;
                        (Some(start), Some(start + n * s), s)
                    } else {
                        let start = bshape[d] as isize - 1 - offs[d] as isize;
                        let stop = start + n * s;
                        (Some(start), if stop < 0 { None } else { Some(stop) }, s)
                    }
                })
                .collect();
            let n = bshape.iter().product();
            let h = HostArr::new(&bshape, values(rng, dt, n, domain));
            let a = make_ok(dev, dt, &h.data, &bshape);
            let sl: Vec<wmx::Slice> = specs
                .iter()
                .map(|&(a, b, c)| wmx::Slice::new(a, b, c))
                .collect();
            let hv = h.slice(&specs);
            assert_eq!(
                hv.shape, shape,
                "test bug: slice specs {specs:?} of {bshape:?}"
            );
            (
                format!("slice {specs:?} of {bshape:?}"),
                ok("slice", a.slice(&sl)),
                hv,
            )
        }
        2 => {
            // Broadcast from a shape with some dims 1 and fewer leading dims.
            let lead = rng.below(nd as u64 + 1) as usize;
            let src: Vec<usize> = shape[lead..]
                .iter()
                .map(|&d| if rng.chance(0.5) { 1 } else { d })
                .collect();
            let n = src.iter().product();
            let h = HostArr::new(&src, values(rng, dt, n, domain));
            let a = make_ok(dev, dt, &h.data, &src);
            (
                format!("broadcast {src:?}"),
                ok("broadcast_to", a.broadcast_to(shape)),
                h.broadcast_to(shape),
            )
        }
        _ => {
            let n = shape.iter().product();
            let h = HostArr::new(shape, values(rng, dt, n, domain));
            ("contiguous".into(), make_ok(dev, dt, &h.data, shape), h)
        }
    }
}

/// A random binary op on two random views of `shape` gives the same bits as on
/// contiguous copies, and matches the reference.
pub fn binary_on_views(dev: &Device, shape: &[usize], seed: u64) {
    let mut rng = Rng::new(seed);
    let dt = pick_dtype(dev, &mut rng);
    let op = *rng.pick(BinaryOp::ALL);
    let Some((in_dt, out_dt)) = binary_dtypes(op.name(), dt, dt) else {
        return;
    };
    let (na, va, ha) = random_view(dev, dt, shape, &mut rng);
    let (nb, vb, hb) = random_view(dev, dt, shape, &mut rng);
    let what = format!("{op}({dt} {na}, {nb}) seed {seed}");
    let gv = read_ok(&ok(&what, wmx::binary(op, &va, &vb)), &what);
    let ca = make_ok(dev, dt, &ha.data, shape);
    let cb = make_ok(dev, dt, &hb.data, shape);
    let gc = read_ok(&ok(&what, wmx::binary(op, &ca, &cb)), &what);
    let show = |k: usize| format!("{}, {}", ha.data[k], hb.data[k]);
    assert_same(&format!("{what}: views vs contiguous"), &gv, &gc, &show);
    let want: Vec<Val> = ha
        .data
        .iter()
        .zip(&hb.data)
        .map(|(&x, &y)| r::binary(op.name(), in_dt, cast(x, in_dt), cast(y, in_dt)))
        .collect();
    let tol = Tol::of(class_of(op.name()), out_dt, 0.0);
    let slack = |k: usize| floor_slack(op, in_dt, ha.data[k], hb.data[k], tol);
    assert_close_with(&what, out_dt, &gv, &want, &slack, &show);
}

/// `tol`, or one unit more for a float `floor_divide` whose exact quotient lies
/// within 3 ulp (f32) of an integer: WGSL bounds f32 division only to 2.5 ulp,
/// so the floor of the device's quotient may be the integer below there
/// (`docs/SEMANTICS.md`, Floating point).
fn floor_slack(op: BinaryOp, in_dt: DType, x: Val, y: Val, tol: Tol) -> Tol {
    if op != BinaryOp::FloorDivide || !in_dt.is_float() || in_dt == DType::F64 {
        return tol;
    }
    let q = cast(x, in_dt).f() / cast(y, in_dt).f();
    let near = q.is_finite() && (q - q.round()).abs() <= 3.0 * crate::val::ulp(DType::F32, q);
    if near {
        Tol {
            abs: tol.abs + 1.0,
            ..tol
        }
    } else {
        tol
    }
}

/// A binary op on two shapes that broadcast (numpy rules) matches the reference.
pub fn broadcast_binary(dev: &Device, sa: &[usize], sb: &[usize], seed: u64) {
    let mut rng = Rng::new(seed);
    let (da, db) = (pick_dtype(dev, &mut rng), pick_dtype(dev, &mut rng));
    let op = *rng.pick(BinaryOp::ALL);
    let Some((in_dt, out_dt)) = binary_dtypes(op.name(), da, db) else {
        return;
    };
    if !supported(dev, in_dt) || !supported(dev, out_dt) {
        return;
    }
    let ha = HostArr::new(sa, values(&mut rng, da, sa.iter().product(), Domain::Any));
    let hb = HostArr::new(sb, values(&mut rng, db, sb.iter().product(), Domain::Any));
    let a = make_ok(dev, da, &ha.data, sa);
    let b = make_ok(dev, db, &hb.data, sb);
    let what = format!("{op}({da}{sa:?}, {db}{sb:?}) seed {seed}");
    let y = ok(&what, wmx::binary(op, &a, &b));
    let shape = bshape(sa, sb);
    assert_eq!(y.shape(), &shape[..], "{what}: shape");
    assert_eq!(y.dtype(), out_dt, "{what}: dtype");
    let got = read_ok(&y, &what);
    let (ba, bb) = (ha.broadcast_to(&shape), hb.broadcast_to(&shape));
    let want: Vec<Val> = ba
        .data
        .iter()
        .zip(&bb.data)
        .map(|(&x, &z)| r::binary(op.name(), in_dt, cast(x, in_dt), cast(z, in_dt)))
        .collect();
    let tol = Tol::of(class_of(op.name()), out_dt, 0.0);
    let slack = |k: usize| floor_slack(op, in_dt, ba.data[k], bb.data[k], tol);
    assert_close_with(&what, out_dt, &got, &want, &slack, &|k| {
        format!("{}, {}", ba.data[k], bb.data[k])
    });
}

/// Reshape of a random view to a random compatible shape and back preserves the
/// row-major elements.
pub fn reshape_round_trip(dev: &Device, shape: &[usize], seed: u64) {
    let mut rng = Rng::new(seed);
    let dt = pick_dtype(dev, &mut rng);
    let (name, v, h) = random_view(dev, dt, shape, &mut rng);
    let n: usize = shape.iter().product();
    // A random factorisation of n (or shapes with zeros when n == 0).
    let mut target: Vec<isize> = Vec::new();
    let mut rest = n;
    if n == 0 {
        target = vec![0, rng.below(4) as isize];
    } else {
        while rest > 1 && target.len() < 4 {
            let divs: Vec<usize> = (2..=rest).filter(|&d| rest.is_multiple_of(d)).collect();
            let d = *rng.pick(&divs);
            target.push(d as isize);
            rest /= d;
        }
        if rest > 1 {
            *target.last_mut().unwrap() *= rest as isize;
        }
        if rng.chance(0.3) {
            target.insert(rng.below(target.len() as u64 + 1) as usize, 1);
        }
        if !target.is_empty() && rng.chance(0.5) {
            let k = rng.below(target.len() as u64) as usize;
            target[k] = -1;
        }
    }
    let what = format!("reshape {name} {shape:?} -> {target:?} seed {seed}");
    let a = ok(&what, v.reshape(&target));
    assert_eq!(a.size(), n, "{what}");
    let got = read_ok(&a, &what);
    assert_same(&what, &got, &h.data, &|k| format!("flat {k}"));
    let back: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    let b = ok(&what, a.reshape(&back));
    assert_eq!(b.shape(), shape);
    assert_same(
        &format!("{what} and back"),
        &read_ok(&b, &what),
        &h.data,
        &|k| format!("flat {k}"),
    );
}

/// Sum (and max, any) over a random subset of axes of a random view matches the
/// reference.
pub fn reduce_random_axes(dev: &Device, shape: &[usize], seed: u64) {
    let mut rng = Rng::new(seed);
    let dt = pick_dtype(dev, &mut rng);
    let (name, v, h) = random_view(dev, dt, shape, &mut rng);
    let nd = shape.len();
    let axes: Vec<usize> = (0..nd).filter(|_| rng.chance(0.5)).collect();
    let as_isize: Vec<isize> = axes
        .iter()
        .map(|&a| {
            if rng.chance(0.5) {
                a as isize - nd as isize
            } else {
                a as isize
            }
        })
        .collect();
    let keepdims = rng.chance(0.5);
    let axes_opt = if rng.chance(0.2) {
        None
    } else {
        Some(&as_isize[..])
    };
    let ax: Vec<usize> = match axes_opt {
        None => (0..nd).collect(),
        Some(_) => axes.clone(),
    };
    for op in ["sum", "max", "any"] {
        let rop = *wmx::ReduceOp::ALL.iter().find(|o| o.name() == op).unwrap();
        let what = format!(
            "{op}({dt} {name} {shape:?}, axes={axes_opt:?}, keepdims={keepdims}) seed {seed}"
        );
        let empty_red = ax.iter().any(|&a| shape[a] == 0);
        let kept: usize = (0..nd)
            .filter(|d| !ax.contains(d))
            .map(|d| shape[d])
            .product();
        let res = wmx::reduce(rop, &v, axes_opt, keepdims);
        if op == "max" && empty_red && kept > 0 {
            assert!(res.is_err(), "{what}: max over an empty axis must fail");
            continue;
        }
        let y = ok(&what, res);
        let out = r::reduce_dtype(op, dt);
        let want_shape: Vec<usize> = (0..nd)
            .filter_map(|d| {
                if ax.contains(&d) {
                    keepdims.then_some(1)
                } else {
                    Some(shape[d])
                }
            })
            .collect();
        assert_eq!(y.shape(), &want_shape[..], "{what}: shape");
        let got = read_ok(&y, &what);
        let (_, want) = h.reduce(&ax, |vals| {
            let tol = if op == "sum" {
                Tol::of(Class::Sum, out, vals.iter().map(|x| x.f().abs()).sum())
            } else {
                Tol::EXACT
            };
            (r::reduce(op, dt, vals).unwrap(), tol)
        });
        let w: Vec<Val> = want.iter().map(|p| p.0).collect();
        assert_close_with(&what, out, &got, &w, &|k| want[k].1, &|k| {
            format!("output {k}")
        });
    }
}

/// A function's value and derivative in f64.
type ValueAndDerivative = fn(f64) -> (f64, f64);

/// Broadcast index map: the row-major index in `small` of each element of `big`.
fn source_indices(small: &[usize], big: &[usize]) -> Vec<usize> {
    let pad = big.len() - small.len();
    crate::host::indices(big)
        .iter()
        .map(|i| {
            (0..small.len()).fold(0, |k, d| {
                k * small[d] + if small[d] == 1 { 0 } else { i[d + pad] }
            })
        })
        .collect()
}

/// The gradient of `sum(op(x) * b)` with `x` a random view (transposed, sliced,
/// broadcast) and `b` broadcast against it, w.r.t. both, against the derivative
/// written in f64 and summed back over the broadcast axes on the host.
pub fn grad_on_views_and_broadcasts(dev: &Device, sa: &[usize], sb: &[usize], seed: u64) {
    let mut rng = Rng::new(seed);
    let ops: [(wmx::UnaryOp, ValueAndDerivative); 5] = [
        (wmx::UnaryOp::Exp, |x| (x.exp(), x.exp())),
        (wmx::UnaryOp::Sin, |x| (x.sin(), x.cos())),
        (wmx::UnaryOp::Sqrt, |x| (x.sqrt(), 0.5 / x.sqrt())),
        (wmx::UnaryOp::Log, |x| (x.ln(), 1.0 / x)),
        (wmx::UnaryOp::Tanh, |x| (x.tanh(), 1.0 - x.tanh().powi(2))),
    ];
    let (op, refop) = *rng.pick(&ops);
    let (view, x, hx) = random_view_in(dev, DType::F32, sa, &mut rng, Domain::Range(0.3, 2.0));
    let hb = HostArr::new(
        sb,
        values(
            &mut rng,
            DType::F32,
            sb.iter().product(),
            Domain::Range(-2.0, 2.0),
        ),
    );
    let b = make_ok(dev, DType::F32, &hb.data, sb);
    let what = format!("grad of sum({op}(x) * b), x {view} {sa:?}, b {sb:?}, seed {seed}");
    let f = |a: &[Array]| {
        Ok(vec![wmx::sum(
            &wmx::multiply(&wmx::unary(op, &a[0])?, &a[1])?,
            None,
            false,
        )?])
    };
    let g = ok(&what, wmx::grad(f, &[0, 1])(&[x, b]));
    let shape = bshape(sa, sb);
    let (bx, bb) = (hx.broadcast_to(&shape), hb.broadcast_to(&shape));
    let (ia, ib) = (source_indices(sa, &shape), source_indices(sb, &shape));
    let mut want = [
        vec![
            0f64;
            ia.iter()
                .max()
                .map_or(0, |m| m + 1)
                .max(sa.iter().product())
        ],
        vec![0f64; sb.iter().product()],
    ];
    let mut mag = want.clone();
    for k in 0..bx.data.len() {
        let (v, d) = refop(bx.data[k].f());
        let w = bb.data[k].f();
        want[0][ia[k]] += d * w;
        mag[0][ia[k]] += (d * w).abs();
        want[1][ib[k]] += v;
        mag[1][ib[k]] += v.abs();
    }
    for (j, name) in ["x", "b"].iter().enumerate() {
        let got: Vec<f64> = read_ok(&g[j], &what).into_iter().map(Val::f).collect();
        assert_eq!(
            g[j].shape(),
            if j == 0 { sa } else { sb },
            "{what}: gradient shape of {name}"
        );
        for (i, (a, e)) in got.iter().zip(&want[j]).enumerate() {
            assert!(
                (a - e).abs() <= 1e-5 * mag[j][i] + 1e-6,
                "{what}: d/d{name} element {i}: got {a}, want {e}"
            );
        }
    }
}

/// Cases per property: `WMX_PROPTEST_CASES`, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("WMX_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
