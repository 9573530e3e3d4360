//! Shared helpers for the GPU tests: device, host encoding of every dtype, random
//! data, strided views, and comparison with tolerances.
#![allow(dead_code)]

use half::{bf16, f16};
use std::sync::OnceLock;
use wmx_kernels::{DType, Kernels, RequestOptions, Strided};
use wmx_reference::val::Val;

/// The dtypes this library's tests check against their f64 reference: all but
/// the 64-bit integers, which an f64 cannot hold (the workspace's conformance
/// suite checks those against i128).
pub const DTYPES: [DType; 8] = [
    DType::Bool,
    DType::U8,
    DType::U32,
    DType::I32,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

static K: OnceLock<Option<Kernels>> = OnceLock::new();
static KF: OnceLock<Option<Kernels>> = OnceLock::new();

fn open(fallback: bool) -> Option<Kernels> {
    let opts = RequestOptions {
        force_fallback_reductions: fallback,
        software_f16: fallback,
        atomic_f32: !fallback,
        ..Default::default()
    };
    wmx_reference::gpu::opened(pollster::block_on(Kernels::request(&opts)))
}

/// The shared device (panics without an adapter unless WMX_ALLOW_NO_GPU=1).
pub fn k() -> Option<&'static Kernels> {
    K.get_or_init(|| open(false)).as_ref()
}

/// A second device on the browser's paths: workgroup-memory reductions, f16
/// converted in software, no float atomics.
pub fn k_fallback() -> Option<&'static Kernels> {
    KF.get_or_init(|| open(true)).as_ref()
}

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Kinds of test data.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Data {
    /// Floats: multiples of 1/8 in [-20, 20] (exact quotients' floors); ints: mixed.
    Eighths,
    /// Floats: uniform in [lo, hi]; ints: as Eighths.
    Range(f64, f64),
}

pub fn random(rng: &mut Rng, n: usize, d: DType, kind: Data, specials: bool) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n)
        .map(|_| match d {
            DType::Bool => (rng.next() & 1) as f64,
            DType::U8 => rng.below(256) as f64,
            DType::U32 => {
                if rng.next() & 1 == 0 {
                    rng.below(50) as f64
                } else {
                    (rng.next() as u32) as f64
                }
            }
            DType::I32 => {
                if rng.next() & 1 == 0 {
                    rng.below(101) as f64 - 50.0
                } else {
                    (rng.next() as i32) as f64
                }
            }
            _ => match kind {
                Data::Eighths => (rng.below(321) as f64 - 160.0) / 8.0,
                Data::Range(lo, hi) => rng.range(lo, hi),
            },
        })
        .map(|x| round_to(x, d))
        .collect();
    if specials && d.is_float() && n >= 8 {
        let sp = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0];
        for (j, s) in sp.iter().enumerate() {
            let i = rng.below(n as u64) as usize;
            let _ = j;
            v[i] = *s;
        }
    }
    v
}

/// `x` cast to `d` by the cast rules and back to f64.
pub fn round_to(x: f64, d: DType) -> f64 {
    match d {
        DType::F64 => x,
        DType::F32 => x as f32 as f64,
        DType::F16 => f16::from_f64(x).to_f64(),
        DType::BF16 => bf16::from_f64(x).to_f64(),
        DType::I32 => x as i32 as f64,
        DType::I64 => x as i64 as f64,
        DType::U64 => x as u64 as f64,
        DType::U32 => x as u32 as f64,
        DType::U8 => x as u8 as f64,
        DType::Bool => (x != 0.0) as u8 as f64,
        DType::C64 => unreachable!("the kernels compute complex64 as f32 pairs"),
    }
}

/// Integer result wrapped into `d` (two's complement / modular).
pub fn wrap(x: i128, d: DType) -> f64 {
    match d {
        DType::I32 => x as i32 as f64,
        DType::U32 => x as u32 as f64,
        DType::U8 => x as u8 as f64,
        DType::Bool => (x != 0) as u8 as f64,
        _ => x as f64,
    }
}

pub fn encode(v: &[f64], d: DType) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * d.size());
    for &x in v {
        match d {
            DType::F64 => out.extend(x.to_le_bytes()),
            DType::F32 => out.extend((x as f32).to_le_bytes()),
            DType::F16 => out.extend(f16::from_f64(x).to_le_bytes()),
            DType::BF16 => out.extend(bf16::from_f64(x).to_le_bytes()),
            DType::I32 => out.extend((x as i32).to_le_bytes()),
            DType::I64 => out.extend((x as i64).to_le_bytes()),
            DType::U64 => out.extend((x as u64).to_le_bytes()),
            DType::U32 => out.extend((x as u32).to_le_bytes()),
            DType::U8 => out.push(x as u8),
            DType::Bool => out.push((x != 0.0) as u8),
            DType::C64 => unreachable!("the kernels compute complex64 as f32 pairs"),
        }
    }
    out
}

