//! Joining and indexing: concatenate and what is built on it (stack, split, pad,
//! roll, tile, repeat, flatten, swapaxes, moveaxis), take / take_along_axis,
//! scatter / scatter_add / put_along_axis / add_along_axis and one_hot, on every
//! dtype against host index arithmetic (`HostArr`), with views as inputs, negative
//! and out-of-range indices, duplicates, packed dtypes sharing words, empty and
//! large arrays; their derivatives against derivatives written out on the host.

use crate::host::{HostArr, indices};
use crate::rng::{Domain, Rng, values};
use crate::val::{Val, make_ok, read_ok};
use wmx_core::{self as wmx, Array, DType, Device, PadMode, Result, Slice};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// Asserts `got` has `want`'s shape and identical elements (NaN payloads aside).
fn same(what: &str, got: &Array, want: &HostArr) {
    assert_eq!(got.shape(), &want.shape[..], "{what}: shape");
    let g = read_ok(got, what);
    for (k, (a, e)) in g.iter().zip(&want.data).enumerate() {
        assert!(
            a.same(*e),
            "{what}: element {k} (index {:?}): got {a}, want {e}",
            indices(&want.shape)[k]
        );
    }
}

fn random(dev: &Device, rng: &mut Rng, dt: DType, shape: &[usize]) -> (Array, HostArr) {
    let n = shape.iter().product();
    let v = values(rng, dt, n, Domain::Any);
    (make_ok(dev, dt, &v, shape), HostArr::new(shape, v))
}

fn ints(dev: &Device, dt: DType, xs: &[i64], shape: &[usize]) -> Array {
    let v: Vec<Val> = xs.iter().map(|&x| Val::I(x as i128)).collect();
    make_ok(dev, dt, &v, shape)
}

/// The element a gather reads for an index outside the axis.
fn fill(dt: DType) -> Val {
    match dt {
        DType::Bool => Val::I(1),
        DType::U8 => Val::I(255),
        DType::U32 => Val::I(u32::MAX as i128),
        DType::U64 => Val::I(u64::MAX as i128),
        DType::I32 => Val::I(i32::MIN as i128),
        DType::I64 => Val::I(i64::MIN as i128),
        _ => Val::F(f64::NAN),
    }
}

/// The index rule: `Some(position)` for `-n <= i < n`.
fn wrap(i: i64, n: usize) -> Option<usize> {
    let n = n as i64;
    let j = if i < 0 { i + n } else { i };
    (0..n).contains(&j).then_some(j as usize)
}

