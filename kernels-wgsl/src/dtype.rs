//! How each dtype is stored in `u32` words and computed in WGSL. The dtypes
//! themselves are the workspace's ([`wmx_spec::DType`]).

pub use wmx_spec::DType;

/// Whether `d` has 8-byte elements, moved as pairs of words and computed by the
/// kernels of `wide/` (f64, i64).
pub(crate) fn is_wide(d: DType) -> bool {
    d.size() == 8
}

/// The WGSL type a dtype is computed in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ct {
    F32,
    I32,
    U32,
}

impl Ct {
    pub(crate) fn wgsl(self) -> &'static str {
        match self {
            Ct::F32 => "f32",
            Ct::I32 => "i32",
            Ct::U32 => "u32",
        }
    }
}

/// The word kernels' view of a dtype.
pub(crate) trait Words {
    /// The compute type of the word kernels. f64 and i64 never reach them
    /// (`compose` refuses them: they have kernels of their own); they map to f32
    /// and i32 only to keep this total.
    fn ct(self) -> Ct;
    /// log2 of the number of elements in one `u32` word.
    fn log_epw(self) -> u32;
    /// Elements per `u32` word.
    fn epw(self) -> usize;
    /// Name of the WGSL extract/store helper suffix (`ex_*`, `st_*` in common.wgsl).
    fn storage(self) -> &'static str;
    /// The 32-bit dtype reductions and scans accumulate in.
    fn acc(self) -> DType;
}

impl Words for DType {
    fn ct(self) -> Ct {
        match self {
            DType::F64 | DType::F32 | DType::F16 | DType::BF16 | DType::C64 => Ct::F32,
            DType::I32 | DType::I64 => Ct::I32,
            DType::U32 | DType::U8 | DType::Bool | DType::U64 => Ct::U32,
        }
    }

    fn log_epw(self) -> u32 {
        match self.size() {
            1 => 2,
            2 => 1,
            _ => 0,
        }
    }

    fn epw(self) -> usize {
        1 << self.log_epw()
    }

    fn storage(self) -> &'static str {
        self.name()
    }

    fn acc(self) -> DType {
        match self.ct() {
            Ct::F32 => DType::F32,
            Ct::I32 => DType::I32,
            Ct::U32 => DType::U32,
        }
    }
}

/// `x` rounded to f32 with ties and inexact results sent to the odd neighbour, so
/// a second rounding to f16/bf16 gives the correctly rounded result (`half`'s
/// `from_f64` rounds through f32 the usual way, twice).
fn f32_round_to_odd(x: f64) -> f32 {
    let r = x as f32;
    if !x.is_finite() || r as f64 == x {
        return r;
    }
    let toward_zero = if (r as f64).abs() > x.abs() {
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    };
    f32::from_bits(toward_zero.to_bits() | 1)
}

/// Storage bits of `value` cast to `dtype` (float → int truncates and saturates, NaN
/// → 0; to bool: nonzero; to f16/bf16: round to nearest even).
pub(crate) fn scalar_bits(value: f64, dtype: DType) -> u32 {
    match dtype {
        // f64 fills are computed in f64.rs; its words are not one u32.
        DType::F32 | DType::F64 | DType::C64 => (value as f32).to_bits(),
        DType::F16 => half::f16::from_f32(f32_round_to_odd(value)).to_bits() as u32,
        DType::BF16 => half::bf16::from_f32(f32_round_to_odd(value)).to_bits() as u32,
        // i64/u64 fills are computed in wide/; their words are not one u32.
        DType::I32 | DType::I64 => (value as i32) as u32,
        DType::U64 => value as u32,
        DType::U32 => value as u32,
        DType::U8 => value as u8 as u32,
        DType::Bool => (value != 0.0) as u32,
    }
}
