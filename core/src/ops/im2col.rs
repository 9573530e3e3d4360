//! The columns of a convolution (im2col) and their adjoint (col2im) as one
//! primitive: the CPU code and transform rules here, the GPU code in `wmx-webgpu`'s
//! `families.rs`. [`super::conv`] builds convolutions on it.

use crate::cpu::CpuBuffer;
use crate::{Array, ConvGeometry, CpuOutput, CustomPrimitive, DType, Error, Result, Slice, View};
use std::sync::Arc;

/// im2col over up to 3 spatial axes: `[N, input..., C]` to `[N, out..., taps, C]`,
/// tap `k` of position `o` reading the input dilated by `input_dilation` at
/// `o * stride + k * kernel_dilation - lo` (zero off the input or between its
/// elements); with `adjoint`, the transpose (columns summed back into
/// `[N, input..., C]`). f32, f16 and bf16.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Im2col {
    /// Which input element each tap reads.
    pub geometry: ConvGeometry,
    /// The transpose: columns to an input gradient.
    pub adjoint: bool,
    /// The bits of the f64 value a tap reading padding gives (0.0 for a
    /// convolution, -inf for max pooling); unused by the transpose.
    pub fill: u64,
}

impl Im2col {
    /// Whether the kernel takes `dtype` and `d` spatial axes.
    pub(crate) fn takes(dtype: DType, d: usize) -> bool {
        matches!(dtype, DType::F32 | DType::F16 | DType::BF16) && (1..=3).contains(&d)
    }

