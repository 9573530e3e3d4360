//! GPU tests of the radix sorts of long rows on both paths: the subgroup device (8-bit
//! passes ranked with ballots, where the adapter has subgroups) and the fallback
//! device (4-bit passes ranked in workgroup memory, the browser's), against a stable
//! sort on the host in numpy's order (NaN last, -0 equal to +0). Ties, NaN, zeros of
//! both signs, infinities and f16 subnormals; rows of partial tiles; an offset view; every dtype of
//! at most 32 bits; the indices (argsort) and the elements (sort_values), bit for bit.

mod common;
use common::*;
use std::cmp::Ordering;
use wmx_kernels::{Batch, Contig, DType, Kernels};

fn order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap(),
    }
}

fn host_argsort(v: &[f64], n: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(v.len());
    for row in v.chunks(n) {
        let mut idx: Vec<u32> = (0..n as u32).collect();
        idx.sort_by(|&i, &j| order(row[i as usize], row[j as usize]));
        out.extend(idx);
    }
    out
}

fn run(k: &Kernels, x: &Input, values: bool) -> Vec<u8> {
    let count: usize = x.shape.iter().product();
    let dtype = if values { x.dtype } else { DType::U32 };
    let bytes = (count * dtype.size()).div_ceil(4) * 4;
    let out = k.create_buffer(bytes as u64, None).unwrap();
    let o = Contig {
        buffer: &out,
        window: None,
        dtype,
        shape: &x.shape,
    };
    let mut b = Batch::new();
    if values {
        k.sort_values(&mut b, &x.view(), &o).unwrap();
    } else {
        k.argsort(&mut b, &x.view(), &o).unwrap();
    }
    k.submit(b).unwrap();
    k.read_blocking(&out, 0, bytes as u64).unwrap()
}

fn check(k: &Kernels, which: &str) {
    let mut rng = Rng(0x5eed_2026);
    for d in DTYPES {
        if d.size() > 4 || !k.supports(d) {
            continue;
        }
        // Several tiles and a partial last one; exactly one 4-bit tile's multiple;
        // a contiguous view at an offset.
        for (rows, n, lay) in [
            (2usize, 20_011usize, Lay::Contig),
            (1, 70_001, Lay::Offset(3)),
            (3, 16_384, Lay::Contig),
        ] {
            // Ties; distinct values; values around f16's subnormals (below 2^-14).
            for data in [
                Data::Eighths,
                Data::Range(-3.0, 3.0),
                Data::Range(-1e-4, 1e-4),
            ] {
                let what = format!("{which}: {d} {rows} x {n} {lay:?} {data:?}");
                let x = Input::new(k, &mut rng, d, &[rows, n], lay, data, true);
                assert!(k.sorts_values(d, n), "{what}: not the radix sort");
                let want = host_argsort(&x.vals, n);
                let got: Vec<u32> = run(k, &x, false)
                    .chunks(4)
                    .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                    .collect();
                let wrong: Vec<usize> = (0..want.len()).filter(|&p| got[p] != want[p]).collect();
                if let Some(&p) = wrong.first() {
                    // Whether the order of values is right (only ties misplaced: a
                    // stability fault) or not.
                    let value = |p: usize| x.vals[(p / n) * n + got[p] as usize % n];
                    let unordered = (1..got.len())
                        .filter(|&q| {
                            q % n != 0 && order(value(q - 1), value(q)) == Ordering::Greater
                        })
                        .count();
                    panic!(
                        "{what}: argsort wrong at {} of {} places (first {p}: got {}, want {}; \
                         {unordered} places out of order by value; got {:?}, want {:?})",
                        wrong.len(),
                        want.len(),
                        got[p],
                        want[p],
                        &got[p..(p + 8).min(got.len())],
                        &want[p..(p + 8).min(got.len())],
                    );
                }
                let sorted = decode(&run(k, &x, true), d);
                for (p, &i) in want.iter().enumerate() {
                    let e = x.vals[(p / n) * n + i as usize];
                    let a = sorted[p];
                    let same = a.to_bits() == e.to_bits() || a.is_nan() && e.is_nan();
                    assert!(same, "{what}: sort at {p}: got {a}, want {e}");
                }
            }
        }
    }
}

#[test]
fn radix_sort_with_subgroups() {
    let Some(k) = k() else { return };
    check(k, "subgroup device");
}

#[test]
fn radix_sort_without_subgroups() {
    let Some(k) = k_fallback() else { return };
    assert!(!k.target().subgroups);
    check(k, "fallback device");
}
