//! Contractions: `einsum` against a brute-force f64 sum over every label
//! assignment (numpy's definition), its paths against opt_einsum's, and
//! `tensordot`, `inner`, `outer`, `kron`, `trace`, `diagonal`, `diag` against host
//! loops; their gradients; errors.

use super::goldens::Goldens;
use crate::rng::Rng;
use wmx_core::{self as wmx, Array, DType, Device, EinsumOptimize, Result, TensorAxes};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

static PATHS: Goldens = Goldens::new(include_str!("../../goldens/numpy_linalg.txt"));

fn random(rng: &mut Rng, shape: &[usize]) -> Vec<f64> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|_| rng.uniform(-1.0, 1.0) as f32 as f64)
        .collect()
}

fn arr(dev: &Device, v: &[f64], shape: &[usize], dt: DType) -> Array {
    let a = ok(
        "input",
        Array::from_slice_on(&v.iter().map(|&x| x as f32).collect::<Vec<_>>(), shape, dev),
    );
    ok("cast", a.astype(dt))
}

/// numpy's einsum by definition: for every assignment of the labels, the product
/// of the operands' elements summed into the output's element. Explicit outputs,
/// letters only (ellipses are written out as letters by the caller).
fn brute(spec: &str, ops: &[(&[f64], &[usize])]) -> (Vec<usize>, Vec<f64>) {
    let (lhs, out) = spec.split_once("->").unwrap();
    let terms: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
    let out: Vec<char> = out.chars().collect();
    let mut labels: Vec<char> = vec![];
    let mut size = vec![];
    for (t, (_, sh)) in terms.iter().zip(ops) {
        for (c, &n) in t.iter().zip(sh.iter()) {
            match labels.iter().position(|l| l == c) {
                Some(i) => size[i] = usize::max(size[i], n),
                None => {
                    labels.push(*c);
                    size.push(n);
                }
            }
        }
    }
    let pos = |c: &char| labels.iter().position(|l| l == c).unwrap();
    let oshape: Vec<usize> = out.iter().map(|c| size[pos(c)]).collect();
    let mut res = vec![0.0; oshape.iter().product()];
    let total: usize = size.iter().product();
    let mut idx = vec![0usize; labels.len()];
    for _ in 0..total {
        let mut p = 1.0;
        for (t, (v, sh)) in terms.iter().zip(ops) {
            let mut flat = 0;
            for (c, &n) in t.iter().zip(sh.iter()) {
                // Size-1 axes broadcast.
                flat = flat * n + if n == 1 { 0 } else { idx[pos(c)] };
            }
            p *= v[flat];
        }
        let mut o = 0;
        for (c, &n) in out.iter().zip(&oshape) {
            o = o * n + idx[pos(c)];
        }
        res[o] += p;
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < size[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    (oshape, res)
}

fn check(what: &str, got: &Array, shape: &[usize], want: &[f64], tol: f64) {
    assert_eq!(got.shape(), shape, "{what}: shape");
    let g = ok(what, got.to_vec_as::<f64>());
    assert_eq!(g.len(), want.len(), "{what}: size");
    for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}: element {i}: got {a}, want {b}"
        );
    }
}