/// concatenate, stack, split, split_at, roll, tile, repeat, flatten, swapaxes,
/// moveaxis and pad on every dtype, with transposed, broadcast, negatively strided
/// and empty inputs, and inputs narrower than a packed word.
pub fn join_values(dev: &Device) {
    let mut rng = Rng::new(0x10);
    for dt in DType::REAL {
        if !super::supported(dev, dt) {
            continue;
        }
        let what = format!("concatenate on {dt}");
        let (a, ha) = random(dev, &mut rng, dt, &[2, 3, 5]);
        // [2, 4, 5] as the transpose of [5, 4, 2].
        let (bt, hbt) = random(dev, &mut rng, dt, &[5, 4, 2]);
        let b = ok(&what, wmx::transpose(&bt, None));
        let hb = hbt.transpose(&[2, 1, 0]);
        // [2, 1, 5] broadcast from one row; [2, 2, 5] read backwards; [2, 0, 5].
        let (r, hr) = random(dev, &mut rng, dt, &[1, 1, 5]);
        let c = ok(&what, wmx::broadcast_to(&r, &[2, 1, 5]));
        let hc = hr.broadcast_to(&[2, 1, 5]);
        let (e, he) = random(dev, &mut rng, dt, &[2, 2, 5]);
        let d = ok(&what, wmx::slice(&e, &[Slice::ALL, Slice::reversed()]));
        let hd = he.slice(&[(None, None, 1), (None, None, -1)]);
        let z = ok(&what, wmx::zeros(&[2, 0, 5], dt));
        let parts = [
            (&a, &ha),
            (&b, &hb),
            (&z, &HostArr::new(&[2, 0, 5], vec![])),
            (&c, &hc),
            (&d, &hd),
        ];
        let got = ok(
            &what,
            wmx::concatenate(&parts.iter().map(|p| p.0).collect::<Vec<_>>(), 1),
        );
        let want = HostArr::from_fn(&[2, 10, 5], |i| {
            let (mut k, mut at) = (i[1], 0);
            while k >= parts[at].1.shape[1] {
                k -= parts[at].1.shape[1];
                at += 1;
            }
            parts[at].1.get(&[i[0], k, i[2]])
        });
        same(&what, &got, &want);
        // Last axis, widths 1, 2 and 3: packed words shared between inputs.
        let (x1, h1) = random(dev, &mut rng, dt, &[3, 1]);
        let (x2, h2) = random(dev, &mut rng, dt, &[3, 2]);
        let (x3, h3) = random(dev, &mut rng, dt, &[3, 3]);
        let got = ok(&what, wmx::concatenate(&[&x1, &x2, &x3, &x1], -1));
        let want = HostArr::from_fn(&[3, 7], |i| match i[1] {
            0 => h1.get(&[i[0], 0]),
            1 | 2 => h2.get(&[i[0], i[1] - 1]),
            6 => h1.get(&[i[0], 0]),
            k => h3.get(&[i[0], k - 3]),
        });
        same(&format!("{what}, last axis"), &got, &want);
        // Axis 0 of 1-D arrays of odd lengths.
        let got = ok(
            &what,
            wmx::concatenate(
                &[
                    &ok(&what, wmx::reshape(&x3, &[-1])),
                    &ok(&what, wmx::reshape(&x1, &[-1])),
                ],
                0,
            ),
        );
        let mut flat = h3.data.clone();
        flat.extend(h1.data.iter().copied());
        same(&format!("{what}, 1-D"), &got, &HostArr::new(&[12], flat));

        // Whole-word ranges (lengths 4 and 8): the word-copy path for every dtype.
        let (w1, hw1) = random(dev, &mut rng, dt, &[4]);
        let (w2, hw2) = random(dev, &mut rng, dt, &[8]);
        let got = ok(&what, wmx::concatenate(&[&w1, &w2, &w1], 0));
        let mut flat = hw1.data.clone();
        flat.extend(hw2.data.iter().chain(&hw1.data).copied());
        same(
            &format!("{what}, whole words"),
            &got,
            &HostArr::new(&[16], flat),
        );
        // More inputs than one dispatch takes (four): whole words (word copies, then
        // one input alone), and odd lengths whose packed words span two dispatches'
        // inputs; one input a view at an offset.
        let w3 = ok(&what, wmx::slice(&w2, &[Slice::range(4, 8)]));
        let hw3: Vec<_> = hw2.data[4..].to_vec();
        let got = ok(&what, wmx::concatenate(&[&w1, &w2, &w3, &w1, &w2], 0));
        let mut flat = hw1.data.clone();
        for h in [&hw2.data[..], &hw3, &hw1.data, &hw2.data] {
            flat.extend(h.iter().copied());
        }
        same(
            &format!("{what}, five whole-word inputs"),
            &got,
            &HostArr::new(&[28], flat),
        );
        let odd = [&x3, &x1, &x3, &x1, &x2, &x3].map(|x| ok(&what, wmx::reshape(x, &[-1])));
        let got = ok(&what, wmx::concatenate(&odd.iter().collect::<Vec<_>>(), 0));
        let mut flat = Vec::new();
        for h in [&h3, &h1, &h3, &h1, &h2, &h3] {
            flat.extend(h.data.iter().copied());
        }
        same(
            &format!("{what}, six odd lengths"),
            &got,
            &HostArr::new(&[flat.len()], flat),
        );

        // Along a late axis (rows of the output), five row-major inputs of two
        // columns: whole words for 32- and 16-bit dtypes, each dispatch writing only
        // its inputs' columns of every row.
        let cols: Vec<_> = (0..5).map(|_| random(dev, &mut rng, dt, &[3, 2])).collect();
        let got = ok(
            &what,
            wmx::concatenate(&cols.iter().map(|c| &c.0).collect::<Vec<_>>(), 1),
        );
        let want = HostArr::from_fn(&[3, 10], |i| cols[i[1] / 2].1.get(&[i[0], i[1] % 2]));
        same(&format!("{what}, five column blocks"), &got, &want);

        let what = format!("stack on {dt}");
        let got = ok(
            &what,
            wmx::stack(
                &[
                    &x2,
                    &ok(&what, wmx::slice(&x3, &[Slice::ALL, Slice::range(1, 3)])),
                ],
                1,
            ),
        );
        let want = HostArr::from_fn(&[3, 2, 2], |i| match i[1] {
            0 => h2.get(&[i[0], i[2]]),
            _ => h3.get(&[i[0], i[2] + 1]),
        });
        same(&what, &got, &want);

        let what = format!("roll on {dt}");
        for (shift, axis) in [
            (2isize, Some(1isize)),
            (-7, Some(2)),
            (3, None),
            (0, Some(0)),
        ] {
            let got = ok(&what, wmx::roll(&a, shift, axis));
            let want = match axis {
                Some(ax) => HostArr::from_fn(&[2, 3, 5], |i| {
                    let mut j = i.to_vec();
                    let n = ha.shape[ax as usize] as isize;
                    j[ax as usize] = (i[ax as usize] as isize - shift).rem_euclid(n) as usize;
                    ha.get(&j)
                }),
                None => HostArr::new(
                    &[2, 3, 5],
                    (0..30)
                        .map(|k| ha.data[(k + 30 - shift as usize) % 30])
                        .collect(),
                ),
            };
            same(&format!("{what} by {shift} on {axis:?}"), &got, &want);
        }

        let what = format!("pad on {dt}");
        let widths = [(1usize, 2usize), (2, 0)];
        for mode in [PadMode::Constant(3.0), PadMode::Edge, PadMode::Reflect] {
            let got = ok(
                &what,
                wmx::pad(
                    &b.slice(&[Slice::range(1, 2)])
                        .and_then(|s| wmx::squeeze(&s, Some(&[0])))
                        .unwrap(),
                    &widths,
                    mode,
                ),
            );
            // b[1] is [4, 5]; padded to [7, 7].
            let src = HostArr::from_fn(&[4, 5], |i| hb.get(&[1, i[0], i[1]]));
            let want = HostArr::from_fn(&[7, 7], |i| {
                let pos = |k: usize, lo: usize, n: usize| -> Option<usize> {
                    let k = k as i64 - lo as i64;
                    let n = n as i64;
                    match mode {
                        PadMode::Constant(_) => (0..n).contains(&k).then_some(k as usize),
                        PadMode::Edge => Some(k.clamp(0, n - 1) as usize),
                        PadMode::Reflect => {
                            let p = 2 * (n - 1);
                            let m = k.rem_euclid(p);
                            Some(if m < n { m } else { p - m } as usize)
                        }
                    }
                };
                match (pos(i[0], 1, 4), pos(i[1], 2, 5)) {
                    (Some(r), Some(c)) => src.get(&[r, c]),
                    _ => crate::val::cast(Val::F(3.0), dt),
                }
            });
            same(&format!("{what} {mode:?}"), &got, &want);
        }
    }

    // Shape-only ops, on f32 and u8.
    let mut rng = Rng::new(0x11);
    for dt in [DType::F32, DType::U8] {
        let (x, hx) = random(dev, &mut rng, dt, &[2, 3]);
        let what = format!("tile on {dt}");
        let got = ok(&what, wmx::tile(&x, &[2, 1, 2]));
        same(
            &what,
            &got,
            &HostArr::from_fn(&[2, 2, 6], |i| hx.get(&[i[1] % 2, i[2] % 3])),
        );
        let got = ok(&what, wmx::tile(&x, &[3]));
        same(
            &what,
            &got,
            &HostArr::from_fn(&[2, 9], |i| hx.get(&[i[0], i[1] % 3])),
        );
        let what = format!("repeat on {dt}");
        let got = ok(&what, wmx::repeat(&x, 2, Some(1)));
        same(
            &what,
            &got,
            &HostArr::from_fn(&[2, 6], |i| hx.get(&[i[0], i[1] / 2])),
        );
        let got = ok(&what, wmx::repeat(&x, 3, None));
        same(
            &what,
            &got,
            &HostArr::new(&[18], (0..18).map(|k| hx.data[k / 3]).collect()),
        );
        let what = format!("split on {dt}");
        let xt = ok(&what, wmx::transpose(&x, None)); // [3, 2]
        let parts = ok(&what, wmx::split(&xt, 3, 0));
        assert_eq!(parts.len(), 3, "{what}");
        for (k, p) in parts.iter().enumerate() {
            same(&what, p, &HostArr::from_fn(&[1, 2], |i| hx.get(&[i[1], k])));
        }
        let parts = ok(&what, wmx::split_at(&x, &[1, -1, 10], 1));
        let widths: Vec<usize> = parts.iter().map(|p| p.shape()[1]).collect();
        assert_eq!(widths, [1, 1, 1, 0], "{what}: split_at widths");
        same(
            &what,
            &parts[1],
            &HostArr::from_fn(&[2, 1], |i| hx.get(&[i[0], 1])),
        );
        let what = format!("flatten, swapaxes, moveaxis on {dt}");
        let (y, hy) = random(dev, &mut rng, dt, &[2, 3, 4]);
        same(
            &what,
            &ok(&what, wmx::flatten(&y, 1, -1)),
            &hy.reshape(&[2, 12]),
        );
        same(
            &what,
            &ok(&what, wmx::flatten(&y, 0, -1)),
            &hy.reshape(&[24]),
        );
        same(
            &what,
            &ok(&what, wmx::swapaxes(&y, 0, -1)),
            &hy.transpose(&[2, 1, 0]),
        );
        same(
            &what,
            &ok(&what, wmx::moveaxis(&y, 0, 2)),
            &hy.transpose(&[1, 2, 0]),
        );
        same(
            &what,
            &ok(&what, wmx::moveaxis(&y, -1, 0)),
            &hy.transpose(&[2, 0, 1]),
        );
    }
    // Promotion: u8 joined with i32 is i32.
    let what = "concatenate u8 with i32";
    let got = ok(
        what,
        wmx::concatenate(
            &[
                &ints(dev, DType::U8, &[200, 7], &[2]),
                &ints(dev, DType::I32, &[-1], &[1]),
            ],
            0,
        ),
    );
    assert_eq!(got.dtype(), DType::I32, "{what}");
    same(
        what,
        &got,
        &HostArr::new(&[3], vec![Val::I(200), Val::I(7), Val::I(-1)]),
    );
    // A large concatenation (many workgroups per input).
    let what = "concatenate of 2 x 300001 f32";
    let xs: Vec<f32> = (0..300_001).map(|i| i as f32).collect();
    let a = ok(what, Array::from_slice_on(&xs, &[300_001], dev));
    let b = ok(what, wmx::negative(&a));
    let got: Vec<f32> = ok(what, ok(what, wmx::concatenate(&[&a, &b], 0)).to_vec());
    for (k, &v) in got.iter().enumerate() {
        let want = if k < 300_001 {
            k as f32
        } else {
            -((k - 300_001) as f32)
        };
        assert_eq!(v.to_bits(), want.to_bits(), "{what}: element {k}");
    }
}

