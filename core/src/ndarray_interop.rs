//! Conversions between wmx arrays and [`ndarray`] arrays (feature `ndarray`).
//!
//! ```
//! # use wmx_core::{Array, Device};
//! let a = ndarray::array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! let x = Array::from_ndarray_on(&a.t(), &Device::cpu())?; // any layout: copied in logical order
//! assert_eq!(x.shape(), &[3, 2]);
//! let back: ndarray::ArrayD<f32> = (&x * 2.0).to_ndarray()?;
//! assert_eq!(back[[2, 1]], 12.0);
//! # Ok::<(), wmx_core::Error>(())
//! ```
use crate::{Array, Device, Element, Error, Result};
use ::ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

impl Array {
    /// Copies `a` (any dimension, any strides: transposed and sliced views are read
    /// in logical order) into a new array on the default device, with `T`'s dtype.
    pub fn from_ndarray<T, S, D>(a: &ArrayBase<S, D>) -> Result<Array>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        Array::from_ndarray_on(a, &crate::default_device()?)
    }

    /// [`Array::from_ndarray`] on `device`.
    pub fn from_ndarray_on<T, S, D>(a: &ArrayBase<S, D>, device: &Device) -> Result<Array>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        let shape = a.shape().to_vec();
        match a.as_slice() {
            Some(s) => Array::from_slice_on(s, &shape, device),
            None => Array::from_slice_on(&a.iter().copied().collect::<Vec<T>>(), &shape, device),
        }
    }

    /// Evaluates the array and reads it into an [`ArrayD`] (row-major, a host copy).
    /// `Err` when `T` is not the array's dtype (use [`Array::astype`] first).
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        let v = self.to_vec::<T>()?;
        ArrayD::from_shape_vec(IxDyn(self.shape()), v)
            .map_err(|e| Error::invalid("to_ndarray", e.to_string()))
    }
}

/// An owned ndarray becomes an array on the default device (its data copied once).
/// `TryFrom`, not `From`: choosing the default device can fail (an invalid
/// `WMX_DEVICE`), and that is an `Err`, never a panic.
impl<T: Element, D: Dimension> TryFrom<::ndarray::Array<T, D>> for Array {
    type Error = Error;
    fn try_from(a: ::ndarray::Array<T, D>) -> Result<Array> {
        Array::from_ndarray(&a)
    }
}
