//! GPU tests of the scans' vec4 kernel (32-bit rows that start on a vec4) on the
//! subgroup device and on the fallback one (workgroup-memory reductions), against
//! f64 host loops: rows of several blocks (the totals pass, then blocks combining
//! the totals before them), partial last vec4s, offsets, both directions,
//! inclusive and exclusive. Data in eighths (floats) and wrapping integers: every
//! result exact.

mod common;
use common::*;
use wmx_kernels::{Batch, Contig, DType, Kernels, ReduceOp};

fn scan_case(k: &Kernels, op: ReduceOp, d: DType, shape: [usize; 2], lay: Lay, seed: u64) {
    let mut rng = Rng(seed);
    let x = Input::new(k, &mut rng, d, &shape, lay, Data::Eighths, false);
    let identity = match (op, d) {
        (ReduceOp::Sum, _) | (ReduceOp::Max, DType::U32) => 0.0,
        (_, DType::I32) => i32::MIN as f64,
        _ => f64::NEG_INFINITY,
    };
    let n = shape[0] * shape[1];
    for (reverse, inclusive) in [(false, true), (true, false), (false, false), (true, true)] {
        let out = k.create_buffer((n * 4) as u64, None).unwrap();
        let mut batch = Batch::new();
        k.scan(
            &mut batch,
            op,
            &x.view(),
            1,
            reverse,
            inclusive,
            &Contig {
                buffer: &out,
                window: None,
                dtype: op.out_dtype(d),
                shape: &shape,
            },
        )
        .unwrap();
        k.submit(batch).unwrap();
        let got = decode(
            &k.read_blocking(&out, 0, (n * 4) as u64).unwrap(),
            op.out_dtype(d),
        );
        for r in 0..shape[0] {
            let mut acc: Option<f64> = None;
            for s in 0..shape[1] {
                let p = if reverse { shape[1] - 1 - s } else { s };
                let v = x.vals[r * shape[1] + p];
                let before = acc;
                acc = Some(match (op, acc) {
                    (_, None) => v,
                    (ReduceOp::Max, Some(a)) => a.max(v),
                    (_, Some(a)) => a + v,
                });
                let want = if inclusive { acc } else { before }.unwrap_or(identity);
                let want = if d == DType::F32 {
                    want
                } else {
                    wrap(want as i128, d)
                };
                let g = got[r * shape[1] + p];
                assert_eq!(
                    g, want,
                    "{op} scan of {d} {shape:?} {lay:?} (reverse {reverse}, inclusive {inclusive}): [{r}, {p}]"
                );
            }
        }
    }
}

fn all_cases(k: &Kernels) {
    for d in [DType::F32, DType::I32, DType::U32] {
        for op in [ReduceOp::Sum, ReduceOp::Max] {
            scan_case(k, op, d, [1, 50_003], Lay::Contig, 1);
            scan_case(k, op, d, [3, 40_000], Lay::Contig, 2);
            scan_case(k, op, d, [2, 36_000], Lay::Offset(4), 3);
            scan_case(k, op, d, [5, 12], Lay::Contig, 4);
        }
    }
}

#[test]
fn vec4_scans_with_subgroups() {
    let Some(k) = k() else { return };
    all_cases(k);
}

#[test]
fn vec4_scans_in_workgroup_memory() {
    let Some(k) = k_fallback() else { return };
    all_cases(k);
}
