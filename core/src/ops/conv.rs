//! Convolution and pooling, channels-last as MLX: inputs are `[N, spatial..., C]`
//! and convolution weights `[C_out, kernel..., C_in / groups]`.
//!
//! Every op here is a composite of views, `concatenate`, `matmul` and reductions
//! (im2col: one strided view per kernel tap, joined, then one product), so each
//! differentiates, batches and fuses as those ops do, on every backend and dtype.
//! [`to_channels_last`] and [`conv_weight_from_torch`] convert PyTorch's NCHW
//! arrays and weights.

use super::im2col::{Depthwise, Im2col};
use super::{
    Slice, astype, broadcast_to, divide, matmul, max, mean, moveaxis, multiply, pad, reshape,
    scalar_like, shaping::PadMode, slice, slice_update, stack, sum, transpose,
};
use crate::{Array, ConvGeometry, CustomFunction, DType, Error, Result};

/// Options of [`conv_general`], per spatial axis. A list of one value applies to
/// every spatial axis; an empty list is the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvOptions {
    /// Step between output positions (default 1).
    pub stride: Vec<usize>,
    /// Zeros added `(before, after)` the input on each spatial axis (default none).
    pub padding: Vec<(usize, usize)>,
    /// Spacing of the kernel's taps (default 1; 2 skips every other element).
    pub kernel_dilation: Vec<usize>,
    /// Spacing of the input's elements: `k - 1` zeros between neighbours (default
    /// 1; a transposed convolution's stride).
    pub input_dilation: Vec<usize>,
    /// Channel groups (default 1): group `g` convolves input channels
    /// `g * C_in/groups ..` with weight rows `g * C_out/groups ..`. `groups = C_in`
    /// is a depthwise convolution.
    pub groups: usize,
    /// Flips the kernel on its spatial axes: `true` is a convolution, `false` (the
    /// default, as in PyTorch and MLX) a cross-correlation.
    pub flip: bool,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: vec![],
            padding: vec![],
            kernel_dilation: vec![],
            input_dilation: vec![],
            groups: 1,
            flip: false,
        }
    }
}

/// `v` with one value per spatial axis (`[]` the default, `[a]` every axis).
fn per_axis<T: Copy>(
    op: &'static str,
    name: &str,
    v: &[T],
    d: usize,
    default: T,
) -> Result<Vec<T>> {
    match v.len() {
        0 => Ok(vec![default; d]),
        1 => Ok(vec![v[0]; d]),
        n if n == d => Ok(v.to_vec()),
        n => Err(Error::invalid(
            op,
            format!("{name} has {n} values for {d} spatial axes"),
        )),
    }
}

fn positive(op: &'static str, name: &str, v: &[usize]) -> Result<()> {
    match v.iter().position(|&s| s == 0) {
        Some(i) => Err(Error::invalid(
            op,
            format!("{name} must be positive, got 0 on spatial axis {i}"),
        )),
        None => Ok(()),
    }
}

/// A convolution's geometry after defaults, with padding that may be negative
/// (a transposed convolution's padding past the kernel crops).
struct Geometry {
    stride: Vec<usize>,
    lo: Vec<i64>,
    hi: Vec<i64>,
    kernel_dilation: Vec<usize>,
    input_dilation: Vec<usize>,
    groups: usize,
    flip: bool,
}

/// The general convolution (MLX's `conv_general`): `x` `[N, spatial..., C_in]`
/// with `w` `[C_out, kernel..., C_in / groups]` gives `[N, out..., C_out]` with
/// `out = (in_dilated + before + after - kernel_dilated) / stride + 1` per axis.
///
/// Floating-point dtypes (promoted between `x` and `w`); half types accumulate in
/// f32. A kernel larger than the padded input, channels that do not divide into
/// the groups, or options of the wrong length are an `Err`. A batch of 0 gives an
/// empty result.
pub fn conv_general(x: &Array, w: &Array, opts: &ConvOptions) -> Result<Array> {
    const OP: &str = "conv_general";
    let d = spatial_axes(OP, x, w)?;
    let padding = per_axis(OP, "padding", &opts.padding, d, (0, 0))?;
    let g = Geometry {
        stride: per_axis(OP, "stride", &opts.stride, d, 1)?,
        lo: padding.iter().map(|p| p.0 as i64).collect(),
        hi: padding.iter().map(|p| p.1 as i64).collect(),
        kernel_dilation: per_axis(OP, "kernel_dilation", &opts.kernel_dilation, d, 1)?,
        input_dilation: per_axis(OP, "input_dilation", &opts.input_dilation, d, 1)?,
        groups: opts.groups,
        flip: opts.flip,
    };
    convolve(OP, x, w, &g)
}

