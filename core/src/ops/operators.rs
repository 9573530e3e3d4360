//! Operators: `a + b` on owned and borrowed arrays in any mix, scalars on either
//! side (`f64` and `i32`, typed as MLX's weak scalars by [`scalar_like`]; one type
//! of each kind, so a literal's type is never ambiguous: `(&x * 2).exp()`), compound assignment (`a += &b` rebinds `a` to a new lazy node)
//! and `-a`. An invalid operation panics at the caller's line (`#[track_caller]`)
//! naming the shapes and dtypes; the function forms return a `Result` instead.

use super::{
    Array, Result, add, bitwise_and, bitwise_or, bitwise_xor, divide, left_shift, multiply,
    negative, remainder, right_shift, scalar_like, subtract,
};

type Op = fn(&Array, &Array) -> Result<Array>;

#[track_caller]
fn apply(name: &str, f: Op, a: &Array, b: &Array) -> Array {
    match f(a, b) {
        Ok(r) => r,
        Err(e) => panic!(
            "{name} of {:?} {} and {:?} {}: {e}",
            a.shape(),
            a.dtype(),
            b.shape(),
            b.dtype()
        ),
    }
}

/// `a op v`, or `v op a` when `left`.
#[track_caller]
fn apply_scalar(name: &str, f: Op, a: &Array, v: f64, left: bool) -> Array {
    let s = match scalar_like(a, v) {
        Ok(s) => s,
        Err(e) => panic!("{name} of {:?} {} and {v}: {e}", a.shape(), a.dtype()),
    };
    if left {
        apply(name, f, &s, a)
    } else {
        apply(name, f, a, &s)
    }
}

macro_rules! operator {
    ($tr:ident, $m:ident, $atr:ident, $am:ident, $f:ident) => {
        impl std::ops::$tr<&Array> for &Array {
            type Output = Array;
            #[track_caller]
            fn $m(self, rhs: &Array) -> Array {
                apply(stringify!($f), $f, self, rhs)
            }
        }
        impl std::ops::$tr<Array> for &Array {
            type Output = Array;
            #[track_caller]
            fn $m(self, rhs: Array) -> Array {
                apply(stringify!($f), $f, self, &rhs)
            }
        }
        impl std::ops::$tr<&Array> for Array {
            type Output = Array;
            #[track_caller]
            fn $m(self, rhs: &Array) -> Array {
                apply(stringify!($f), $f, &self, rhs)
            }
        }
        impl std::ops::$tr<Array> for Array {
            type Output = Array;
            #[track_caller]
            fn $m(self, rhs: Array) -> Array {
                apply(stringify!($f), $f, &self, &rhs)
            }
        }
        impl std::ops::$atr<&Array> for Array {
            #[track_caller]
            fn $am(&mut self, rhs: &Array) {
                *self = apply(stringify!($f), $f, self, rhs);
            }
        }
        impl std::ops::$atr<Array> for Array {
            #[track_caller]
            fn $am(&mut self, rhs: Array) {
                *self = apply(stringify!($f), $f, self, &rhs);
            }
        }
        scalar_operator!($tr, $m, $atr, $am, $f; f64, i32);
    };
}

/// The scalar forms.
macro_rules! scalar_operator {
    ($tr:ident, $m:ident, $atr:ident, $am:ident, $f:ident; $($t:ty),*) => {$(
        impl std::ops::$tr<$t> for &Array {
            type Output = Array;
            #[track_caller]
            fn $m(self, rhs: $t) -> Array {
                apply_scalar(stringify!($f), $f, self, rhs as f64, false)
            }
        }
        impl std::ops::$tr<$t> for Array {
            type Output = Array;
            #[track_caller]
            fn $m(self, rhs: $t) -> Array {
                apply_scalar(stringify!($f), $f, &self, rhs as f64, false)
            }
        }
        impl std::ops::$tr<&Array> for $t {
            type Output = Array;
            #[track_caller]
            fn $m(self, rhs: &Array) -> Array {
                apply_scalar(stringify!($f), $f, rhs, self as f64, true)
            }
        }
        impl std::ops::$tr<Array> for $t {
            type Output = Array;
            #[track_caller]
            fn $m(self, rhs: Array) -> Array {
                apply_scalar(stringify!($f), $f, &rhs, self as f64, true)
            }
        }
        impl std::ops::$atr<$t> for Array {
            #[track_caller]
            fn $am(&mut self, rhs: $t) {
                *self = apply_scalar(stringify!($f), $f, self, rhs as f64, false);
            }
        }
    )*};
}

operator!(Add, add, AddAssign, add_assign, add);
operator!(Sub, sub, SubAssign, sub_assign, subtract);
operator!(Mul, mul, MulAssign, mul_assign, multiply);
operator!(Div, div, DivAssign, div_assign, divide);
operator!(Rem, rem, RemAssign, rem_assign, remainder);
operator!(BitAnd, bitand, BitAndAssign, bitand_assign, bitwise_and);
operator!(BitOr, bitor, BitOrAssign, bitor_assign, bitwise_or);
operator!(BitXor, bitxor, BitXorAssign, bitxor_assign, bitwise_xor);
operator!(Shl, shl, ShlAssign, shl_assign, left_shift);
operator!(Shr, shr, ShrAssign, shr_assign, right_shift);

/// `-x` (negative is defined for every dtype).
impl std::ops::Neg for &Array {
    type Output = Array;
    #[track_caller]
    fn neg(self) -> Array {
        match negative(self) {
            Ok(r) => r,
            Err(e) => panic!("negative of {:?} {}: {e}", self.shape(), self.dtype()),
        }
    }
}

/// `-x`.
impl std::ops::Neg for Array {
    type Output = Array;
    #[track_caller]
    fn neg(self) -> Array {
        -&self
    }
}