/// take and take_along_axis on every dtype with i32, u32 and u8 indices: negative
/// and out-of-range indices, transposed data, broadcast indices, empty indices, a
/// large take.
pub fn gather_values(dev: &Device) {
    let mut rng = Rng::new(0x20);
    for dt in DType::REAL {
        if !super::supported(dev, dt) {
            continue;
        }
        for it in [DType::I32, DType::U32, DType::U8, DType::I64] {
            if !super::supported(dev, it) {
                continue;
            }
            let what = format!("take of {dt} by {it}");
            let (x, hx) = random(dev, &mut rng, dt, &[4, 7]);
            let raw: Vec<i64> = match it {
                DType::I32 => vec![0, 6, -1, -7, 3, 7, -8, 2, 5],
                // Out of range however the words are read: 2^32 + 2, -2^32 - 1, MIN.
                DType::I64 => vec![0, 6, -1, (1 << 32) + 2, 3, -(1 << 32) - 1, i64::MIN, 2, -7],
                DType::U8 => vec![0, 6, 1, 200, 3, 7, 255, 2, 5],
                _ => vec![0, 6, 1, 4_000_000_000, 3, 7, 9, 2, 5],
            };
            let idx = ints(dev, it, &raw, &[3, 3]);
            let got = ok(&what, wmx::take(&x, &idx, Some(1)));
            let want = HostArr::from_fn(&[4, 3, 3], |i| match wrap(raw[i[1] * 3 + i[2]], 7) {
                Some(k) => hx.get(&[i[0], k]),
                None => fill(dt),
            });
            same(&what, &got, &want);
            // Flattened, and along axis 0 of the transpose.
            let got = ok(&what, wmx::take(&x, &idx, None));
            let want = HostArr::from_fn(&[3, 3], |i| match wrap(raw[i[0] * 3 + i[1]], 28) {
                Some(k) => hx.data[k],
                None => fill(dt),
            });
            same(&format!("{what}, flattened"), &got, &want);
            let xt = ok(&what, wmx::transpose(&x, None)); // [7, 4]
            let got = ok(&what, wmx::take(&xt, &idx, Some(0)));
            let want = HostArr::from_fn(&[3, 3, 4], |i| match wrap(raw[i[0] * 3 + i[1]], 7) {
                Some(k) => hx.get(&[i[2], k]),
                None => fill(dt),
            });
            same(&format!("{what}, transposed"), &got, &want);
            // A scalar index removes the axis.
            let s = ints(dev, it, &[2], &[]);
            let got = ok(&what, wmx::take(&x, &s, Some(-1)));
            same(
                &format!("{what}, scalar index"),
                &got,
                &HostArr::from_fn(&[4], |i| hx.get(&[i[0], 2])),
            );

            let what = format!("take_along_axis of {dt} by {it}");
            // Per-row indices [4, 3] along axis 1, and one column broadcast [1, 3].
            let raw2: Vec<i64> = (0..12).map(|k| raw[k % 9]).collect();
            let idx2 = ints(dev, it, &raw2, &[4, 3]);
            let got = ok(&what, wmx::take_along_axis(&x, &idx2, Some(1)));
            let want = HostArr::from_fn(&[4, 3], |i| match wrap(raw2[i[0] * 3 + i[1]], 7) {
                Some(k) => hx.get(&[i[0], k]),
                None => fill(dt),
            });
            same(&what, &got, &want);
            let row = ints(dev, it, &raw[..3], &[1, 3]);
            let got = ok(
                &what,
                wmx::take_along_axis(&xt, &ok(&what, wmx::transpose(&row, None)), Some(0)),
            );
            let want = HostArr::from_fn(&[3, 4], |i| match wrap(raw[i[0]], 7) {
                Some(k) => hx.get(&[i[1], k]),
                None => fill(dt),
            });
            same(&format!("{what}, broadcast indices"), &got, &want);
            // Empty indices.
            let e = ok(&what, wmx::zeros(&[0], it));
            let got = ok(&what, wmx::take(&x, &e, Some(1)));
            assert_eq!(got.shape(), &[4, 0], "{what}: empty");
            ok(&what, got.eval());
        }
    }
    // A large take: 2^18 random indices into 1000 f32 values (index arithmetic at
    // scale; many workgroups).
    let what = "take of 2^18 indices";
    let n = 1 << 18;
    let data: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let ids: Vec<i32> = (0..n).map(|_| rng.int_in(-1000, 999) as i32).collect();
    let x = ok(what, Array::from_slice_on(&data, &[1000], dev));
    let idx = ok(what, Array::from_slice_on(&ids, &[n], dev));
    let got: Vec<f32> = ok(what, ok(what, wmx::take(&x, &idx, Some(0))).to_vec());
    for (k, (&g, &i)) in got.iter().zip(&ids).enumerate() {
        let j = if i < 0 { i + 1000 } else { i } as usize;
        assert_eq!(g, data[j], "{what}: element {k} (index {i})");
    }
}

