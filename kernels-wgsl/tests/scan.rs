//! The one-pass float scan (decoupled look-back with fallback) on long lines, with
//! the predecessors' words waited for (the default) and with every silent
//! predecessor's total recomputed (0 polls), against exact host scans: the data
//! (small integers, ±1 for products, NaN for max/min) keeps every f32 result exact,
//! so both paths must agree bit for bit. Its own binary: the poll knob is global.

mod common;
use common::*;
use wmx_kernels::{Batch, Contig, DType, Kernels, Strided};

/// Inclusive or exclusive scan of each row of `x` ([rows, len]), forwards or not.
fn host_scan(op: &str, x: &[f64], len: usize, reverse: bool, inclusive: bool) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for (r, row) in x.chunks(len).enumerate() {
        let mut acc = match op {
            "sum" => 0.0,
            "prod" => 1.0,
            "max" => f64::NEG_INFINITY,
            _ => f64::INFINITY,
        };
        for s in 0..len {
            let p = if reverse { len - 1 - s } else { s };
            let before = acc;
            let v = row[p];
            acc = match op {
                "sum" => acc + v,
                "prod" => acc * v,
                _ if v.is_nan() || acc.is_nan() => f64::NAN,
                "max" => acc.max(v),
                _ => acc.min(v),
            };
            out[r * len + p] = if inclusive { acc } else { before };
        }
    }
    out
}

fn run(k: &Kernels, op: &str, x: &[f64], rows: usize, len: usize, reverse: bool, inclusive: bool) {
    let buf = k.upload(&encode(x, DType::F32)).unwrap();
    let out = k.create_buffer((x.len() * 4) as u64, None).unwrap();
    let shape = [rows, len];
    let strides = [len as isize, 1];
    let mut b = Batch::new();
    let view = Strided {
        buffer: &buf,
        dtype: DType::F32,
        shape: &shape,
        strides: &strides,
        offset: 0,
    };
    let dst = Contig {
        buffer: &out,
        dtype: DType::F32,
        shape: &shape,
    };
    k.scan(&mut b, op, &view, 1, reverse, inclusive, &dst)
        .unwrap();
    k.submit(b).unwrap();
    let got = decode(
        &k.read_blocking(&out, 0, (x.len() * 4) as u64).unwrap(),
        DType::F32,
    );
    let want = host_scan(op, x, len, reverse, inclusive);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g == w || (g.is_nan() && w.is_nan()),
            "{op} scan of {rows} x {len} (reverse {reverse}, inclusive {inclusive}): element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn onepass_scans_are_exact_with_and_without_waiting() {
    let Some(k) = k() else { return };
    let mut rng = Rng(0x0e5ca);
    // 3 rows of 50 001 (25 blocks each, the last partial) and one of 700 001.
    for (rows, len) in [(3usize, 50_001usize), (1, 700_001)] {
        let n = rows * len;
        let small: Vec<f64> = (0..n).map(|_| rng.below(5) as f64 - 2.0).collect();
        let signs: Vec<f64> = (0..n)
            .map(|_| if rng.below(2) == 0 { 1.0 } else { -1.0 })
            .collect();
        let mut wide: Vec<f64> = (0..n).map(|_| rng.below(1 << 20) as f64 - 5e5).collect();
        wide[(len + len / 2) % n] = f64::NAN;
        for polls in [64, 0] {
            k.set_scan_look_spins(polls);
            for (reverse, inclusive) in [(false, true), (true, false), (true, true)] {
                run(k, "sum", &small, rows, len, reverse, inclusive);
                run(k, "prod", &signs, rows, len, reverse, inclusive);
                run(k, "max", &wide, rows, len, reverse, inclusive);
                run(k, "min", &wide, rows, len, reverse, inclusive);
            }
        }
        k.set_scan_look_spins(64);
    }
}