/// `einsum` over matrix products, batches, traces, diagonals, transposes, sums,
/// outer products, three and four operands, implicit outputs, ellipses with
/// broadcasting, integers, empty axes and views, each against `brute`.
pub fn einsum_values(dev: &Device) {
    let mut rng = Rng::new(0xe125);
    // (einsum spec, equivalent explicit letters spec for the reference, shapes)
    let cases: &[(&str, &str, &[&[usize]])] = &[
        ("ij,jk->ik", "ij,jk->ik", &[&[3, 5], &[5, 4]]),
        ("ij,jk", "ij,jk->ik", &[&[3, 5], &[5, 4]]),
        ("bij,bjk->bik", "bij,bjk->bik", &[&[2, 3, 5], &[2, 5, 7]]),
        ("ii->i", "ii->i", &[&[4, 4]]),
        ("ii", "ii->", &[&[5, 5]]),
        ("iii->i", "iii->i", &[&[3, 3, 3]]),
        ("iij->ji", "iij->ji", &[&[3, 3, 2]]),
        ("ij->ji", "ij->ji", &[&[3, 4]]),
        ("ij->", "ij->", &[&[3, 4]]),
        ("ij->j", "ij->j", &[&[3, 4]]),
        ("i,i->", "i,i->", &[&[7], &[7]]),
        ("i,j->ij", "i,j->ij", &[&[3], &[4]]),
        ("i,j", "i,j->ij", &[&[3], &[4]]),
        (
            "ijk,jl,lk->i",
            "ijk,jl,lk->i",
            &[&[2, 3, 4], &[3, 5], &[5, 4]],
        ),
        (
            "abc,cd,de,ea->b",
            "abc,cd,de,ea->b",
            &[&[2, 3, 4], &[4, 3], &[3, 2], &[2, 2]],
        ),
        (
            "ab,bc,cd,de->ae",
            "ab,bc,cd,de->ae",
            &[&[2, 9], &[9, 2], &[2, 8], &[8, 3]],
        ),
        (
            "bhqd,bhkd->bhqk",
            "bhqd,bhkd->bhqk",
            &[&[2, 3, 4, 5], &[2, 3, 6, 5]],
        ),
        (
            "...ij,...jk->...ik",
            "xyij,yjk->xyik",
            &[&[2, 1, 3, 4], &[5, 4, 2]],
        ),
        ("...i->...", "xyi->xy", &[&[2, 3, 4]]),
        ("i...->...", "ixy->xy", &[&[2, 3, 4]]),
        (
            "ij...,jk...->ik...",
            "ijx,jkx->ikx",
            &[&[2, 3, 4], &[3, 2, 4]],
        ),
        ("ij,jk->ik", "ij,jk->ik", &[&[3, 0], &[0, 4]]),
        ("ij,jk->ik", "ij,jk->ik", &[&[0, 2], &[2, 4]]),
        ("i,i->i", "i,i->i", &[&[6], &[6]]),
        ("", "->", &[&[]]),
        (",->", ",->", &[&[], &[]]),
        ("i,->i", "i,->i", &[&[4], &[]]),
    ];
    for (spec, refspec, shapes) in cases {
        let vals: Vec<Vec<f64>> = shapes.iter().map(|s| random(&mut rng, s)).collect();
        let ops: Vec<Array> = vals
            .iter()
            .zip(shapes.iter())
            .map(|(v, s)| arr(dev, v, s, DType::F32))
            .collect();
        let refs: Vec<(&[f64], &[usize])> = vals
            .iter()
            .zip(shapes.iter())
            .map(|(v, s)| (v.as_slice(), *s))
            .collect();
        let (shape, want) = brute(refspec, &refs);
        let opr: Vec<&Array> = ops.iter().collect();
        for opt in [
            EinsumOptimize::Auto,
            EinsumOptimize::Greedy,
            EinsumOptimize::None,
        ] {
            let what = format!("einsum('{spec}') of {shapes:?} ({opt:?})");
            let got = ok(&what, wmx::einsum_with(spec, &opr, opt));
            check(&what, &got, &shape, &want, 1e-5);
        }
    }
    // Integer operands (no float product): exact.
    let what = "einsum('ij,jk->ik') of i32";
    let a = ok(
        what,
        Array::from_slice_on(&[1i32, -2, 3, 4, 5, -6], &[2, 3], dev),
    );
    let b = ok(
        what,
        Array::from_slice_on(&[7i32, 8, -9, 10, 11, 12], &[3, 2], dev),
    );
    let c = ok(what, wmx::einsum("ij,jk->ik", &[&a, &b]));
    assert_eq!(c.dtype(), DType::I32, "{what}");
    assert_eq!(ok(what, c.to_vec::<i32>()), vec![58, 24, -83, 10], "{what}");
    // Transposed and sliced views, and f16 operands (promoted with f32).
    let what = "einsum of views";
    let v = random(&mut rng, &[4, 6]);
    let x = arr(dev, &v, &[4, 6], DType::F32);
    let xt = ok(what, x.t()); // [6, 4]
    let xs = ok(
        what,
        x.slice(&[wmx::Slice::ALL, wmx::Slice::new(Some(1), None, 2)]),
    ); // [4, 3]
    let h = ok(what, xs.astype(DType::F16));
    let got = ok(what, wmx::einsum("ji,ik->jk", &[&xt, &h]));
    assert_eq!(got.dtype(), DType::F32, "{what}: promoted dtype");
    let xsv: Vec<f64> = (0..4)
        .flat_map(|i| (0..3).map(move |k| (i, k)))
        .map(|(i, k)| v[i * 6 + 1 + 2 * k] as f32 as f64)
        .map(|x| wmx::f16::from_f64(x).to_f64())
        .collect();
    let xtv: Vec<f64> = (0..6)
        .flat_map(|j| (0..4).map(move |i| (j, i)))
        .map(|(j, i)| v[i * 6 + j])
        .collect();
    let (shape, want) = brute("ji,ik->jk", &[(&xtv, &[6, 4]), (&xsv, &[4, 3])]);
    check(what, &got, &shape, &want, 1e-5);
}

