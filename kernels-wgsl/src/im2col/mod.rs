//! Convolution columns (im2col) and their adjoint (col2im): the gather that turns a
//! convolution into one matrix product, with padding, strides and both dilations
//! in its index arithmetic (nothing padded or dilated in memory), and the gather
//! that sums columns back into an input gradient. Up to 3 spatial axes.

use crate::compose::{Family, Io, ModuleSpec, Variant, WORDS, check_out as check_dtype};
use crate::driver::{Batch, Driver};
use crate::dtype::{DType, Words, scalar_bits};
use crate::kernels::{Kernels, MAX_GROUPS};
use crate::layout::{Contig, Strided, check_out, check_view, is_row_major};
use crate::{ConvGeometry, Error, Result};

const COLUMNS: &str = include_str!("columns.wgsl");

/// The columns: x (f32, f16 or bf16) to cols of its dtype (`im2col`), and back
/// (`col2im`): a kernel over whole words of rows of channels, one over vec4s of
/// words (`_vec`) where rows are whole vec4s, and one over elements (`_elems`)
/// for channels that split words.
pub static IM2COL: Family = Family {
    name: "Im2col",
    arity: 1,
    takes: |s| s.inputs.len() == 1,
    entry: |s| match s.op.name() {
        "im2col" => "im2col_rows",
        "col2im" => "col2im_rows",
        "im2col_vec" => "im2col_vec",
        "col2im_vec" => "col2im_vec",
        _ => "general",
    },
    raw: |_| false,
    io: |s| {
        if s.op.name().ends_with("_vec") {
            Io {
                words: false,
                out: "array<vec4<u32>>",
                ..Io::elementwise(s)
            }
        } else {
            Io::elementwise(s)
        }
    },
    body: |spec, _| {
        let d = spec.inputs[0];
        if !matches!(d, DType::F32 | DType::F16 | DType::BF16) || spec.variant != Variant::General {
            return Err(Error::Shape(format!(
                "im2col reads f32, f16 or bf16 (general variant), got {:?} ({:?})",
                spec.inputs, spec.variant
            )));
        }
        check_dtype(spec, d)?;
        match spec.op.name() {
            "im2col" | "im2col_elems" => Ok(vec![WORDS, COLUMNS, include_str!("im2col.wgsl")]),
            "col2im" | "col2im_elems" => Ok(vec![WORDS, COLUMNS, include_str!("col2im.wgsl")]),
            "im2col_vec" | "col2im_vec" => Ok(vec![COLUMNS, include_str!("im2col_vec.wgsl")]),
            op => Err(Error::Shape(format!("im2col has no op {op}"))),
        }
    },
    specs: |t| {
        let mut v = Vec::new();
        for d in [DType::F32, DType::F16, DType::BF16] {
            for op in [
                "im2col",
                "im2col_elems",
                "im2col_vec",
                "col2im",
                "col2im_elems",
                "col2im_vec",
            ] {
                v.push(ModuleSpec::new(
                    &IM2COL,
                    op,
                    vec![d],
                    d,
                    Variant::General,
                    t,
                ));
            }
        }
        v
    },
};

