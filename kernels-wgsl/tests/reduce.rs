//! GPU tests of reductions and arg reductions against f64/i128 references, on the
//! subgroup path and on the workgroup-memory fallback.
//!
//! Tolerances: integer, bool, max/min, all/any and arg results are exact. Float sums
//! allow 1e-6 * sum(|x|) absolute plus one ulp of the output dtype; float products
//! (data in [0.9, 1.1]) 1e-4 relative plus one ulp.

mod common;
use common::*;
use wmx_kernels::{ArgReduceOp, Batch, Contig, DType, Error, Kernels, ReduceOp, Strided, Wgpu};
use wmx_reference::reference;
use wmx_reference::val::Val;

struct Case {
    label: String,
    out: wgpu::Buffer,
    dtype: DType,
    want: Vec<f64>,
    atol: Vec<f64>,
    rtol: f64,
}

fn finish(k: &Kernels, batch: Batch<Wgpu>, cases: Vec<Case>) {
    k.submit(batch).unwrap();
    for c in cases {
        let n = c.want.len();
        let got = decode(
            &k.read_blocking(&c.out, 0, (n * c.dtype.size()) as u64)
                .unwrap(),
            c.dtype,
        );
        for (i, (g, w)) in got.iter().zip(&c.want).enumerate() {
            assert!(
                close(*g, *w, c.atol[i], c.rtol),
                "{}: output {i} of {n}: got {g} want {w}",
                c.label
            );
        }
    }
}

