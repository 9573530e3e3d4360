//! Rotary position embedding, MLX's `fast.rope`: the op, its primitive (CPU code
//! and transform rules; its GPU code is in `wmx-webgpu`'s `families.rs`).

use crate::cpu::CpuBuffer;
use crate::{Array, CpuOutput, CustomPrimitive, DType, Error, Result, View};
use std::sync::Arc;

/// Rotary position embedding of `x` (`[..., L, D]`), as MLX's `mx.fast.rope`.
///
/// The first `dims` elements of each row of `D` rotate in pairs, `(2k, 2k + 1)`
/// when `traditional` (GPT-J's layout), else `(k, k + dims / 2)` (GPT-NeoX's and
/// Llama's), by the angle `scale · p · inv_freq[k]`, where `p = offset + l` is the
/// position of row `l` along axis -2; the other `D - dims` elements are copied.
/// `inv_freq[k] = base^(-2k / dims)`, or `1 / freqs[k]` when `freqs` (`dims / 2`
/// periods, MLX's convention) is given instead of `base`.
///
/// `offset` is an integer scalar, or (batched decode, `x` of rank 3 or more) a 1-D
/// integer array with one offset per index of `x`'s first axis. For f32, f16 and
/// bf16 one kernel computes each angle as `(scale · p) · inv_freq` in f32, the
/// rotation in f32, and rounds once to `x`'s dtype; f64 is composed of f64 ops
/// (on every device). Differentiable in `x` (the vjp rotates back); `offset` and
/// `freqs` get no gradient.
///
/// ```
/// # fn main() -> wmx_core::Result<()> {
/// use wmx_core::{Array, DType};
/// let x = wmx_core::ones(&[1, 3, 4], DType::F32)?;
/// let y = wmx_core::rope(&x, 4, false, Some(10000.0), 1.0, &wmx_core::scalar(0.0, DType::I32)?, None)?;
/// // position 0 is not rotated
/// assert_eq!(&y.to_vec::<f32>()?[..4], &[1.0, 1.0, 1.0, 1.0]);
/// # Ok(()) }
/// ```
pub fn rope(
    x: &Array,
    dims: usize,
    traditional: bool,
    base: Option<f64>,
    scale: f64,
    offset: &Array,
    freqs: Option<&Array>,
) -> Result<Array> {
    let bad = |msg: String| Err(Error::invalid("rope", msg));
    let shape = x.shape();
    if !x.dtype().is_float() {
        return bad(format!("x must be a float array, got {}", x.dtype()));
    }
    if shape.len() < 2 {
        return bad(format!("x must be [..., L, D], got shape {shape:?}"));
    }
    let d = shape[shape.len() - 1];
    if dims == 0 || !dims.is_multiple_of(2) || dims > d {
        return bad(format!(
            "dims must be even and in 2..={d} (the last axis), got {dims}"
        ));
    }
    if !scale.is_finite() {
        return bad(format!("scale must be finite, got {scale}"));
    }
    if !offset.dtype().is_int() {
        return bad(format!("offset must be integer, got {}", offset.dtype()));
    }
    match offset.shape() {
        [] => {}
        [n] if shape.len() >= 3 && *n == shape[0] => {}
        s => {
            return bad(format!(
                "offset must be a scalar or, for x of rank 3 or more, one per index of x's first axis ({}); got shape {s:?} for x {shape:?}",
                if shape.len() >= 3 { shape[0] } else { 0 }
            ));
        }
    }
    let fdt = if x.dtype() == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let on_x = |f: &dyn Fn() -> Result<Array>| crate::with_device(x.device(), f);
    let inv = match (base, freqs) {
        (Some(b), None) => {
            if !(b.is_finite() && b > 0.0) {
                return bad(format!("base must be positive and finite, got {b}"));
            }
            let v: Vec<f64> = (0..dims / 2)
                .map(|k| b.powf(-2.0 * k as f64 / dims as f64))
                .collect();
            if fdt == DType::F64 {
                Array::from_slice_on(&v, &[dims / 2], x.device())?
            } else {
                let v: Vec<f32> = v.iter().map(|&f| f as f32).collect();
                Array::from_slice_on(&v, &[dims / 2], x.device())?
            }
        }
        (None, Some(f)) => {
            if f.shape() != [dims / 2] || !f.dtype().is_float() {
                return bad(format!(
                    "freqs must be a float array of shape [{}] (dims / 2), got {} {:?}",
                    dims / 2,
                    f.dtype(),
                    f.shape()
                ));
            }
            {
                let f = crate::astype(f, fdt)?;
                crate::contiguous(&crate::divide(&on_x(&|| crate::scalar(1.0, fdt))?, &f)?)?
            }
        }
        _ => return bad("give exactly one of base and freqs".into()),
    };
    if fdt == DType::F64 {
        return composed(x, dims, traditional, scale, offset, &inv);
    }
    let rope = Rope {
        dims,
        traditional,
        scale: scale as f32,
    };
    rope.apply(x, offset, &inv)
}

