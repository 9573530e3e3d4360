//! `z = alpha * x + beta * y` as a primitive of its own, built on wmx's public API
//! only: MLX's extension guide (`Axpby`) in Rust. The crate's README walks
//! through it section by section.
//!
//! ```
//! use wmx::{Array, DType, Device};
//! # fn main() -> wmx::Result<()> {
//! let x = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &Device::cpu())?;
//! let y = wmx::ones(&[3], DType::F32)?.to_device(&Device::cpu())?;
//! let z = wmx_axpby::axpby(&x, &y, 4.0, 2.0)?;
//! assert_eq!(z.to_vec::<f32>()?, vec![6.0, 10.0, 14.0]);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use wmx::ext::cpu::{CpuBuffer, par_chunks};
use wmx::ext::{CpuOutput, CustomPrimitive, GpuContext, Layout, View};
use wmx::webgpu::{CustomEval, UserModule};
use wmx::{Array, DType, Error, Result, bf16, f16};

/// Scales and sums two arrays elementwise: `alpha * x + beta * y`, in one pass.
///
/// `x` and `y` broadcast as in numpy and are promoted together, then to f32 if
/// the result is not a float. The result is lazy, on `x`'s device; it
/// differentiates and batches (`grad`, `jvp`, `vmap`) like any op.
pub fn axpby(x: &Array, y: &Array, alpha: f64, beta: f64) -> Result<Array> {
    let dtype = DType::promote(x.dtype(), y.dtype()).to_float();
    let shape = wmx::ext::layout::broadcast_shapes("axpby", x.shape(), y.shape())?;
    // Both inputs take the output's dtype and shape (broadcasting is a view).
    let x = wmx::broadcast_to(&wmx::astype(x, dtype)?, &shape)?;
    let y = wmx::broadcast_to(&wmx::astype(y, dtype)?, &shape)?;
    wmx::ext::custom(Arc::new(Axpby { alpha, beta }), &[x, y], &shape, dtype)
}

/// The primitive: its parameters, its code per backend and its transform rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axpby {
    /// Scale of `x`.
    pub alpha: f64,
    /// Scale of `y`.
    pub beta: f64,
}

impl CustomPrimitive for Axpby {
    fn name(&self) -> &str {
        "axpby"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let (x, y) = (&inputs[0], &inputs[1]);
        let (a, b) = (self.alpha as f32, self.beta as f32);
        let fast = x.layout.is_row_contiguous() && y.layout.is_row_contiguous();
        match out.dtype {
            DType::F32 if fast => cpu::contiguous_f32(x, y, out.buffer, a, b),
            DType::F16 if fast => cpu::contiguous_f16(x, y, out.buffer, a, b),
            DType::F32 => cpu::general::<f32>(x, y, out.buffer, a, b),
            DType::F16 => cpu::general::<f16>(x, y, out.buffer, a, b),
            DType::BF16 => cpu::general::<bf16>(x, y, out.buffer, a, b),
            d => return Err(not_float(d)),
        }
        Ok(())
    }

    fn eval_webgpu(&self, gpu: &mut GpuContext<'_>) -> Result<()> {
        let ev = gpu.get::<CustomEval>()?;
        let (x, y) = (ev.inputs()[0].clone(), ev.inputs()[1].clone());
        let out = ev.output().clone();
        let contiguous = x.layout.is_row_contiguous() && y.layout.is_row_contiguous();
        let n = x.layout.numel();
        // Four elements per load where sizes and offsets allow it.
        let vec4 = contiguous && n % 4 == 0 && x.layout.offset % 4 == 0 && y.layout.offset % 4 == 0;
        let w = if vec4 { 4 } else { 1 };
        let source = cached_source(out.dtype, vec4)?;
        let pipe = ev.pipeline(&UserModule {
            label: "axpby",
            source,
            entry: if contiguous {
                "axpby_contiguous"
            } else {
                "axpby_general"
            },
            outputs: 1,
            inputs: 2,
        })?;
        let word = |v: usize| {
            u32::try_from(v)
                .map_err(|_| Error::invalid("axpby", format!("{v} exceeds 32-bit indexing")))
        };
        let mut p = vec![
            word(n / w)?,
            word(x.layout.ndim())?,
            (self.alpha as f32).to_bits(),
            (self.beta as f32).to_bits(),
            word(x.layout.offset / w)?,
            word(y.layout.offset / w)?,
        ];
        if !contiguous {
            p.extend(x.layout.shape.iter().map(|&d| d as u32));
            p.extend(strides(&x.layout)?);
            p.extend(strides(&y.layout)?);
        }
        // 256 threads per workgroup, each taking four elements (of E) on the
        // contiguous path; x folds into y past the per-dimension limit.
        let per_thread = if contiguous { 4 } else { 1 };
        let groups = (n / w).div_ceil(256 * per_thread) as u64;
        let groups = ev
            .kernels()
            .grid(groups)
            .map_err(|e| Error::invalid("axpby", e.to_string()))?;
        ev.dispatch(&pipe, &[&out.buffer, &x.buffer, &y.buffer], &p, groups)
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Axpby>()
            .is_some_and(|o| o == self)
    }