/// The number of spatial axes of `x` and `w` (both of rank `2 + d`, `d >= 1`).
fn spatial_axes(op: &'static str, x: &Array, w: &Array) -> Result<usize> {
    if x.ndim() < 3 || w.ndim() != x.ndim() {
        return Err(Error::invalid(
            op,
            format!(
                "input [N, spatial..., C_in] and weight [C_out, kernel..., C_in/groups] need one \
                 rank of at least 3, got {:?} and {:?}",
                x.shape(),
                w.shape()
            ),
        ));
    }
    Ok(x.ndim() - 2)
}

fn convolve(op: &'static str, x: &Array, w: &Array, g: &Geometry) -> Result<Array> {
    let d = x.ndim() - 2;
    let dtype = DType::promote(x.dtype(), w.dtype());
    if !dtype.is_float() {
        return Err(Error::UnsupportedDType { op, dtype });
    }
    positive(op, "stride", &g.stride)?;
    positive(op, "kernel_dilation", &g.kernel_dilation)?;
    positive(op, "input_dilation", &g.input_dilation)?;
    let (n, c_in) = (x.shape()[0], x.shape()[d + 1]);
    let (c_out, c_group) = (w.shape()[0], w.shape()[d + 1]);
    let groups = g.groups;
    if groups == 0 || c_out % groups != 0 || c_group.checked_mul(groups) != Some(c_in) {
        return Err(Error::invalid(
            op,
            format!(
                "input of {c_in} channels and weight {:?} ({c_group} input channels per group) \
                 do not make {groups} groups (C_in and C_out must both divide into them)",
                w.shape()
            ),
        ));
    }
    let kernel = &w.shape()[1..=d];
    let mut out = Vec::with_capacity(d);
    for (i, &k) in kernel.iter().enumerate() {
        let k = k as i64;
        let len = x.shape()[1 + i] as i64;
        if k == 0 {
            return Err(Error::invalid(
                op,
                format!("the kernel has length 0 on spatial axis {i}"),
            ));
        }
        let dilated = if len == 0 {
            0
        } else {
            (len - 1) * g.input_dilation[i] as i64 + 1
        };
        let extent = (k - 1) * g.kernel_dilation[i] as i64 + 1;
        let span = dilated + g.lo[i] + g.hi[i];
        if span < extent {
            return Err(Error::invalid(
                op,
                format!(
                    "on spatial axis {i} the kernel spans {extent} elements, more than the {span} \
                     of the padded input {:?}",
                    x.shape()
                ),
            ));
        }
        out.push(((span - extent) / g.stride[i] as i64 + 1) as usize);
    }
    let x = astype(x, dtype)?;
    let mut w = astype(w, dtype)?;
    if g.flip {
        let mut flips = vec![Slice::ALL];
        flips.extend((0..d).map(|_| Slice::reversed()));
        w = slice(&w, &flips)?;
    }
    // [N, out..., taps, C_in]: the im2col matrix: a view for 1x1 kernels, else
    // one kernel where there is one, else one strided view per tap of the padded
    // input.
    let geometry = || ConvGeometry {
        input: x.shape()[1..=d].to_vec(),
        out: out.clone(),
        kernel: kernel.to_vec(),
        stride: g.stride.clone(),
        kernel_dilation: g.kernel_dilation.clone(),
        input_dilation: g.input_dilation.clone(),
        lo: g.lo.clone(),
    };
    if groups > 1 && c_group == 1 && c_out == groups && Im2col::takes(dtype, d) {
        // Depthwise with one filter per channel: one kernel, no columns.
        let taps = kernel.iter().product::<usize>() as isize;
        let w = reshape(&w, &[c_out as isize, taps])?;
        return Depthwise {
            geometry: geometry(),
            transposed: false,
        }
        .apply(&x, &w);
    }
    let direct = kernel.iter().all(|&k| k == 1)
        && g.lo.iter().all(|&p| p == 0)
        && g.hi.iter().all(|&p| p <= 0)
        && g.input_dilation.iter().all(|&s| s == 1);
    let cols = if direct {
        // A 1x1 kernel inside the input: the columns are a strided view of it.
        let axes: Vec<usize> = (1..=d).collect();
        windows(
            &x,
            &axes,
            kernel,
            &g.kernel_dilation,
            &g.stride,
            &out,
            d + 1,
        )?
    } else if Im2col::takes(dtype, d) {
        Im2col {
            geometry: geometry(),
            adjoint: false,
            fill: 0,
        }
        .apply(&x)?
    } else {
        let axes: Vec<usize> = (1..=d).collect();
        let x = dilate_and_pad(&x, g)?;
        windows(
            &x,
            &axes,
            kernel,
            &g.kernel_dilation,
            &g.stride,
            &out,
            d + 1,
        )?
    };
    let taps: usize = kernel.iter().product();
    let m = n * out.iter().product::<usize>();
    let (mi, c_out_i) = (m as isize, c_out as isize);
    let (t, cg, og, gi) = (
        taps as isize,
        c_group as isize,
        (c_out / groups) as isize,
        groups as isize,
    );
    let y = if groups == 1 {
        let cols = reshape(&cols, &[mi, t * cg])?;
        tall_product(&cols, &reshape(&w, &[c_out_i, t * cg])?)?
    } else if c_group == 1 {
        // Depthwise: a product per channel over the taps, not `groups` products
        // of one column each.
        let wide = |a: &Array| match dtype {
            DType::F16 | DType::BF16 => astype(a, DType::F32),
            _ => Ok(a.clone()),
        };
        let cols = reshape(&cols, &[mi, t, gi, 1])?;
        let wt = transpose(&reshape(&w, &[gi, og, t])?, Some(&[2, 0, 1]))?;
        let y = sum(&multiply(&wide(&cols)?, &wide(&wt)?)?, Some(&[1]), false)?;
        astype(&reshape(&y, &[mi, c_out_i])?, dtype)?
    } else {
        let cols = transpose(&reshape(&cols, &[mi, t, gi, cg])?, Some(&[2, 0, 1, 3]))?;
        let cols = reshape(&cols, &[gi, mi, t * cg])?;
        let wg = transpose(&reshape(&w, &[gi, og, t * cg])?, Some(&[0, 2, 1]))?;
        let y = transpose(&matmul(&cols, &wg)?, Some(&[1, 0, 2]))?;
        reshape(&y, &[mi, c_out_i])?
    };
    let mut shape = vec![n as isize];
    shape.extend(out.iter().map(|&o| o as isize));
    shape.push(c_out_i);
    reshape(&y, &shape)
}

