//! Sorting: argsort, sort, partition, argpartition and topk on every dtype against
//! a stable host sort in numpy's order (NaN last, -0 equal to +0), with ties,
//! views, many short rows, long rows (the GPU's global passes), empty axes;
//! random permutations; the derivative of sort.

use crate::host::HostArr;
use crate::rng::{Domain, Rng, values};
use crate::val::{Val, make_ok, read_ok};
use std::cmp::Ordering;
use wmx_core::{self as wmx, Array, DType, Device, Result, random};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// numpy's order: NaN last, -0 == +0.
fn order(a: &Val, b: &Val) -> Ordering {
    match (a, b) {
        (Val::I(a), Val::I(b)) => a.cmp(b),
        (Val::F(a), Val::F(b)) => match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => a.partial_cmp(b).unwrap(),
        },
        _ => unreachable!(),
    }
}

/// Stable argsort of each row of a row-major [rows, n] host array.
fn host_argsort(v: &[Val], n: usize) -> Vec<u32> {
    let mut out = vec![];
    for row in v.chunks(n.max(1)) {
        let mut idx: Vec<u32> = (0..row.len() as u32).collect();
        idx.sort_by(|&a, &b| order(&row[a as usize], &row[b as usize]));
        out.extend(idx);
    }
    out
}

/// Values with many ties (a few distinct values), and edge values for floats.
fn tied(rng: &mut Rng, dt: DType, n: usize) -> Vec<Val> {
    let pool = values(rng, dt, 6, Domain::Any);
    let mut v: Vec<Val> = (0..n).map(|_| *rng.pick(&pool)).collect();
    if dt.is_float() && n > 8 {
        for (k, x) in [f64::NAN, -0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, -0.0]
            .iter()
            .enumerate()
        {
            v[(k * 7) % n] = Val::F(*x);
        }
    }
    v
}

fn u32s(a: &Array, what: &str) -> Vec<u32> {
    ok(what, a.to_vec())
}

