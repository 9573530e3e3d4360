//! Small literals from nested Rust arrays and vectors: `wmx::array(&[[1.0f32, 2.0],
//! [3.0, 4.0]])` is a `[2, 2]` f32 array.

use crate::{Array, Element, Error, Result};

/// Nested data whose innermost elements are `T`: `T` itself (a 0-d array), `[U;
/// N]`, `Vec<U>` and `[U]` of nested `U`. Ragged vectors are an `Err`.
pub trait Nested<T: Element> {
    /// Appends the elements in row-major order to `out`; returns the shape.
    fn flatten_into(&self, out: &mut Vec<T>) -> Result<Vec<usize>>;
}

impl<T: Element> Nested<T> for T {
    fn flatten_into(&self, out: &mut Vec<T>) -> Result<Vec<usize>> {
        out.push(*self);
        Ok(Vec::new())
    }
}

/// The shape of equal-shaped parts, with their count in front.
fn rows<T: Element, U: Nested<T>>(parts: &[U], out: &mut Vec<T>) -> Result<Vec<usize>> {
    let mut inner: Option<Vec<usize>> = None;
    for (i, p) in parts.iter().enumerate() {
        let s = p.flatten_into(out)?;
        match &inner {
            None => inner = Some(s),
            Some(first) if *first != s => {
                return Err(Error::invalid(
                    "array",
                    format!("ragged data: part {i} has shape {s:?}, part 0 {first:?}"),
                ));
            }
            Some(_) => {}
        }
    }
    // An empty part count has unknown inner dims: [0].
    let mut shape = vec![parts.len()];
    shape.extend(inner.unwrap_or_default());
    Ok(shape)
}

impl<T: Element, U: Nested<T>, const N: usize> Nested<T> for [U; N] {
    fn flatten_into(&self, out: &mut Vec<T>) -> Result<Vec<usize>> {
        rows(self, out)
    }
}

impl<T: Element, U: Nested<T>> Nested<T> for [U] {
    fn flatten_into(&self, out: &mut Vec<T>) -> Result<Vec<usize>> {
        rows(self, out)
    }
}

impl<T: Element, U: Nested<T>> Nested<T> for Vec<U> {
    fn flatten_into(&self, out: &mut Vec<T>) -> Result<Vec<usize>> {
        rows(self, out)
    }
}

/// An array of nested data on the default device: `wmx::array(&[[1.0f32, 2.0], [3.0,
/// 4.0]])?` (shape `[2, 2]`, f32), `wmx::array(&vec![1i32, 2, 3])?`, `wmx::array(&2.5f32)?`
/// (0-d). Ragged data is an `Err`.
pub fn array<T: Element, D: Nested<T> + ?Sized>(data: &D) -> Result<Array> {
    let mut v = Vec::new();
    let shape = data.flatten_into(&mut v)?;
    Array::from_slice(&v, &shape)
}