/// `a @ b^T` for the tall columns `a` `[M, K]` (M: every output position) and a
/// weight `b` `[N, K]`. The weight's gradient `ct^T @ a` is a product whose inner
/// length is M and whose output has few tiles; it runs as a batch of row chunks
/// summed (split-K), for that many times the workgroups.
fn tall_product(a: &Array, b: &Array) -> Result<Array> {
    let f = CustomFunction::new(|x: &[Array]| Ok(vec![matmul(&x[0], &x[1].t()?)?]))
        .name("conv_general")
        .vjp(|x, _, ct| {
            let da = matmul(&ct[0], &x[1])?;
            Ok(vec![Some(da), Some(split_k_tn(&ct[0], &x[0])?)])
        });
    Ok(f.call(&[a.clone(), b.clone()])?.remove(0))
}

/// `g^T @ a` (`[M, N]` and `[M, K]` to `[N, K]`) with M in chunks: enough to give
/// the GPU up to 264 output tiles of 64 x 64 (two per SM of a large GPU), chunks of
/// at least 1024 rows.
fn split_k_tn(g: &Array, a: &Array) -> Result<Array> {
    let (m, n, k) = (a.shape()[0], g.shape()[1], a.shape()[1]);
    let tiles = n.div_ceil(64) * k.div_ceil(64);
    // At most 264 tiles below one wave of 132 (a few more start a third wave: 288
    // ran slower than 252, bench/NOTES.md run 163), two up to two waves.
    let mut chunks = (m / 1024).min(match tiles {
        0..132 => 264 / tiles.max(1),
        132..264 => 2,
        _ => 1,
    });
    if a.dtype() != DType::F32 && tiles >= 16 {
        // Larger 16-bit outputs run on the cooperative kernel's 128 x 128 tiles:
        // chunks up to 264 of those where they are under one wave.
        let coop = n.div_ceil(128) * k.div_ceil(128);
        chunks = if coop < 132 {
            (m / 1024).min(264 / coop)
        } else {
            1
        };
    }
    if chunks < 2 {
        return matmul(&g.t()?, a);
    }
    // Chunks of a multiple of 8 rows (a 16-bit product's cooperative-matrix path
    // needs K a multiple of 8), the rows left over in one more product.
    let rows = m / chunks / 8 * 8;
    let head = (chunks * rows) as isize;
    let part = |x: &Array, cols: usize| {
        reshape(
            &slice(x, &[Slice::range(0, head)])?,
            &[chunks as isize, rows as isize, cols as isize],
        )
    };
    let (gb, ab) = (part(g, n)?, part(a, k)?);
    let y = sum(
        &matmul(&transpose(&gb, Some(&[0, 2, 1]))?, &ab)?,
        Some(&[0]),
        false,
    )?;
    if head as usize == m {
        return Ok(y);
    }
    let tail = |x: &Array| slice(x, &[Slice::range(head, m as isize)]);
    crate::add(&y, &matmul(&tail(g)?.t()?, &tail(a)?)?)
}