/// `einsum_path`: the search's order is no costlier than opt_einsum's optimal
/// path (`tests/goldens/numpy_linalg.py`), which, given as an explicit path,
/// computes the same values.
pub fn einsum_paths(dev: &Device) {
    let mut rng = Rng::new(0x9a75);
    let cases: &[(&str, &str, &[&[usize]])] = &[
        ("path0", "ab,bc,cd->ad", &[&[30, 2], &[2, 40], &[40, 5]]),
        (
            "path1",
            "ea,fb,abcd,gc,hd->efgh",
            &[&[6, 5], &[7, 4], &[5, 4, 3, 2], &[8, 3], &[9, 2]],
        ),
        (
            "path2",
            "ab,bc,cd,de,ef->af",
            &[&[10, 2], &[2, 12], &[12, 3], &[3, 14], &[14, 4]],
        ),
        (
            "path3",
            "abc,bd,ce,ad->e",
            &[&[4, 5, 6], &[5, 7], &[6, 3], &[4, 7]],
        ),
    ];
    for (name, spec, shapes) in cases {
        let what = format!("einsum_path('{spec}')");
        let (_, steps) = PATHS.get(name);
        let theirs: Vec<(usize, usize)> = steps
            .chunks(2)
            .map(|p| (p[0] as usize, p[1] as usize))
            .collect();
        let ours = ok(&what, wmx::einsum_path(spec, shapes, EinsumOptimize::Auto));
        let given = ok(
            &what,
            wmx::einsum_path(spec, shapes, EinsumOptimize::Path(theirs.clone())),
        );
        assert_eq!(given.steps, theirs, "{what}: the given path is kept");
        assert!(
            ours.flops <= given.flops * (1.0 + 1e-12),
            "{what}: ours {:?} costs {}, opt_einsum's {:?} {}",
            ours.steps,
            ours.flops,
            theirs,
            given.flops
        );
        let greedy = ok(
            &what,
            wmx::einsum_path(spec, shapes, EinsumOptimize::Greedy),
        );
        assert!(
            greedy.flops <= 4.0 * given.flops,
            "{what}: greedy {:?} costs {}, opt_einsum's {}",
            greedy.steps,
            greedy.flops,
            given.flops
        );
        let vals: Vec<Vec<f64>> = shapes.iter().map(|s| random(&mut rng, s)).collect();
        let ops: Vec<Array> = vals
            .iter()
            .zip(shapes.iter())
            .map(|(v, s)| arr(dev, v, s, DType::F32))
            .collect();
        let opr: Vec<&Array> = ops.iter().collect();
        let a = ok(&what, wmx::einsum(spec, &opr));
        let b = ok(
            &what,
            wmx::einsum_with(spec, &opr, EinsumOptimize::Path(theirs)),
        );
        let want = ok(&what, b.to_vec_as::<f64>());
        check(&what, &a, b.shape(), &want, 1e-4);
    }
    let what = "a path that does not fit";
    wmx::with_device(dev, || -> Result<()> {
        let x = wmx::ones(&[2, 2], DType::F32)?;
        super::expect_err(
            what,
            wmx::einsum_with(
                "ij,jk,kl->il",
                &[&x, &x, &x],
                EinsumOptimize::Path(vec![(0, 3)]),
            ),
            &["einsum", "path"],
        );
        super::expect_err(
            what,
            wmx::einsum_with(
                "ij,jk,kl->il",
                &[&x, &x, &x],
                EinsumOptimize::Path(vec![(0, 1)]),
            ),
            &["einsum", "path", "leaves 2 operands"],
        );
        Ok(())
    })
    .unwrap();
}