    fn jvp(&self, _: &[Array], out: &Array, t: &[Option<Array>]) -> Result<Option<Array>> {
        Ok(match (&t[0], &t[1]) {
            (Some(tx), Some(ty)) => Some(axpby(tx, ty, self.alpha, self.beta)?),
            (Some(tx), None) => Some(scale(tx, self.alpha, out.dtype())?),
            (None, Some(ty)) => Some(scale(ty, self.beta, out.dtype())?),
            (None, None) => None,
        })
    }

    fn vjp(&self, _: &[Array], out: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        let d = out.dtype();
        Ok(vec![
            Some(scale(ct, self.alpha, d)?),
            Some(scale(ct, self.beta, d)?),
        ])
    }

    fn vmap(&self, inputs: &[Array], _batched: &[bool]) -> Result<Array> {
        // Elementwise: a batched input (batch axis first) broadcasts against an
        // unbatched one, so the batched output is axpby of the inputs as they are.
        axpby(&inputs[0], &inputs[1], self.alpha, self.beta)
    }
}

/// `a * s`, the scalar made on `a`'s device in `dtype`.
fn scale(a: &Array, s: f64, dtype: DType) -> Result<Array> {
    let s = wmx::with_device(a.device(), || wmx::scalar(s, dtype))?;
    wmx::multiply(a, &s)
}

fn not_float(d: DType) -> Error {
    Error::invalid("axpby", format!("computes f32, f16 or bf16, not {d}"))
}

fn strides(l: &Layout) -> Result<Vec<u32>> {
    l.strides
        .iter()
        .map(|&s| {
            i32::try_from(s)
                .map(|s| s as u32)
                .map_err(|_| Error::invalid("axpby", format!("stride {s} exceeds 32-bit indexing")))
        })
        .collect()
}

/// `axpby.wgsl` behind its prelude: elements of `dtype`, bound one or four
/// (`vec4`) at a time. The one kernel source, specialised.
pub fn gpu_source(dtype: DType, vec4: bool) -> Result<String> {
    let t = match dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => {
            return Err(Error::invalid(
                "axpby",
                "bf16 has no WGSL type (it is stored packed); convert with astype(F32) on the GPU",
            ));
        }
        d => return Err(not_float(d)),
    };
    let enable = if dtype == DType::F16 {
        "enable f16;\n"
    } else {
        ""
    };
    let (e, f) = if vec4 {
        ("vec4<T>", "vec4<f32>")
    } else {
        ("T", "f32")
    };
    Ok(format!(
        "{enable}alias T = {t};\nalias E = {e};\nalias F = {f};\n{}",
        include_str!("axpby.wgsl")
    ))
}

/// [`gpu_source`], made once per specialisation (an eval then costs no formatting).
fn cached_source(dtype: DType, vec4: bool) -> Result<&'static str> {
    use std::sync::OnceLock;
    static SOURCES: [OnceLock<String>; 4] = [const { OnceLock::new() }; 4];
    let slot = match dtype {
        DType::F32 => 0,
        DType::F16 => 2,
        _ => return gpu_source(dtype, vec4).map(|_| ""), // the Err naming the dtype
    } + vec4 as usize;
    if let Some(s) = SOURCES[slot].get() {
        return Ok(s);
    }
    let s = gpu_source(dtype, vec4)?;
    Ok(SOURCES[slot].get_or_init(|| s))
}