/// `x` with `input_dilation - 1` zeros between neighbours on each spatial axis,
/// then padded (or cropped, where the padding is negative).
fn dilate_and_pad(x: &Array, g: &Geometry) -> Result<Array> {
    let d = x.ndim() - 2;
    let mut x = x.clone();
    if g.input_dilation.iter().any(|&s| s > 1) {
        let mut shape = x.shape().to_vec();
        let mut steps = vec![Slice::ALL];
        for i in 0..d {
            let len = shape[1 + i];
            shape[1 + i] = if len == 0 {
                0
            } else {
                (len - 1) * g.input_dilation[i] + 1
            };
            steps.push(Slice::new(None, None, g.input_dilation[i] as isize));
        }
        let zeros = broadcast_to(&scalar_like(&x, 0.0)?, &shape)?;
        x = slice_update(&zeros, &x, &steps)?;
    }
    if g.lo.iter().chain(&g.hi).any(|&p| p < 0) {
        let mut crop = vec![Slice::ALL];
        for i in 0..d {
            let len = x.shape()[1 + i] as i64;
            let (a, b) = ((-g.lo[i]).max(0), len - (-g.hi[i]).max(0));
            crop.push(Slice::range(a as isize, b.max(a) as isize));
        }
        x = slice(&x, &crop)?;
    }
    if g.lo.iter().chain(&g.hi).any(|&p| p > 0) {
        let mut widths = vec![(0, 0)];
        widths.extend((0..d).map(|i| (g.lo[i].max(0) as usize, g.hi[i].max(0) as usize)));
        widths.push((0, 0));
        x = pad(&x, &widths, PadMode::Constant(0.0))?;
    }
    Ok(x)
}

/// The windows of `x` over `axes` joined on a new axis `at`: one strided view per
/// tap (row-major over `kernel`), tap `j` on axis `a` starting at `j * dilation`
/// and stepping `stride` for `out` elements.
fn windows(
    x: &Array,
    axes: &[usize],
    kernel: &[usize],
    dilation: &[usize],
    stride: &[usize],
    out: &[usize],
    at: usize,
) -> Result<Array> {
    let taps: usize = kernel.iter().product();
    let mut views = Vec::with_capacity(taps);
    for tap in 0..taps {
        let mut slices = vec![Slice::ALL; x.ndim()];
        let mut rest = tap;
        for i in (0..axes.len()).rev() {
            let j = rest % kernel[i];
            rest /= kernel[i];
            let start = (j * dilation[i]) as isize;
            let stop = start + (out[i].saturating_sub(1) * stride[i]) as isize + 1;
            slices[axes[i]] = Slice::new(
                Some(start),
                Some(if out[i] == 0 { start } else { stop }),
                stride[i] as isize,
            );
        }
        views.push(slice(x, &slices)?);
    }
    stack(&views.iter().collect::<Vec<_>>(), at as isize)
}