/// `tensordot`, `inner`, `outer`, `kron`, `trace`, `diagonal` and `diag` against
/// the same sums written on the host (through `brute` or loops).
pub fn contraction_helpers(dev: &Device) {
    let mut rng = Rng::new(0x7e45);
    let dt = DType::F32;
    let va = random(&mut rng, &[3, 4, 5]);
    let vb = random(&mut rng, &[4, 5, 2]);
    let (a, b) = (arr(dev, &va, &[3, 4, 5], dt), arr(dev, &vb, &[4, 5, 2], dt));
    let shapes = [
        (&va[..], &[3usize, 4, 5][..]),
        (&vb[..], &[4usize, 5, 2][..]),
    ];
    for (what, axes, spec) in [
        ("tensordot(axes=2)", TensorAxes::Last(2), "ijk,jkl->il"),
        (
            "tensordot(axes=([1],[0]))",
            TensorAxes::Pairs(vec![1], vec![0]),
            "ijk,jlm->iklm",
        ),
        ("tensordot(axes=0)", TensorAxes::Last(0), "ijk,lmn->ijklmn"),
        (
            "tensordot(axes=([2,1],[1,0]))",
            TensorAxes::Pairs(vec![2, -2], vec![1, 0]),
            "ijk,jkl->il",
        ),
    ] {
        let (s, w) = brute(spec, &shapes);
        check(what, &ok(what, wmx::tensordot(&a, &b, axes)), &s, &w, 1e-5);
    }
    let what = "inner";
    let vc = random(&mut rng, &[2, 5]);
    let c = arr(dev, &vc, &[2, 5], dt);
    let (s, w) = brute("ijk,lk->ijl", &[(&va, &[3, 4, 5]), (&vc, &[2, 5])]);
    check(what, &ok(what, wmx::inner(&a, &c)), &s, &w, 1e-5);
    let what = "outer";
    let (s, w) = brute("i,j->ij", &[(&vc, &[10]), (&vb[..6], &[6])]);
    let b6 = arr(dev, &vb[..6], &[2, 3], dt);
    check(what, &ok(what, wmx::outer(&c, &b6)), &s, &w, 1e-6);
    let what = "kron";
    let vk = random(&mut rng, &[3, 2]);
    let k = arr(dev, &vk, &[3, 2], dt);
    let got = ok(what, wmx::kron(&c, &k));
    let mut want = vec![0.0; 6 * 10];
    for i in 0..2 {
        for j in 0..5 {
            for p in 0..3 {
                for q in 0..2 {
                    want[(i * 3 + p) * 10 + j * 2 + q] = vc[i * 5 + j] * vk[p * 2 + q];
                }
            }
        }
    }
    check(what, &got, &[6, 10], &want, 1e-6);
    let what = "kron of a vector and a matrix";
    let v3 = arr(dev, &vk[..3], &[3], dt);
    let got = ok(what, wmx::kron(&v3, &k));
    let want: Vec<f64> = (0..3)
        .flat_map(|p| (0..2 * 3).map(move |j| (p, j)))
        .map(|(p, j)| vk[p * 2 + j % 2] * vk[j / 2])
        .collect();
    check(what, &got, &[3, 6], &want, 1e-6);
    // diagonal/trace with offsets and axes, on a [3, 4, 5] array.
    for (off, a1, a2) in [
        (0, 1, 2),
        (1, 1, 2),
        (-2, 1, 2),
        (2, 0, 2),
        (-1, 2, 0),
        (9, 1, 2),
    ] {
        let what = format!("diagonal(offset {off}, axes {a1}, {a2})");
        let sh = [3usize, 4, 5];
        let other = 3 - a1 - a2;
        let (n1, n2) = (sh[a1 as usize], sh[a2 as usize]);
        let len = if off >= 0 {
            n1.min(n2.saturating_sub(off as usize))
        } else {
            n1.saturating_sub((-off) as usize).min(n2)
        };
        let mut want = vec![];
        for o in 0..sh[other as usize] {
            for d in 0..len {
                let (i1, i2) = if off >= 0 {
                    (d, d + off as usize)
                } else {
                    (d + (-off) as usize, d)
                };
                let mut idx = [0usize; 3];
                idx[other as usize] = o;
                idx[a1 as usize] = i1;
                idx[a2 as usize] = i2;
                want.push(va[(idx[0] * 4 + idx[1]) * 5 + idx[2]]);
            }
        }
        let got = ok(&what, wmx::diagonal(&a, off, a1, a2));
        check(&what, &got, &[sh[other as usize], len], &want, 0.0);
        let tr: Vec<f64> = want.chunks(len.max(1)).map(|c| c.iter().sum()).collect();
        let tr = if len == 0 {
            vec![0.0; sh[other as usize]]
        } else {
            tr
        };
        let got = ok(&what, wmx::trace(&a, off, a1, a2));
        check(&what, &got, &[sh[other as usize]], &tr, 1e-6);
    }
    for k in [-2isize, 0, 1, 3] {
        let what = format!("diag(v, {k})");
        let v = arr(dev, &vk[..4], &[4], dt);
        let m = 4 + k.unsigned_abs();
        let mut want = vec![0.0; m * m];
        for (i, &x) in vk[..4].iter().enumerate() {
            let (r, c) = if k >= 0 {
                (i, i + k as usize)
            } else {
                (i + (-k) as usize, i)
            };
            want[r * m + c] = x;
        }
        let got = ok(&what, wmx::diag(&v, k));
        check(&what, &got, &[m, m], &want, 0.0);
        let back = ok(&what, wmx::diag(&got, k));
        check(&what, &back, &[4], &vk[..4], 0.0);
    }
    // Errors name the op and the values.
    let x = arr(dev, &va, &[3, 4, 5], dt);
    super::expect_err(
        "einsum operand count",
        wmx::einsum("ij,jk->ik", &[&x]),
        &["einsum", "2 operands", "1 were given"],
    );
    super::expect_err(
        "einsum axis count",
        wmx::einsum("ij->i", &[&x]),
        &["einsum", "'ij'", "3"],
    );
    super::expect_err(
        "einsum sizes",
        wmx::einsum("ijk,ij->k", &[&x, &c]),
        &["einsum", "'i'", "3", "2"],
    );
    super::expect_err(
        "einsum bad character",
        wmx::einsum("ij1->i", &[&x]),
        &["einsum", "'1'"],
    );
    super::expect_err(
        "einsum output label",
        wmx::einsum("ijk->iz", &[&x]),
        &["einsum", "no operand"],
    );
    super::expect_err(
        "einsum output twice",
        wmx::einsum("ijk->ii", &[&x]),
        &["einsum", "twice"],
    );
    super::expect_err(
        "tensordot sizes",
        wmx::tensordot(&x, &c, TensorAxes::Last(1)),
        &["tensordot", "5", "2"],
    );
    super::expect_err(
        "diagonal of a vector",
        wmx::diagonal(&c.reshape(&[-1]).unwrap(), 0, 0, 1),
        &["diagonal", "[10]"],
    );
    super::expect_err(
        "diagonal same axes",
        wmx::diagonal(&x, 0, 1, -2),
        &["diagonal", "axis 1"],
    );
    super::expect_err("diag of 3-D", wmx::diag(&x, 0), &["diag", "[3, 4, 5]"]);
}

