//! Property test of compile (proptest): random elementwise DAGs (unary, binary,
//! select, casts, axpby, scalar constants, broadcast and transposed arguments,
//! shared nodes, outputs in the middle of the graph, a reduction consumer) give
//! the same results compiled and uncompiled, and in compiled mode, on the CPU
//! and the WebGPU backend (lavapipe in CI). Integers and bools must be
//! bit-identical; floats may differ by the multiply-add contraction a GPU compiler
//! applies inside one kernel (a few ulp at the magnitude of the graph's values).
//! `WMX_PROPTEST_CASES` overrides the number of cases.

use proptest::prelude::*;
use wmx_core::{self as wmx, Array, DType, Device, Mode, Result};
use wmx_tests::gpu::devices;
use wmx_tests::rng::Rng;
use wmx_tests::val::{Val, read_ok, ulp};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: wmx_tests::props::cases(48),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A random graph: how to build it from its arguments (replayable from `seed`).
#[derive(Debug, Clone)]
struct Dag {
    seed: u64,
    shape: Vec<usize>,
    dtype: DType,
    args: Vec<Arg>,
    ops: usize,
}

#[derive(Debug, Clone, Copy)]
enum Arg {
    /// The graph's shape.
    Full,
    /// Broadcast from a shape with leading dims dropped and some set to 1.
    Broadcast(u64),
    /// The transpose of an array of the reversed shape.
    Transposed,
}

fn arg_shape(shape: &[usize], a: Arg) -> Vec<usize> {
    match a {
        Arg::Full => shape.to_vec(),
        Arg::Transposed => shape.iter().rev().copied().collect(),
        Arg::Broadcast(bits) => {
            let drop = (bits % (shape.len() as u64 + 1)) as usize;
            shape[drop..]
                .iter()
                .enumerate()
                .map(|(i, &d)| if bits >> (8 + i) & 1 == 1 { 1 } else { d })
                .collect()
        }
    }
}

fn dag() -> impl Strategy<Value = Dag> {
    (
        prop::collection::vec(1usize..=6, 0..=3),
        0usize..4,
        prop::collection::vec((0u8..3, any::<u64>()), 1..=4),
        2usize..=14,
        any::<u64>(),
    )
        .prop_map(|(shape, d, args, ops, seed)| Dag {
            seed,
            shape,
            dtype: [DType::F32, DType::F32, DType::F16, DType::I32][d],
            args: args
                .into_iter()
                .map(|(k, bits)| match k {
                    0 => Arg::Full,
                    1 => Arg::Broadcast(bits),
                    _ => Arg::Transposed,
                })
                .collect(),
            ops,
        })
}

/// Builds the graph on `a` (the arguments, views already applied): every value
/// made is kept in a pool; ops pick random operands from it. Returns the outputs.
fn build(dag: &Dag, a: &[Array]) -> Result<Vec<Array>> {
    let mut rng = Rng::new(dag.seed);
    let mut pool: Vec<Array> = Vec::new();
    for (x, kind) in a.iter().zip(&dag.args) {
        pool.push(match kind {
            Arg::Transposed => wmx::transpose(x, None)?,
            _ => x.clone(),
        });
    }
    let float = dag.dtype.is_float();
    for _ in 0..dag.ops {
        let x = pool[rng.below(pool.len() as u64) as usize].clone();
        let y = pool[rng.below(pool.len() as u64) as usize].clone();
        let v = match rng.below(9) {
            0 if float => wmx::tanh(&x)?,
            0 => wmx::negative(&x)?,
            1 if float => wmx::sin(&wmx::add(&x, &y)?)?,
            1 => wmx::abs(&x)?,
            2 => wmx::add(&x, &y)?,
            3 => wmx::subtract(&x, &y)?,
            4 if float => wmx::tanh(&wmx::multiply(&x, &y)?)?,
            4 => wmx::multiply(&x, &y)?,
            5 => wmx::maximum(&x, &(&y * if float { 0.5 } else { 2.0 }))?,
            6 => wmx::where_(&wmx::greater(&x, &y)?, &x, &wmx::minimum(&x, &y)?)?,
            7 if float => {
                // Through f16 and back: the rounding must happen in both.
                let h = wmx::astype(&wmx::sigmoid(&x)?, DType::F16)?;
                wmx::astype(&wmx::add(&h, &h)?, x.dtype())?
            }
            7 => wmx::astype(&wmx::astype(&x, DType::F32)?, DType::I32)?,
            _ if float => wmx::axpby(&x, &y, 0.75, -1.25)?,
            _ => wmx::bitwise_xor(&x, &wmx::square(&y)?)?,
        };
        pool.push(v);
    }
    // Outputs: the last value, one in the middle, and a reduction of a third.
    let n = pool.len();
    let mid = pool[(rng.below(n as u64)) as usize].clone();
    let red = wmx::sum(&pool[n / 2], None, false)?;
    Ok(vec![pool[n - 1].clone(), mid, red])
}

