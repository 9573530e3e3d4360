//! Element storage and arithmetic on the CPU: the CPU function of every op, and
//! the table naming each elementwise op's (`unary_fn!`, `binary_fn!`).
//!
//! Each dtype has a storage type (`Store`, the bytes in the buffer) and a compute
//! type (`Compute`): f16/bf16 compute in f32, bool in i32, the rest in themselves
//! (docs/SEMANTICS.md). Accumulating reductions use `Store::Acc` (f64, i64 or u64).

use half::{bf16, f16};

/// bool stored as one byte.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct B8(pub u8);

/// A value of any dtype, widened without loss, for casts.
#[derive(Clone, Copy, Debug)]
pub enum Wide {
    /// Integers and bool (i128 holds every i64 and u64).
    I(i128),
    /// Floats.
    F(f64),
}

/// The bytes of one element of a dtype.
pub trait Store: bytemuck::Pod + Send + Sync + 'static {
    /// The type arithmetic runs in.
    type C: Compute;
    /// The type reductions accumulate in.
    type Acc: Accum;
    /// Storage → compute.
    fn load(self) -> Self::C;
    /// Compute → storage (rounds f16/bf16 to nearest even; bool is `!= 0`).
    fn store(c: Self::C) -> Self;
    /// Lossless widening for casts.
    fn wide(self) -> Wide;
    /// Narrowing with the cast rules of `astype`.
    fn from_wide(w: Wide) -> Self;
    /// Storage → accumulator.
    fn to_acc(self) -> Self::Acc;
    /// Accumulator → storage (ints keep the low bits).
    fn from_acc(a: Self::Acc) -> Self;
    /// From an f64 constant (fill, arange, scalars).
    fn from_const(v: f64) -> Self {
        Self::from_wide(Wide::F(v))
    }
}

/// Accumulator of a reduction: f64 for floats, i64 (wrapping) for integers, u64
/// for u64 (its order is not i64's).
pub trait Accum: Copy + PartialOrd + Send + Sync + 'static {
    /// 0
    const ZERO: Self;
    /// 1
    const ONE: Self;
    /// Below every value (the start of a max).
    const LOWEST: Self;
    /// Above every value (the start of a min).
    const HIGHEST: Self;
    /// Addition (wrapping for ints).
    fn add(self, o: Self) -> Self;
    /// Multiplication (wrapping for ints).
    fn mul(self, o: Self) -> Self;
    /// NaN test.
    fn is_nan(self) -> bool;
    /// Nonzero (NaN is nonzero).
    fn nonzero(self) -> bool;
    /// As a cast source.
    fn wide(self) -> Wide;
}

impl Accum for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const LOWEST: Self = f64::NEG_INFINITY;
    const HIGHEST: Self = f64::INFINITY;
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn nonzero(self) -> bool {
        self != 0.0
    }
    fn wide(self) -> Wide {
        Wide::F(self)
    }
}

macro_rules! int_accum {
    ($t:ty) => {
        impl Accum for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn is_nan(self) -> bool {
                false
            }
            fn nonzero(self) -> bool {
                self != 0
            }
            fn wide(self) -> Wide {
                Wide::I(self as i128)
            }
        }
    };
}
int_accum!(i64);
int_accum!(u64);

