//! The columns of a convolution (im2col) and their adjoint (col2im) as one
//! primitive: the CPU code and transform rules here, the GPU code in `wmx-webgpu`'s
//! `families.rs`. [`super::conv`] builds convolutions on it.

use crate::cpu::CpuBuffer;
use crate::{Array, CpuOutput, CustomPrimitive, DType, Error, Result, View};
use std::sync::Arc;

/// im2col over up to 3 spatial axes: `[N, input..., C]` to `[N, out..., taps, C]`,
/// tap `k` of position `o` reading the input dilated by `input_dilation` at
/// `o * stride + k * kernel_dilation - lo` (zero off the input or between its
/// elements); with `adjoint`, the transpose (columns summed back into
/// `[N, input..., C]`). f32, f16 and bf16.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Im2col {
    /// The input's spatial lengths.
    pub input: Vec<usize>,
    /// The output's spatial lengths.
    pub out: Vec<usize>,
    /// The kernel's lengths.
    pub kernel: Vec<usize>,
    /// Output step per axis.
    pub stride: Vec<usize>,
    /// Spacing of the kernel's taps.
    pub kernel_dilation: Vec<usize>,
    /// Spacing of the input's elements.
    pub input_dilation: Vec<usize>,
    /// Padding before each axis (negative: the input is cropped).
    pub lo: Vec<i64>,
    /// The transpose: columns to an input gradient.
    pub adjoint: bool,
}

impl Im2col {
    /// Whether the kernel takes `dtype` and `d` spatial axes.
    pub(crate) fn takes(dtype: DType, d: usize) -> bool {
        matches!(dtype, DType::F32 | DType::F16 | DType::BF16) && (1..=3).contains(&d)
    }

    /// The output of this primitive for `x` (the image, or with `adjoint` the
    /// columns) of `n` images of `c` channels.
    pub(crate) fn apply(&self, x: &Array) -> Result<Array> {
        let d = self.input.len();
        let (n, c) = (x.shape()[0], x.shape()[x.ndim() - 1]);
        let mut shape = vec![n];
        if self.adjoint {
            shape.extend(&self.input);
        } else {
            shape.extend(&self.out);
            shape.push(self.kernel.iter().product());
        }
        shape.push(c);
        let want = if self.adjoint { d + 3 } else { d + 2 };
        if x.ndim() != want {
            return Err(Error::invalid(
                "im2col",
                format!("input of rank {} for {d} spatial axes", x.ndim()),
            ));
        }
        crate::custom(
            Arc::new(self.clone()),
            &[crate::contiguous(x)?],
            &shape,
            x.dtype(),
        )
    }

    fn transposed(&self) -> Im2col {
        Im2col {
            adjoint: !self.adjoint,
            ..self.clone()
        }
    }

    /// The image element (row-major, without the channel) that column position
    /// `o` and tap `k` read, if any.
    fn source(&self, batch: usize, o: &[usize], k: &[usize]) -> Option<usize> {
        let mut src = batch;
        for a in 0..self.input.len() {
            let q = (o[a] * self.stride[a] + k[a] * self.kernel_dilation[a]) as i64 - self.lo[a];
            let dil = self.input_dilation[a] as i64;
            if q < 0 || q % dil != 0 || q / dil >= self.input[a] as i64 {
                return None;
            }
            src = src * self.input[a] + (q / dil) as usize;
        }
        Some(src)
    }

    /// For each column row (image, position, tap) the image row it reads.
    fn rows(&self, n: usize) -> Vec<Option<usize>> {
        let positions = crate::layout::numel(&self.out);
        let taps = crate::layout::numel(&self.kernel);
        let mut rows = Vec::with_capacity(n * positions * taps);
        let (mut o, mut k) = (vec![0; self.out.len()], vec![0; self.kernel.len()]);
        for b in 0..n {
            for p in 0..positions {
                unravel(p, &self.out, &mut o);
                for t in 0..taps {
                    unravel(t, &self.kernel, &mut k);
                    rows.push(self.source(b, &o, &k));
                }
            }
        }
        rows
    }