/// Gradients of einsum (a product, a trace, a diagonal) against derivatives
/// written out on the host; vmap of einsum equals the batched einsum.
pub fn grad_einsum(dev: &Device) {
    let mut rng = Rng::new(0x6e1);
    let dt = DType::F32;
    let (va, vb) = (random(&mut rng, &[3, 4]), random(&mut rng, &[4, 4]));
    let (a, b) = (arr(dev, &va, &[3, 4], dt), arr(dev, &vb, &[4, 4], dt));
    // f(a, b) = sum_ik (a @ b)_ik * (ik weight) + trace(b) * 2 + sum(diag(b) ** 2)
    let vw = random(&mut rng, &[3, 4]);
    let w = arr(dev, &vw, &[3, 4], dt);
    let f = move |xs: &[Array]| -> Result<Vec<Array>> {
        let p = wmx::einsum("ij,jk,ik->", &[&xs[0], &xs[1], &w])?;
        let t = wmx::einsum("ii", &[&xs[1]])?;
        let d = wmx::einsum("ii->i", &[&xs[1]])?;
        let s = wmx::sum(&wmx::multiply(&d, &d)?, None, false)?;
        Ok(vec![wmx::add(
            &wmx::add(&p, &wmx::multiply(&t, &wmx::scalar(2.0, DType::F32)?)?)?,
            &s,
        )?])
    };
    let g = ok(
        "grad einsum",
        wmx::grad(f, &[0, 1])(&[a.clone(), b.clone()]),
    );
    // da_ij = sum_k b_jk w_ik; db_jk = sum_i a_ij w_ik + 2 δ_jk + 2 b_jj δ_jk.
    let mut da = vec![0.0; 12];
    let mut db = vec![0.0; 16];
    for i in 0..3 {
        for j in 0..4 {
            for k in 0..4 {
                da[i * 4 + j] += vb[j * 4 + k] * vw[i * 4 + k];
                db[j * 4 + k] += va[i * 4 + j] * vw[i * 4 + k];
            }
        }
    }
    for j in 0..4 {
        db[j * 4 + j] += 2.0 + 2.0 * vb[j * 4 + j];
    }
    check("grad einsum: da", &g[0], &[3, 4], &da, 1e-5);
    check("grad einsum: db", &g[1], &[4, 4], &db, 1e-5);
    let what = "vmap einsum";
    let vx = random(&mut rng, &[5, 3, 4]);
    let x = arr(dev, &vx, &[5, 3, 4], dt);
    let bb = b.clone();
    let f = move |xs: &[Array]| -> Result<Vec<Array>> {
        Ok(vec![wmx::einsum("ij,jk->ki", &[&xs[0], &bb])?])
    };
    let v = ok(what, wmx::vmap(f, &[Some(0)], &[0])(&[x]));
    let (s, want) = brute("nij,jk->nki", &[(&vx, &[5, 3, 4]), (&vb, &[4, 4])]);
    check(what, &v[0], &s, &want, 1e-5);
}