/// scatter, scatter_add, put_along_axis and add_along_axis on every dtype:
/// negative and dropped indices, duplicates (exact sums of small integers; a set
/// keeps one of the candidates), neighbours in one packed word written by
/// different invocations, views as inputs, a large histogram.
pub fn scatter_values(dev: &Device) {
    let mut rng = Rng::new(0x30);
    for dt in DType::REAL {
        if !super::supported(dev, dt) {
            continue;
        }
        let small = |rng: &mut Rng, n: usize| -> Vec<Val> {
            (0..n)
                .map(|_| match dt {
                    DType::Bool => Val::I(rng.int_in(0, 1)),
                    DType::U8 | DType::U32 | DType::U64 => Val::I(rng.int_in(0, 3)),
                    d if d.is_float() => Val::F(rng.int_in(-3, 3) as f64),
                    _ => Val::I(rng.int_in(-3, 3)),
                })
                .collect()
        };
        let add = |a: Val, b: Val| -> Val {
            match (a, b) {
                (Val::F(x), Val::F(y)) => Val::F(x + y),
                (Val::I(x), Val::I(y)) => Val::I(crate::val::wrap(dt, x + y)),
                _ => unreachable!(),
            }
        };
        for it in [DType::I32, DType::U32, DType::U8, DType::I64] {
            if !super::supported(dev, it) {
                continue;
            }
            let what = format!("scatter of {dt} by {it}");
            let bv = small(&mut rng, 30);
            let base = make_ok(dev, dt, &bv, &[5, 6]);
            let hb = HostArr::new(&[5, 6], bv.clone());
            // Rows 4, 1 (as -4 for i32) and a dropped one.
            let raw: Vec<i64> = match it {
                DType::I32 => vec![4, -4, 5],
                DType::I64 => vec![4, -4, (1 << 32) + 1],
                _ => vec![4, 1, 250],
            };
            let idx = ints(dev, it, &raw, &[3]);
            let uv = small(&mut rng, 18);
            let upd = make_ok(dev, dt, &uv, &[3, 6]);
            let got = ok(&what, wmx::scatter(&base, &idx, &upd, 0));
            let want = HostArr::from_fn(&[5, 6], |i| match i[0] {
                4 => uv[i[1]],
                1 => uv[6 + i[1]],
                _ => hb.get(i),
            });
            same(&what, &got, &want);
            // A broadcast scalar update.
            let one = make_ok(dev, dt, &[crate::val::cast(Val::I(1), dt)], &[]);
            let got = ok(&what, wmx::scatter(&base, &idx, &one, 0));
            let want = HostArr::from_fn(&[5, 6], |i| match i[0] {
                4 | 1 => crate::val::cast(Val::I(1), dt),
                _ => hb.get(i),
            });
            same(&format!("{what}, scalar update"), &got, &want);

            // Along the last axis of a transposed base: every element of a row of a
            // packed dtype is written by its own invocation, some twice.
            let what = format!("add_along_axis of {dt} by {it}");
            let bt = ok(&what, wmx::transpose(&base, None)); // [6, 5]
            let cols: Vec<i64> = vec![0, 1, 2, 3, 4, 0, 2, 4];
            let idx2 = ints(dev, it, &cols, &[1, 8]);
            let vv = small(&mut rng, 48);
            let vals = make_ok(dev, dt, &vv, &[6, 8]);
            if dt != DType::Bool {
                let got = ok(&what, wmx::add_along_axis(&bt, &idx2, &vals, 1));
                let mut want = hb.transpose(&[1, 0]);
                for r in 0..6 {
                    for (k, &c) in cols.iter().enumerate() {
                        let at = r * 5 + c as usize;
                        want.data[at] = add(want.data[at], vv[r * 8 + k]);
                    }
                }
                same(&what, &got, &want);
                let what = format!("scatter_add of {dt} by {it}");
                let dup = ints(dev, it, &[0, 2, 0, 0], &[4]);
                let u4 = small(&mut rng, 20);
                let got = ok(
                    &what,
                    wmx::scatter_add(&base, &dup, &make_ok(dev, dt, &u4, &[5, 4]), 1),
                );
                let mut want = hb.clone();
                for r in 0..5 {
                    for (k, c) in [0, 2, 0, 0].iter().enumerate() {
                        want.data[r * 6 + c] = add(want.data[r * 6 + c], u4[r * 4 + k]);
                    }
                }
                same(&what, &got, &HostArr::new(&[5, 6], want.data));
            } else {
                super::expect_err(
                    &what,
                    wmx::add_along_axis(&bt, &idx2, &vals, 1),
                    &["scatter_add", "bool"],
                );
            }
            // A set with duplicates keeps one of the candidates.
            let what = format!("put_along_axis of {dt} by {it}");
            let got = ok(&what, wmx::put_along_axis(&bt, &idx2, &vals, 1));
            let g = read_ok(&got, &what);
            let ht = hb.transpose(&[1, 0]);
            for r in 0..6 {
                for c in 0..5 {
                    let cands: Vec<Val> = cols
                        .iter()
                        .enumerate()
                        .filter(|&(_, &cc)| cc as usize == c)
                        .map(|(k, _)| vv[r * 8 + k])
                        .collect();
                    let v = g[r * 5 + c];
                    if cands.is_empty() {
                        assert!(v.same(ht.get(&[r, c])), "{what}: [{r}, {c}] changed");
                    } else {
                        assert!(
                            cands.iter().any(|e| e.same(v)),
                            "{what}: [{r}, {c}] = {v}, not one of {cands:?}"
                        );
                    }
                }
            }
            // The inputs are untouched.
            same(&format!("{what}: base after"), &base, &hb);
        }
    }
    // A histogram: 2^17 ones added into 1000 bins (exact in f32 and i32).
    let n = 1 << 17;
    let ids: Vec<i32> = (0..n).map(|_| rng.int_in(0, 999) as i32).collect();
    let mut counts = vec![0i32; 1000];
    for &i in &ids {
        counts[i as usize] += 1;
    }
    let idx = ok("hist", Array::from_slice_on(&ids, &[n], dev));
    for dt in [DType::F32, DType::I32] {
        let what = format!("scatter_add histogram in {dt}");
        let zeros = ok(&what, wmx::with_device(dev, || wmx::zeros(&[1000], dt)));
        let one = ok(&what, wmx::with_device(dev, || wmx::ones(&[], dt)));
        let got = ok(&what, wmx::scatter_add(&zeros, &idx, &one, 0));
        let g: Vec<f64> = ok(&what, got.to_vec_f64());
        for (k, (&a, &e)) in g.iter().zip(&counts).enumerate() {
            assert_eq!(a, e as f64, "{what}: bin {k}");
        }
    }
}