    #[allow(clippy::too_many_arguments)]
    fn run<T: Copy>(
        &self,
        x: &[T],
        out: &mut [T],
        n: usize,
        c: usize,
        zero: T,
        ld: fn(T) -> f32,
        st: fn(f32) -> T,
    ) {
        let rows = self.rows(n);
        if self.adjoint {
            let mut acc = vec![0f32; out.len()];
            for (r, src) in rows.iter().enumerate() {
                if let Some(s) = src {
                    for ch in 0..c {
                        acc[s * c + ch] += ld(x[r * c + ch]);
                    }
                }
            }
            for (o, a) in out.iter_mut().zip(acc) {
                *o = st(a);
            }
        } else {
            for (r, src) in rows.iter().enumerate() {
                let dst = &mut out[r * c..(r + 1) * c];
                match src {
                    Some(s) => dst.copy_from_slice(&x[s * c..(s + 1) * c]),
                    None => dst.fill(zero),
                }
            }
        }
    }
}

/// The row-major multi-index of `i` in `shape`, into `idx`.
fn unravel(mut i: usize, shape: &[usize], idx: &mut [usize]) {
    for a in (0..shape.len()).rev() {
        idx[a] = i % shape[a];
        i /= shape[a];
    }
}

impl CustomPrimitive for Im2col {
    fn name(&self) -> &str {
        if self.adjoint { "col2im" } else { "im2col" }
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let (xb, x0) = (inputs[0].buffer, inputs[0].layout.offset);
        let len = inputs[0].layout.numel();
        let (n, c) = (out.shape[0], *out.shape.last().unwrap_or(&0));
        let buf = &mut *out.buffer;
        match out.dtype {
            DType::F32 => {
                let x = &xb.as_slice::<f32>()[x0..x0 + len];
                self.run(x, buf.as_mut_slice(), n, c, 0.0, |v| v, |v| v);
            }
            DType::F16 => {
                let x = &xb.as_slice::<half::f16>()[x0..x0 + len];
                let (ld, st) = (half::f16::to_f32, half::f16::from_f32);
                self.run(x, buf.as_mut_slice(), n, c, half::f16::ZERO, ld, st);
            }
            DType::BF16 => {
                let x = &xb.as_slice::<half::bf16>()[x0..x0 + len];
                let (ld, st) = (half::bf16::to_f32, half::bf16::from_f32);
                self.run(x, buf.as_mut_slice(), n, c, half::bf16::ZERO, ld, st);
            }
            other => {
                return Err(Error::invalid(
                    "im2col",
                    format!("no im2col code for {other}"),
                ));
            }
        }
        Ok(())
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Im2col>()
            .is_some_and(|o| o == self)
    }

    fn jvp(&self, _: &[Array], _: &Array, tangents: &[Option<Array>]) -> Result<Option<Array>> {
        // Linear: the same gather of the tangent.
        tangents[0].as_ref().map(|t| self.apply(t)).transpose()
    }

    fn vjp(&self, _: &[Array], _: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        Ok(vec![Some(self.transposed().apply(ct)?)])
    }

    fn vmap(&self, inputs: &[Array], _: &[bool]) -> Result<Array> {
        // The batch axis joins the images: [V, N, ...] as [V * N, ...].
        let x = &inputs[0];
        let (v, n) = (x.shape()[0], x.shape()[1]);
        let mut flat = vec![(v * n) as isize];
        flat.extend(x.shape()[2..].iter().map(|&s| s as isize));
        let y = self.apply(&crate::reshape(x, &flat)?)?;
        let mut shape = vec![v as isize, n as isize];
        shape.extend(y.shape()[1..].iter().map(|&s| s as isize));
        crate::reshape(&y, &shape)
    }
}