/// 1-D convolution: `x` `[N, L, C_in]`, `w` `[C_out, K, C_in / groups]`, zero
/// padding on both sides. See [`conv_general`].
pub fn conv1d(
    x: &Array,
    w: &Array,
    stride: usize,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> Result<Array> {
    conv_nd::<1>("conv1d", x, w, [stride], [padding], [dilation], groups)
}

/// 2-D convolution: `x` `[N, H, W, C_in]`, `w` `[C_out, KH, KW, C_in / groups]`,
/// symmetric zero padding per axis. See [`conv_general`].
pub fn conv2d(
    x: &Array,
    w: &Array,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Result<Array> {
    conv_nd("conv2d", x, w, stride, padding, dilation, groups)
}

/// 3-D convolution: `x` `[N, D, H, W, C_in]`, `w` `[C_out, KD, KH, KW, C_in /
/// groups]`. See [`conv_general`].
pub fn conv3d(
    x: &Array,
    w: &Array,
    stride: [usize; 3],
    padding: [usize; 3],
    dilation: [usize; 3],
    groups: usize,
) -> Result<Array> {
    conv_nd("conv3d", x, w, stride, padding, dilation, groups)
}

fn rank_is(op: &'static str, x: &Array, w: &Array, d: usize) -> Result<()> {
    if x.ndim() != d + 2 || w.ndim() != d + 2 {
        return Err(Error::invalid(
            op,
            format!(
                "needs an input and a weight of rank {} ({d} spatial axes), got {:?} and {:?}",
                d + 2,
                x.shape(),
                w.shape()
            ),
        ));
    }
    Ok(())
}

fn conv_nd<const D: usize>(
    op: &'static str,
    x: &Array,
    w: &Array,
    stride: [usize; D],
    padding: [usize; D],
    dilation: [usize; D],
    groups: usize,
) -> Result<Array> {
    rank_is(op, x, w, D)?;
    let g = Geometry {
        stride: stride.to_vec(),
        lo: padding.iter().map(|&p| p as i64).collect(),
        hi: padding.iter().map(|&p| p as i64).collect(),
        kernel_dilation: dilation.to_vec(),
        input_dilation: vec![1; D],
        groups,
        flip: false,
    };
    convolve(op, x, w, &g)
}

/// The transposed convolution (the gradient of a convolution with respect to its
/// input, PyTorch's `conv_transpose` and MLX's): `x` `[N, spatial..., C_in]`, `w`
/// `[C_out, kernel..., C_in / groups]` (MLX's layout; [`conv_weight_from_torch`]
/// converts PyTorch's). Per axis the output has
/// `(in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1`
/// elements; `output_padding` (extra elements at the end) must be smaller than
/// the stride or the dilation. Lists as in [`ConvOptions`].
pub fn conv_transpose_general(
    x: &Array,
    w: &Array,
    stride: &[usize],
    padding: &[usize],
    dilation: &[usize],
    output_padding: &[usize],
    groups: usize,
) -> Result<Array> {
    const OP: &str = "conv_transpose";
    let d = spatial_axes(OP, x, w)?;
    let stride = per_axis(OP, "stride", stride, d, 1)?;
    let padding = per_axis(OP, "padding", padding, d, 0)?;
    let dilation = per_axis(OP, "dilation", dilation, d, 1)?;
    let output_padding = per_axis(OP, "output_padding", output_padding, d, 0)?;
    positive(OP, "stride", &stride)?;
    positive(OP, "dilation", &dilation)?;
    let (mut lo, mut hi) = (vec![], vec![]);
    for i in 0..d {
        if output_padding[i] >= stride[i].max(dilation[i]) {
            return Err(Error::invalid(
                OP,
                format!(
                    "output_padding {} on spatial axis {i} must be smaller than the stride {} or \
                     the dilation {}",
                    output_padding[i], stride[i], dilation[i]
                ),
            ));
        }
        let extent = (w.shape()[1 + i] as i64 - 1) * dilation[i] as i64 + 1;
        lo.push(extent - 1 - padding[i] as i64);
        hi.push(extent - 1 - padding[i] as i64 + output_padding[i] as i64);
    }
    let g = Geometry {
        stride: vec![1; d],
        lo,
        hi,
        kernel_dilation: dilation,
        input_dilation: stride,
        groups,
        flip: true,
    };
    convolve(OP, x, w, &g)
}

/// 1-D transposed convolution: `x` `[N, L, C_in]`, `w` `[C_out, K, C_in / groups]`.
/// See [`conv_transpose_general`].
pub fn conv_transpose1d(
    x: &Array,
    w: &Array,
    stride: usize,
    padding: usize,
    dilation: usize,
    output_padding: usize,
    groups: usize,
) -> Result<Array> {
    rank_is("conv_transpose1d", x, w, 1)?;
    conv_transpose_general(
        x,
        w,
        &[stride],
        &[padding],
        &[dilation],
        &[output_padding],
        groups,
    )
}

/// 2-D transposed convolution: `x` `[N, H, W, C_in]`, `w` `[C_out, KH, KW,
/// C_in / groups]`. See [`conv_transpose_general`].
pub fn conv_transpose2d(
    x: &Array,
    w: &Array,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    output_padding: [usize; 2],
    groups: usize,
) -> Result<Array> {
    rank_is("conv_transpose2d", x, w, 2)?;
    conv_transpose_general(x, w, &stride, &padding, &dilation, &output_padding, groups)
}

/// 3-D transposed convolution: `x` `[N, D, H, W, C_in]`, `w` `[C_out, KD, KH, KW,
/// C_in / groups]`. See [`conv_transpose_general`].
pub fn conv_transpose3d(
    x: &Array,
    w: &Array,
    stride: [usize; 3],
    padding: [usize; 3],
    dilation: [usize; 3],
    output_padding: [usize; 3],
    groups: usize,
) -> Result<Array> {
    rank_is("conv_transpose3d", x, w, 3)?;
    conv_transpose_general(x, w, &stride, &padding, &dilation, &output_padding, groups)
}

/// PyTorch's channels-first `[N, C, spatial...]` as wmx's channels-last
/// `[N, spatial..., C]` (a view).
pub fn to_channels_last(x: &Array) -> Result<Array> {
    if x.ndim() < 3 {
        return Err(Error::invalid(
            "to_channels_last",
            format!("needs [N, C, spatial...], got {:?}", x.shape()),
        ));
    }
    moveaxis(x, 1, -1)
}

/// wmx's channels-last `[N, spatial..., C]` as PyTorch's `[N, C, spatial...]` (a
/// view).
pub fn to_channels_first(x: &Array) -> Result<Array> {
    if x.ndim() < 3 {
        return Err(Error::invalid(
            "to_channels_first",
            format!("needs [N, spatial..., C], got {:?}", x.shape()),
        ));
    }
    moveaxis(x, -1, 1)
}

/// A PyTorch convolution weight in wmx's layout `[C_out, kernel..., C_in /
/// groups]`: from `Conv*d.weight` `[C_out, C_in / groups, kernel...]`, or, with
/// `transposed`, from `ConvTranspose*d.weight` `[C_in, C_out / groups, kernel...]`.
pub fn conv_weight_from_torch(w: &Array, transposed: bool, groups: usize) -> Result<Array> {
    const OP: &str = "conv_weight_from_torch";
    if w.ndim() < 3 {
        return Err(Error::invalid(
            OP,
            format!("needs [C, C / groups, kernel...], got {:?}", w.shape()),
        ));
    }
    if !transposed {
        return moveaxis(w, 1, -1);
    }
    let (c_in, og) = (w.shape()[0], w.shape()[1]);
    if groups == 0 || c_in % groups != 0 {
        return Err(Error::invalid(
            OP,
            format!("{c_in} input channels do not divide into {groups} groups"),
        ));
    }
    let kernel = &w.shape()[2..];
    let mut shape = vec![groups as isize, (c_in / groups) as isize, og as isize];
    shape.extend(kernel.iter().map(|&k| k as isize));
    let w = reshape(w, &shape)?;
    // [g, C_in/g, C_out/g, kernel...] -> [g, C_out/g, kernel..., C_in/g]
    let k = kernel.len();
    let mut perm: Vec<isize> = vec![0, 2];
    perm.extend((3..3 + k as isize).collect::<Vec<_>>());
    perm.push(1);
    let w = transpose(&w, Some(&perm))?;
    let mut out = vec![(groups * og) as isize];
    out.extend(kernel.iter().map(|&k| k as isize));
    out.push((c_in / groups) as isize);
    reshape(&w, &out)
}

/// Options of the pooling ops, per spatial axis (a list of one value applies to
/// every axis, an empty one is the default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolOptions {
    /// Step between windows (default: the kernel, windows that do not overlap).
    pub stride: Vec<usize>,
    /// Implicit padding on both sides (default 0), at most half the kernel's
    /// extent: `-inf` for [`max_pool`], zeros for [`avg_pool`].
    pub padding: Vec<usize>,
    /// Spacing of a window's taps (default 1).
    pub dilation: Vec<usize>,
    /// Counts a last, partial window where the input (with its left padding) has
    /// one to start (PyTorch's `ceil_mode`; default false).
    pub ceil_mode: bool,
    /// [`avg_pool`] divides by the window's taps inside the padded input (true,
    /// the default, as PyTorch) or inside the input alone (false).
    pub count_include_pad: bool,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            stride: vec![],
            padding: vec![],
            dilation: vec![],
            ceil_mode: false,
            count_include_pad: true,
        }
    }
}