/// The CPU code: a fast path for contiguous f32 and f16, and a general strided
/// fallback for every float dtype and layout.
mod cpu {
    use super::*;

    /// Contiguous f32: one loop over slices, which the compiler vectorises, on
    /// every core for large arrays.
    pub fn contiguous_f32(
        x: &View<'_, CpuBuffer>,
        y: &View<'_, CpuBuffer>,
        out: &mut CpuBuffer,
        a: f32,
        b: f32,
    ) {
        let xs = &x.buffer.as_slice::<f32>()[x.layout.offset..];
        let ys = &y.buffer.as_slice::<f32>()[y.layout.offset..];
        par_chunks(out.as_mut_slice::<f32>(), |start, o| {
            for ((o, x), y) in o.iter_mut().zip(&xs[start..]).zip(&ys[start..]) {
                *o = a * x + b * y;
            }
        });
    }

    /// Contiguous f16: blocks converted to f32 with SIMD (`half`'s slice
    /// conversions), combined, and rounded back once.
    pub fn contiguous_f16(
        x: &View<'_, CpuBuffer>,
        y: &View<'_, CpuBuffer>,
        out: &mut CpuBuffer,
        a: f32,
        b: f32,
    ) {
        use half::slice::HalfFloatSliceExt;
        const BLOCK: usize = 1024;
        let xs = &x.buffer.as_slice::<f16>()[x.layout.offset..];
        let ys = &y.buffer.as_slice::<f16>()[y.layout.offset..];
        par_chunks(out.as_mut_slice::<f16>(), |start, o| {
            let (xs, ys) = (&xs[start..], &ys[start..]);
            let (mut fx, mut fy) = ([0f32; BLOCK], [0f32; BLOCK]);
            for ((o, x), y) in o
                .chunks_mut(BLOCK)
                .zip(xs.chunks(BLOCK))
                .zip(ys.chunks(BLOCK))
            {
                let k = o.len();
                x[..k].convert_to_f32_slice(&mut fx[..k]);
                y[..k].convert_to_f32_slice(&mut fy[..k]);
                for (u, v) in fx[..k].iter_mut().zip(&fy[..k]) {
                    *u = a * *u + b * v;
                }
                o.convert_from_f32_slice(&fx[..k]);
            }
        });
    }

    /// A float element the general path computes in f32.
    pub trait Float: bytemuck::Pod + Send + Sync {
        fn to_f32(self) -> f32;
        fn from_f32(v: f32) -> Self;
    }
    impl Float for f32 {
        fn to_f32(self) -> f32 {
            self
        }
        fn from_f32(v: f32) -> Self {
            v
        }
    }
    impl Float for f16 {
        fn to_f32(self) -> f32 {
            f16::to_f32(self)
        }
        fn from_f32(v: f32) -> Self {
            f16::from_f32(v)
        }
    }
    impl Float for bf16 {
        fn to_f32(self) -> f32 {
            bf16::to_f32(self)
        }
        fn from_f32(v: f32) -> Self {
            bf16::from_f32(v)
        }
    }

    /// Any layouts: each output element finds its inputs through their strides
    /// (MLX's `elem_to_loc`).
    pub fn general<T: Float>(
        x: &View<'_, CpuBuffer>,
        y: &View<'_, CpuBuffer>,
        out: &mut CpuBuffer,
        a: f32,
        b: f32,
    ) {
        let (xs, ys) = (x.buffer.as_slice::<T>(), y.buffer.as_slice::<T>());
        let (xl, yl) = (x.layout, y.layout);
        par_chunks(out.as_mut_slice::<T>(), |start, o| {
            for (i, o) in o.iter_mut().enumerate() {
                let (xo, yo) = (loc(start + i, xl), loc(start + i, yl));
                *o = T::from_f32(a * xs[xo].to_f32() + b * ys[yo].to_f32());
            }
        });
    }

    /// The buffer index of row-major element `i` of a layout.
    fn loc(mut i: usize, l: &Layout) -> usize {
        let mut off = l.offset as isize;
        for d in (0..l.ndim()).rev() {
            off += (i % l.shape[d]) as isize * l.strides[d];
            i /= l.shape[d];
        }
        off as usize
    }
}
