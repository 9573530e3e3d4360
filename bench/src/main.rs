//! GPU benchmark of wmx: bandwidth of elementwise ops and reductions, through the
//! public `wmx` API (what users get) and through the bare `wmx-kernels` library
//! (what the kernels alone reach), plus the CPU cost of a lazy 1000-op graph.
//!
//! ```text
//! cargo run --release -p wmx-bench --bin bench                        # default sizes
//! cargo run --release -p wmx-bench --bin bench -- --sizes 2^20,2^26 --json wmx.json
//! cargo run --release -p wmx-bench --bin bench -- --smoke             # CI: checks only
//! ```
//!
//! Options: `--sizes` (element counts, `2^k` allowed; default 2^10,2^16,2^20,2^24,2^26),
//! `--dtypes` (f32,f16; f64 with `--decomp`), `--paths` (wmx,kernels), `--ops` (names, comma separated; with
//! `--linalg`, case names such as `gemv,softmax`),
//! `--reps` (timed repetitions after 200 ms of warm-up, median taken; default 7), `--json FILE`, `--smoke`.
//! `WMX_BENCH_SAMPLES=1` prints every timed sample (to study the spread).
//!
//! Method: every case is first checked against a CPU f64 reference on random data
//! (never zeros), then warmed up and timed: `iters` launches (200 up to 2^20
//! elements, else 50, as `torch_ref.py`) between two GPU timestamps
//! (`TIMESTAMP_QUERY`; ticks × `Queue::get_timestamp_period`; resolved in a separate
//! encoder), or wall clock around submit + wait where the adapter has no timestamps;
//! the median of `reps` repetitions is reported. Bytes counted are those the op must
//! move (inputs read once, output written once), as in `torch_ref.py`.
//!
//! - `wmx` path: each launch is a fresh graph (`wmx::add(&x, &y)` …) evaluated with
//!   `eval()` and dropped (at most one submit per eval); the timestamps go into the
//!   backend's stream (`WebGpuBackend::write_timestamp`, like CUDA events) before
//!   the first and after the last, so GPU gaps between evals count, as launch gaps
//!   count in PyTorch's events. `submits_per_launch` records how many evals shared
//!   a submit.
//! - `kernels` path: the launches are recorded into one `Batch` (one compute pass)
//!   and bracketed by timestamps in the same command encoder.
//!
//! `--coop-peak` measures naga's cooperative-matrix multiply-adds alone (`coop.rs`);
//! `--regs` prints what the Vulkan driver reports of each kernel module (registers,
//! spills: `regs.rs`; `--ops` filters by label).
//! `--train` times a training step of an MLP, lazy and compiled (`train.rs`; `torch_train.py`
//! is the PyTorch side). `WMX_BENCH_GPT=host` gives issue 43's GPT its full structure
//! at tiny sizes (a step's time is then the host's), `WMX_BENCH_STEPS=N` more steps.
//! `--conv` times issue 36's convolution shapes forward and backward (`conv.rs`;
//! `torch_conv.py` is the cuDNN side).
//! `--attention` times issue 37's attention shapes, fused and composed
//! (`attention.rs`; `torch_attention.py` is PyTorch's side). `--quant` times
//! issue 38's quantized products (`quant.rs`; `torch_quant.py`); `--llm` a 1B
//! Llama's prefill and decode, f16 and 4-bit (`llm.rs`; `torch_llm.py`); `--decomp`
//! issue 41's batched Cholesky, solve and QR (`decomp.rs`; `numpy_decomp.py`).
//! `--int64` times i64 (word pairs in WGSL) against i32 (`int64.rs`;
//! `torch_int64.py`). `--fft` times issue 40's transforms (`fft.rs`;
//! `torch_fft.py`).
//! `--blocks` runs the building blocks (concatenate, take, cumsum, sort, uniform,
//! scatter_add; `--ops concat,take,cumsum,sort,uniform,scatter_add` picks some;
//! `WMX_BENCH_PROFILE=1` profiles one eval of each; `bench/torch_blocks.py` is
//! their PyTorch side). `--large`
//! runs 3 GiB arrays, computed in pieces past the binding limit
//! (`torch_blocks.py --large`).
//! `--smoke` runs small sizes with one repetition, checks every result and the
//! 1000-op chain, and asserts nothing about timings (`bench/tests/smoke.rs`).

mod attention;
mod blocks;
mod conv;
mod coop;
mod decomp;
#[cfg(feature = "mpi")]
mod dist;
mod fft;
mod int64;
mod linalg;
mod llm;
mod quant;
mod readback;
mod regs;
mod train;

use std::fmt::Write as _;
use std::time::Instant;
use wmx::{Array, DType, Device, DeviceKind};
use wmx_kernels as k;

type Res<T> = std::result::Result<T, String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

// ------------------------------------------------------------------ options

struct Options {
    sizes: Vec<usize>,
    dtypes: Vec<DType>,
    paths: Vec<String>,
    ops: Option<Vec<String>>,
    reps: usize,
    json: Option<String>,
    smoke: bool,
    chain: usize,
    /// Only the matrix-product cases (`linalg.rs`); smoke runs check both.
    linalg: bool,
    /// Only the building-block cases (`blocks.rs`); smoke runs check them too.
    blocks: bool,
    /// Only the 3 GiB cases (`blocks.rs`).
    large: bool,
    /// Only the cooperative-matrix probe (`coop.rs`).
    coop_peak: bool,
    /// Only the driver's statistics of the kernel modules (`regs.rs`).
    regs: bool,
    /// Only the training steps (`train.rs`).
    train: bool,
    conv: bool,
    /// Only the attention shapes (`attention.rs`).
    attention: bool,
    /// Only the quantized products (`quant.rs`).
    quant: bool,
    /// Only the batched decompositions (`decomp.rs`).
    decomp: bool,
    dist: bool,
    readback: bool,
    /// Only the language model (`llm.rs`).
    llm: bool,
    /// Only i64 against i32 (`int64.rs`).
    int64: bool,
    /// Only the FFT cases (`fft.rs`).
    fft: bool,
    /// `--sizes` was given (with `--linalg`: square products of those sizes).
    sizes_given: bool,
}