fn args(dag: &Dag, dev: &Device) -> Result<Vec<Array>> {
    let mut rng = Rng::new(dag.seed ^ 0x5eed);
    dag.args
        .iter()
        .map(|&k| {
            let s = arg_shape(&dag.shape, k);
            let n: usize = s.iter().product();
            let vals: Vec<f32> = (0..n)
                .map(|_| match dag.dtype {
                    DType::I32 => rng.int_in(-50_000, 50_000) as f32,
                    _ => rng.uniform(-2.0, 2.0) as f32,
                })
                .collect();
            let x = Array::from_slice_on(&vals, &s, dev)?;
            wmx::astype(&x, dag.dtype)
        })
        .collect()
}

/// Compiled results against uncompiled ones (see the module docs for the rule).
fn check(dag: &Dag, dev: &Device) {
    if dev.check_dtype(dag.dtype).is_err() || dev.check_dtype(DType::F16).is_err() {
        return;
    }
    let a = args(dag, dev).expect("arguments");
    let plain = wmx::with_mode(Mode::Lazy, || {
        let outs = build(dag, &a)?;
        wmx::eval(&outs)?;
        Ok::<_, wmx::Error>(outs)
    })
    .expect("uncompiled");
    let d = dag.clone();
    let f = wmx::compile(move |x: &[Array]| build(&d, x));
    let compiled = f.call(&a).expect("compiled");
    let in_mode = wmx::with_mode(Mode::Compiled, || {
        let outs = build(dag, &a)?;
        wmx::eval(&outs)?;
        Ok::<_, wmx::Error>(outs)
    })
    .expect("compiled mode");
    for (k, p) in plain.iter().enumerate() {
        let pv = read_ok(p, "uncompiled");
        // Tolerance at the magnitude of the values (cancellations keep it).
        let scale = pv
            .iter()
            .map(|v| v.f().abs())
            .filter(|v| v.is_finite())
            .fold(4.0f64, f64::max);
        for (what, other) in [("compiled", &compiled[k]), ("compiled mode", &in_mode[k])] {
            assert_eq!(p.dtype(), other.dtype(), "{what} output {k} dtype");
            assert_eq!(p.shape(), other.shape(), "{what} output {k} shape");
            let ov = read_ok(other, what);
            for (i, (x, y)) in pv.iter().zip(&ov).enumerate() {
                let fine = match (x, y) {
                    (Val::F(a), Val::F(b)) if a.is_finite() && b.is_finite() => {
                        // The reduction sums many: its own scale.
                        let s = if k == 2 { scale * 64.0 } else { scale };
                        (a - b).abs() <= 16.0 * ulp(p.dtype(), s)
                    }
                    _ => x.same(*y),
                };
                assert!(
                    fine,
                    "{dag:?} on {dev}: {what} output {k} element {i}: {y:?}, uncompiled {x:?}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn compiled_dags_match_uncompiled(d in dag()) {
        for dev in devices() {
            check(&d, &dev);
        }
    }
}
