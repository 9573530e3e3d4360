//! Element types and their promotion rules.

use half::{bf16, f16};
use std::fmt;

/// The element type of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Boolean, one byte (0 or 1).
    Bool,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer (CPU only).
    I64,
    /// IEEE half precision.
    F16,
    /// bfloat16: the upper half of an f32.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision (CPU; WebGPU only where the adapter has `SHADER_F64`).
    F64,
}

impl DType {
    /// Every dtype, in promotion order.
    pub const ALL: [DType; 9] = [
        DType::Bool,
        DType::U8,
        DType::U32,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// The lowercase name (`"f32"`, `"bool"`, …).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// Parses a name as printed by [`DType::name`] (also accepts numpy spellings).
    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::Bool,
            "u8" | "uint8" => DType::U8,
            "u32" | "uint32" => DType::U32,
            "i32" | "int32" => DType::I32,
            "i64" | "int64" => DType::I64,
            "f16" | "float16" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "f32" | "float32" => DType::F32,
            "f64" | "float64" => DType::F64,
            _ => return None,
        })
    }

    /// f16, bf16, f32 or f64.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Any integer type (not bool).
    pub const fn is_int(self) -> bool {
        matches!(self, DType::U8 | DType::U32 | DType::I32 | DType::I64)
    }

    /// Signed integer types.
    pub const fn is_signed_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// Unsigned integer types.
    pub const fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U32)
    }

    /// The dtype float math on `self` produces: `self` for floats, f32 otherwise.
    pub const fn to_float(self) -> DType {
        if self.is_float() { self } else { DType::F32 }
    }

    /// The type both operands of a binary op are converted to, as in MLX:
    ///
    /// | a \ b | rule |
    /// |---|---|
    /// | bool, X | X |
    /// | unsigned, unsigned / signed, signed | the wider |
    /// | u8, i32 → i32; u8, i64 → i64; u32, i32 → i64; u32, i64 → i64 | smallest signed type holding both |
    /// | integer, float | the float |
    /// | f16, bf16 | f32 |
    /// | float, float | the wider (f64 wins) |
    pub fn promote(a: DType, b: DType) -> DType {
        use DType::*;
        if a == b {
            return a;
        }
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        match (lo, hi) {
            (Bool, x) => x,
            (F16, BF16) => F32,
            (x, y) if x.is_float() && y.is_float() => F32.max(y),
            (_, f) if f.is_float() => f,
            (U8, U32) => U32,
            (U8, I32) => I32,
            (U32, I32) => I64,
            (_, I64) => I64,
            (I32, _) | (U8, _) | (U32, _) => unreachable!("all integer pairs are listed"),
            _ => hi,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_is_symmetric_and_idempotent() {
        for a in DType::ALL {
            assert_eq!(DType::promote(a, a), a);
            for b in DType::ALL {
                assert_eq!(DType::promote(a, b), DType::promote(b, a), "{a} {b}");
            }
        }
    }

    #[test]
    fn promotion_table() {
        use DType::*;
        let cases = [
            (Bool, U8, U8),
            (U8, U32, U32),
            (U8, I32, I32),
            (U32, I32, I64),
            (U32, I64, I64),
            (I32, I64, I64),
            (I32, F16, F16),
            (I64, BF16, BF16),
            (U8, F32, F32),
            (F16, BF16, F32),
            (F16, F32, F32),
            (BF16, F32, F32),
            (Bool, F16, F16),
        ];
        for (a, b, want) in cases {
            assert_eq!(DType::promote(a, b), want, "{a} + {b}");
        }
    }

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::from_name("complex64"), None);
    }
}