/// one_hot for every index dtype, with negative and too-large indices (zero rows).
pub fn one_hot_values(dev: &Device) {
    for it in [DType::I32, DType::U32, DType::U8, DType::I64] {
        if !super::supported(dev, it) {
            continue;
        }
        let what = format!("one_hot of {it}");
        let raw: Vec<i64> = match it {
            DType::I32 => vec![0, 2, -1, 3, 1, 9],
            DType::I64 => vec![0, 2, -1, 3, (1 << 32) + 1, 9],
            _ => vec![0, 2, 255, 3, 1, 9],
        };
        let idx = ints(dev, it, &raw, &[2, 3]);
        for dt in [DType::F32, DType::U8, DType::Bool] {
            let got = ok(&what, wmx::one_hot(&idx, 4, dt));
            assert_eq!(got.dtype(), dt, "{what}");
            let want = HostArr::from_fn(&[2, 3, 4], |i| {
                crate::val::cast(Val::I((raw[i[0] * 3 + i[1]] == i[2] as i64) as i128), dt)
            });
            same(&format!("{what} as {dt}"), &got, &want);
        }
    }
    // u8 indices with more than 256 classes.
    let idx = ints(dev, DType::U8, &[255, 0], &[2]);
    let got = ok("one_hot 300", wmx::one_hot(&idx, 300, DType::I32));
    let g: Vec<f64> = ok("one_hot 300", got.to_vec_f64());
    assert_eq!(g.iter().filter(|&&v| v == 1.0).count(), 2, "one_hot 300");
    assert_eq!((g[255], g[300]), (1.0, 1.0), "one_hot 300");
}