    /// The output of this primitive for `x` (the image, or with `adjoint` the
    /// columns) of `n` images of `c` channels.
    pub(crate) fn apply(&self, x: &Array) -> Result<Array> {
        let d = self.geometry.input.len();
        let (n, c) = (x.shape()[0], x.shape()[x.ndim() - 1]);
        let mut shape = vec![n];
        if self.adjoint {
            shape.extend(&self.geometry.input);
        } else {
            shape.extend(&self.geometry.out);
            shape.push(self.geometry.kernel.iter().product());
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

    /// The transpose, and the linear part of a fill (its derivative reads zeros).
    fn transposed(&self) -> Im2col {
        Im2col {
            adjoint: !self.adjoint,
            fill: 0,
            ..self.clone()
        }
    }

    fn linear(&self) -> Im2col {
        Im2col {
            fill: 0,
            ..self.clone()
        }
    }

    /// The image element (row-major, without the channel) that column position
    /// `o` and tap `k` read, if any.
    fn source(&self, batch: usize, o: &[usize], k: &[usize]) -> Option<usize> {
        let g = &self.geometry;
        let mut src = batch;
        for a in 0..g.input.len() {
            src = src * g.input[a] + g.source(a, o[a], k[a])?;
        }
        Some(src)
    }

    /// For each column row (image, position, tap) the image row it reads.
    fn rows(&self, n: usize) -> Vec<Option<usize>> {
        let positions = crate::layout::numel(&self.geometry.out);
        let taps = crate::layout::numel(&self.geometry.kernel);
        let mut rows = Vec::with_capacity(n * positions * taps);
        let (mut o, mut k) = (
            vec![0; self.geometry.out.len()],
            vec![0; self.geometry.kernel.len()],
        );
        for b in 0..n {
            for p in 0..positions {
                unravel(p, &self.geometry.out, &mut o);
                for t in 0..taps {
                    unravel(t, &self.geometry.kernel, &mut k);
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
        let fill = f64::from_bits(self.fill);
        let buf = &mut *out.buffer;
        match out.dtype {
            DType::F32 => {
                let x = &xb.as_slice::<f32>()[x0..x0 + len];
                self.run(x, buf.as_mut_slice(), n, c, fill as f32, |v| v, |v| v);
            }
            DType::F16 => {
                let x = &xb.as_slice::<half::f16>()[x0..x0 + len];
                let (ld, st) = (half::f16::to_f32, half::f16::from_f32);
                self.run(
                    x,
                    buf.as_mut_slice(),
                    n,
                    c,
                    half::f16::from_f64(fill),
                    ld,
                    st,
                );
            }
            DType::BF16 => {
                let x = &xb.as_slice::<half::bf16>()[x0..x0 + len];
                let (ld, st) = (half::bf16::to_f32, half::bf16::from_f32);
                self.run(
                    x,
                    buf.as_mut_slice(),
                    n,
                    c,
                    half::bf16::from_f64(fill),
                    ld,
                    st,
                );
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
        tangents[0]
            .as_ref()
            .map(|t| self.linear().apply(t))
            .transpose()
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

/// Depthwise convolution (one filter per channel) on [`Im2col`]'s geometry: x
/// `[N, input..., C]` and w `[C, taps]` to `[N, out..., C]`, each output the f32
/// sum over taps of the input element the tap reads times the channel's weight.
/// With `transposed`, the transpose (the input gradient): dy `[N, out..., C]` and
/// w to `[N, input..., C]`. f32, f16 and bf16.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Depthwise {
    /// Which input element each tap reads.
    pub geometry: ConvGeometry,
    /// The transposed op.
    pub transposed: bool,
}

impl Depthwise {
    pub(crate) fn apply(&self, x: &Array, w: &Array) -> Result<Array> {
        let g = &self.geometry;
        let mut shape = vec![x.shape()[0]];
        shape.extend(if self.transposed { &g.input } else { &g.out });
        shape.push(x.shape()[x.ndim() - 1]);
        let inputs = [crate::contiguous(x)?, crate::contiguous(w)?];
        crate::custom(Arc::new(self.clone()), &inputs, &shape, x.dtype())
    }

    fn with_transposed(&self, transposed: bool) -> Depthwise {
        Depthwise {
            transposed,
            ..self.clone()
        }
    }

    /// The weights' gradient `[C, taps]`: over images and positions, the columns
    /// of `image` (the forward op's input) times `grad` (its output's gradient).
    fn weight_grad(&self, image: &Array, grad: &Array) -> Result<Array> {
        // Partial sums over chunks of positions: enough chunks for about 2^20
        // (tap, channel) sums, 2^18 threads of a GPU's vec4 kernel (a large GPU's
        // fill), then one reduction.
        let c = image.shape()[image.ndim() - 1].max(1);
        let positions = grad.size() / c;
        let sums_per_chunk = self.geometry.taps() * c.next_power_of_two();
        let chunks = ((1usize << 20) / sums_per_chunk).clamp(1, positions.max(1));
        let parts = DepthwiseWgrad {
            geometry: self.geometry.clone(),
            chunk: positions.div_ceil(chunks).max(1),
        }
        .apply(image, grad)?;
        let g = crate::sum(&parts, Some(&[0]), false)?;
        crate::astype(&g.t()?, image.dtype())
    }

    #[allow(clippy::too_many_arguments)]
    fn run<T: Copy>(
        &self,
        x: &[T],
        w: &[T],
        out: &mut [T],
        n: usize,
        c: usize,
        ld: fn(T) -> f32,
        st: fn(f32) -> T,
    ) {
        let cols = Im2col {
            geometry: self.geometry.clone(),
            adjoint: self.transposed,
            fill: 0,
        };
        let taps = self.geometry.taps();
        let mut acc = vec![0f32; out.len()];
        for (r, src) in cols.rows(n).iter().enumerate() {
            let (pos, t) = (r / taps, r % taps);
            if let Some(s) = *src {
                // Forward: out[pos] gathers x[s]; transposed: dx[s] gathers dy[pos].
                let (to, from) = if self.transposed { (s, pos) } else { (pos, s) };
                for ch in 0..c {
                    acc[to * c + ch] += ld(x[from * c + ch]) * ld(w[ch * taps + t]);
                }
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            *o = st(a);
        }
    }
}

impl CustomPrimitive for Depthwise {
    fn name(&self) -> &str {
        if self.transposed {
            "depthwise_t"
        } else {
            "depthwise"
        }
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let part = |i: usize| {
            (
                inputs[i].buffer,
                inputs[i].layout.offset,
                inputs[i].layout.numel(),
            )
        };
        let ((xb, x0, xn), (wb, w0, wn)) = (part(0), part(1));
        let (n, c) = (out.shape[0], *out.shape.last().unwrap_or(&0));
        let buf = &mut *out.buffer;
        macro_rules! run {
            ($t:ty, $ld:expr, $st:expr) => {
                self.run(
                    &xb.as_slice::<$t>()[x0..x0 + xn],
                    &wb.as_slice::<$t>()[w0..w0 + wn],
                    buf.as_mut_slice(),
                    n,
                    c,
                    $ld,
                    $st,
                )
            };
        }
        match out.dtype {
            DType::F32 => run!(f32, |v| v, |v| v),
            DType::F16 => run!(half::f16, half::f16::to_f32, half::f16::from_f32),
            DType::BF16 => run!(half::bf16, half::bf16::to_f32, half::bf16::from_f32),
            other => {
                return Err(Error::invalid(
                    "depthwise",
                    format!("no depthwise code for {other}"),
                ));
            }
        }
        Ok(())
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Depthwise>()
            .is_some_and(|o| o == self)
    }

    fn jvp(
        &self,
        primals: &[Array],
        _: &Array,
        tangents: &[Option<Array>],
    ) -> Result<Option<Array>> {
        // Linear in each input.
        bilinear_jvp(|a, b| self.apply(a, b), primals, tangents)
    }

    fn vjp(&self, primals: &[Array], _: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        let (x, w) = (&primals[0], &primals[1]);
        let back = self.with_transposed(!self.transposed).apply(ct, w)?;
        let dw = if self.transposed {
            self.weight_grad(ct, x)?
        } else {
            self.weight_grad(x, ct)?
        };
        Ok(vec![Some(back), Some(dw)])
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        let (x, w) = (&inputs[0], &inputs[1]);
        if batched[1] {
            // A filter per batch index: one call each.
            return vmap_loop(|a, b| self.apply(a, b), inputs, batched);
        }
        let (v, n) = (x.shape()[0], x.shape()[1]);
        let mut flat = vec![(v * n) as isize];
        flat.extend(x.shape()[2..].iter().map(|&s| s as isize));
        let y = self.apply(&crate::reshape(x, &flat)?, w)?;
        let mut shape = vec![v as isize, n as isize];
        shape.extend(y.shape()[1..].iter().map(|&s| s as isize));
        crate::reshape(&y, &shape)
    }
}

/// The weights' gradient of a depthwise convolution in f32 partial sums: `image`
/// `[N, input..., C]` and `grad` `[N, out..., C]` (one dtype) to `[chunks, taps,
/// C]` f32, chunk `s` summing, over output positions `s * chunk ..` (row-major
/// over `[N, out...]`), `image` at the position each tap reads times `grad`.
/// Summed over its first axis it is the gradient (transposed to `[C, taps]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepthwiseWgrad {
    /// Which input element each tap reads.
    pub geometry: ConvGeometry,
    /// Output positions a partial sum covers.
    pub chunk: usize,
}

impl DepthwiseWgrad {
    fn chunks(&self, image: &Array) -> usize {
        let positions = image.shape()[0] * crate::layout::numel(&self.geometry.out);
        positions.div_ceil(self.chunk)
    }

    pub(crate) fn apply(&self, image: &Array, grad: &Array) -> Result<Array> {
        let c = image.shape()[image.ndim() - 1];
        let shape = [self.chunks(image), self.geometry.taps(), c];
        let inputs = [crate::contiguous(image)?, crate::contiguous(grad)?];
        crate::custom(Arc::new(self.clone()), &inputs, &shape, DType::F32)
    }

    /// `ct` `[chunks, taps, C]` as one row per output position `[N, out..., taps,
    /// C]` (each position's chunk's row).
    fn per_position(&self, ct: &Array, grad: &Array) -> Result<Array> {
        let (s, t, c) = (ct.shape()[0], ct.shape()[1], ct.shape()[2]);
        let every = crate::broadcast_to(&crate::expand_dims(ct, 1)?, &[s, self.chunk, t, c])?;
        let flat = crate::reshape(&every, &[(s * self.chunk) as isize, t as isize, c as isize])?;
        let positions = grad.size() / c.max(1);
        let rows = flat.slice(&[Slice::range(0, positions as isize)])?;
        let mut shape: Vec<isize> = grad.shape()[..grad.ndim() - 1]
            .iter()
            .map(|&v| v as isize)
            .collect();
        shape.extend([t as isize, c as isize]);
        crate::reshape(&rows, &shape)
    }
}

impl CustomPrimitive for DepthwiseWgrad {
    fn name(&self) -> &str {
        "depthwise_wgrad"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let part = |i: usize| {
            (
                inputs[i].buffer,
                inputs[i].layout.offset,
                inputs[i].layout.numel(),
            )
        };
        let ((ib, i0, ilen), (gb, g0, glen)) = (part(0), part(1));
        let n = inputs[0].layout.shape[0];
        let c = *out.shape.last().unwrap_or(&0);
        let cols = Im2col {
            geometry: self.geometry.clone(),
            adjoint: false,
            fill: 0,
        };
        let taps = self.geometry.taps();
        let o = out.buffer.as_mut_slice::<f32>();
        macro_rules! run {
            ($t:ty, $ld:expr) => {{
                let (x, g) = (
                    &ib.as_slice::<$t>()[i0..i0 + ilen],
                    &gb.as_slice::<$t>()[g0..g0 + glen],
                );
                for (r, src) in cols.rows(n).iter().enumerate() {
                    let (pos, t) = (r / taps, r % taps);
                    if let Some(s) = *src {
                        let at = (pos / self.chunk * taps + t) * c;
                        for ch in 0..c {
                            o[at + ch] += $ld(x[s * c + ch]) * $ld(g[pos * c + ch]);
                        }
                    }
                }
            }};
        }
        match inputs[0].dtype {
            DType::F32 => run!(f32, |v: f32| v),
            DType::F16 => run!(half::f16, half::f16::to_f32),
            DType::BF16 => run!(half::bf16, half::bf16::to_f32),
            other => {
                return Err(Error::invalid(
                    "depthwise_wgrad",
                    format!("no depthwise code for {other}"),
                ));
            }
        }
        Ok(())
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<DepthwiseWgrad>()
            .is_some_and(|o| o == self)
    }

    fn jvp(
        &self,
        primals: &[Array],
        _: &Array,
        tangents: &[Option<Array>],
    ) -> Result<Option<Array>> {
        // Bilinear in the image and the gradient.
        bilinear_jvp(|a, b| self.apply(a, b), primals, tangents)
    }

    fn vjp(&self, primals: &[Array], _: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        // Through the columns: d(image) = col2im(grad x ct), d(grad) = sum over
        // taps of columns x ct, with ct spread over each chunk's positions.
        let (image, grad) = (&primals[0], &primals[1]);
        let dt = image.dtype();
        let each = self.per_position(ct, grad)?;
        let cols = Im2col {
            geometry: self.geometry.clone(),
            adjoint: false,
            fill: 0,
        };
        let wide = |a: &Array| crate::astype(a, DType::F32);
        let d_grad = crate::sum(
            &crate::multiply(&wide(&cols.apply(image)?)?, &each)?,
            Some(&[-2]),
            false,
        )?;
        let spread = crate::multiply(&wide(&crate::expand_dims(grad, -2)?)?, &each)?;
        let d_image = cols.transposed().apply(&crate::astype(&spread, dt)?)?;
        Ok(vec![Some(d_image), Some(crate::astype(&d_grad, dt)?)])
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        vmap_loop(|a, b| self.apply(a, b), inputs, batched)
    }
}

/// The jvp of an op `f` bilinear (or linear) in its two inputs: `f(tx, y) + f(x, ty)`.
fn bilinear_jvp(
    f: impl Fn(&Array, &Array) -> Result<Array>,
    primals: &[Array],
    tangents: &[Option<Array>],
) -> Result<Option<Array>> {
    let mut out = None;
    if let Some(t) = &tangents[0] {
        out = Some(f(t, &primals[1])?);
    }
    if let Some(t) = &tangents[1] {
        let y = f(&primals[0], t)?;
        out = Some(match out {
            Some(o) => crate::add(&o, &y)?,
            None => y,
        });
    }
    Ok(out)
}

/// vmap of a two-input op by one call per batch index (inputs batched on axis 0
/// where `batched`), stacked.
fn vmap_loop(
    f: impl Fn(&Array, &Array) -> Result<Array>,
    inputs: &[Array],
    batched: &[bool],
) -> Result<Array> {
    let v = inputs[if batched[0] { 0 } else { 1 }].shape()[0];
    let pick = |a: &Array, b: bool, i: isize| -> Result<Array> {
        if b {
            crate::squeeze(&a.slice(&[Slice::range(i, i + 1)])?, Some(&[0]))
        } else {
            Ok(a.clone())
        }
    };
    let ys: Vec<Array> = (0..v as isize)
        .map(|i| {
            f(
                &pick(&inputs[0], batched[0], i)?,
                &pick(&inputs[1], batched[1], i)?,
            )
        })
        .collect::<Result<_>>()?;
    crate::stack(&ys.iter().collect::<Vec<_>>(), 0)
}
