//! Element types and their promotion rules.

use half::{bf16, f16};
use std::fmt;

pub use wmx_spec::DType;

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the element of some [`DType`]: used to create arrays from
/// slices and to read them back.
pub trait Element: Copy + Send + Sync + fmt::Debug + PartialEq + 'static + sealed::Sealed {
    /// The matching dtype.
    const DTYPE: DType;
    /// Appends the little-endian bytes of `values` to `out`.
    fn write_bytes(values: &[Self], out: &mut Vec<u8>);
    /// Reads one value from its `DTYPE.size()` bytes.
    fn read(bytes: &[u8]) -> Self;
    /// Converts from f64 with the cast rules of `astype` (saturating, NaN → 0 for ints).
    fn from_f64(v: f64) -> Self;
    /// Converts to f64 (exact for every type but i64 beyond 2^53).
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($t:ty, $d:expr, $from:expr, $to:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $d;
            fn write_bytes(values: &[Self], out: &mut Vec<u8>) {
                for v in values {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            fn read(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes[..std::mem::size_of::<$t>()].try_into().unwrap())
            }
            fn from_f64(v: f64) -> Self {
                let f: fn(f64) -> $t = $from;
                f(v)
            }
            fn to_f64(self) -> f64 {
                let f: fn($t) -> f64 = $to;
                f(self)
            }
        }
    };
}

element!(u8, DType::U8, |v| v as u8, |v| v as f64);
element!(u32, DType::U32, |v| v as u32, |v| v as f64);
element!(i32, DType::I32, |v| v as i32, |v| v as f64);
element!(i64, DType::I64, |v| v as i64, |v| v as f64);
element!(u64, DType::U64, |v| v as u64, |v| v as f64);
element!(f32, DType::F32, |v| v as f32, |v| v as f64);
element!(f64, DType::F64, |v| v, |v| v);
element!(f16, DType::F16, |v| f16::from_f32(f64_to_f32_odd(v)), |v| v
    .to_f64());
element!(
    bf16,
    DType::BF16,
    |v| bf16::from_f32(f64_to_f32_odd(v)),
    |v| v.to_f64()
);

/// `x` as f32 rounded to odd (a nearest f32 when exact, else the neighbour toward
/// zero with its last bit set). Rounding that to f16/bf16 rounds once, as if from
/// `x` itself; `half`'s `from_f64` rounds twice (through f32, or after truncating
/// the low 32 bits), which is wrong near ties.
pub(crate) fn f64_to_f32_odd(x: f64) -> f32 {
    let r = x as f32;
    if !x.is_finite() || r as f64 == x {
        return r;
    }
    let toward_zero = if (r as f64).abs() > x.abs() {
        f32::from_bits(r.to_bits() - 1) // |r| > 0 here; bits count the magnitude
    } else {
        r
    };
    f32::from_bits(toward_zero.to_bits() | 1)
}

/// A complex64 element: the real part, then the imaginary part.
pub use num_complex::Complex32;

impl sealed::Sealed for Complex32 {}
/// `from_f64` gives a real value; `to_f64` the real part (a complex array's
/// [`crate::Array::to_vec_f64`] gives both parts).
impl Element for Complex32 {
    const DTYPE: DType = DType::C64;
    fn write_bytes(values: &[Self], out: &mut Vec<u8>) {
        for v in values {
            out.extend_from_slice(&v.re.to_le_bytes());
            out.extend_from_slice(&v.im.to_le_bytes());
        }
    }
    fn read(bytes: &[u8]) -> Self {
        Complex32::new(f32::read(&bytes[..4]), f32::read(&bytes[4..8]))
    }
    fn from_f64(v: f64) -> Self {
        Complex32::new(v as f32, 0.0)
    }
    fn to_f64(self) -> f64 {
        self.re as f64
    }
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn write_bytes(values: &[Self], out: &mut Vec<u8>) {
        out.extend(values.iter().map(|&b| b as u8));
    }
    fn read(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
}