/// Depthwise convolution (one filter per channel): x and its weights `[C, taps]`
/// (f32, f16 or bf16, one dtype) to the output, or (a parameter) the output's
/// gradient and the weights to the input's. One loop over output elements, the
/// taps summed in f32. The `_vec` ops read their inputs in vec4s of words (channel
/// rows of whole vec4s, offsets aligned).
pub static DEPTHWISE: Family = Family {
    name: "Depthwise",
    arity: 2,
    takes: |s| s.inputs.len() == 2,
    entry: |s| match s.op.name() {
        "depthwise" => "depthwise_rows",
        "depthwise_vec" => "depthwise_vec",
        "depthwise_wgrad" => "depthwise_wgrad",
        "depthwise_wgrad_vec" => "depthwise_wgrad_vec",
        _ => "general",
    },
    raw: |_| false,
    io: |s| Io {
        words: !s.op.name().ends_with("_vec"),
        out: "array<u32>",
        ..Io::elementwise(s)
    },
    body: |spec, _| {
        let d = spec.inputs[0];
        if !matches!(d, DType::F32 | DType::F16 | DType::BF16)
            || spec.inputs[1] != d
            || spec.variant != Variant::General
        {
            return Err(Error::Shape(format!(
                "depthwise reads f32, f16 or bf16 (one dtype, general variant), got {:?} ({:?})",
                spec.inputs, spec.variant
            )));
        }
        // The weights' gradient's partial sums are f32.
        let out = if spec.op.name().starts_with("depthwise_wgrad") {
            DType::F32
        } else {
            d
        };
        check_dtype(spec, out)?;
        match spec.op.name() {
            "depthwise"
            | "depthwise_elems"
            | "depthwise_vec"
            | "depthwise_wgrad"
            | "depthwise_wgrad_vec" => Ok(vec![WORDS, COLUMNS, include_str!("depthwise.wgsl")]),
            op => Err(Error::Shape(format!("depthwise has no op {op}"))),
        }
    },
    specs: |t| {
        let mut v = Vec::new();
        for d in [DType::F32, DType::F16, DType::BF16] {
            for op in [
                "depthwise",
                "depthwise_elems",
                "depthwise_vec",
                "depthwise_wgrad",
                "depthwise_wgrad_vec",
            ] {
                let out = if op.starts_with("depthwise_wgrad") {
                    DType::F32
                } else {
                    d
                };
                v.push(ModuleSpec::new(
                    &DEPTHWISE,
                    op,
                    vec![d, d],
                    out,
                    Variant::General,
                    t,
                ));
            }
        }
        v
    },
};

/// columns.wgsl's geometry words: `[n, x0, C, T, per axis (in, out, k, stride,
/// kdil, idil, lo)]`, length-1 axes before the given ones (so the last given axis
/// is the kernels' axis 2, which `depthwise_rows` blocks).
fn geometry_words(g: &ConvGeometry, n: usize, x0: usize, channels: usize) -> Vec<u32> {
    let mut w = vec![n as u32, x0 as u32, channels as u32, g.taps() as u32];
    let pad = 3 - g.input.len();
    for a in 0..3 {
        if a < pad {
            w.extend([1, 1, 1, 1, 1, 1, 0]);
        } else {
            let a = a - pad;
            w.extend([
                g.input[a] as u32,
                g.out[a] as u32,
                g.kernel[a] as u32,
                g.stride[a] as u32,
                g.kernel_dilation[a] as u32,
                g.input_dilation[a] as u32,
                g.lo[a] as i32 as u32,
            ]);
        }
    }
    w
}