/// Rope of ops, for f64: the angles `[..., L, dims / 2]`, then the pairs rotated
/// and put back in their layout.
fn composed(
    x: &Array,
    dims: usize,
    traditional: bool,
    scale: f64,
    offset: &Array,
    inv: &Array,
) -> Result<Array> {
    use crate::{Slice, add, concatenate, multiply, reshape, slice, subtract};
    let on_x = |f: &dyn Fn() -> Result<Array>| crate::with_device(x.device(), f);
    let shape: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
    let (rank, l, h) = (shape.len(), shape[shape.len() - 2], dims as isize / 2);
    let dt = x.dtype();
    let mut off = crate::astype(offset, dt)?;
    if off.ndim() == 1 {
        let mut s = vec![-1isize];
        s.extend(std::iter::repeat_n(1, rank - 2));
        off = reshape(&off, &s)?;
    }
    let pos = add(&off, &on_x(&|| crate::arange(0.0, l as f64, 1.0, dt))?)?;
    let scaled = multiply(&on_x(&|| crate::scalar(scale, dt))?, &pos)?;
    let theta = multiply(&crate::expand_dims(&scaled, -1)?, inv)?;
    let (c, s) = (crate::cos(&theta)?, crate::sin(&theta)?);
    let last = |a: Option<isize>, b: Option<isize>, step: isize| {
        let mut sl = vec![Slice::ALL; rank - 1];
        sl.push(Slice::new(a, b, step));
        sl
    };
    let (a, b) = if traditional {
        (
            slice(x, &last(Some(0), Some(2 * h), 2))?,
            slice(x, &last(Some(1), Some(2 * h), 2))?,
        )
    } else {
        (
            slice(x, &last(Some(0), Some(h), 1))?,
            slice(x, &last(Some(h), Some(2 * h), 1))?,
        )
    };
    let y1 = subtract(&multiply(&a, &c)?, &multiply(&b, &s)?)?;
    let y2 = add(&multiply(&a, &s)?, &multiply(&b, &c)?)?;
    let rotated = if traditional {
        let mut s2 = shape.clone();
        s2[rank - 1] = 2 * h;
        reshape(&crate::stack(&[&y1, &y2], -1)?, &s2)?
    } else {
        concatenate(&[&y1, &y2], -1)?
    };
    if dims == x.shape()[rank - 1] {
        return Ok(rotated);
    }
    let rest = slice(x, &last(Some(2 * h), None, 1))?;
    concatenate(&[&rotated, &rest], -1)
}

/// The rope primitive (inputs: row-major f32, f16 or bf16 `x`, contiguous i32
/// offsets, contiguous f32 inverse frequencies). Public for the GPU backends, which
/// run it through `wmx_kernels::Kernels::rope`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    /// Leading elements of each row that rotate.
    pub dims: usize,
    /// Pairs `(2k, 2k + 1)`, else `(k, k + dims / 2)`.
    pub traditional: bool,
    /// Multiplies the positions (negated: the inverse rotation).
    pub scale: f32,
}

impl Rope {
    fn apply(&self, x: &Array, offset: &Array, inv: &Array) -> Result<Array> {
        let inputs = [
            crate::contiguous(x)?,
            crate::contiguous(&crate::astype(offset, DType::I32)?)?,
            inv.clone(),
        ];
        crate::custom(Arc::new(self.clone()), &inputs, x.shape(), x.dtype())
    }

    /// Rows per sequence and row length of `shape`.
    pub fn geometry(shape: &[usize]) -> (usize, usize) {
        (shape[shape.len() - 2], shape[shape.len() - 1])
    }
}