/// A pooling's geometry per spatial axis.
struct PoolShape {
    kernel: Vec<usize>,
    stride: Vec<usize>,
    padding: Vec<usize>,
    dilation: Vec<usize>,
    out: Vec<usize>,
    /// Elements past the right padding that ceil mode's last window reaches.
    extra: Vec<usize>,
}

fn pool_shape(op: &'static str, x: &Array, kernel: &[usize], o: &PoolOptions) -> Result<PoolShape> {
    let d = kernel.len();
    if d == 0 || x.ndim() != d + 2 {
        return Err(Error::invalid(
            op,
            format!(
                "a kernel of {d} axes needs an input [N, spatial..., C] of rank {}, got {:?}",
                d + 2,
                x.shape()
            ),
        ));
    }
    positive(op, "kernel", kernel)?;
    let stride = per_axis(op, "stride", &o.stride, d, 0)?;
    let stride: Vec<usize> = stride
        .iter()
        .zip(kernel)
        .map(|(&s, &k)| if o.stride.is_empty() { k } else { s })
        .collect();
    positive(op, "stride", &stride)?;
    let padding = per_axis(op, "padding", &o.padding, d, 0)?;
    let dilation = per_axis(op, "dilation", &o.dilation, d, 1)?;
    positive(op, "dilation", &dilation)?;
    let (mut out, mut extra) = (vec![], vec![]);
    for i in 0..d {
        let extent = (kernel[i] - 1) * dilation[i] + 1;
        if 2 * padding[i] > extent {
            return Err(Error::invalid(
                op,
                format!(
                    "padding {} on spatial axis {i} is more than half the window's extent {extent}",
                    padding[i]
                ),
            ));
        }
        let len = x.shape()[1 + i];
        let span = len + 2 * padding[i];
        if span < extent {
            return Err(Error::invalid(
                op,
                format!(
                    "on spatial axis {i} the window spans {extent} elements, more than the {span} \
                     of the padded input {:?}",
                    x.shape()
                ),
            ));
        }
        let mut n = if o.ceil_mode {
            (span - extent).div_ceil(stride[i]) + 1
        } else {
            (span - extent) / stride[i] + 1
        };
        // The last window must start inside the input or its left padding.
        if o.ceil_mode && (n - 1) * stride[i] >= len + padding[i] {
            n -= 1;
        }
        out.push(n);
        extra.push(((n - 1) * stride[i] + extent).saturating_sub(span));
    }
    Ok(PoolShape {
        kernel: kernel.to_vec(),
        stride,
        padding,
        dilation,
        out,
        extra,
    })
}