impl Options {
    fn parse(args: &[String]) -> Res<Options> {
        let mut o = Options {
            sizes: [10, 16, 20, 24, 26].iter().map(|p| 1usize << p).collect(),
            dtypes: vec![DType::F32, DType::F16],
            paths: vec!["wmx".into(), "kernels".into()],
            ops: None,
            reps: 7,
            json: None,
            smoke: false,
            chain: 1000,
            linalg: false,
            blocks: false,
            large: false,
            coop_peak: false,
            regs: false,
            train: false,
            conv: false,
            attention: false,
            quant: false,
            decomp: false,
            dist: false,
            readback: false,
            llm: false,
            int64: false,
            fft: false,
            sizes_given: false,
        };
        let mut sizes_given = false;
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            let mut val = || -> Res<String> {
                i += 1;
                args.get(i).cloned().ok_or(format!("{a} needs a value"))
            };
            match a {
                "--sizes" => {
                    o.sizes = val()?.split(',').map(parse_size).collect::<Res<_>>()?;
                    sizes_given = true;
                }
                "--dtypes" => {
                    o.dtypes = val()?
                        .split(',')
                        .map(|s| match s {
                            "f32" | "float32" => Ok(DType::F32),
                            "f16" | "float16" => Ok(DType::F16),
                            "bf16" | "bfloat16" => Ok(DType::BF16),
                            "f64" | "float64" => Ok(DType::F64),
                            _ => Err(format!("unknown dtype {s} (f32, f16, bf16, f64)")),
                        })
                        .collect::<Res<_>>()?
                }
                "--paths" => o.paths = val()?.split(',').map(str::to_string).collect(),
                "--ops" => o.ops = Some(val()?.split(',').map(str::to_string).collect()),
                "--reps" => o.reps = val()?.parse().map_err(err)?,
                "--json" => o.json = Some(val()?),
                "--chain" => o.chain = val()?.parse().map_err(err)?,
                "--smoke" => o.smoke = true,
                "--linalg" => o.linalg = true,
                "--blocks" => o.blocks = true,
                "--large" => o.large = true,
                "--coop-peak" => o.coop_peak = true,
                "--regs" => o.regs = true,
                "--train" => o.train = true,
                "--conv" => o.conv = true,
                "--attention" => o.attention = true,
                "--quant" => o.quant = true,
                "--decomp" => o.decomp = true,
                "--dist" => o.dist = true,
                "--readback" => o.readback = true,
                "--llm" => o.llm = true,
                "--int64" => o.int64 = true,
                "--fft" => o.fft = true,
                "-h" | "--help" => {
                    return Err("usage: bench [--sizes 2^10,2^20,...] [--dtypes f32,f16] \
                                [--paths wmx,kernels] [--ops add,sum_all,...] [--reps N] \
                                [--json FILE] [--smoke] [--linalg] [--blocks] [--large] [--coop-peak] [--regs [--ops matmul,...]] [--train [--ops mlp,cnn,gpt]] [--conv] [--attention] [--quant] [--decomp] [--dist [--train]] [--llm] [--int64] [--fft]"
                        .into());
                }
                _ => return Err(format!("unknown argument {a}")),
            }
            i += 1;
        }
        o.sizes_given = sizes_given && o.linalg;
        if o.dtypes.contains(&DType::F64) && !o.decomp {
            return Err("--dtypes f64 is for --decomp".into());
        }
        if o.smoke {
            if !sizes_given {
                o.sizes = vec![1 << 10, 1 << 16];
            }
            o.reps = 1;
        }
        Ok(o)
    }
}

fn parse_size(s: &str) -> Res<usize> {
    let s = s.trim();
    if let Some(p) = s.strip_prefix("2^") {
        let p: u32 = p.parse().map_err(err)?;
        return Ok(1usize << p);
    }
    s.parse().map_err(|e| format!("size {s}: {e}"))
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        _ => "float32",
    }
}

fn kdtype(d: DType) -> k::DType {
    match d {
        DType::F16 => k::DType::F16,
        _ => k::DType::F32,
    }
}

// ------------------------------------------------------------------ cases

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Copy,
    Add,
    Multiply,
    Divide,
    Exp,
    Axpby,
    AxpbyComposed,
    SumAll,
    SumLast,
    SumFirst,
    ArgmaxLast,
    /// `copy_buffer_to_buffer` (the driver's copy; kernels path only): the copy limit.
    CopyBuffer,
    /// `add` with one `Kernels::submit` per launch (kernels path only): the cost of a
    /// submit without the wmx graph, to compare with the API path's one eval per launch.
    AddSubmitEach,
    /// `sum(axpby(x, y))` (wmx path only): the forward of `GradSumAxpby`.
    SumAxpby,
    /// The gradient of `sum(axpby(x, y))` w.r.t. x and y (wmx path only).
    GradSumAxpby,
    /// `sum(gelu(x))`, tanh form written out as 9 elementwise ops and a sum (wmx
    /// path only): the forward of `GradGeluSum`.
    GeluSum,
    /// The gradient of `sum(gelu(x))` w.r.t. x (wmx path only).
    GradGeluSum,
    /// `torch_ref.py`'s `gelu10`: tanh-GELU written out as 9 elementwise ops, lazy
    /// (9 kernels; wmx path only).
    Gelu10,
    /// `gelu10` through `wmx::compile` (one fused kernel; wmx path only).
    Gelu10Compiled,
    /// `gelu_sum` through `wmx::compile` (wmx path only).
    GeluSumCompiled,
    /// A row-major copy of the transposed `[rows, cols]` view (the strided kernel;
    /// wmx path only).
    TransposeCopy,
    /// `x + y.T` on square views (the strided two-input kernel; wmx path only).
    AddTransposed,
    /// `rope` of `[b, 64, 128]` rows (base 10000; wmx path only): against the copy
    /// limit (issue 37 asks for 0.9x).
    Rope,
}

/// Ops that only the wmx path runs (transforms have no kernels-path equivalent).
fn wmx_only(op: Op) -> bool {
    matches!(
        op,
        Op::SumAxpby
            | Op::GradSumAxpby
            | Op::GeluSum
            | Op::GradGeluSum
            | Op::Gelu10
            | Op::Gelu10Compiled
            | Op::GeluSumCompiled
            | Op::TransposeCopy
            | Op::AddTransposed
            | Op::Rope
    )
}

/// Side of the square view of `n` elements (`add_transposed` runs only then).
fn square_side(n: usize) -> Option<usize> {
    let s = (n as f64).sqrt().round() as usize;
    (s * s == n).then_some(s)
}

/// `rope`'s `[b, l, d]` view of `n` elements: rows of 128 in sequences of 64 where
/// they divide, else one row.
fn rope_shape(n: usize) -> [usize; 3] {
    let d = if n.is_multiple_of(128) { 128 } else { n };
    let rows = n / d;
    let l = if rows.is_multiple_of(64) { 64 } else { rows };
    [rows / l, l, d]
}

/// Whether `op` runs on `n` elements.
fn applies(op: Op, n: usize) -> bool {
    match op {
        Op::AddTransposed => square_side(n).is_some(),
        Op::Rope => rope_shape(n)[2].is_multiple_of(2),
        _ => true,
    }
}

const OPS: [Op; 23] = [
    Op::Copy,
    Op::CopyBuffer,
    Op::Add,
    Op::AddSubmitEach,
    Op::Multiply,
    Op::Divide,
    Op::Exp,
    Op::Axpby,
    Op::AxpbyComposed,
    Op::SumAll,
    Op::SumLast,
    Op::SumFirst,
    Op::ArgmaxLast,
    Op::SumAxpby,
    Op::GradSumAxpby,
    Op::GeluSum,
    Op::GradGeluSum,
    Op::Gelu10,
    Op::Gelu10Compiled,
    Op::GeluSumCompiled,
    Op::TransposeCopy,
    Op::AddTransposed,
    Op::Rope,
];

/// Offset (elements) of the view `copy` reads on the wmx path: a sliced view is
/// the user-visible way to make a copy; 8 keeps it 16-byte aligned for f16 and f32.
const COPY_OFFSET: usize = 8;
const ALPHA: f64 = 2.0;
const BETA: f64 = 0.5;

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Copy => "copy",
            Op::CopyBuffer => "copy_buffer",
            Op::AddSubmitEach => "add_submit_each",
            Op::Add => "add",
            Op::Multiply => "multiply",
            Op::Divide => "divide",
            Op::Exp => "exp",
            Op::Axpby => "axpby",
            Op::AxpbyComposed => "axpby_composed",
            Op::SumAll => "sum_all",
            Op::SumLast => "sum_last_axis",
            Op::SumFirst => "sum_first_axis",
            Op::ArgmaxLast => "argmax_last_axis",
            Op::SumAxpby => "sum_axpby",
            Op::GradSumAxpby => "grad_sum_axpby",
            Op::GeluSum => "gelu_sum",
            Op::GradGeluSum => "grad_gelu_sum",
            Op::Gelu10 => "gelu10",
            Op::Gelu10Compiled => "gelu10_compiled",
            Op::GeluSumCompiled => "gelu_sum_compiled",
            Op::TransposeCopy => "transpose_copy",
            Op::AddTransposed => "add_transposed",
            Op::Rope => "rope",
        }
    }

    /// Bytes that must move for `n` elements of `e` bytes (as torch_ref.py counts).
    fn bytes(self, n: usize, e: usize) -> f64 {
        let n = n as f64 * e as f64;
        match self {
            Op::Copy | Op::CopyBuffer | Op::Exp | Op::TransposeCopy | Op::Rope => 2.0 * n,
            Op::AddTransposed => 3.0 * n,
            Op::Add
            | Op::AddSubmitEach
            | Op::Multiply
            | Op::Divide
            | Op::Axpby
            | Op::AxpbyComposed => 3.0 * n,
            Op::SumAll
            | Op::SumLast
            | Op::SumFirst
            | Op::ArgmaxLast
            | Op::GeluSum
            | Op::GeluSumCompiled => n,
            Op::Gelu10 | Op::Gelu10Compiled => 2.0 * n,
            // Read x and y / write both gradients; read x, write its gradient.
            Op::SumAxpby | Op::GradSumAxpby | Op::GradGeluSum => 2.0 * n,
        }
    }
}