/// Bad input gets an error naming the op and the offending values.
pub fn index_errors(dev: &Device) {
    use super::expect_err;
    let x = ok(
        "x",
        wmx::with_device(dev, || wmx::zeros(&[2, 3], DType::F32)),
    );
    let fidx = ok("f", wmx::with_device(dev, || wmx::zeros(&[2], DType::F32)));
    let bidx = ok("b", wmx::with_device(dev, || wmx::zeros(&[2], DType::Bool)));
    let idx = ints(dev, DType::I32, &[0, 1], &[2]);
    expect_err(
        "take by f32",
        wmx::take(&x, &fidx, Some(0)),
        &["take", "f32"],
    );
    expect_err(
        "take by bool",
        wmx::take(&x, &bidx, Some(0)),
        &["take", "bool"],
    );
    expect_err(
        "take axis 2",
        wmx::take(&x, &idx, Some(2)),
        &["take", "axis 2"],
    );
    let s = ok("s", wmx::with_device(dev, || wmx::zeros(&[], DType::F32)));
    expect_err(
        "take of a scalar on an axis",
        wmx::take(&s, &idx, Some(0)),
        &["take", "zero-dimensional"],
    );
    expect_err(
        "take_along_axis rank",
        wmx::take_along_axis(&x, &idx, Some(0)),
        &["take_along_axis", "[2, 3]", "[2]"],
    );
    let i23 = ints(dev, DType::I32, &[0; 6], &[3, 2]);
    expect_err(
        "take_along_axis extents",
        wmx::take_along_axis(&x, &i23, Some(0)),
        &["take_along_axis", "[2, 3]", "[3, 2]"],
    );
    expect_err(
        "scatter update shape",
        wmx::scatter(
            &x,
            &idx,
            &ok(
                "u",
                wmx::with_device(dev, || wmx::zeros(&[2, 4], DType::F32)),
            ),
            0,
        ),
        &["scatter", "[2, 4]", "[2, 3]"],
    );
    let xb = ok(
        "xb",
        wmx::with_device(dev, || wmx::zeros(&[2, 3], DType::Bool)),
    );
    expect_err(
        "scatter_add on bool",
        wmx::scatter_add(&xb, &idx, &xb, 0),
        &["scatter_add", "bool"],
    );
    expect_err(
        "scatter by f32",
        wmx::scatter(&x, &fidx, &x, 0),
        &["scatter", "f32"],
    );
    expect_err(
        "one_hot of f32",
        wmx::one_hot(&fidx, 3, DType::F32),
        &["one_hot", "f32"],
    );
    expect_err(
        "concatenate nothing",
        wmx::concatenate(&[], 0),
        &["concatenate", "at least one"],
    );
    let y = ok(
        "y",
        wmx::with_device(dev, || wmx::zeros(&[3, 3], DType::F32)),
    );
    expect_err(
        "concatenate shapes",
        wmx::concatenate(&[&x, &y], 1),
        &["concatenate", "[2, 3]", "[3, 3]"],
    );
    expect_err(
        "concatenate scalars",
        wmx::concatenate(&[&s, &s], 0),
        &["concatenate", "zero-dimensional"],
    );
    expect_err(
        "concatenate axis",
        wmx::concatenate(&[&x, &x], 2),
        &["concatenate", "axis 2"],
    );
    expect_err(
        "stack shapes",
        wmx::stack(&[&x, &y], 0),
        &["stack", "[2, 3]", "[3, 3]"],
    );
    expect_err(
        "split uneven",
        wmx::split(&x, 2, 1),
        &["split", "3", "2 equal"],
    );
    expect_err(
        "pad widths",
        wmx::pad(&x, &[(1, 1); 3], PadMode::Edge),
        &["pad", "3", "2 dimensions"],
    );
    let e = ok(
        "e",
        wmx::with_device(dev, || wmx::zeros(&[0, 3], DType::F32)),
    );
    expect_err(
        "pad edge of empty",
        wmx::pad(&e, &[(1, 1)], PadMode::Edge),
        &["pad", "Edge", "length 0"],
    );
    expect_err(
        "flatten order",
        wmx::flatten(&x, 1, 0),
        &["flatten", "start axis 1"],
    );
    expect_err(
        "moveaxis axis",
        wmx::moveaxis(&x, 0, 5),
        &["moveaxis", "axis 5"],
    );
    // The inputs are intact and usable after the errors.
    ok("x after errors", wmx::add(&x, &x).and_then(|a| a.eval()));
}