impl<D: Driver> Kernels<D> {
    /// im2col (`adjoint = false`): the row-major `x` `[N, input..., C]` into `out`
    /// `[N, out..., taps, C]` (`fill` where a tap reads padding: 0 for a
    /// convolution, -inf for max pooling); col2im (`true`): `x` is the columns and
    /// `out` `[N, input..., C]` sums them back (`fill` unused).
    #[allow(clippy::too_many_arguments)]
    pub fn im2col(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        p: &ConvGeometry,
        adjoint: bool,
        fill: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let d = p.input.len();
        let (cols, image) = if adjoint {
            (x.shape, out.shape)
        } else {
            (out.shape, x.shape)
        };
        let taps: usize = p.kernel.iter().product();
        let ok = p.is_valid()
            && image.len() == d + 2
            && cols.len() == d + 3
            && image[1..=d] == p.input[..]
            && cols[1..=d] == p.out[..]
            && cols[d + 1] == taps
            && cols[0] == image[0]
            && cols[d + 2] == image[d + 1]
            && p.stride
                .iter()
                .chain(&p.kernel_dilation)
                .chain(&p.input_dilation)
                .all(|&s| s > 0)
            && out.dtype == x.dtype
            && is_row_major(x);
        if !ok {
            return Err(Error::Shape(format!(
                "im2col: x {:?} (strides {:?}), out {:?}, {p:?}, adjoint {adjoint}",
                x.shape, x.strides, out.shape
            )));
        }
        check_view(x, "im2col x")?;
        check_out(out)?;
        let channels = image[d + 1];
        let epw = out.dtype.epw();
        let words = channels.is_multiple_of(epw) && x.offset.is_multiple_of(epw);
        let vec4 = channels.is_multiple_of(4 * epw) && x.offset.is_multiple_of(4 * epw);
        let op = match (adjoint, vec4, words) {
            (false, true, _) => "im2col_vec",
            (false, false, true) => "im2col",
            (false, false, false) => "im2col_elems",
            (true, true, _) => "col2im_vec",
            (true, false, true) => "col2im",
            (true, false, false) => "col2im_elems",
        };
        let spec = self.spec(&IM2COL, op, vec![x.dtype], out.dtype, Variant::General, 0);
        let n: usize = out.shape.iter().product();
        if n == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let fits = |v: usize| u32::try_from(v).is_ok();
        if !fits(n) || !fits(x.shape.iter().product()) {
            return Err(Error::Shape(format!(
                "im2col: {n} elements past the kernel's 32-bit indices"
            )));
        }
        let mut params = geometry_words(p, n, x.offset, channels);
        // Word (vec4) kernels: lanes to a row (a power of two; im2col's lanes copy
        // several words (vec4s) each, col2im's one each). im2col_vec's lanes take an
        // output position's rows of every tap (the word kernel's rows stay one per
        // lane group: its rows of a few words are written contiguously, run 165).
        let cw = channels / if vec4 { 4 * epw } else { epw };
        let mut rows = n / channels;
        if vec4 && !adjoint {
            rows /= taps.max(1);
        }
        let lanes = if adjoint {
            cw.next_power_of_two()
        } else {
            cw.next_power_of_two().min(32)
        };
        let threads = if words || vec4 {
            rows * lanes
        } else {
            n.div_ceil(epw)
        };
        if !fits(threads) {
            return Err(Error::Shape(format!(
                "im2col: {threads} threads past the kernel's 32-bit count"
            )));
        }
        let bits = scalar_bits(fill, out.dtype);
        let fill_word = (0..epw).fold(0u32, |w, j| w | bits << (j * 32 / epw));
        params.extend([cw as u32, lanes.trailing_zeros(), rows as u32, fill_word]);
        let groups = (threads as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
        self.record(b, &spec, [out.binding(), x.binding()], params, groups)
    }
}

impl<D: Driver> Kernels<D> {
    /// Depthwise convolution of the row-major `x` `[N, input..., C]` with the
    /// row-major weights `w` `[C, taps]` into `out` `[N, out..., C]`; with
    /// `transposed`, `x` is the output's gradient `[N, out..., C]` and `out` the
    /// input's `[N, input..., C]`.
    pub fn depthwise(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        w: &Strided<D::Buffer>,
        p: &ConvGeometry,
        transposed: bool,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let d = p.input.len();
        let (from, to) = if transposed {
            (&p.out, &p.input)
        } else {
            (&p.input, &p.out)
        };
        let taps: usize = p.kernel.iter().product();
        let c = x.shape.last().copied().unwrap_or(0);
        let ok = p.is_valid()
            && x.shape.len() == d + 2
            && out.shape.len() == d + 2
            && x.shape[1..=d] == from[..]
            && out.shape[1..=d] == to[..]
            && out.shape[0] == x.shape[0]
            && out.shape[d + 1] == c
            && w.shape == [c, taps]
            && out.dtype == x.dtype
            && w.dtype == x.dtype
            && is_row_major(x)
            && is_row_major(w);
        if !ok {
            return Err(Error::Shape(format!(
                "depthwise: x {:?} (strides {:?}), w {:?}, out {:?}, {p:?}, transposed {transposed}",
                x.shape, x.strides, w.shape, out.shape
            )));
        }
        check_view(x, "depthwise x")?;
        check_view(w, "depthwise weights")?;
        check_out(out)?;
        let epw = out.dtype.epw();
        let words = c.is_multiple_of(epw) && x.offset.is_multiple_of(epw);
        let vec4 = c.is_multiple_of(4 * epw) && x.offset.is_multiple_of(4 * epw);
        let op = if vec4 {
            "depthwise_vec"
        } else if words {
            "depthwise"
        } else {
            "depthwise_elems"
        };
        let spec = self.spec(
            &DEPTHWISE,
            op,
            vec![x.dtype, w.dtype],
            out.dtype,
            Variant::General,
            0,
        );
        let n: usize = out.shape.iter().product();
        if n == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        if u32::try_from(n).is_err() || u32::try_from(x.shape.iter().product::<usize>()).is_err() {
            return Err(Error::Shape(format!(
                "depthwise: {n} elements past the kernel's 32-bit indices"
            )));
        }
        let mut params = geometry_words(p, n, x.offset, c);
        params.extend([w.offset as u32, transposed as u32]);
        // depthwise_rows (_vec): a thread per word (vec4 of words) of four positions
        // along the last axis.
        let d = p.input.len();
        let last = out.shape[d];
        let per = if vec4 { 4 * epw } else { epw };
        let (cw, nb) = (c / per, last.div_ceil(4));
        let lanes = cw.next_power_of_two();
        let blocks = n / c / last.max(1) * nb;
        let threads = if words || vec4 {
            blocks * lanes
        } else {
            n.div_ceil(epw)
        };
        if u32::try_from(threads).is_err() {
            return Err(Error::Shape(format!(
                "depthwise: {threads} threads past the kernel's 32-bit count"
            )));
        }
        params.extend([cw as u32, lanes.trailing_zeros(), nb as u32, blocks as u32]);
        let groups = (threads as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
        self.record(
            b,
            &spec,
            [out.binding(), x.binding(), w.binding()],
            params,
            groups,
        )
    }
}

impl<D: Driver> Kernels<D> {
    /// The weights' gradient of a depthwise convolution, in f32 partial sums:
    /// `image` `[N, input..., C]` and `grad` `[N, out..., C]` (one dtype, row-major)
    /// into `out` `[chunks, taps, C]` (f32), chunk `s`
    /// summing `image` at each tap's input position times `grad` over the `s`-th
    /// `chunk` output positions. Sum `out` over its first axis for the gradient.
    #[allow(clippy::too_many_arguments)]
    pub fn depthwise_wgrad(
        &self,
        b: &mut Batch<D>,
        image: &Strided<D::Buffer>,
        grad: &Strided<D::Buffer>,
        p: &ConvGeometry,
        chunk: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let d = p.input.len();
        let c = image.shape.last().copied().unwrap_or(0);
        let positions: usize = grad.shape[..=d].iter().product();
        let chunks = positions.div_ceil(chunk.max(1));
        let ok = p.is_valid()
            && chunk > 0
            && image.shape.len() == d + 2
            && grad.shape.len() == d + 2
            && image.shape[1..=d] == p.input[..]
            && grad.shape[1..=d] == p.out[..]
            && grad.shape[0] == image.shape[0]
            && grad.shape[d + 1] == c
            && grad.dtype == image.dtype
            && out.dtype == DType::F32
            && out.shape == [chunks, p.taps(), c]
            && is_row_major(image)
            && is_row_major(grad);
        if !ok {
            return Err(Error::Shape(format!(
                "depthwise_wgrad: image {:?}, grad {:?}, out {:?}, chunk {chunk}, {p:?}",
                image.shape, grad.shape, out.shape
            )));
        }
        check_view(image, "depthwise_wgrad image")?;
        check_view(grad, "depthwise_wgrad grad")?;
        check_out(out)?;
        let per = 4 * image.dtype.epw();
        let vec4 = [c, image.offset, grad.offset]
            .iter()
            .all(|v| v.is_multiple_of(per));
        let spec = self.spec(
            &DEPTHWISE,
            if vec4 {
                "depthwise_wgrad_vec"
            } else {
                "depthwise_wgrad"
            },
            vec![image.dtype, grad.dtype],
            DType::F32,
            Variant::General,
            0,
        );
        let n = positions * c;
        if n == 0 || out.shape.iter().product::<usize>() == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let lanes = if vec4 { c / per } else { c }.next_power_of_two();
        let threads = chunks * p.taps() * lanes;
        if u32::try_from(n).is_err() || u32::try_from(threads).is_err() {
            return Err(Error::Shape(format!(
                "depthwise_wgrad: {n} elements or {threads} threads past 32-bit counts"
            )));
        }
        let mut params = geometry_words(p, n, image.offset, c);
        params.extend([
            grad.offset as u32,
            chunk as u32,
            lanes.trailing_zeros(),
            chunks as u32,
        ]);
        let groups = (threads as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
        self.record(
            b,
            &spec,
            [out.binding(), image.binding(), grad.binding()],
            params,
            groups,
        )
    }
}