/// argsort/sort on every dtype along both axes, flattened and through a transposed
/// view; many short rows; a long row; topk, partition, argpartition; errors.
pub fn sort_values(dev: &Device) {
    let mut rng = Rng::new(0x50);
    for dt in DType::REAL {
        if !super::supported(dev, dt) {
            continue;
        }
        let what = format!("argsort of {dt}");
        let v = tied(&mut rng, dt, 4 * 37);
        let x = make_ok(dev, dt, &v, &[4, 37]);
        let hx = HostArr::new(&[4, 37], v.clone());
        let got = u32s(&ok(&what, wmx::argsort(&x, Some(-1))), &what);
        assert_eq!(got, host_argsort(&v, 37), "{what}, last axis");
        // Axis 0, through the host transpose.
        let t = hx.transpose(&[1, 0]);
        let got = ok(&what, wmx::argsort(&x, Some(0)));
        assert_eq!(got.shape(), &[4, 37], "{what}: shape");
        let gt = HostArr::new(&[4, 37], read_ok(&got, &what)).transpose(&[1, 0]);
        let want: Vec<Val> = host_argsort(&t.data, 4)
            .iter()
            .map(|&i| Val::I(i as i128))
            .collect();
        assert!(
            gt.data.iter().zip(&want).all(|(a, b)| a.same(*b)),
            "{what}, axis 0"
        );
        // Flattened, and sort's values.
        let got = u32s(&ok(&what, wmx::argsort(&x, None)), &what);
        let flat = host_argsort(&v, v.len());
        assert_eq!(got, flat, "{what}, flattened");
        let what = format!("sort of {dt}");
        let s = read_ok(&ok(&what, wmx::sort(&x, None)), &what);
        for (k, (a, &i)) in s.iter().zip(&flat).enumerate() {
            assert!(
                a.same(v[i as usize]),
                "{what}: element {k}: got {a}, want {}",
                v[i as usize]
            );
        }
        // A transposed view sorted along its last axis.
        let xt = ok(&what, wmx::transpose(&x, None));
        let got = u32s(&ok(&what, wmx::argsort(&xt, Some(1))), &what);
        assert_eq!(got, host_argsort(&t.data, 4), "{what}: transposed view");
    }
    // Rows long enough for the GPU's radix sort (RADIX_MIN = 2^14), every dtype,
    // with ties, NaN, -0 and infinities: the order, stability and index of each.
    for dt in DType::REAL {
        if !super::supported(dev, dt) {
            continue;
        }
        let (rows, n) = (3, 20_011);
        let what = format!("argsort of {rows} x {n} {dt}");
        let v = tied(&mut rng, dt, rows * n);
        let x = make_ok(dev, dt, &v, &[rows, n]);
        // Distinct values too, neighbours a last bit apart and (16-bit floats)
        // subnormals among them: every digit of the keys matters.
        let mut spread = values(&mut rng, dt, rows * n, Domain::Any);
        if dt.is_float() {
            for k in 0..200 {
                let sub = (k % 40 + 1) as f64 * 2f64.powi(-24) * if k % 3 == 0 { -1.0 } else { 1.0 };
                spread[k * 97] = Val::F(sub);
            }
        }
        let what_s = format!("argsort of {rows} x {n} distinct {dt}");
        let xs = make_ok(dev, dt, &spread, &[rows, n]);
        let got = u32s(&ok(&what_s, wmx::argsort(&xs, Some(1))), &what_s);
        assert_eq!(got, host_argsort(&spread, n), "{what_s}");
        let got = u32s(&ok(&what, wmx::argsort(&x, Some(1))), &what);
        let want = host_argsort(&v, n);
        assert_eq!(got, want, "{what}");
        // sort's elements themselves (the GPU's radix sort carries 32-bit ones):
        // -0 and +0 in their order; along axis 0 of the transpose too.
        let what = format!("sort of {rows} x {n} {dt}");
        let xt = ok(&what, wmx::transpose(&x, None));
        for (got, kind) in [
            (ok(&what, wmx::sort(&x, Some(1))), "rows"),
            (
                ok(&what, wmx::transpose(&ok(&what, wmx::sort(&xt, Some(0))), None)),
                "columns of the transpose",
            ),
        ] {
            let got = read_ok(&got, &what);
            for (k, (a, &i)) in got.iter().zip(&want).enumerate() {
                let e = v[(k / n) * n + i as usize];
                assert!(a.same(e), "{what}, {kind}: element {k}: got {a}, want {e}");
            }
        }
    }
    // Many short rows (several rows per GPU block), long rows (global passes, the
    // radix sort; 300 001 needs more than one block to scan its digit counts).
    for (rows, n) in [(3000usize, 5usize), (1, 100_003), (2, 1500), (1, 300_001)] {
        let what = format!("argsort of {rows} x {n} f32");
        let xs: Vec<f32> = (0..rows * n)
            .map(|_| (rng.int_in(-500, 500) as f32) * 0.25)
            .collect();
        let x = ok(&what, Array::from_slice_on(&xs, &[rows, n], dev));
        let vals: Vec<Val> = xs.iter().map(|&f| Val::F(f as f64)).collect();
        assert_eq!(
            u32s(&ok(&what, wmx::argsort(&x, Some(1))), &what),
            host_argsort(&vals, n),
            "{what}"
        );
        let what = format!("argsort of {rows} x {n} i32");
        let xi: Vec<i32> = (0..rows * n).map(|_| rng.int_in(-40, 40) as i32).collect();
        let x = ok(&what, Array::from_slice_on(&xi, &[rows, n], dev));
        let vals: Vec<Val> = xi.iter().map(|&i| Val::I(i as i128)).collect();
        assert_eq!(
            u32s(&ok(&what, wmx::argsort(&x, Some(1))), &what),
            host_argsort(&vals, n),
            "{what}"
        );
    }
    // topk: largest first, NaN largest.
    let what = "topk";
    let x = ok(
        what,
        Array::from_slice_on(&[3.0f32, f32::NAN, 7.0, -1.0, 7.0, 2.0], &[2, 3], dev),
    );
    let (v, i) = ok(what, wmx::topk(&x, 2, -1));
    let (v, i): (Vec<f32>, Vec<u32>) = (ok(what, v.to_vec()), ok(what, i.to_vec()));
    assert!(
        v[0].is_nan() && v[1] == 7.0 && v[2] == 7.0 && v[3] == 2.0,
        "{what}: {v:?}"
    );
    assert_eq!(i, [1, 2, 1, 2], "{what}: indices");
    let (v, _) = ok(what, wmx::topk(&x, 1, 0));
    assert_eq!(v.shape(), &[1, 3], "{what}: axis 0");
    // partition/argpartition: the kth element in place, smaller before, larger after.
    let what = "partition";
    let xs: Vec<f32> = (0..50).map(|_| rng.int_in(-9, 9) as f32).collect();
    let x = ok(what, Array::from_slice_on(&xs, &[50], dev));
    for kth in [0isize, 17, -1] {
        let p: Vec<f32> = ok(what, ok(what, wmx::partition(&x, kth, None)).to_vec());
        let k = kth.rem_euclid(50) as usize;
        let mut sorted = xs.clone();
        sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
        assert_eq!(p[k], sorted[k], "{what}: kth {kth}");
        assert!(
            p[..k].iter().all(|&a| a <= p[k]) && p[k..].iter().all(|&a| a >= p[k]),
            "{what}: kth {kth}"
        );
        let ip = u32s(&ok(what, wmx::argpartition(&x, kth, Some(0))), what);
        assert_eq!(xs[ip[k] as usize], sorted[k], "argpartition: kth {kth}");
    }
    // Empty axes and errors.
    let e = ok(
        "e",
        wmx::with_device(dev, || wmx::zeros(&[3, 0], DType::F32)),
    );
    assert_eq!(ok("e", wmx::sort(&e, Some(1))).shape(), &[3, 0]);
    ok("e", ok("e", wmx::argsort(&e, Some(0))).eval());
    super::expect_err(
        "topk too many",
        wmx::topk(&x, 51, 0),
        &["topk", "k = 51", "50"],
    );
    super::expect_err(
        "partition kth",
        wmx::partition(&x, 50, None),
        &["partition", "kth 50"],
    );
    let s = ok("s", wmx::with_device(dev, || wmx::zeros(&[], DType::F32)));
    super::expect_err(
        "argsort of a scalar on an axis",
        wmx::argsort(&s, Some(0)),
        &["argsort", "zero-dimensional"],
    );
    super::expect_err("sort axis", wmx::sort(&e, Some(2)), &["sort", "axis 2"]);
}