/// Groups the logical elements of `vals` (row-major over `shape`) by output index
/// (kept dims row-major), each group in row-major order of the reduced dims.
fn groups(vals: &[f64], shape: &[usize], axes: &[usize]) -> Vec<Vec<f64>> {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let nk: usize = kept.iter().map(|d| shape[*d]).product();
    let mut g = vec![Vec::new(); nk];
    let mut idx = vec![0usize; shape.len()];
    for v in vals {
        let mut o = 0;
        for d in &kept {
            o = o * shape[*d] + idx[*d];
        }
        g[o].push(*v);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    g
}

/// The shared reference (`wmx_reference`) of a reduction of `xs` (values of `d`),
/// rounded to the output dtype.
fn ref_reduce(op: ReduceOp, d: DType, xs: &[f64]) -> f64 {
    let od = op.out_dtype(d);
    let vals: Vec<Val> = xs.iter().map(|&x| val(x, d)).collect();
    match reference::reduce(op.name(), d, &vals).expect("a defined reduction") {
        Val::I(i) => i as f64,
        Val::F(x) => round_to(x, od),
    }
}

/// The shared reference of an arg reduction: the index.
fn ref_arg(op: ArgReduceOp, d: DType, xs: &[f64]) -> f64 {
    let vals: Vec<Val> = xs.iter().map(|&x| val(x, d)).collect();
    reference::arg_reduce(op.name(), &vals).expect("a non-empty axis") as f64
}

type Shape = (&'static [usize], &'static [usize], Lay);

/// (shape, axes, layout) cases for the full matrix.
const SMALL: &[Shape] = &[
    (&[0], &[0], Lay::Contig),
    (&[1], &[0], Lay::Contig),
    (&[3], &[0], Lay::Offset(1)),
    (&[1000], &[0], Lay::Contig),
    (&[1000], &[0], Lay::Neg),
    (&[40, 25], &[1], Lay::Contig),
    (&[40, 25], &[0], Lay::Contig),
    (&[40, 25], &[1], Lay::Trans),
    (&[40, 25], &[0, 1], Lay::Trans),
    (&[40, 25], &[], Lay::Offset(3)),
    (&[40, 25], &[0], Lay::BcastRow),
    (&[6, 7, 8], &[0, 2], Lay::Contig),
    (&[6, 7, 8], &[1], Lay::Trans),
    (&[6, 7, 8], &[0, 2], Lay::Neg),
    (&[5, 0, 3], &[1], Lay::Contig),
    (&[3, 5000], &[1], Lay::Contig),
    // Column sums with vec4 loads (aligned row pitch), partial last workgroup.
    (&[33, 64], &[0], Lay::Contig),
    (&[7, 1000], &[0], Lay::Contig),
    (&[9, 48], &[0], Lay::Contig),
];

fn data_for(op: ReduceOp) -> Data {
    if op == ReduceOp::Prod {
        Data::Range(0.9, 1.1)
    } else {
        Data::Range(-10.0, 10.0)
    }
}

fn reduce_cases(
    k: &Kernels,
    op: ReduceOp,
    d: DType,
    shapes: &[(&[usize], &[usize], Lay)],
    seed: u64,
) {
    let mut rng = Rng(seed);
    let mut batch = Batch::new();
    let mut cases = Vec::new();
    let od = op.out_dtype(d);
    for (shape, axes, lay) in shapes {
        let nred: usize = axes.iter().map(|a| shape[*a]).product();
        if nred == 0 && matches!(op, ReduceOp::Max | ReduceOp::Min) {
            continue;
        }
        let x = Input::new(k, &mut rng, d, shape, *lay, data_for(op), true);
        let g = groups(&x.vals, shape, axes);
        let out = k.create_buffer((g.len() * od.size()) as u64, None).unwrap();
        let out_shape = [g.len()];
        k.reduce(
            &mut batch,
            op,
            &x.view(),
            axes,
            &Contig {
                buffer: &out,
                window: None,
                dtype: od,
                shape: &out_shape,
            },
        )
        .unwrap();
        let want = g.iter().map(|xs| ref_reduce(op, d, xs)).collect();
        let float_acc = d.is_float() && matches!(op, ReduceOp::Sum | ReduceOp::Prod);
        let atol = g
            .iter()
            .map(|xs| {
                if float_acc && op == ReduceOp::Sum {
                    1e-6 * xs.iter().map(|v| v.abs()).sum::<f64>()
                } else {
                    0.0
                }
            })
            .collect();
        let rtol = if float_acc {
            ulp(od) + if op == ReduceOp::Prod { 1e-4 } else { 0.0 }
        } else {
            0.0
        };
        cases.push(Case {
            label: format!("reduce {op} {d} {shape:?} axes {axes:?} {lay:?}"),
            out,
            dtype: od,
            want,
            atol,
            rtol,
        });
    }
    finish(k, batch, cases);
}

fn arg_cases(k: &Kernels, op: ArgReduceOp, d: DType, shapes: &[(&[usize], usize, Lay)], seed: u64) {
    let mut rng = Rng(seed);
    let mut batch = Batch::new();
    let mut cases = Vec::new();
    for (shape, axis, lay) in shapes {
        // Few distinct values, so ties (first index wins) are common.
        let data = if d.is_float() {
            Data::Eighths
        } else {
            Data::Range(-3.0, 3.0)
        };
        let x = Input::new(k, &mut rng, d, shape, *lay, data, true);
        let g = groups(&x.vals, shape, &[*axis]);
        let out = k.create_buffer((g.len() * 4) as u64, None).unwrap();
        let out_shape = [g.len()];
        k.arg_reduce(
            &mut batch,
            op,
            &x.view(),
            *axis,
            &Contig {
                buffer: &out,
                window: None,
                dtype: DType::U32,
                shape: &out_shape,
            },
        )
        .unwrap();
        let want = g.iter().map(|xs| ref_arg(op, d, xs)).collect();
        cases.push(Case {
            label: format!("{op} {d} {shape:?} axis {axis} {lay:?}"),
            out,
            dtype: DType::U32,
            want,
            atol: vec![0.0; g.len()],
            rtol: 0.0,
        });
    }
    finish(k, batch, cases);
}

const ARG_SHAPES: &[(&[usize], usize, Lay)] = &[
    (&[1], 0, Lay::Contig),
    (&[3], 0, Lay::Neg),
    (&[1000], 0, Lay::Offset(2)),
    (&[40, 25], 1, Lay::Contig),
    (&[40, 25], 0, Lay::Contig),
    (&[40, 25], 1, Lay::Trans),
    (&[6, 7, 8], 1, Lay::Trans),
    (&[6, 1, 8], 1, Lay::Contig),
    (&[40, 25], 0, Lay::BcastRow),
];

fn all_reductions(k: &Kernels) {
    for (i, &op) in ReduceOp::ALL.iter().enumerate() {
        for d in DTYPES {
            if k.supports(d) {
                reduce_cases(k, op, d, SMALL, 100 + i as u64);
            }
        }
    }
    for (i, &op) in ArgReduceOp::ALL.iter().enumerate() {
        for d in DTYPES {
            if k.supports(d) {
                arg_cases(k, op, d, ARG_SHAPES, 200 + i as u64);
            }
        }
    }
}

#[test]
fn reductions_all_ops_all_dtypes() {
    let Some(k) = k() else { return };
    all_reductions(k);
}

#[test]
fn reductions_workgroup_memory_fallback() {
    let Some(k) = k_fallback() else { return };
    assert!(!k.target().subgroups);
    all_reductions(k);
}

#[test]
fn subgroups_are_used_when_available() {
    let Some(k) = k() else { return };
    eprintln!("caps: {:?}", k.caps());
    assert_eq!(k.target().subgroups, k.caps().subgroups);
}

#[test]
fn reductions_big_sizes() {
    let Some(k) = k() else { return };
    const N: usize = (1 << 20) + 3;
    const HUGE: usize = 65535 * 256 + 3;
    for d in DTYPES {
        if k.supports(d) {
            let op = if d == DType::Bool {
                ReduceOp::Any
            } else {
                ReduceOp::Sum
            };
            reduce_cases(
                k,
                op,
                d,
                &[
                    (&[N], &[0], Lay::Contig),
                    (&[1024, 1024], &[0], Lay::Contig),
                ],
                300,
            );
            reduce_cases(k, ReduceOp::Max, d, &[(&[N], &[0], Lay::Neg)], 301);
        }
    }
    // Two-pass reduce-all with > 65535 * 256 elements; rows: > 65535 workgroups.
    reduce_cases(
        k,
        ReduceOp::Sum,
        DType::F32,
        &[
            (&[HUGE], &[0], Lay::Contig),
            (&[70000, 20], &[1], Lay::Contig),
        ],
        302,
    );
    arg_cases(
        k,
        ArgReduceOp::ArgMax,
        DType::F32,
        &[(&[N], 0, Lay::Contig), (&[70000, 20], 1, Lay::Contig)],
        303,
    );
    // Tall matrices, columns reduced: chunks of rows, then their partials (every
    // op and dtype; 9000 x 12 has three vec4 columns, 20001 x 64 one workgroup).
    for (i, &op) in ReduceOp::ALL.iter().enumerate() {
        for d in DTYPES {
            if k.supports(d) {
                reduce_cases(
                    k,
                    op,
                    d,
                    &[
                        (&[20001, 64], &[0], Lay::Contig),
                        (&[9000, 12], &[0], Lay::Contig),
                        (&[3, 9001, 16], &[1], Lay::Contig),
                    ],
                    310 + i as u64,
                );
            }
        }
    }
    if let Some(kf) = k_fallback() {
        reduce_cases(
            kf,
            ReduceOp::Sum,
            DType::F32,
            &[(&[N], &[0], Lay::Contig)],
            304,
        );
        arg_cases(
            kf,
            ArgReduceOp::ArgMin,
            DType::F32,
            &[(&[N], 0, Lay::Neg)],
            305,
        );
    }
}

#[test]
fn reduction_errors() {
    let Some(k) = k() else { return };
    let buf = k.create_buffer(64, None).unwrap();
    let out = k.create_buffer(64, None).unwrap();
    let x = Strided {
        buffer: &buf,
        window: None,
        dtype: DType::F32,
        shape: &[4, 0],
        strides: &[0, 1],
        offset: 0,
    };
    let mut b = Batch::new();
    let o = Contig {
        buffer: &out,
        window: None,
        dtype: DType::F32,
        shape: &[4],
    };
    assert!(matches!(
        k.reduce(&mut b, ReduceOp::Max, &x, &[1], &o),
        Err(Error::Shape(_))
    ));
    let y = Strided {
        window: None,
        shape: &[4, 2],
        strides: &[2, 1],
        ..x
    };
    // sum of u8 writes u32.
    let yu8 = Strided {
        window: None,
        dtype: DType::U8,
        ..y
    };
    assert!(matches!(
        k.reduce(
            &mut b,
            ReduceOp::Sum,
            &yu8,
            &[1],
            &Contig {
                window: None,
                dtype: DType::U8,
                ..o
            }
        ),
        Err(Error::Shape(_))
    ));
    assert!(matches!(
        k.reduce(&mut b, ReduceOp::Sum, &y, &[1, 0], &o),
        Err(Error::Shape(_))
    ));
    assert!(matches!(
        k.arg_reduce(&mut b, ArgReduceOp::ArgMax, &y, 1, &o),
        Err(Error::Shape(_))
    ));
    assert!(b.is_empty());
}

/// f16/bf16 column sums store their rounded results from the final pass (two to
/// a word), not through an f32 scratch and a cast dispatch; their values are
/// checked with every op and dtype above.
#[test]
fn narrow_column_sums_need_no_cast_pass() {
    let Some(k) = k() else { return };
    let mut rng = Rng(320);
    let cases: &[(&[usize], &[usize], usize)] = &[
        (&[33, 64], &[0], 1),      // vec4 columns, one pass
        (&[40, 25], &[0], 1),      // element columns, odd count
        (&[20001, 64], &[0], 2),   // vec4 columns in row chunks, then their partials
        (&[3, 9001, 16], &[1], 2), // element columns in row chunks
        (&[40, 25], &[1], 2),      // rows: a pass and a cast (workgroups share words)
    ];
    for d in [DType::F16, DType::BF16] {
        if !k.supports(d) {
            continue;
        }
        for &(shape, axes, want) in cases {
            let x = Input::new(
                k,
                &mut rng,
                d,
                shape,
                Lay::Contig,
                Data::Range(-1.0, 1.0),
                true,
            );
            let kept: usize = (0..shape.len())
                .filter(|a| !axes.contains(a))
                .map(|a| shape[a])
                .product();
            let out = k.create_buffer((kept * d.size()) as u64, None).unwrap();
            let mut batch = Batch::new();
            let o = Contig {
                buffer: &out,
                window: None,
                dtype: d,
                shape: &[kept],
            };
            k.reduce(&mut batch, ReduceOp::Sum, &x.view(), axes, &o)
                .unwrap();
            assert_eq!(batch.len(), want, "sum {d} {shape:?} over {axes:?}");
        }
    }
}