/// `[N, out..., taps, C]`: `x` padded with `fill` and cut into windows (by the
/// im2col kernel where it takes the dtype).
fn pool_windows(x: &Array, p: &PoolShape, fill: f64) -> Result<Array> {
    let d = p.kernel.len();
    if Im2col::takes(x.dtype(), d) {
        let prim = Im2col {
            geometry: ConvGeometry {
                input: x.shape()[1..=d].to_vec(),
                out: p.out.clone(),
                kernel: p.kernel.clone(),
                stride: p.stride.clone(),
                kernel_dilation: p.dilation.clone(),
                input_dilation: vec![1; d],
                lo: p.padding.iter().map(|&v| v as i64).collect(),
            },
            adjoint: false,
            fill: fill.to_bits(),
        };
        return prim.apply(x);
    }
    let x = if p.padding.iter().chain(&p.extra).any(|&w| w > 0) {
        let mut widths = vec![(0, 0)];
        widths.extend((0..d).map(|i| (p.padding[i], p.padding[i] + p.extra[i])));
        widths.push((0, 0));
        pad(x, &widths, PadMode::Constant(fill))?
    } else {
        x.clone()
    };
    let axes: Vec<usize> = (1..=d).collect();
    windows(&x, &axes, &p.kernel, &p.dilation, &p.stride, &p.out, d + 1)
}

/// Max pooling over windows of `kernel` (one length per spatial axis) of `x`
/// `[N, spatial..., C]`: `[N, out..., C]`, every dtype. NaN propagates; the
/// gradient of a window whose maximum is tied goes to the tied elements as
/// [`max`]'s does.
pub fn max_pool(x: &Array, kernel: &[usize], opts: &PoolOptions) -> Result<Array> {
    let p = pool_shape("max_pool", x, kernel, opts)?;
    let fill = match x.dtype() {
        DType::Bool | DType::U8 | DType::U32 | DType::U64 => 0.0,
        DType::I32 => i32::MIN as f64,
        DType::I64 => i64::MIN as f64,
        _ => f64::NEG_INFINITY,
    };
    let w = pool_windows(x, &p, fill)?;
    max(&w, Some(&[kernel.len() as isize + 1]), false)
}

/// Average pooling over windows of `kernel` of `x` `[N, spatial..., C]`:
/// `[N, out..., C]`, floating-point dtypes. The divisor follows
/// [`PoolOptions::count_include_pad`]; taps past the padding (ceil mode's last
/// window) never count.
pub fn avg_pool(x: &Array, kernel: &[usize], opts: &PoolOptions) -> Result<Array> {
    const OP: &str = "avg_pool";
    if !x.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op: OP,
            dtype: x.dtype(),
        });
    }
    let p = pool_shape(OP, x, kernel, opts)?;
    let d = kernel.len();
    let sums = sum(&pool_windows(x, &p, 0.0)?, Some(&[d as isize + 1]), false)?;
    // Taps inside the counted range per output position, one axis at a time.
    let counts: Vec<Vec<f64>> = (0..d)
        .map(|i| {
            let len = x.shape()[1 + i] as i64;
            let pad = p.padding[i] as i64;
            let (a, b) = if opts.count_include_pad {
                (-pad, len + pad)
            } else {
                (0, len)
            };
            (0..p.out[i])
                .map(|o| {
                    let start = (o * p.stride[i]) as i64 - pad;
                    (0..p.kernel[i] as i64)
                        .map(|j| start + j * p.dilation[i] as i64)
                        .filter(|&q| q >= a && q < b)
                        .count() as f64
                })
                .collect()
        })
        .collect();
    let mut divisor = vec![1.0f64];
    for c in &counts {
        divisor = divisor
            .iter()
            .flat_map(|&v| c.iter().map(move |&k| v * k))
            .collect();
    }
    let first = divisor.first().copied().unwrap_or(1.0);
    let divisor = if divisor.iter().all(|&v| v == first) {
        scalar_like(&sums, first)?
    } else {
        let mut shape: Vec<usize> = p.out.clone();
        shape.push(1);
        // Counts of taps: exact in f32, which every device holds (not f64).
        let divisor: Vec<f32> = divisor.iter().map(|&v| v as f32).collect();
        astype(
            &Array::from_slice_on(&divisor, &shape, x.device())?,
            x.dtype(),
        )?
    };
    divide(&sums, &divisor)
}