pub fn decode(b: &[u8], d: DType) -> Vec<f64> {
    b.chunks_exact(d.size())
        .map(|c| match d {
            DType::F64 => f64::from_le_bytes(c.try_into().unwrap()),
            DType::F32 => f32::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::F16 => f16::from_le_bytes(c.try_into().unwrap()).to_f64(),
            DType::BF16 => bf16::from_le_bytes(c.try_into().unwrap()).to_f64(),
            DType::I32 => i32::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::I64 => i64::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::U64 => u64::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::U32 => u32::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::U8 | DType::Bool => c[0] as f64,
            DType::C64 => unreachable!("the kernels compute complex64 as f32 pairs"),
        })
        .collect()
}

/// Ways to lay a logical array out in memory.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Lay {
    Contig,
    /// Contiguous at an element offset.
    Offset(usize),
    /// Every dim reversed (negative strides).
    Neg,
    /// Dims in reverse order in memory (transpose).
    Trans,
    /// Every other element.
    Step2,
    /// One element broadcast everywhere (all strides 0).
    Scalar,
    /// First dim broadcast (stride 0).
    BcastRow,
}

pub fn contiguous(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut a = 1isize;
    for i in (0..shape.len()).rev() {
        s[i] = a;
        a *= shape[i] as isize;
    }
    s
}

/// (physical length, strides, offset) of `shape` laid out as `lay`.
pub fn layout(lay: Lay, shape: &[usize]) -> (usize, Vec<isize>, usize) {
    let n: usize = shape.iter().product();
    let c = contiguous(shape);
    match lay {
        Lay::Contig => (n, c, 0),
        Lay::Offset(o) => (n + o, c, o),
        Lay::Neg => (n, c.iter().map(|s| -s).collect(), n.saturating_sub(1)),
        Lay::Trans => {
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            let mut s = contiguous(&rev);
            s.reverse();
            (n, s, 0)
        }
        Lay::Step2 => (2 * n, c.iter().map(|s| 2 * s).collect(), 0),
        Lay::Scalar => (3, vec![0; shape.len()], 2),
        Lay::BcastRow => {
            if shape.len() < 2 {
                return (3, vec![0; shape.len()], 2);
            }
            let inner = contiguous(&shape[1..]);
            let mut s = vec![0isize];
            s.extend(inner);
            (shape[1..].iter().product(), s, 0)
        }
    }
}

/// Logical values of a view over `phys`.
pub fn gather(phys: &[f64], shape: &[usize], strides: &[isize], offset: usize) -> Vec<f64> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let mut off = offset as isize;
        for d in 0..shape.len() {
            off += idx[d] as isize * strides[d];
        }
        out.push(phys[off as usize]);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Relative tolerance of one rounding to `d` (one unit in the last place).
pub fn ulp(d: DType) -> f64 {
    match d {
        DType::F16 => 1.0 / 1024.0,
        DType::BF16 => 1.0 / 128.0,
        DType::F32 => 1.2e-7,
        _ => 0.0,
    }
}

/// Equal, or both NaN, or within `atol + rtol * |want|` (infinities must match).
pub fn close(got: f64, want: f64, atol: f64, rtol: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.is_infinite() || got.is_infinite() || got.is_nan() {
        return got == want;
    }
    (got - want).abs() <= atol + rtol * want.abs()
}

pub fn assert_close(
    what: &str,
    got: &[f64],
    want: &[f64],
    atol: f64,
    rtol: f64,
    skip: &dyn Fn(usize) -> bool,
) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut bad = Vec::new();
    for i in 0..got.len() {
        if !skip(i) && !close(got[i], want[i], atol, rtol) {
            bad.push(i);
        }
    }
    if !bad.is_empty() {
        let show: Vec<String> = bad
            .iter()
            .take(6)
            .map(|&i| format!("[{i}] got {} want {}", got[i], want[i]))
            .collect();
        panic!(
            "{what}: {} of {} wrong: {}",
            bad.len(),
            got.len(),
            show.join(", ")
        );
    }
}

/// An input array: its buffer, its view (a layout of [`Lay`]) and its logical
/// values in f64.
pub struct Input {
    pub buf: wgpu::Buffer,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub offset: usize,
    pub vals: Vec<f64>,
}

impl Input {
    pub fn new(
        k: &Kernels,
        rng: &mut Rng,
        d: DType,
        shape: &[usize],
        lay: Lay,
        data: Data,
        specials: bool,
    ) -> Input {
        let (phys_len, strides, offset) = layout(lay, shape);
        let phys = random(rng, phys_len, d, data, specials);
        let vals = gather(&phys, shape, &strides, offset);
        Input {
            buf: k.upload(&encode(&phys, d)).unwrap(),
            dtype: d,
            shape: shape.to_vec(),
            strides,
            offset,
            vals,
        }
    }
    pub fn view(&self) -> Strided<'_> {
        Strided {
            buffer: &self.buf,
            window: None,
            dtype: self.dtype,
            shape: &self.shape,
            strides: &self.strides,
            offset: self.offset,
        }
    }
}

/// `a` as a reference value of dtype `d`.
pub fn val(a: f64, d: DType) -> Val {
    if d.is_float() {
        Val::F(a)
    } else {
        Val::I(a as i128)
    }
}
