//! Host values ([`wmx_reference::val`]) moved in and out of arrays.

use wmx_core::{Array, DType, Device, Result, bf16, f16};
pub use wmx_reference::val::*;

/// An array of `dt` on `dev` holding `vals` (which must be representable).
pub fn make(dev: &Device, dt: DType, vals: &[Val], shape: &[usize]) -> Result<Array> {
    fn ints<T>(vals: &[Val], f: impl Fn(i128) -> T) -> Vec<T> {
        vals.iter().map(|v| f(v.as_int())).collect()
    }
    fn floats<T>(vals: &[Val], f: impl Fn(f64) -> T) -> Vec<T> {
        vals.iter()
            .map(|v| match v {
                Val::F(x) => f(*x),
                Val::I(i) => f(*i as f64),
            })
            .collect()
    }
    assert!(
        !dt.is_complex(),
        "test bug: complex arrays are made by cases::complex's helpers"
    );
    for v in vals {
        let ok = match (dt, v) {
            (d, Val::F(x)) if d.is_float() => x.is_nan() || round_to(d, *x) == *x,
            (d, Val::I(i)) if !d.is_float() => {
                let (lo, hi) = crate::rng::int_range(d);
                *i >= lo && *i <= hi
            }
            _ => false,
        };
        assert!(ok, "test bug: {v:?} is not a value of {dt}");
    }
    match dt {
        DType::Bool => Array::from_slice_on(&ints(vals, |i| i != 0), shape, dev),
        DType::U8 => Array::from_slice_on(&ints(vals, |i| i as u8), shape, dev),
        DType::U32 => Array::from_slice_on(&ints(vals, |i| i as u32), shape, dev),
        DType::I32 => Array::from_slice_on(&ints(vals, |i| i as i32), shape, dev),
        DType::I64 => Array::from_slice_on(&ints(vals, |i| i as i64), shape, dev),
        DType::U64 => Array::from_slice_on(&ints(vals, |i| i as u64), shape, dev),
        DType::F16 => Array::from_slice_on(&floats(vals, f16::from_f64), shape, dev),
        DType::BF16 => Array::from_slice_on(&floats(vals, bf16::from_f64), shape, dev),
        DType::F32 => Array::from_slice_on(&floats(vals, |x| x as f32), shape, dev),
        DType::F64 => Array::from_slice_on(&floats(vals, |x| x), shape, dev),
        DType::C64 => unreachable!("refused above"),
    }
}

/// Like [`make`], panicking with the context on error.
pub fn make_ok(dev: &Device, dt: DType, vals: &[Val], shape: &[usize]) -> Array {
    make(dev, dt, vals, shape)
        .unwrap_or_else(|e| panic!("creating a {dt} array of shape {shape:?} on {dev}: {e}"))
}

/// The elements of `a`, row-major, through the typed public reader `to_vec`.
pub fn read(a: &Array) -> Result<Vec<Val>> {
    fn i<T: Copy>(v: Vec<T>, f: impl Fn(T) -> i128) -> Vec<Val> {
        v.into_iter().map(|x| Val::I(f(x))).collect()
    }
    fn fl<T: Copy>(v: Vec<T>, f: impl Fn(T) -> f64) -> Vec<Val> {
        v.into_iter().map(|x| Val::F(f(x))).collect()
    }
    Ok(match a.dtype() {
        DType::Bool => i(a.to_vec::<bool>()?, |x| x as i128),
        DType::U8 => i(a.to_vec::<u8>()?, |x| x as i128),
        DType::U32 => i(a.to_vec::<u32>()?, |x| x as i128),
        DType::I32 => i(a.to_vec::<i32>()?, |x| x as i128),
        DType::I64 => i(a.to_vec::<i64>()?, |x| x as i128),
        DType::U64 => i(a.to_vec::<u64>()?, |x| x as i128),
        DType::F16 => fl(a.to_vec::<f16>()?, |x| x.to_f64()),
        DType::BF16 => fl(a.to_vec::<bf16>()?, |x| x.to_f64()),
        DType::F32 => fl(a.to_vec::<f32>()?, |x| x as f64),
        DType::F64 => fl(a.to_vec::<f64>()?, |x| x),
        // Both parts of each element, in turn (cases::complex compares them).
        DType::C64 => fl(a.to_vec_f64()?, |x| x),
    })
}

/// Like [`read`], panicking with `what` on error; also checks the element count.
pub fn read_ok(a: &Array, what: &str) -> Vec<Val> {
    let v = read(a).unwrap_or_else(|e| panic!("{what}: reading the result failed: {e}"));
    assert_eq!(
        v.len(),
        a.shape().iter().product::<usize>(),
        "{what}: read {} elements from shape {:?}",
        v.len(),
        a.shape()
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_matches_hardware_for_f32() {
        let mut r = crate::rng::Rng::new(1);
        for _ in 0..100_000 {
            let x = f64::from_bits(r.next_u64());
            if x.is_finite() {
                let want = x as f32 as f64;
                assert_eq!(round_to(DType::F32, x).to_bits(), want.to_bits(), "{x:e}");
            }
        }
        assert_eq!(round_to(DType::F16, 65519.0), 65504.0);
        assert_eq!(round_to(DType::F16, 65520.0), f64::INFINITY);
        assert_eq!(round_to(DType::F16, 1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(
            round_to(DType::F16, 1.0 + 3.0 * 2f64.powi(-11)),
            1.0 + 2f64.powi(-9)
        );
        assert_eq!(round_to(DType::F16, 2f64.powi(-25)), 0.0);
        assert_eq!(round_to(DType::F16, 2f64.powi(-25) * 1.5), 2f64.powi(-24));
        assert_eq!(round_to(DType::BF16, 1.0 + 2f64.powi(-8)), 1.0);
        assert_eq!(
            int_to_float(DType::F32, (1 << 60) + (1 << 36) + 1),
            (2f64.powi(60) + 2f64.powi(37))
        );
    }

    #[test]
    fn promotion_table_is_symmetric() {
        for a in DType::REAL {
            for b in DType::REAL {
                assert_eq!(promote(a, b), promote(b, a));
            }
        }
    }
}
