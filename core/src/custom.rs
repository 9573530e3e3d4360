//! Arrays computed by primitives defined outside core.

use crate::{Array, CustomPrimitive, DType, Error, Layout, Primitive, Result};
use std::sync::Arc;

/// A lazy array of `shape`/`dtype` computed by `prim` from `inputs` on the first
/// input's device (or the innermost [`crate::with_device`] scope's). The device
/// must hold every dtype involved.
///
/// ```
/// use std::any::Any;
/// use wmx_core::{cpu::{CpuBackend, CpuBuffer}, Array, CustomInput, CustomPrimitive, DType, Device, Result};
///
/// /// Doubles an f32 array; CPU only.
/// #[derive(Debug)]
/// struct Double;
/// impl CustomPrimitive for Double {
///     fn name(&self) -> &str { "double" }
///     fn eval(&self, _: &Device, backend: &dyn Any, inputs: &[CustomInput<'_>], shape: &[usize], _: DType)
///         -> Result<Box<dyn Any + Send + Sync>> {
///         if backend.downcast_ref::<CpuBackend>().is_none() {
///             return Err(wmx_core::Error::Invalid { op: "double", msg: "CPU only".into() });
///         }
///         let x = inputs[0].buffer.downcast_ref::<CpuBuffer>().unwrap().as_slice::<f32>();
///         let l = inputs[0].layout;
///         let n: usize = shape.iter().product();
///         let mut out = CpuBuffer::zeroed(n * 4);
///         let o = out.as_mut_slice::<f32>();
///         // (a real primitive would walk l.strides; this one asks for contiguous input)
///         for i in 0..n { o[i] = 2.0 * x[l.offset + i]; }
///         Ok(Box::new(out))
///     }
/// }
///
/// # fn main() -> Result<()> {
/// let x = Array::from_slice_on(&[1.0f32, 2.5], &[2], &Device::cpu())?;
/// let y = wmx_core::custom(std::sync::Arc::new(Double), &[wmx_core::contiguous(&x)?], &[2], DType::F32)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![2.0, 5.0]);
/// # Ok(()) }
/// ```
pub fn custom(
    prim: Arc<dyn CustomPrimitive>,
    inputs: &[Array],
    shape: &[usize],
    dtype: DType,
) -> Result<Array> {
    let device = match (crate::device::scoped_device(), inputs.first()) {
        (Some(d), _) => d,
        (None, Some(x)) => x.device().clone(),
        (None, None) => crate::default_device()?,
    };
    device.check_dtype(dtype)?;
    for x in inputs {
        device.check_dtype(x.dtype())?;
    }
    if shape.iter().any(|&d| d > isize::MAX as usize) {
        return Err(Error::invalid(
            "custom",
            format!("shape {shape:?} too large"),
        ));
    }
    Ok(Array::from_op(
        Primitive::Custom(prim),
        inputs.to_vec(),
        Layout::contiguous(shape),
        dtype,
        device,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CustomInput, Device};
    use std::any::Any;

    #[derive(Debug)]
    struct Panics;
    impl CustomPrimitive for Panics {
        fn name(&self) -> &str {
            "panics"
        }
        fn eval(
            &self,
            _: &Device,
            _: &dyn Any,
            _: &[CustomInput<'_>],
            _: &[usize],
            _: DType,
        ) -> Result<Box<dyn Any + Send + Sync>> {
            panic!("index out of bounds in user code")
        }
    }

    /// A panic inside a custom primitive is an `Err` at that op; other arrays and
    /// the device are unaffected.
    #[test]
    fn panic_in_custom_code_is_an_error_at_that_op() {
        let dev = Device::cpu();
        let x = Array::from_slice_on(&[1.0f32, 2.0], &[2], &dev).unwrap();
        let y = custom(Arc::new(Panics), std::slice::from_ref(&x), &[2], DType::F32).unwrap();
        let e = y.eval().unwrap_err().to_string();
        assert!(e.contains("custom primitive panics panicked"), "{e}");
        assert!(e.contains("index out of bounds in user code"), "{e}");
        assert!(!y.is_evaluated());
        assert_eq!(
            crate::add(&x, &x).unwrap().to_vec::<f32>().unwrap(),
            vec![2.0, 4.0]
        );
    }
}