impl Rope {
    #[allow(clippy::too_many_arguments)]
    fn rotate<T: bytemuck::Pod>(
        &self,
        x: &[T],
        off: &[i32],
        inv: &[f32],
        shape: &[usize],
        out: &mut [T],
        load: impl Fn(T) -> f32,
        store: impl Fn(f32) -> T,
    ) {
        let (l, d) = Rope::geometry(shape);
        let n = out.len();
        let per = n / off.len().max(1);
        let h = self.dims / 2;
        for (e, o) in out.iter_mut().enumerate() {
            let j = e % d;
            if j >= self.dims {
                *o = x[e];
                continue;
            }
            let (k, first, lo, step) = if self.traditional {
                (j / 2, j % 2 == 0, e - j % 2, 1)
            } else if j < h {
                (j, true, e, h)
            } else {
                (j - h, false, e - h, h)
            };
            // The kernel's order: f32 position, then (scale * p) * inv_freq.
            let p = off[e / per] as f32 + ((e / d) % l) as f32;
            let theta = self.scale * p * inv[k];
            let (c, s) = (theta.cos(), theta.sin());
            let (a, b) = (load(x[lo]), load(x[lo + step]));
            *o = store(if first { a * c - b * s } else { a * s + b * c });
        }
    }
}

impl CustomPrimitive for Rope {
    fn name(&self) -> &str {
        "rope"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let slice = |i: usize| (inputs[i].buffer, inputs[i].layout.offset);
        let (xb, x0) = slice(0);
        let (ob, o0) = slice(1);
        let (fb, f0) = slice(2);
        let n: usize = out.shape.iter().product();
        let off = &ob.as_slice::<i32>()[o0..o0 + inputs[1].layout.numel()];
        let shape = out.shape;
        let buf = &mut *out.buffer;
        let inv = &fb.as_slice::<f32>()[f0..];
        match out.dtype {
            DType::F32 => {
                let x = &xb.as_slice::<f32>()[x0..x0 + n];
                self.rotate(x, off, inv, shape, buf.as_mut_slice(), |v| v, |v| v);
            }
            DType::F16 => {
                let x = &xb.as_slice::<half::f16>()[x0..x0 + n];
                let (ld, st) = (half::f16::to_f32, half::f16::from_f32);
                self.rotate(x, off, inv, shape, buf.as_mut_slice(), ld, st);
            }
            DType::BF16 => {
                let x = &xb.as_slice::<half::bf16>()[x0..x0 + n];
                let (ld, st) = (half::bf16::to_f32, half::bf16::from_f32);
                self.rotate(x, off, inv, shape, buf.as_mut_slice(), ld, st);
            }
            other => {
                return Err(Error::invalid(
                    "rope",
                    format!("no rope kernel for {other}"),
                ));
            }
        }
        Ok(())
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Rope>()
            .is_some_and(|o| o == self)
    }

    fn jvp(
        &self,
        primals: &[Array],
        _: &Array,
        tangents: &[Option<Array>],
    ) -> Result<Option<Array>> {
        no_gradient(tangents[1..].iter().any(Option::is_some))?;
        tangents[0]
            .as_ref()
            .map(|t| self.apply(t, &primals[1], &primals[2]))
            .transpose()
    }

    fn vjp(&self, primals: &[Array], _: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        // A rotation's transpose is the rotation by the opposite angle.
        let back = Rope {
            scale: -self.scale,
            ..self.clone()
        };
        Ok(vec![
            Some(back.apply(ct, &primals[1], &primals[2])?),
            None,
            None,
        ])
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        no_gradient(batched[2])?;
        let (x, off) = (&inputs[0], &inputs[1]);
        let v = if batched[0] {
            x.shape()[0]
        } else {
            off.shape()[0]
        };
        let x = if batched[0] {
            x.clone()
        } else {
            let mut s = vec![v];
            s.extend(x.shape());
            crate::broadcast_to(x, &s)?
        };
        // The traced offsets were a scalar (now one per batch index: x's new first
        // axis) or one per index of x's first axis (now [v, b]: flatten both).
        let traced_rank = off.ndim() - batched[1] as usize;
        if traced_rank == 0 {
            return self.apply(&x, off, &inputs[2]);
        }
        let b = x.shape()[1];
        let off = if batched[1] {
            off.clone()
        } else {
            crate::broadcast_to(off, &[v, b])?
        };
        let mut flat: Vec<isize> = vec![(v * b) as isize];
        flat.extend(x.shape()[2..].iter().map(|&s| s as isize));
        let y = self.apply(
            &crate::reshape(&x, &flat)?,
            &crate::reshape(&off, &[-1])?,
            &inputs[2],
        )?;
        crate::reshape(
            &y,
            &x.shape().iter().map(|&s| s as isize).collect::<Vec<_>>(),
        )
    }
}

fn no_gradient(asked: bool) -> Result<()> {
    if asked {
        return Err(Error::invalid(
            "rope",
            "offset and freqs have no derivative and cannot be batched by vmap (freqs)",
        ));
    }
    Ok(())
}