/// Arithmetic of one compute type: one method per elementwise op. Float math
/// has a default through f64, which integers keep (they never reach it: ops
/// promote them to f32 first) and the float types override.
#[allow(missing_docs)]
pub trait Compute: Copy + PartialOrd + Send + Sync + 'static {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn floor_div(self, o: Self) -> Self;
    fn rem(self, o: Self) -> Self;
    fn pow(self, o: Self) -> Self;
    fn max(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
    fn atan2(self, o: Self) -> Self;
    fn hypot(self, o: Self) -> Self {
        Self::from_f64(self.to_f64().hypot(o.to_f64()))
    }
    fn band(self, o: Self) -> Self;
    fn bor(self, o: Self) -> Self;
    fn bxor(self, o: Self) -> Self;
    fn shl(self, o: Self) -> Self;
    fn shr(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn sign(self) -> Self;
    fn sqrt(self) -> Self {
        Self::from_f64(self.to_f64().sqrt())
    }
    fn rsqrt(self) -> Self {
        Self::from_f64(1.0 / self.to_f64().sqrt())
    }
    fn cbrt(self) -> Self {
        Self::from_f64(self.to_f64().cbrt())
    }
    fn exp(self) -> Self {
        Self::from_f64(self.to_f64().exp())
    }
    fn expm1(self) -> Self {
        Self::from_f64(self.to_f64().exp_m1())
    }
    fn ln(self) -> Self {
        Self::from_f64(self.to_f64().ln())
    }
    fn ln1p(self) -> Self {
        Self::from_f64(self.to_f64().ln_1p())
    }
    fn log2(self) -> Self {
        Self::from_f64(self.to_f64().log2())
    }
    fn sin(self) -> Self {
        Self::from_f64(self.to_f64().sin())
    }
    fn cos(self) -> Self {
        Self::from_f64(self.to_f64().cos())
    }
    fn tan(self) -> Self {
        Self::from_f64(self.to_f64().tan())
    }
    fn tanh(self) -> Self {
        Self::from_f64(self.to_f64().tanh())
    }
    fn sigmoid(self) -> Self {
        Self::from_f64(1.0 / (1.0 + (-self.to_f64()).exp()))
    }
    fn erf(self) -> Self {
        Self::from_f64(libm::erf(self.to_f64()))
    }
    fn erfinv(self) -> Self {
        Self::from_f64(erfinv(self.to_f64()))
    }
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_inf(self) -> bool;
    fn nonzero(self) -> bool;
    fn from_bool(b: bool) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

/// Each op's per-element function, one line an op: `$body` runs with `$f` bound
/// to the op's generic function (`fn $f<C: Compute>(..) -> C`).
macro_rules! op_fns {
    ($enum:ident, $op:expr, $f:ident => $body:expr; $($v:ident => |$($x:ident),+| $e:expr,)*) => {
        match $op {
            $(crate::$enum::$v => {
                fn $f<C: Compute>($($x: C),+) -> C {
                    $e
                }
                $body
            })*
        }
    };
}

macro_rules! unary_fn {
    ($op:expr, $f:ident => $body:expr) => {
        op_fns!(UnaryOp, $op, $f => $body;
            Negative     => |x| x.neg(),
            Abs          => |x| x.abs(),
            Sign         => |x| x.sign(),
            Square       => |x| x.mul(x),
            Sqrt         => |x| x.sqrt(),
            Rsqrt        => |x| x.rsqrt(),
            Cbrt         => |x| x.cbrt(),
            Exp          => |x| x.exp(),
            Expm1        => |x| x.expm1(),
            Log          => |x| x.ln(),
            Log1p        => |x| x.ln1p(),
            Log2         => |x| x.log2(),
            Sin          => |x| x.sin(),
            Cos          => |x| x.cos(),
            Tan          => |x| x.tan(),
            Tanh         => |x| x.tanh(),
            Sigmoid      => |x| x.sigmoid(),
            Erf          => |x| x.erf(),
            Erfinv       => |x| x.erfinv(),
            Floor        => |x| x.floor(),
            Ceil         => |x| x.ceil(),
            Round        => |x| x.round(),
            LogicalNot   => |x| C::from_bool(!x.nonzero()),
            IsNan        => |x| C::from_bool(x.is_nan()),
            IsInf        => |x| C::from_bool(x.is_inf()),
        )
    };
}

macro_rules! binary_fn {
    ($op:expr, $f:ident => $body:expr) => {
        op_fns!(BinaryOp, $op, $f => $body;
            Add          => |a, b| a.add(b),
            Subtract     => |a, b| a.sub(b),
            Multiply     => |a, b| a.mul(b),
            Divide       => |a, b| a.div(b),
            FloorDivide  => |a, b| a.floor_div(b),
            Remainder    => |a, b| a.rem(b),
            Power        => |a, b| a.pow(b),
            Maximum      => |a, b| a.max(b),
            Minimum      => |a, b| a.min(b),
            Arctan2      => |a, b| a.atan2(b),
            Hypot        => |a, b| a.hypot(b),
            Equal        => |a, b| C::from_bool(a == b),
            NotEqual     => |a, b| C::from_bool(a != b),
            Less         => |a, b| C::from_bool(a < b),
            LessEqual    => |a, b| C::from_bool(a <= b),
            Greater      => |a, b| C::from_bool(a > b),
            GreaterEqual => |a, b| C::from_bool(a >= b),
            LogicalAnd   => |a, b| C::from_bool(a.nonzero() && b.nonzero()),
            LogicalOr    => |a, b| C::from_bool(a.nonzero() || b.nonzero()),
            BitwiseAnd   => |a, b| a.band(b),
            BitwiseOr    => |a, b| a.bor(b),
            BitwiseXor   => |a, b| a.bxor(b),
            LeftShift    => |a, b| a.shl(b),
            RightShift   => |a, b| a.shr(b),
        )
    };
}
pub(crate) use {binary_fn, op_fns, unary_fn};

/// Float arithmetic in `$t` (f32, which f16/bf16 also compute in, and f64).
macro_rules! float_compute {
    ($t:ty, $erf:path) => {
        impl Compute for $t {
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn floor_div(self, o: Self) -> Self {
                (self / o).floor()
            }
            fn rem(self, o: Self) -> Self {
                let r = self % o;
                if r == 0.0 {
                    (0.0 as $t).copysign(o)
                } else if (r < 0.0) != (o < 0.0) {
                    r + o
                } else {
                    r
                }
            }
            fn pow(self, o: Self) -> Self {
                self.powf(o)
            }
            fn max(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() {
                    <$t>::NAN
                } else {
                    <$t>::max(self, o)
                }
            }
            fn min(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() {
                    <$t>::NAN
                } else {
                    <$t>::min(self, o)
                }
            }
            fn atan2(self, o: Self) -> Self {
                <$t>::atan2(self, o)
            }
            fn hypot(self, o: Self) -> Self {
                <$t>::hypot(self, o)
            }
            fn band(self, o: Self) -> Self {
                <$t>::from_bits(self.to_bits() & o.to_bits())
            }
            fn bor(self, o: Self) -> Self {
                <$t>::from_bits(self.to_bits() | o.to_bits())
            }
            fn bxor(self, o: Self) -> Self {
                <$t>::from_bits(self.to_bits() ^ o.to_bits())
            }
            // Shifts are not defined on floats (the op refuses them first).
            fn shl(self, _: Self) -> Self {
                Self::NAN
            }
            fn shr(self, _: Self) -> Self {
                Self::NAN
            }
            fn neg(self) -> Self {
                -self
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn sign(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else {
                    self
                }
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn rsqrt(self) -> Self {
                1.0 / <$t>::sqrt(self)
            }
            fn cbrt(self) -> Self {
                <$t>::cbrt(self)
            }
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            fn expm1(self) -> Self {
                <$t>::exp_m1(self)
            }
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            fn ln1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            fn log2(self) -> Self {
                <$t>::log2(self)
            }
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            fn sigmoid(self) -> Self {
                1.0 / (1.0 + <$t>::exp(-self))
            }
            fn erf(self) -> Self {
                $erf(self)
            }
            fn erfinv(self) -> Self {
                erfinv(self as f64) as $t
            }
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            fn round(self) -> Self {
                <$t>::round_ties_even(self)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_inf(self) -> bool {
                <$t>::is_infinite(self)
            }
            fn nonzero(self) -> bool {
                self != 0.0
            }
            fn from_bool(b: bool) -> Self {
                b as u8 as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}
float_compute!(f32, libm::erff);
float_compute!(f64, libm::erf);

macro_rules! int_compute {
    ($t:ty) => {
        #[allow(unused_comparisons)]
        impl Compute for $t {
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn div(self, o: Self) -> Self {
                self.floor_div(o)
            }
            fn floor_div(self, o: Self) -> Self {
                if o == 0 {
                    return 0;
                }
                let q = self.wrapping_div(o);
                let adjust = q.wrapping_mul(o) != self && ((self < 0) != (o < 0));
                if adjust { q.wrapping_sub(1) } else { q }
            }
            fn rem(self, o: Self) -> Self {
                if o == 0 {
                    return 0;
                }
                let r = self.wrapping_rem(o);
                let adjust = r != 0 && ((r < 0) != (o < 0));
                if adjust { r.wrapping_add(o) } else { r }
            }
            fn pow(self, o: Self) -> Self {
                if o < 0 {
                    return match self as i64 {
                        1 => 1,
                        -1 => {
                            if o % 2 == 0 {
                                1
                            } else {
                                self
                            }
                        }
                        _ => 0,
                    };
                }
                let (mut base, mut e, mut acc) = (self, o, 1 as $t);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
            fn max(self, o: Self) -> Self {
                Ord::max(self, o)
            }
            fn min(self, o: Self) -> Self {
                Ord::min(self, o)
            }
            fn atan2(self, o: Self) -> Self {
                <Self as Compute>::from_f64((self as f64).atan2(o as f64))
            }
            fn band(self, o: Self) -> Self {
                self & o
            }
            fn bor(self, o: Self) -> Self {
                self | o
            }
            fn bxor(self, o: Self) -> Self {
                self ^ o
            }
            fn shl(self, o: Self) -> Self {
                match u32::try_from(o) {
                    Ok(n) if n < <$t>::BITS => self << n,
                    _ => 0,
                }
            }
            fn shr(self, o: Self) -> Self {
                match u32::try_from(o) {
                    Ok(n) if n < <$t>::BITS => self >> n,
                    _ if self < 0 => (0 as $t).wrapping_sub(1),
                    _ => 0,
                }
            }
            fn neg(self) -> Self {
                (0 as $t).wrapping_sub(self)
            }
            fn abs(self) -> Self {
                if self < 0 { self.neg() } else { self }
            }
            fn sign(self) -> Self {
                if self > 0 {
                    1
                } else if self < 0 {
                    (0 as $t).wrapping_sub(1)
                } else {
                    0
                }
            }
            fn floor(self) -> Self {
                self
            }
            fn ceil(self) -> Self {
                self
            }
            fn round(self) -> Self {
                self
            }
            fn is_nan(self) -> bool {
                false
            }
            fn is_inf(self) -> bool {
                false
            }
            fn nonzero(self) -> bool {
                self != 0
            }
            fn from_bool(b: bool) -> Self {
                b as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}

int_compute!(u8);
int_compute!(u32);
int_compute!(i32);
int_compute!(i64);
int_compute!(u64);

macro_rules! store_self_int {
    ($t:ty, $acc:ty) => {
        impl Store for $t {
            type C = $t;
            type Acc = $acc;
            fn load(self) -> $t {
                self
            }
            fn store(c: $t) -> Self {
                c
            }
            fn wide(self) -> Wide {
                Wide::I(self as i128)
            }
            fn from_wide(w: Wide) -> Self {
                match w {
                    Wide::I(i) => i as $t,
                    Wide::F(f) => f as $t,
                }
            }
            fn to_acc(self) -> $acc {
                self as $acc
            }
            fn from_acc(a: $acc) -> Self {
                a as $t
            }
        }
    };
}
store_self_int!(u8, i64);
store_self_int!(u32, i64);
store_self_int!(i32, i64);
store_self_int!(i64, i64);
store_self_int!(u64, u64);

impl Store for B8 {
    type C = i32;
    type Acc = i64;
    fn load(self) -> i32 {
        self.0 as i32
    }
    fn store(c: i32) -> Self {
        B8((c != 0) as u8)
    }
    fn wide(self) -> Wide {
        Wide::I(self.0 as i128)
    }
    fn from_wide(w: Wide) -> Self {
        B8(match w {
            Wide::I(i) => (i != 0) as u8,
            Wide::F(f) => (f != 0.0) as u8,
        })
    }
    fn to_acc(self) -> i64 {
        self.0 as i64
    }
    fn from_acc(a: i64) -> Self {
        B8((a != 0) as u8)
    }
}

/// `i` as f64 rounded to odd (exact below 2^53): rounding that to f32/f16/bf16
/// then rounds once, as if from `i` itself (`i as f64` first would round twice).
fn int_to_f64_odd(i: i128) -> f64 {
    let a = i.unsigned_abs();
    let shift = (128 - a.leading_zeros()).saturating_sub(53);
    let mut m = a >> shift << shift;
    if m != a {
        m |= 1 << shift; // sticky bit: the value was inexact
    }
    let x = m as f64; // at most 53 significant bits: exact
    if i < 0 { -x } else { x }
}

macro_rules! store_float {
    ($t:ty, $load:expr, $store:expr, $from64:expr) => {
        impl Store for $t {
            type C = f32;
            type Acc = f64;
            fn load(self) -> f32 {
                let f: fn($t) -> f32 = $load;
                f(self)
            }
            fn store(c: f32) -> Self {
                let f: fn(f32) -> $t = $store;
                f(c)
            }
            fn wide(self) -> Wide {
                Wide::F(self.load() as f64)
            }
            fn from_wide(w: Wide) -> Self {
                let f: fn(f64) -> $t = $from64;
                match w {
                    Wide::I(i) => f(int_to_f64_odd(i)),
                    Wide::F(x) => f(x),
                }
            }
            fn to_acc(self) -> f64 {
                self.load() as f64
            }
            fn from_acc(a: f64) -> Self {
                Self::from_wide(Wide::F(a))
            }
        }
    };
}
store_float!(f32, |x| x, |x| x, |x| x as f32);

impl Store for f64 {
    type C = f64;
    type Acc = f64;
    fn load(self) -> f64 {
        self
    }
    fn store(c: f64) -> Self {
        c
    }
    fn wide(self) -> Wide {
        Wide::F(self)
    }
    fn from_wide(w: Wide) -> Self {
        match w {
            Wide::I(i) => i as f64,
            Wide::F(x) => x,
        }
    }
    fn to_acc(self) -> f64 {
        self
    }
    fn from_acc(a: f64) -> Self {
        a
    }
}
store_float!(f16, f16::to_f32, f16::from_f32, |x| f16::from_f32(
    crate::dtype::f64_to_f32_odd(x)
));
store_float!(bf16, bf16::to_f32, bf16::from_f32, |x| bf16::from_f32(
    crate::dtype::f64_to_f32_odd(x)
));

/// Runs `$body` with `$T` bound to the storage type of `$dtype`.
macro_rules! with_store {
    ($dtype:expr, $T:ident => $body:expr) => {{
        use $crate::cpu::scalar::B8;
        match $dtype {
            $crate::DType::Bool => {
                type $T = B8;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::U32 => {
                type $T = u32;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::U64 => {
                type $T = u64;
                $body
            }
            $crate::DType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            // core computes complex64 through f32 views (`ops::complex`), and
            // `ops::node` refuses it for every other primitive.
            $crate::DType::C64 => unreachable!("complex64 reaches backends only as f32 pairs"),
        }
    }};
}
pub(crate) use with_store;

/// The inverse error function in f64: Giles' approximation ("Approximating the
/// erfinv function", GPU Computing Gems, 2011) refined by Newton steps on erf, or
/// on erfc past 0.5 where `erf(y) - x` would cancel (`1 - |x|` is exact there).
pub(crate) fn erfinv(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 1.0 {
        return f64::NAN;
    }
    if x.abs() == 1.0 {
        return x * f64::INFINITY;
    }
    if x == 0.0 {
        return x;
    }
    let a = x.abs();
    let w = -((1.0 - a) * (1.0 + a)).ln();
    let mut y = if w < 5.0 {
        let w = w - 2.5;
        let mut p = 2.810_226_36e-08;
        for c in [
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ] {
            p = c + p * w;
        }
        p * a
    } else {
        let w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        for c in [
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ] {
            p = c + p * w;
        }
        p * a
    };
    // Halley steps (cubic): the single-precision start can be ~1e-3 off near ±1,
    // where Newton's three steps fell short of f64.
    for _ in 0..6 {
        let r = if a > 0.5 {
            (1.0 - a) - libm::erfc(y)
        } else {
            libm::erf(y) - a
        };
        let d = std::f64::consts::FRAC_2_SQRT_PI * (-y * y).exp();
        if d == 0.0 || r == 0.0 {
            break;
        }
        y -= r / (d + y * r);
    }
    y.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_rules() {
        assert_eq!((-7i32).floor_div(2), -4);
        assert_eq!(7i32.floor_div(-2), -4);
        assert_eq!(i32::MIN.floor_div(-1), i32::MIN);
        assert_eq!(5i32.floor_div(0), 0);
        assert_eq!((-7i32).rem(3), 2);
        assert_eq!(7i32.rem(-3), -2);
        assert_eq!(7u32.rem(0), 0);
        assert_eq!(Compute::pow(3i32, 4), 81);
        assert_eq!(Compute::pow(2i32, -1), 0);
        assert_eq!(Compute::pow(-1i32, -3), -1);
        assert_eq!(Compute::abs(i32::MIN), i32::MIN);
        assert_eq!(3u8.neg(), 253);
        assert_eq!(Compute::pow(2u8, 9), 0);
    }

    #[test]
    fn float_rules() {
        assert_eq!((-7.0f32).rem(3.0), 2.0);
        assert_eq!(7.0f32.rem(-3.0), -2.0);
        assert!(1.0f32.rem(0.0).is_nan());
        assert!(Compute::max(f32::NAN, 1.0).is_nan());
        assert!(Compute::min(1.0, f32::NAN).is_nan());
        assert_eq!(Compute::round(2.5f32), 2.0);
        assert_eq!(Compute::round(-3.5f32), -4.0);
        assert_eq!((-0.0f32).sign().to_bits(), (-0.0f32).to_bits());
        assert_eq!(f16::from_wide(Wide::F(65520.0)), f16::INFINITY);
        assert_eq!(i32::from_wide(Wide::F(f64::NAN)), 0);
        assert_eq!(u8::from_wide(Wide::F(300.0)), 255);
        assert_eq!(u8::from_wide(Wide::I(300)), 44);
        assert_eq!(B8::from_wide(Wide::F(f64::NAN)), B8(1));
    }
}