/// Adaptive average pooling (PyTorch's `adaptive_avg_pool`): `x`
/// `[N, spatial..., C]` to `[N, output..., C]`, output element `o` of an axis of
/// length `L` averaging elements `floor(o L / out) .. ceil((o + 1) L / out)`.
/// Floating-point dtypes.
pub fn adaptive_avg_pool(x: &Array, output: &[usize]) -> Result<Array> {
    const OP: &str = "adaptive_avg_pool";
    let d = output.len();
    if d == 0 || x.ndim() != d + 2 {
        return Err(Error::invalid(
            OP,
            format!(
                "an output of {d} axes needs an input [N, spatial..., C] of rank {}, got {:?}",
                d + 2,
                x.shape()
            ),
        ));
    }
    if !x.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op: OP,
            dtype: x.dtype(),
        });
    }
    positive(OP, "output size", output)?;
    let mut y = x.clone();
    for (i, &o) in output.iter().enumerate() {
        let ax = 1 + i;
        let len = x.shape()[ax];
        if len == 0 {
            return Err(Error::invalid(
                OP,
                format!("spatial axis {i} of {:?} is empty", x.shape()),
            ));
        }
        if o == len {
            continue;
        }
        y = if len.is_multiple_of(o) {
            // Equal windows: a reshape and one mean.
            let mut shape: Vec<isize> = y.shape().iter().map(|&s| s as isize).collect();
            shape[ax] = o as isize;
            shape.insert(ax + 1, (len / o) as isize);
            mean(&reshape(&y, &shape)?, Some(&[ax as isize + 1]), false)?
        } else {
            let parts: Vec<Array> = (0..o)
                .map(|k| {
                    let (a, b) = (k * len / o, ((k + 1) * len).div_ceil(o));
                    let mut s = vec![Slice::ALL; y.ndim()];
                    s[ax] = Slice::range(a as isize, b as isize);
                    mean(&slice(&y, &s)?, Some(&[ax as isize]), false)
                })
                .collect::<Result<_>>()?;
            stack(&parts.iter().collect::<Vec<_>>(), ax as isize)?
        };
    }
    Ok(y)
}

/// numpy's `sliding_window_view`: every window of `window` (one length per axis
/// in `axes`; `None`: every axis of `x`), the window axes appended in order. Axis
/// `a` shrinks to `len - window + 1`. A new array (numpy's is a read-only view).
pub fn sliding_window_view(x: &Array, window: &[usize], axes: Option<&[isize]>) -> Result<Array> {
    const OP: &str = "sliding_window_view";
    let axes: Vec<isize> = match axes {
        Some(a) => a.to_vec(),
        None => (0..x.ndim() as isize).collect(),
    };
    if axes.len() != window.len() {
        return Err(Error::invalid(
            OP,
            format!("{} window lengths for {} axes", window.len(), axes.len()),
        ));
    }
    positive(OP, "window", window)?;
    let mut y = x.clone();
    for (&a, &w) in axes.iter().zip(window) {
        let ax = crate::layout::normalize_axis(OP, a, x.ndim())?;
        let len = y.shape()[ax];
        if w > len {
            return Err(Error::invalid(
                OP,
                format!("a window of {w} on axis {ax} of length {len}"),
            ));
        }
        let parts: Vec<Array> = (0..w)
            .map(|j| {
                let mut s = vec![Slice::ALL; y.ndim()];
                s[ax] = Slice::range(j as isize, (j + len - w + 1) as isize);
                slice(&y, &s)
            })
            .collect::<Result<_>>()?;
        y = stack(&parts.iter().collect::<Vec<_>>(), -1)?;
    }
    Ok(y)
}