/// permutation is a permutation (and MLX's, through the goldens); shuffle moves
/// whole slices; the derivative of sort sends each weight back to its element.
pub fn permutation_and_grad_sort(dev: &Device) {
    let key = ok("key", wmx::with_device(dev, || random::key(77)));
    let what = "permutation";
    let p = u32s(&ok(what, random::permutation(&key, 1000)), what);
    let mut seen = vec![false; 1000];
    for &i in &p {
        assert!(
            !std::mem::replace(&mut seen[i as usize], true),
            "{what}: {i} twice"
        );
    }
    assert!(
        p.iter()
            .enumerate()
            .filter(|(k, i)| *k as u32 == **i)
            .count()
            < 20,
        "{what}: barely moved"
    );
    let what = "shuffle";
    let x = ok(
        what,
        Array::from_slice_on(&(0..12).map(|v| v as f32).collect::<Vec<_>>(), &[4, 3], dev),
    );
    let s: Vec<f32> = ok(what, ok(what, random::shuffle(&key, &x, 0)).to_vec());
    let perm = u32s(&ok(what, random::permutation(&key, 4)), what);
    for (r, &src) in perm.iter().enumerate() {
        for c in 0..3 {
            assert_eq!(s[r * 3 + c], (src * 3) as f32 + c as f32, "{what}: row {r}");
        }
    }
    let what = "grad of sort";
    let xs = [0.5f32, -1.0, 2.0, 0.5, -3.0];
    let ws = [1.0f32, 10.0, 100.0, 1000.0, 10000.0];
    let x = ok(what, Array::from_slice_on(&xs, &[5], dev));
    let w = ok(what, Array::from_slice_on(&ws, &[5], dev));
    let one = ok(what, wmx::with_device(dev, || wmx::ones(&[], DType::F32)));
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        Ok(vec![wmx::sum(
            &wmx::multiply(&wmx::sort(&a[0], None)?, &w)?,
            None,
            false,
        )?])
    };
    let (_, g) = ok(
        what,
        wmx::vjp(f, std::slice::from_ref(&x), std::slice::from_ref(&one)),
    );
    // Sorted: -3 (4), -1 (1), 0.5 (0), 0.5 (3), 2 (2).
    let g: Vec<f32> = ok(what, g[0].to_vec());
    assert_eq!(g, [100.0, 10.0, 10000.0, 1000.0, 1.0], "{what}");
    // A row long enough for the GPU's radix sort, with ties: the weight of sorted
    // place j goes back to the element there (vjp), and the tangent of each element
    // moves with it (jvp).
    let what = "grad of a long sort";
    let n = 20_011;
    let mut rng = Rng::new(0x51);
    let xs: Vec<f32> = (0..n).map(|_| rng.int_in(-300, 300) as f32 * 0.5).collect();
    let ws: Vec<f32> = (0..n).map(|j| (j % 97) as f32 - 40.0).collect();
    let ts: Vec<f32> = (0..n).map(|i| (i % 89) as f32 + 0.25).collect();
    let vals: Vec<Val> = xs.iter().map(|&f| Val::F(f as f64)).collect();
    let order = host_argsort(&vals, n);
    let x = ok(what, Array::from_slice_on(&xs, &[n], dev));
    let w = ok(what, Array::from_slice_on(&ws, &[n], dev));
    let t = ok(what, Array::from_slice_on(&ts, &[n], dev));
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        Ok(vec![wmx::multiply(&wmx::sort(&a[0], None)?, &w)?])
    };
    let (_, g) = ok(what, wmx::vjp(f, std::slice::from_ref(&x), std::slice::from_ref(&w)));
    let g: Vec<f32> = ok(what, g[0].to_vec());
    let (_, jt) = ok(what, wmx::jvp(f, std::slice::from_ref(&x), std::slice::from_ref(&t)));
    let jt: Vec<f32> = ok(what, jt[0].to_vec());
    for (j, &i) in order.iter().enumerate() {
        let i = i as usize;
        assert_eq!(g[i], ws[j] * ws[j], "{what}: vjp at element {i} (place {j})");
        assert_eq!(jt[j], ts[i] * ws[j], "{what}: jvp at place {j} (element {i})");
    }
}