/// Rows of the matrix view used by the axis reductions (as torch_ref.py).
fn rows_for(n: usize) -> usize {
    if n >= 1 << 20 { 1024 } else { 32 }
}

/// A measured case.
struct Row {
    path: &'static str,
    op: String,
    dtype: DType,
    n: usize,
    ms: f64,
    gbps: f64,
    extra: Vec<(&'static str, f64)>,
}

// ------------------------------------------------------------------ data and references

/// Deterministic pseudo-random 64-bit words (xorshift), from `seed`.
fn words(seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    std::iter::repeat_with(move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    })
}

/// Deterministic pseudo-random values in [-1, 1), never all zero.
fn random(n: usize, seed: u64) -> Vec<f32> {
    words(seed)
        .take(n)
        .map(|s| (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect()
}

/// Host data in `dtype`: the storage bytes and the exact values as f64.
struct Host {
    bytes: Vec<u8>,
    vals: Vec<f64>,
}

fn host(v: &[f32], dtype: DType) -> Host {
    match dtype {
        DType::F16 => {
            let h: Vec<wmx::f16> = v.iter().map(|x| wmx::f16::from_f32(*x)).collect();
            Host {
                bytes: h.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
                vals: h.iter().map(|x| x.to_f64()).collect(),
            }
        }
        DType::BF16 => {
            let h: Vec<wmx::bf16> = v.iter().map(|x| wmx::bf16::from_f32(*x)).collect();
            Host {
                bytes: h.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
                vals: h.iter().map(|x| x.to_f64()).collect(),
            }
        }
        _ => Host {
            bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            vals: v.iter().map(|x| *x as f64).collect(),
        },
    }
}

fn decode(bytes: &[u8], dtype: k::DType) -> Vec<f64> {
    match dtype {
        k::DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| wmx::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64())
            .collect(),
        k::DType::U32 => bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
    }
}

/// Expected output and the tolerance of each element.
struct Expect {
    want: Vec<f64>,
    tol: Vec<f64>,
    /// Arg reductions: compare the values at the indices (ties allowed).
    arg_of: Option<Vec<f64>>,
}

fn reference(op: Op, x: &[f64], y: &[f64], dtype: DType) -> Expect {
    let f16 = dtype == DType::F16;
    // Elementwise: relative to the value (f16 outputs round, composed ops round twice;
    // bf16 keeps 8 bits).
    let (rel, abs) = match dtype {
        DType::F16 => (4e-3, 1e-3),
        DType::BF16 => (1.6e-2, 4e-3),
        _ => (1e-5, 1e-6),
    };
    let ew = |want: Vec<f64>| {
        let tol = want.iter().map(|w| rel * w.abs() + abs).collect();
        Expect {
            want,
            tol,
            arg_of: None,
        }
    };
    let n = x.len();
    let rows = rows_for(n);
    let cols = n / rows;
    // Sums: relative to the sum of magnitudes, plus the output's rounding.
    let sums = |groups: Vec<(f64, f64)>| {
        let out_rel = if f16 { 1e-3 } else { 1e-6 };
        Expect {
            want: groups.iter().map(|g| g.0).collect(),
            tol: groups
                .iter()
                .map(|(s, a)| 1e-5 * a + out_rel * s.abs() + 1e-6)
                .collect(),
            arg_of: None,
        }
    };
    match op {
        Op::Copy => ew(x[COPY_OFFSET..].to_vec()),
        Op::CopyBuffer => ew(x.to_vec()),
        Op::Add | Op::AddSubmitEach => ew(x.iter().zip(y).map(|(a, b)| a + b).collect()),
        Op::Multiply => ew(x.iter().zip(y).map(|(a, b)| a * b).collect()),
        // Past the largest finite value (and half a unit) the quotient is infinite.
        Op::Divide => {
            let max = match dtype {
                DType::F16 => 65520.0,
                DType::BF16 => 3.3895314e38,
                _ => f32::MAX as f64,
            };
            let q = |a: f64, b: f64| {
                let q = a / b;
                if q.abs() > max {
                    q.signum() * f64::INFINITY
                } else {
                    q
                }
            };
            ew(x.iter().zip(y).map(|(a, b)| q(*a, *b)).collect())
        }
        Op::Exp => ew(x.iter().map(|a| a.exp()).collect()),
        Op::Axpby | Op::AxpbyComposed => {
            ew(x.iter().zip(y).map(|(a, b)| ALPHA * a + BETA * b).collect())
        }
        Op::SumAll => sums(vec![(x.iter().sum(), x.iter().map(|v| v.abs()).sum())]),
        Op::SumLast => sums(
            x.chunks(cols)
                .map(|r| (r.iter().sum(), r.iter().map(|v| v.abs()).sum()))
                .collect(),
        ),
        Op::SumFirst => {
            let mut s = vec![(0.0, 0.0); cols];
            for r in x.chunks(cols) {
                for (acc, v) in s.iter_mut().zip(r) {
                    acc.0 += v;
                    acc.1 += v.abs();
                }
            }
            sums(s)
        }
        Op::SumAxpby => sums(vec![(
            x.iter().zip(y).map(|(a, b)| ALPHA * a + BETA * b).sum(),
            x.iter()
                .zip(y)
                .map(|(a, b)| (ALPHA * a).abs() + (BETA * b).abs())
                .sum(),
        )]),
        Op::GradSumAxpby => ew(vec![ALPHA; n]),
        Op::TransposeCopy => ew((0..n).map(|k| x[(k % rows) * cols + k / rows]).collect()),
        Op::AddTransposed => {
            let s = square_side(n).expect("a square");
            ew((0..n).map(|k| x[k] + y[(k % s) * s + k / s]).collect())
        }
        Op::Rope => {
            let [_, l, d] = rope_shape(n);
            let inv: Vec<f32> = (0..d / 2)
                .map(|k| 10000f64.powf(-2.0 * k as f64 / d as f64) as f32)
                .collect();
            let (mut want, mut tol) = (x.to_vec(), vec![0.0; n]);
            for row in 0..n / d {
                let p = (row % l) as f32;
                for (k, f) in inv.iter().enumerate() {
                    let (i, j) = (row * d + k, row * d + k + d / 2);
                    let th = (p * f) as f64;
                    want[i] = x[i] * th.cos() - x[j] * th.sin();
                    want[j] = x[i] * th.sin() + x[j] * th.cos();
                    let t = rel * (x[i].abs() + x[j].abs()) + abs;
                    (tol[i], tol[j]) = (t, t);
                }
            }
            Expect {
                want,
                tol,
                arg_of: None,
            }
        }
        Op::Gelu10 | Op::Gelu10Compiled => {
            let mut e = ew(x.iter().map(|&v| gelu(v).0).collect());
            if f16 {
                // Nine f16 roundings.
                e.tol = e.want.iter().map(|w| 1e-2 * w.abs() + 2e-3).collect();
            }
            e
        }
        Op::GeluSum | Op::GeluSumCompiled => {
            let mut e = sums(vec![(
                x.iter().map(|&v| gelu(v).0).sum(),
                x.iter().map(|&v| gelu(v).0.abs()).sum(),
            )]);
            if f16 {
                // Nine f16 roundings per element before the f32 sum.
                let a: f64 = x.iter().map(|&v| gelu(v).0.abs()).sum();
                e.tol = vec![4e-3 * a];
            }
            e
        }
        Op::GradGeluSum => {
            let mut e = ew(x.iter().map(|&v| gelu(v).1).collect());
            if f16 {
                // Ten f16 roundings along the chain rule.
                e.tol = e.want.iter().map(|w| 2e-2 * w.abs() + 2e-3).collect();
            }
            e
        }
        Op::ArgmaxLast => {
            let want: Vec<f64> = x
                .chunks(cols)
                .map(|r| {
                    let mut best = 0;
                    for (i, v) in r.iter().enumerate() {
                        if *v > r[best] {
                            best = i;
                        }
                    }
                    best as f64
                })
                .collect();
            Expect {
                tol: vec![0.0; want.len()],
                want,
                arg_of: Some(x.to_vec()),
            }
        }
    }
}

/// The tanh form of GELU and its derivative in f64.
fn gelu(x: f64) -> (f64, f64) {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    let u = k * (x + 0.044715 * x.powi(3));
    let t = u.tanh();
    let du = k * (1.0 + 3.0 * 0.044715 * x * x);
    (
        0.5 * x * (1.0 + t),
        0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du,
    )
}

fn check(what: &str, got: &[f64], e: &Expect) -> Res<()> {
    if got.len() != e.want.len() {
        return Err(format!(
            "{what}: {} results, expected {}",
            got.len(),
            e.want.len()
        ));
    }
    let cols = if let Some(x) = &e.arg_of {
        x.len() / e.want.len().max(1)
    } else {
        0
    };
    for (i, (g, w)) in got.iter().zip(&e.want).enumerate() {
        let ok = match &e.arg_of {
            Some(x) => {
                let gi = *g as usize;
                gi < cols && x[i * cols + gi] == x[i * cols + *w as usize]
            }
            None => g == w || (g - w).abs() <= e.tol[i],
        };
        if !ok {
            return Err(format!(
                "{what}: element {i} is {g}, expected {w} (tolerance {})",
                e.tol[i]
            ));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ timing

/// GPU timestamps (two slots), where the device has them inside encoders.
struct Stamps {
    queue: wgpu::Queue,
    device: wgpu::Device,
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    period_ns: f64,
}

impl Stamps {
    fn new(kernels: &k::Kernels) -> Option<Stamps> {
        let dev = kernels.device();
        let need =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        if !dev.features().contains(need) || std::env::var_os("WMX_BENCH_WALL_CLOCK").is_some() {
            return None;
        }
        let set = dev.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("bench timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let buf = |usage| {
            dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("bench timestamps"),
                size: 16,
                usage,
                mapped_at_creation: false,
            })
        };
        Some(Stamps {
            queue: kernels.queue().clone(),
            device: dev.clone(),
            set,
            resolve: buf(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC),
            read: buf(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            period_ns: kernels.queue().get_timestamp_period() as f64,
        })
    }

    /// Writes timestamp `slot` in its own submit (after all earlier work).
    fn stamp(&self, slot: u32) {
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.write_timestamp(&self.set, slot);
        self.queue.submit([enc.finish()]);
    }

    /// Milliseconds between slot 0 and slot 1 (waits for the GPU).
    fn elapsed_ms(&self) -> Res<f64> {
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.resolve_query_set(&self.set, 0..2, &self.resolve, 0);
        enc.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, 16);
        self.queue.submit([enc.finish()]);
        let slice = self.read.slice(..);
        slice.map_async(wgpu::MapMode::Read, |_| {});
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(err)?;
        let t = {
            let v = slice.get_mapped_range().map_err(err)?;
            let t0 = u64::from_le_bytes(v[0..8].try_into().unwrap());
            let t1 = u64::from_le_bytes(v[8..16].try_into().unwrap());
            t1.wrapping_sub(t0)
        };
        self.read.unmap();
        Ok(t as f64 * self.period_ns / 1e6)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn iters_for(n: usize, smoke: bool) -> usize {
    if smoke {
        2
    } else if n <= 1 << 20 {
        200
    } else {
        50
    }
}

// ------------------------------------------------------------------ the wmx path

struct WmxCase {
    x: Array,
    y: Array,
    m: Array,
    /// Square views of x and y, where n is a square.
    sq: Option<(Array, Array)>,
    gelu10: wmx::Compiled,
    gelu_sum: wmx::Compiled,
}

/// `torch_ref.py`'s `gelu10`, op for op.
fn gelu10(x: &Array) -> wmx::Result<Array> {
    let u = wmx::multiply(x, x)?;
    let u = wmx::multiply(&u, x)?;
    let u = &u * 0.044715;
    let u = wmx::add(&u, x)?;
    let u = &u * 0.7978845608;
    let u = wmx::tanh(&u)?;
    let u = &u + 1.0;
    let u = wmx::multiply(&u, x)?;
    Ok(&u * 0.5)
}

/// `sum(gelu(x))` as a user writes it: nine elementwise ops and a sum, accumulated
/// and returned in f32 (an f16 sum of 2^20 such values overflows f16).
fn gelu_sum(x: &Array) -> wmx::Result<Array> {
    let c = wmx::multiply(&wmx::square(x)?, x)?;
    let c = wmx::add(&(&c * 0.044715), x)?;
    let t = wmx::tanh(&(&c * (2.0 / std::f64::consts::PI).sqrt()))?;
    let y = wmx::multiply(&(x * 0.5), &(&t + 1.0))?;
    wmx::sum(&wmx::astype(&y, DType::F32)?, None, false)
}

/// The arrays a case computes (the first is checked; a launch evaluates all).
fn wmx_build(op: Op, c: &WmxCase) -> wmx::Result<Vec<Array>> {
    let sum_axpby = |a: &[Array]| {
        Ok(vec![wmx::sum(
            &wmx::axpby(&a[0], &a[1], ALPHA, BETA)?,
            None,
            false,
        )?])
    };
    Ok(match op {
        Op::SumAxpby => sum_axpby(&[c.x.clone(), c.y.clone()])?,
        Op::GradSumAxpby => wmx::grad(sum_axpby, &[0, 1])(&[c.x.clone(), c.y.clone()])?,
        Op::GeluSum => vec![gelu_sum(&c.x)?],
        Op::GradGeluSum => vec![wmx::grad1(gelu_sum)(&c.x)?],
        Op::Gelu10 => vec![gelu10(&c.x)?],
        Op::Gelu10Compiled => c.gelu10.call(std::slice::from_ref(&c.x))?,
        Op::GeluSumCompiled => c.gelu_sum.call(std::slice::from_ref(&c.x))?,
        op => vec![wmx_build_one(op, c)?],
    })
}

fn wmx_build_one(op: Op, c: &WmxCase) -> wmx::Result<Array> {
    use wmx::ops::Slice;
    match op {
        Op::Copy => wmx::contiguous(&wmx::slice(
            &c.x,
            &[Slice::new(Some(COPY_OFFSET as isize), None, 1)],
        )?),
        Op::Add => wmx::add(&c.x, &c.y),
        Op::Multiply => wmx::multiply(&c.x, &c.y),
        Op::Divide => wmx::divide(&c.x, &c.y),
        Op::Exp => wmx::exp(&c.x),
        Op::Axpby => wmx::axpby(&c.x, &c.y, ALPHA, BETA),
        Op::AxpbyComposed => Ok(&(&c.x * ALPHA) + &(&c.y * BETA)),
        Op::SumAll => wmx::sum(&c.x, None, false),
        Op::SumLast => wmx::sum(&c.m, Some(&[-1]), false),
        Op::SumFirst => wmx::sum(&c.m, Some(&[0]), false),
        Op::ArgmaxLast => wmx::argmax(&c.m, -1, false),
        Op::TransposeCopy => wmx::contiguous(&c.m.t()?),
        Op::AddTransposed => {
            let (a, b) = c.sq.as_ref().expect("a square");
            wmx::add(a, &b.t()?)
        }
        Op::Rope => {
            let s = rope_shape(c.x.size()).map(|v| v as isize);
            let off = wmx::with_device(c.x.device(), || wmx::scalar(0.0, DType::I32))?;
            wmx::rope(
                &c.x.reshape(&s)?,
                s[2] as usize,
                false,
                Some(1e4),
                1.0,
                &off,
                None,
            )
        }
        Op::CopyBuffer | Op::AddSubmitEach => unreachable!("kernels path only"),
        _ => unreachable!("built by wmx_build"),
    }
}

fn bench_wmx(
    dev: &Device,
    stamps: Option<&Stamps>,
    o: &Options,
    dtype: DType,
    n: usize,
    data: (&Host, &Host),
    rows: &mut Vec<Row>,
) -> Res<()> {
    let shape = [n];
    let x = Array::from_bytes_on(data.0.bytes.clone(), &shape, dtype, dev).map_err(err)?;
    let y = Array::from_bytes_on(data.1.bytes.clone(), &shape, dtype, dev).map_err(err)?;
    let r = rows_for(n);
    let m = x.reshape(&[r as isize, (n / r) as isize]).map_err(err)?;
    let sq = match square_side(n) {
        Some(s) => {
            let s = [s as isize, s as isize];
            Some((x.reshape(&s).map_err(err)?, y.reshape(&s).map_err(err)?))
        }
        None => None,
    };
    let c = WmxCase {
        x,
        y,
        m,
        sq,
        gelu10: wmx::compile(|a: &[Array]| Ok(vec![gelu10(&a[0])?])),
        gelu_sum: wmx::compile(|a: &[Array]| Ok(vec![gelu_sum(&a[0])?])),
    };
    let iters = iters_for(n, o.smoke);
    for op in selected(o) {
        if matches!(op, Op::CopyBuffer | Op::AddSubmitEach) || !applies(op, n) {
            continue;
        }
        let what = format!("wmx {} {} n={n}", op.name(), dtype_name(dtype));
        // Check first (this also uploads the inputs and compiles the pipelines).
        let out = wmx_build(op, &c).map_err(err)?;
        let got = out[0].to_vec_f64().map_err(err)?;
        drop(out);
        check(
            &what,
            &got,
            &reference(op, &data.0.vals, &data.1.vals, dtype),
        )?;
        let run = || -> Res<()> {
            let out = wmx_build(op, &c).map_err(err)?;
            wmx::eval(&out).map_err(err)
        };
        // CPU time of the launches alone: far below the GPU time means the CPU runs
        // ahead and gaps on the GPU come from the submits themselves.
        let cpu_ms = std::cell::RefCell::new(Vec::new());
        let submits = std::cell::RefCell::new(Vec::new());
        let submit_us = std::cell::RefCell::new(Vec::new());
        let created = std::cell::RefCell::new(Vec::new());
        let gpu = wmx::webgpu::backend(dev);
        let measure = || -> Res<f64> {
            dev.synchronize().map_err(err)?;
            let ms = match (stamps, gpu) {
                (Some(s), Some(g)) => {
                    // In-stream stamps (like CUDA events): the first goes out with the
                    // first eval's submit, the second after the last eval's kernels.
                    let before = g.stats();
                    g.write_timestamp(&s.set, 0).map_err(err)?;
                    let t = Instant::now();
                    for _ in 0..iters {
                        run()?;
                    }
                    g.write_timestamp(&s.set, 1).map_err(err)?;
                    cpu_ms
                        .borrow_mut()
                        .push(t.elapsed().as_secs_f64() * 1e3 / iters as f64);
                    dev.synchronize().map_err(err)?;
                    submits
                        .borrow_mut()
                        .push((g.stats().submits - before.submits) as f64 / iters as f64);
                    let after = g.stats();
                    let subs = (after.submits - before.submits).max(1) as f64;
                    submit_us
                        .borrow_mut()
                        .push((after.submit_ns - before.submit_ns) as f64 / 1e3 / subs);
                    created.borrow_mut().push(
                        (after.buffers_created - before.buffers_created) as f64 / iters as f64,
                    );
                    s.elapsed_ms()?
                }
                _ => {
                    let t = Instant::now();
                    for _ in 0..iters {
                        run()?;
                    }
                    dev.synchronize().map_err(err)?;
                    t.elapsed().as_secs_f64() * 1e3
                }
            };
            Ok(ms / iters as f64)
        };
        let samples = sample(o, n, measure)?;
        push_row(rows, "wmx", op, dtype, n, &samples);
        let cpu = cpu_ms.into_inner();
        if !cpu.is_empty() {
            let last = rows.last_mut().expect("pushed above");
            last.extra.push(("cpu_ms", median(cpu)));
            last.extra
                .push(("submits_per_launch", median(submits.into_inner())));
            last.extra
                .push(("us_per_submit", median(submit_us.into_inner())));
            last.extra
                .push(("created_per_launch", median(created.into_inner())));
        }
    }
    Ok(())
}

/// Warm-up, then `reps` samples of ms per launch. The warm-up lasts 200 ms, or 1 s
/// from 2^22 elements: after the idle gap of the CPU reference check, the H200 ran
/// the big cases up to 2.4x slower for the first ~0.3 s of work (same buffers, SM
/// clock constant; `runs/18/samples.log`), which a 200 ms warm-up did not cover.
/// One sample in smoke runs.
fn sample(o: &Options, n: usize, measure: impl FnMut() -> Res<f64>) -> Res<Vec<f64>> {
    let warm_ms = if n >= 1 << 22 { 1000.0 } else { 200.0 };
    sample_n(o.smoke, o.reps, warm_ms, measure)
}

/// [`sample`] with the warm-up given.
fn sample_n(
    smoke: bool,
    reps: usize,
    warm_ms: f64,
    mut measure: impl FnMut() -> Res<f64>,
) -> Res<Vec<f64>> {
    let t = Instant::now();
    measure()?;
    while !smoke && t.elapsed().as_secs_f64() * 1e3 < warm_ms {
        measure()?;
    }
    (0..reps).map(|_| measure()).collect()
}

fn push_row(
    rows: &mut Vec<Row>,
    path: &'static str,
    op: Op,
    dtype: DType,
    n: usize,
    samples: &[f64],
) {
    let ms = median(samples.to_vec());
    if std::env::var_os("WMX_BENCH_SAMPLES").is_some() {
        let us: Vec<String> = samples.iter().map(|m| format!("{:.1}", m * 1e3)).collect();
        println!(
            "samples {path} {} {} n={n}: {} us",
            op.name(),
            dtype_name(dtype),
            us.join(" ")
        );
    }
    let moved = if op == Op::Copy && path == "wmx" {
        n - COPY_OFFSET
    } else {
        n
    };
    let gbps = op.bytes(moved, dtype.size()) / (ms * 1e6);
    let row = Row {
        path,
        op: op.name().into(),
        dtype,
        n,
        ms,
        gbps,
        extra: vec![
            (
                "ms_min",
                samples.iter().copied().fold(f64::INFINITY, f64::min),
            ),
            ("ms_max", samples.iter().copied().fold(0.0, f64::max)),
        ],
    };
    print_row(&row);
    rows.push(row);
}

fn print_row(r: &Row) {
    println!(
        "{:<8} {:<18} {:<8} n={:>10} {:>11.2} us {:>8.1} GB/s",
        r.path,
        r.op,
        dtype_name(r.dtype),
        r.n,
        r.ms * 1e3,
        r.gbps
    );
}

fn selected(o: &Options) -> Vec<Op> {
    OPS.iter()
        .copied()
        .filter(|op| {
            o.ops
                .as_ref()
                .is_none_or(|l| l.iter().any(|s| s == op.name()))
        })
        .collect()
}

// ------------------------------------------------------------------ the kernels path

struct KCase {
    x: wgpu::Buffer,
    y: wgpu::Buffer,
    two: wgpu::Buffer,
    half: wgpu::Buffer,
    out: wgpu::Buffer,
    t1: wgpu::Buffer,
    t2: wgpu::Buffer,
}

/// Records one launch of `op` (several dispatches for the composed axpby).
fn k_record(
    kern: &k::Kernels,
    b: &mut k::Batch<k::Wgpu>,
    op: Op,
    c: &KCase,
    d: k::DType,
    n: usize,
) -> k::Result<()> {
    let shape = [n];
    let unit = [1isize];
    let v = |buf| k::Strided {
        buffer: buf,
        window: None,
        dtype: d,
        shape: &shape,
        strides: &unit,
        offset: 0,
    };
    let out = |buf, dtype, shape| k::Contig {
        buffer: buf,
        window: None,
        dtype,
        shape,
    };
    let rows = rows_for(n);
    let cols = n / rows;
    let mshape = [rows, cols];
    let mstrides = [cols as isize, 1];
    let m = k::Strided {
        buffer: &c.x,
        window: None,
        dtype: d,
        shape: &mshape,
        strides: &mstrides,
        offset: 0,
    };
    let zero = [0isize];
    let scalar = |buf| k::Strided {
        buffer: buf,
        window: None,
        dtype: d,
        shape: &shape,
        strides: &zero,
        offset: 0,
    };
    match op {
        Op::Copy => kern.copy(b, &v(&c.x), &out(&c.out, d, &shape)),
        Op::Add | Op::AddSubmitEach => kern.binary(
            b,
            wmx_kernels::BinaryOp::Add,
            &v(&c.x),
            &v(&c.y),
            &out(&c.out, d, &shape),
        ),
        Op::Multiply => kern.binary(
            b,
            wmx_kernels::BinaryOp::Multiply,
            &v(&c.x),
            &v(&c.y),
            &out(&c.out, d, &shape),
        ),
        Op::Divide => kern.binary(
            b,
            wmx_kernels::BinaryOp::Divide,
            &v(&c.x),
            &v(&c.y),
            &out(&c.out, d, &shape),
        ),
        Op::Exp => kern.unary(
            b,
            wmx_kernels::UnaryOp::Exp,
            &v(&c.x),
            &out(&c.out, d, &shape),
        ),
        Op::Axpby => kern.axpby(b, &v(&c.x), &v(&c.y), ALPHA, BETA, &out(&c.out, d, &shape)),
        Op::AxpbyComposed => {
            kern.binary(
                b,
                wmx_kernels::BinaryOp::Multiply,
                &v(&c.x),
                &scalar(&c.two),
                &out(&c.t1, d, &shape),
            )?;
            kern.binary(
                b,
                wmx_kernels::BinaryOp::Multiply,
                &v(&c.y),
                &scalar(&c.half),
                &out(&c.t2, d, &shape),
            )?;
            kern.binary(
                b,
                wmx_kernels::BinaryOp::Add,
                &v(&c.t1),
                &v(&c.t2),
                &out(&c.out, d, &shape),
            )
        }
        Op::SumAll => kern.reduce(
            b,
            wmx_kernels::ReduceOp::Sum,
            &v(&c.x),
            &[0],
            &out(&c.out, d, &[]),
        ),
        Op::SumLast => kern.reduce(
            b,
            wmx_kernels::ReduceOp::Sum,
            &m,
            &[1],
            &out(&c.out, d, &[rows]),
        ),
        Op::SumFirst => kern.reduce(
            b,
            wmx_kernels::ReduceOp::Sum,
            &m,
            &[0],
            &out(&c.out, d, &[cols]),
        ),
        Op::ArgmaxLast => kern.arg_reduce(
            b,
            k::ArgReduceOp::ArgMax,
            &m,
            1,
            &out(&c.out, k::DType::U32, &[rows]),
        ),
        Op::CopyBuffer => unreachable!("not a kernel"),
        Op::SumAxpby
        | Op::GradSumAxpby
        | Op::GeluSum
        | Op::GradGeluSum
        | Op::Gelu10
        | Op::Gelu10Compiled
        | Op::GeluSumCompiled
        | Op::TransposeCopy
        | Op::AddTransposed
        | Op::Rope => {
            unreachable!("wmx path only")
        }
    }
}

/// Elements the output of `op` holds and their dtype.
fn k_output(op: Op, n: usize, d: k::DType) -> (usize, k::DType) {
    let rows = rows_for(n);
    match op {
        Op::SumAll => (1, d),
        Op::SumLast => (rows, d),
        Op::SumFirst => (n / rows, d),
        Op::ArgmaxLast => (rows, k::DType::U32),
        _ => (n, d),
    }
}

fn bench_kernels(
    kern: &k::Kernels,
    stamps: Option<&Stamps>,
    o: &Options,
    dtype: DType,
    n: usize,
    data: (&Host, &Host),
    rows: &mut Vec<Row>,
) -> Res<()> {
    let d = kdtype(dtype);
    let scalar_bytes = |v: f32| host(&[v], dtype).bytes;
    let nb = (n * dtype.size()) as u64;
    let c = KCase {
        x: kern.upload(&data.0.bytes).map_err(err)?,
        y: kern.upload(&data.1.bytes).map_err(err)?,
        two: kern.upload(&scalar_bytes(ALPHA as f32)).map_err(err)?,
        half: kern.upload(&scalar_bytes(BETA as f32)).map_err(err)?,
        out: kern.create_buffer(nb, Some("bench out")).map_err(err)?,
        t1: kern.create_buffer(nb, Some("bench t1")).map_err(err)?,
        t2: kern.create_buffer(nb, Some("bench t2")).map_err(err)?,
    };
    let iters = iters_for(n, o.smoke);
    let dev = kern.device();
    for op in selected(o) {
        if (op == Op::AddSubmitEach && dtype != DType::F32) || wmx_only(op) {
            continue;
        }
        let what = format!("kernels {} {} n={n}", op.name(), dtype_name(dtype));
        let (on, od) = k_output(op, n, d);
        // Poison the output so unwritten elements show.
        kern.queue()
            .write_buffer(&c.out, 0, &vec![0xffu8; (on * od.size()).div_ceil(4) * 4]);
        let launch = |enc: &mut wgpu::CommandEncoder| -> Res<()> {
            if op == Op::CopyBuffer {
                for _ in 0..iters {
                    enc.copy_buffer_to_buffer(&c.x, 0, &c.out, 0, nb.div_ceil(4) * 4);
                }
                return Ok(());
            }
            let mut b = k::Batch::new();
            for _ in 0..iters {
                k_record(kern, &mut b, op, &c, d, n).map_err(err)?;
            }
            kern.encode(b, enc).map_err(err)
        };
        // Check (and warm up) first.
        let mut enc = dev.create_command_encoder(&Default::default());
        launch(&mut enc)?;
        kern.queue().submit([enc.finish()]);
        let got = decode(
            &kern
                .read_blocking(&c.out, 0, (on * od.size()) as u64)
                .map_err(err)?,
            od,
        );
        let mut e = reference(op, &data.0.vals, &data.1.vals, dtype);
        if op == Op::Copy {
            e = reference(Op::CopyBuffer, &data.0.vals, &data.1.vals, dtype);
        }
        check(&what, &got, &e)?;
        let measure = || -> Res<f64> {
            if op == Op::AddSubmitEach {
                let submits = || -> Res<()> {
                    for _ in 0..iters {
                        let mut b = k::Batch::new();
                        k_record(kern, &mut b, op, &c, d, n).map_err(err)?;
                        kern.submit(b).map_err(err)?;
                    }
                    Ok(())
                };
                kern.poll_wait();
                let ms = match stamps {
                    Some(s) => {
                        s.stamp(0);
                        submits()?;
                        s.stamp(1);
                        s.elapsed_ms()?
                    }
                    None => {
                        let t = Instant::now();
                        submits()?;
                        kern.poll_wait();
                        t.elapsed().as_secs_f64() * 1e3
                    }
                };
                return Ok(ms / iters as f64);
            }
            let mut enc = dev.create_command_encoder(&Default::default());
            let ms = match stamps {
                Some(s) => {
                    enc.write_timestamp(&s.set, 0);
                    launch(&mut enc)?;
                    enc.write_timestamp(&s.set, 1);
                    kern.queue().submit([enc.finish()]);
                    s.elapsed_ms()?
                }
                None => {
                    kern.poll_wait();
                    let t = Instant::now();
                    launch(&mut enc)?;
                    kern.queue().submit([enc.finish()]);
                    kern.poll_wait();
                    t.elapsed().as_secs_f64() * 1e3
                }
            };
            Ok(ms / iters as f64)
        };
        let samples = sample(o, n, measure)?;
        // The kernels copy moves all n elements.
        push_row(rows, "kernels", op, dtype, n, &samples);
    }
    Ok(())
}

// ------------------------------------------------------------------ dispatch overhead

/// A lazy chain of `len` dependent elementwise ops on 4096-element f32 arrays
/// (alternately `+ y` and `* z`), built and evaluated once: CPU µs per op for the
/// graph build and for eval (record + submit), and the GPU time (wait after submit).
/// `compiled`: the chain is a `wmx::compile`d function, called (replayed) per build.
fn bench_chain(
    dev: &Device,
    len: usize,
    reps: usize,
    compiled: bool,
    rows: &mut Vec<Row>,
) -> Res<()> {
    const N: usize = 4096;
    let xs = random(N, 11);
    let ys = random(N, 12);
    let zs: Vec<f32> = random(N, 13).iter().map(|v| 0.9 * v).collect();
    let arr = |v: &[f32]| Array::from_slice_on(v, &[N], dev).map_err(err);
    let (x, y, z) = (arr(&xs)?, arr(&ys)?, arr(&zs)?);
    // CPU reference in f64.
    let mut want: Vec<f64> = xs.iter().map(|v| *v as f64).collect();
    for i in 0..len {
        for (j, w) in want.iter_mut().enumerate() {
            *w = if i % 2 == 0 {
                *w + ys[j] as f64
            } else {
                *w * zs[j] as f64
            };
        }
    }
    let chain = move |a: &[Array]| -> wmx::Result<Vec<Array>> {
        let mut r = a[0].clone();
        for i in 0..len {
            r = if i % 2 == 0 {
                wmx::add(&r, &a[1])
            } else {
                wmx::multiply(&r, &a[2])
            }?;
        }
        Ok(vec![r])
    };
    let f = wmx::compile(chain);
    let args = [x, y, z];
    let build = || -> Res<Array> {
        let mut out = if compiled {
            f.call(&args)
        } else {
            chain(&args)
        }
        .map_err(err)?;
        Ok(out.remove(0))
    };
    let name = if compiled {
        format!("lazy_chain_{len}_compiled")
    } else {
        format!("lazy_chain_{len}")
    };
    // Warm-up (uploads, pipelines) and check.
    let a = build()?;
    let got = a.to_vec_f64().map_err(err)?;
    let tol: Vec<f64> = want.iter().map(|w| 1e-4 * w.abs() + 1e-4).collect();
    check(
        &name,
        &got,
        &Expect {
            want,
            tol,
            arg_of: None,
        },
    )?;
    drop(a);
    let (mut tb, mut te, mut tw) = (Vec::new(), Vec::new(), Vec::new());
    let stats0 = wmx::webgpu::backend(dev).map(|b| b.stats());
    for _ in 0..reps.max(1) {
        dev.synchronize().map_err(err)?;
        let t0 = Instant::now();
        let a = build()?;
        let t1 = Instant::now();
        a.eval().map_err(err)?;
        let t2 = Instant::now();
        dev.synchronize().map_err(err)?;
        let t3 = Instant::now();
        tb.push((t1 - t0).as_secs_f64() * 1e6 / len as f64);
        te.push((t2 - t1).as_secs_f64() * 1e6 / len as f64);
        tw.push((t3 - t2).as_secs_f64() * 1e6 / len as f64);
    }
    let (b, e, w) = (median(tb), median(te), median(tw));
    let mut submit_us = None;
    let per_eval = match (stats0, wmx::webgpu::backend(dev).map(|b| b.stats())) {
        (Some(s0), Some(s1)) => {
            // Includes the warm-up-free reps only (stats0 is taken after the check).
            let us = (s1.submit_ns - s0.submit_ns) as f64 / 1e3 / (reps.max(1) * len) as f64;
            submit_us = Some(us);
            format!(
                ", {} dispatches in {} submits per eval; of eval, {us:.2} us/op in \
                 encoding and submitting (wgpu)",
                (s1.dispatches - s0.dispatches) / reps.max(1) as u64,
                (s1.submits - s0.submits) / reps.max(1) as u64
            )
        }
        _ => String::new(),
    };
    println!(
        "{name} on {N} f32: build {b:.2} us/op + eval {e:.2} us/op = \
         {:.2} us of CPU per op; GPU wait after submit {w:.2} us/op{per_eval}",
        b + e
    );
    let mut extra_submit = Vec::new();
    if let Some(us) = submit_us {
        extra_submit.push(("submit_us_per_op", us));
    }
    rows.push(Row {
        path: "wmx",
        op: name,
        dtype: DType::F32,
        n: N,
        ms: (b + e) * len as f64 / 1e3,
        gbps: 0.0,
        extra: vec![
            ("cpu_us_per_op", b + e),
            ("build_us_per_op", b),
            ("eval_us_per_op", e),
            ("gpu_wait_us_per_op", w),
        ]
        .into_iter()
        .chain(extra_submit)
        .collect(),
    });
    Ok(())
}

// ------------------------------------------------------------------ driver

fn to_json(rows: &[Row], device: &str) -> String {
    let mut s = String::from("[\n");
    for (i, r) in rows.iter().enumerate() {
        write!(
            s,
            " {{\"op\": \"{}\", \"dtype\": \"{}\", \"n\": {}, \"ms\": {:e}, \"gbps\": {:.3}, \
             \"path\": \"{}\", \"device\": \"{}\"",
            r.op,
            dtype_name(r.dtype),
            r.n,
            r.ms,
            r.gbps,
            r.path,
            device.replace('\\', "/").replace('"', "'")
        )
        .unwrap();
        for (k, v) in &r.extra {
            write!(s, ", \"{k}\": {v:e}").unwrap();
        }
        s.push('}');
        s.push_str(if i + 1 < rows.len() { ",\n" } else { "\n" });
    }
    s.push_str("]\n");
    s
}

/// Runs the benchmark; returns the rows (also written as JSON when asked).
fn run(o: &Options) -> Res<Vec<Row>> {
    let dev = wmx::default_device().map_err(err)?;
    let gpu = wmx::webgpu::backend(&dev);
    if dev.kind() != DeviceKind::Gpu {
        let why = Device::gpu()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        if o.smoke && std::env::var("WMX_ALLOW_NO_GPU").as_deref() != Ok("1") {
            return Err(format!(
                "no GPU adapter ({why}); set WMX_ALLOW_NO_GPU=1 to smoke-test on the CPU only"
            ));
        }
        println!("no GPU ({why}): the wmx path runs on the CPU, the kernels path is skipped");
    }
    let kern = gpu.map(|b| b.kernels().clone());
    let stamps = kern.as_ref().and_then(Stamps::new);
    println!("device: {dev}");
    if let Some(kr) = &kern {
        let c = kr.caps();
        println!(
            "adapter: {} ({:?}), f16 {} ({} conversions), subgroups {} (size {}), cooperative-matrix matmul {}, timing: {}",
            c.adapter_name,
            c.backend,
            c.f16,
            if kr.target().f16 {
                "hardware"
            } else {
                "software"
            },
            c.subgroups,
            c.subgroup_size,
            if kr.target().coop > 0 { "on" } else { "off" },
            if stamps.is_some() {
                "GPU timestamps"
            } else {
                "wall clock around submit + wait"
            }
        );
    }
    let mut rows = Vec::new();
    if o.readback {
        let kr = kern.as_ref().ok_or("--readback needs a WebGPU device")?;
        readback::bench_readback(kr)?;
        readback::bench_to_vec(&dev)?;
        return Ok(rows);
    }
    if o.int64 {
        int64::bench_int64(&dev, stamps.as_ref(), o.reps)?;
        return Ok(rows);
    }
    if o.fft {
        fft::bench_fft(&dev, stamps.as_ref(), o.reps)?;
        return Ok(rows);
    }
    if o.regs {
        let kr = kern.as_ref().ok_or("--regs needs a WebGPU device")?;
        regs::bench_regs(kr.target(), o.ops.as_deref().unwrap_or(&[]))?;
        return Ok(rows);
    }
    if o.coop_peak {
        let kr = kern.as_ref().ok_or("--coop-peak needs a WebGPU device")?;
        coop::coop_peak(kr, o.reps)?;
        return Ok(rows);
    }
    if o.attention || o.quant || o.llm || o.decomp || o.dist {
        if o.dist {
            #[cfg(feature = "mpi")]
            if o.train {
                train::bench_gpt_dp(&dev, o.smoke, &mut rows)?;
            } else {
                dist::bench_dist(&dev, o.smoke, &mut rows)?;
            }
            #[cfg(not(feature = "mpi"))]
            return Err("--dist needs the bench built with --features mpi".into());
        } else if o.decomp {
            decomp::bench_decomp(&dev, o.smoke, &o.dtypes, &mut rows)?;
        } else if o.attention {
            attention::bench_attention(&dev, o.smoke, &mut rows)?;
        } else if o.llm {
            llm::bench_llm(&dev, o.smoke, &mut rows)?;
        } else {
            quant::bench_quant(&dev, o.smoke, &mut rows)?;
        }
        if let Some(path) = &o.json {
            std::fs::write(path, to_json(&rows, &dev.name()))
                .map_err(|e| format!("{path}: {e}"))?;
        }
        return Ok(rows);
    }
    if o.conv {
        conv::bench_conv(&dev, o.smoke, &o.dtypes, &mut rows)?;
        if let Some(path) = &o.json {
            std::fs::write(path, to_json(&rows, &dev.name()))
                .map_err(|e| format!("{path}: {e}"))?;
        }
        return Ok(rows);
    }
    if o.train {
        // `--ops mlp,cnn,gpt` picks models (all by default); `--dtypes` the GPT's.
        let run = |m: &str| o.ops.as_ref().is_none_or(|ops| ops.iter().any(|x| x == m));
        if run("mlp") {
            train::bench_train(&dev, o.smoke, &mut rows)?;
        }
        if run("cnn") {
            train::bench_cnn(&dev, o.smoke, &mut rows)?;
        }
        if run("gpt") {
            train::bench_gpt(&dev, o.smoke, &o.dtypes, &mut rows)?;
        }
        if let Some(path) = &o.json {
            std::fs::write(path, to_json(&rows, &dev.name()))
                .map_err(|e| format!("{path}: {e}"))?;
        }
        return Ok(rows);
    }
    if o.linalg || o.smoke {
        linalg::bench_linalg(&dev, stamps.as_ref(), o, &mut rows)?;
    }
    if o.blocks || o.smoke {
        blocks::bench_blocks(
            &dev,
            stamps.as_ref(),
            o.smoke,
            o.reps,
            o.ops.as_deref(),
            &mut rows,
        )?;
    }
    if o.large {
        blocks::bench_large(&dev, stamps.as_ref(), o.reps, &mut rows)?;
    }
    for &dtype in o
        .dtypes
        .iter()
        .filter(|_| !o.linalg && !o.blocks && !o.large)
    {
        if dev.check_dtype(dtype).is_err() {
            println!("skipping {}: not supported on {dev}", dtype_name(dtype));
            continue;
        }
        for &n in &o.sizes {
            if n < 64 || n % 64 != 0 {
                return Err(format!("size {n}: use multiples of 64 (at least 64)"));
            }
            let x = host(&random(n, 1 + n as u64), dtype);
            let y = host(&random(n, 2 + n as u64), dtype);
            if o.paths.iter().any(|p| p == "wmx") {
                bench_wmx(&dev, stamps.as_ref(), o, dtype, n, (&x, &y), &mut rows)?;
            }
            if let Some(kr) = &kern {
                if o.paths.iter().any(|p| p == "kernels") {
                    bench_kernels(kr, stamps.as_ref(), o, dtype, n, (&x, &y), &mut rows)?;
                }
            }
            // Free cached buffers of this size before the next.
            if let Some(b) = gpu {
                b.clear_cache();
            }
        }
    }
    if o.chain > 0 && !o.linalg && !o.blocks && !o.large && o.paths.iter().any(|p| p == "wmx") {
        bench_chain(&dev, o.chain, o.reps, false, &mut rows)?;
        bench_chain(&dev, o.chain, o.reps, true, &mut rows)?;
    }
    if let Some(path) = &o.json {
        std::fs::write(path, to_json(&rows, &dev.name())).map_err(|e| format!("{path}: {e}"))?;
        println!("wrote {} rows to {path}", rows.len());
    }
    Ok(rows)
}

/// Milliseconds per call of `f` by wall clock over `iters` calls after warm-up
/// calls, the device synchronised at both ends. The warm-up lasts [`WARM_MS`]
/// (three calls in smoke runs, `iters` 1): after the seconds of a host-side check
/// the GPU idles at a fifth of its clock, and a few calls do not bring it back
/// (bench/NOTES.md, run 202).
pub(crate) fn wall_ms(dev: &Device, iters: usize, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    let t = std::time::Instant::now();
    for _ in 0..3 {
        f()?;
    }
    dev.synchronize().map_err(err)?;
    while iters > 1 && t.elapsed().as_secs_f64() * 1e3 < WARM_MS {
        f()?;
        dev.synchronize().map_err(err)?;
    }
    let t = std::time::Instant::now();
    for _ in 0..iters {
        f()?;
    }
    dev.synchronize().map_err(err)?;
    Ok(t.elapsed().as_secs_f64() * 1e3 / iters as f64)
}

/// With `WMX_BENCH_PROFILE` set and a WebGPU device: runs `f` once under the
/// profiler and prints its dispatches as "profile of `what`".
pub(crate) fn profile_once(
    dev: &Device,
    what: &str,
    f: impl FnOnce() -> wmx::Result<()>,
) -> Res<()> {
    if let (Some(be), true) = (
        wmx::webgpu::backend(dev),
        std::env::var_os("WMX_BENCH_PROFILE").is_some(),
    ) {
        let (r, p) = be.profile(f).map_err(err)?;
        r.map_err(err)?;
        println!("profile of {what}:\n{}", p.table());
    }
    Ok(())
}

/// How long [`wall_ms`] warms up.
const WARM_MS: f64 = 1000.0;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = Options::parse(&args).and_then(|o| {
        let rows = run(&o)?;
        if o.smoke {
            println!(
                "smoke: {} cases checked against the f64 reference",
                rows.len()
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }
}