fn f64s(a: &Array, what: &str) -> Vec<f64> {
    read_ok(a, what).into_iter().map(Val::f).collect()
}

fn close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}: element {k}: got {g}, want {w}"
        );
    }
}

/// Derivatives: concatenate (slices of the cotangent), take with duplicate and
/// dropped indices (scatter-add of the cotangent), take_along_axis, scatter (the
/// overwritten part of the base gets zero), scatter_add, pad, roll; jvp of take;
/// vmap of take_along_axis and scatter_add against a loop.
pub fn grad_index(dev: &Device) {
    let mut rng = Rng::new(0x40);
    let f32s = |n: usize, rng: &mut Rng| -> Vec<f32> {
        (0..n).map(|_| rng.uniform(-1.0, 1.0) as f32).collect()
    };
    let arr = |v: &[f32], shape: &[usize]| ok("arr", Array::from_slice_on(v, shape, dev));
    let w = f32s(4 * 5, &mut rng);
    let wa = arr(&w, &[4, 5]);
    let xv = f32s(7 * 5, &mut rng);
    let x = arr(&xv, &[7, 5]);
    let idx = ints(dev, DType::I32, &[1, 6, 1, 9], &[4]);

    // take along axis 0 with a duplicate (row 1 twice) and a dropped index (9).
    let what = "grad of take";
    let wa2 = wa.clone();
    let f = move |a: &[Array]| -> Result<Vec<Array>> {
        let t = wmx::take(&a[0], &idx, Some(0))?;
        // Dropped rows read NaN: mask them out of the loss as a user would.
        let t = wmx::where_(&wmx::isnan(&t)?, &wmx::zeros_like(&t)?, &t)?;
        Ok(vec![wmx::sum(&wmx::multiply(&t, &wa2)?, None, false)?])
    };
    let (_, g) = ok(
        what,
        wmx::vjp(
            &f,
            std::slice::from_ref(&x),
            &[ok(
                what,
                wmx::with_device(dev, || wmx::ones(&[], DType::F32)),
            )],
        ),
    );
    let mut want = vec![0.0f64; 35];
    for (k, r) in [1usize, 6, 1].iter().enumerate() {
        for c in 0..5 {
            want[r * 5 + c] += w[k * 5 + c] as f64;
        }
    }
    close(what, &f64s(&g[0], what), &want);

    // jvp of take is take of the tangent.
    let what = "jvp of take";
    let tv = f32s(35, &mut rng);
    let t = arr(&tv, &[7, 5]);
    let i2 = ints(dev, DType::I32, &[-1, 3], &[2]);
    let (_, jt) = ok(
        what,
        wmx::jvp(
            |a: &[Array]| Ok(vec![wmx::take(&a[0], &i2, Some(1))?]),
            std::slice::from_ref(&x),
            &[t],
        ),
    );
    let want: Vec<f64> = (0..7)
        .flat_map(|r| [tv[r * 5 + 4] as f64, tv[r * 5 + 3] as f64])
        .collect();
    close(what, &f64s(&jt[0], what), &want);

    // concatenate: each input gets its slice of the cotangent.
    let what = "grad of concatenate";
    let y = arr(&f32s(2 * 5, &mut rng), &[2, 5]);
    let wc = arr(&f32s(9 * 5, &mut rng), &[9, 5]);
    let wcv = f64s(&wc, what);
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        let c = wmx::concatenate(&[&a[0], &a[1]], 0)?;
        Ok(vec![wmx::sum(&wmx::multiply(&c, &wc)?, None, false)?])
    };
    let one = ok(what, wmx::with_device(dev, || wmx::ones(&[], DType::F32)));
    let (_, g) = ok(
        what,
        wmx::vjp(f, &[x.clone(), y.clone()], std::slice::from_ref(&one)),
    );
    close(what, &f64s(&g[0], what), &wcv[..35]);
    close(what, &f64s(&g[1], what), &wcv[35..]);

    // scatter (set): the base's overwritten rows get zero, the updates their rows;
    // the dropped update (index 9) gets zero.
    let what = "grad of scatter";
    let s_idx = ints(dev, DType::I32, &[2, -1, 9], &[3]);
    let u = arr(&f32s(15, &mut rng), &[3, 5]);
    let ws = arr(&f32s(35, &mut rng), &[7, 5]);
    let wsv = f64s(&ws, what);
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        let s = wmx::scatter(&a[0], &s_idx, &a[1], 0)?;
        Ok(vec![wmx::sum(&wmx::multiply(&s, &ws)?, None, false)?])
    };
    let (_, g) = ok(
        what,
        wmx::vjp(f, &[x.clone(), u.clone()], std::slice::from_ref(&one)),
    );
    let want_x: Vec<f64> = (0..35)
        .map(|k| {
            if k / 5 == 2 || k / 5 == 6 {
                0.0
            } else {
                wsv[k]
            }
        })
        .collect();
    close(what, &f64s(&g[0], what), &want_x);
    let want_u: Vec<f64> = (0..15)
        .map(|k| match k / 5 {
            0 => wsv[10 + k % 5],
            1 => wsv[30 + k % 5],
            _ => 0.0,
        })
        .collect();
    close(what, &f64s(&g[1], what), &want_u);

    // scatter_add: the base passes the cotangent through; updates read theirs.
    let what = "grad of scatter_add";
    let a_idx = ints(dev, DType::I32, &[3, 3, 0], &[3]);
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        let s = wmx::scatter_add(&a[0], &a_idx, &a[1], 0)?;
        Ok(vec![wmx::sum(&wmx::multiply(&s, &ws)?, None, false)?])
    };
    let (_, g) = ok(
        what,
        wmx::vjp(f, &[x.clone(), u.clone()], std::slice::from_ref(&one)),
    );
    close(what, &f64s(&g[0], what), &wsv);
    let want_u: Vec<f64> = (0..15).map(|k| wsv[[3, 3, 0][k / 5] * 5 + k % 5]).collect();
    close(what, &f64s(&g[1], what), &want_u);

    // pad (edge) and roll: each input element's derivative is the sum of the
    // weights of the positions it lands on.
    let what = "grad of pad and roll";
    let v = arr(&f32s(4, &mut rng), &[4]);
    let wp = arr(&f32s(7, &mut rng), &[7]);
    let wpv = f64s(&wp, what);
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        let p = wmx::roll(&wmx::pad(&a[0], &[(2, 1)], PadMode::Edge)?, 1, Some(0))?;
        Ok(vec![wmx::sum(&wmx::multiply(&p, &wp)?, None, false)?])
    };
    let (_, g) = ok(
        what,
        wmx::vjp(f, std::slice::from_ref(&v), std::slice::from_ref(&one)),
    );
    // pad: [v0 v0 v0 v1 v2 v3 v3]; roll by 1: [v3 v0 v0 v0 v1 v2 v3].
    let src = [3usize, 0, 0, 0, 1, 2, 3];
    let mut want = vec![0.0; 4];
    for (k, &s) in src.iter().enumerate() {
        want[s] += wpv[k];
    }
    close(what, &f64s(&g[0], what), &want);

    // vmap of take_along_axis and scatter_add against a loop over the batch.
    let what = "vmap of take_along_axis and scatter_add";
    let xb = arr(&f32s(3 * 7 * 5, &mut rng), &[3, 7, 5]);
    let ib = ints(
        dev,
        DType::I32,
        &(0..3 * 2 * 5)
            .map(|k| (k * 7 % 9) as i64 - 1)
            .collect::<Vec<_>>(),
        &[3, 2, 5],
    );
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        let g = wmx::take_along_axis(&a[0], &a[1], Some(0))?;
        let g = wmx::where_(&wmx::isnan(&g)?, &wmx::zeros_like(&g)?, &g)?;
        Ok(vec![wmx::add_along_axis(&a[0], &a[1], &g, 0)?])
    };
    let got = ok(
        what,
        wmx::vmap(&f, &[Some(0), Some(0)], &[0])(&[xb.clone(), ib.clone()]),
    );
    for k in 0..3 {
        let pick = |a: &Array| {
            ok(
                what,
                wmx::squeeze(
                    &ok(what, a.slice(&[Slice::range(k as isize, k as isize + 1)])),
                    Some(&[0]),
                ),
            )
        };
        let want = ok(what, f(&[pick(&xb), pick(&ib)]));
        close(
            &format!("{what}, example {k}"),
            &f64s(&pick(&got[0]), what),
            &f64s(&want[0], what),
        );
    }
}
