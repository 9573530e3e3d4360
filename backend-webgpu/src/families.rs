//! The GPU code of core's families that are custom primitives
//! (`wmx_core::families`), on any kernel driver: each takes the primitive's
//! [`CustomEval`] and calls its kernels.

use crate::custom::{CustomEval, GpuInput, GpuOutput};
use crate::kerr;
use std::any::Any;
use wmx_core::Result;
use wmx_core::families::{
    Block, Depthwise, DepthwiseWgrad, Dequantize, FftPass, FftReal, Flash, FlashCombine, Im2col,
    NormVjp, Quantize, QuantizedMatvec, Rope,
};

use wmx_kernels as k;
use wmx_kernels::Driver;

/// Runs `prim` if it is one of core's families; `None` for other primitives.
pub(crate) fn eval<D: Driver>(prim: &dyn Any, ev: &mut CustomEval<D>) -> Option<Result<()>> {
    if let Some(r) = prim.downcast_ref::<Rope>() {
        return Some(rope(r, ev));
    }
    if let Some(f) = prim.downcast_ref::<FftPass>() {
        return Some(fft(ev, |k, b, x, t, o| k.fft_rows(b, x, t, *f, o)));
    }
    if let Some(f) = prim.downcast_ref::<FftReal>() {
        return Some(fft(ev, |k, b, x, t, o| k.fft_real(b, x, t, *f, o)));
    }
    if let Some(p) = prim.downcast_ref::<NormVjp>() {
        let out = out_view(&ev.output);
        let (x, w, dy) = (
            view(&ev.inputs[0]),
            view(&ev.inputs[1]),
            view(&ev.inputs[2]),
        );
        return Some(
            ev.kernels
                .normalize_vjp(&mut ev.batch, p.op, &x, &w, &dy, p.eps, &out)
                .map_err(kerr),
        );
    }
    if let Some(p) = prim.downcast_ref::<Block>() {
        let out = out_view(&ev.output);
        return Some(
            ev.kernels
                .linalg_block(&mut ev.batch, p.block, &view(&ev.inputs[0]), &out)
                .map_err(kerr),
        );
    }
    if let Some(p) = prim.downcast_ref::<Im2col>() {
        return Some(im2col(p, ev));
    }
    if let Some(p) = prim.downcast_ref::<Depthwise>() {
        return Some(depthwise(p, ev));
    }
    if let Some(p) = prim.downcast_ref::<Flash>() {
        let out = out_view(&ev.output);
        let (q, k, v) = (
            view(&ev.inputs[0]),
            view(&ev.inputs[1]),
            view(&ev.inputs[2]),
        );
        let params = k::FlashParams {
            scale: p.scale,
            mask: p.mask,
            window: p.window,
            splits: p.splits,
            chunk: p.chunk,
        };
        return Some(
            ev.kernels
                .flash_attention(&mut ev.batch, &q, &k, &v, params, &out)
                .map_err(kerr),
        );
    }
    if prim.is::<FlashCombine>() {
        let out = out_view(&ev.output);
        return Some(
            ev.kernels
                .flash_combine(&mut ev.batch, &view(&ev.inputs[0]), &out)
                .map_err(kerr),
        );
    }
    if let Some(p) = prim.downcast_ref::<DepthwiseWgrad>() {
        let out = out_view(&ev.output);
        let (image, grad) = (view(&ev.inputs[0]), view(&ev.inputs[1]));
        return Some(
            ev.kernels
                .depthwise_wgrad(&mut ev.batch, &image, &grad, &p.geometry, p.chunk, &out)
                .map_err(kerr),
        );
    }
    if let Some(p) = prim.downcast_ref::<Quantize>() {
        let q = k::QuantParams {
            bits: p.bits,
            group: p.group,
        };
        let out = out_view(&ev.output);
        let w = view(&ev.inputs[0]);
        return Some(
            ev.kernels
                .quantize(&mut ev.batch, &w, q, p.params, &out)
                .map_err(kerr),
        );
    }
    if let Some(p) = prim.downcast_ref::<Dequantize>() {
        let q = k::QuantParams {
            bits: p.bits,
            group: p.group,
        };
        let out = out_view(&ev.output);
        let (w, s, b) = (
            view(&ev.inputs[0]),
            view(&ev.inputs[1]),
            view(&ev.inputs[2]),
        );
        return Some(
            ev.kernels
                .dequantize(&mut ev.batch, &w, &s, &b, q, &out)
                .map_err(kerr),
        );
    }
    if let Some(p) = prim.downcast_ref::<QuantizedMatvec>() {
        let q = k::QuantParams {
            bits: p.bits,
            group: p.group,
        };
        let out = out_view(&ev.output);
        let (x, w, s, b) = (
            view(&ev.inputs[0]),
            view(&ev.inputs[1]),
            view(&ev.inputs[2]),
            view(&ev.inputs[3]),
        );
        let addend = ev.inputs.get(4).map(view);
        return Some(
            ev.kernels
                .qmv(&mut ev.batch, &x, &w, &s, &b, addend.as_ref(), q, &out)
                .map_err(kerr),
        );
    }
    None
}

fn view<B>(x: &GpuInput<B>) -> k::Strided<'_, B> {
    k::Strided {
        buffer: &x.buffer,
        window: None,
        dtype: x.dtype,
        shape: &x.layout.shape,
        strides: &x.layout.strides,
        offset: x.layout.offset,
    }
}

fn rope<D: Driver>(r: &Rope, ev: &mut CustomEval<D>) -> Result<()> {
    let (x, off, inv) = (&ev.inputs[0], &ev.inputs[1], &ev.inputs[2]);
    let (seq_len, _) = Rope::geometry(&x.layout.shape);
    let params = k::RopeParams {
        seq_len,
        dims: r.dims,
        traditional: r.traditional,
        scale: r.scale,
    };
    let out = out_view(&ev.output);
    ev.kernels
        .rope(
            &mut ev.batch,
            &view(x),
            &view(off),
            &view(inv),
            params,
            &out,
        )
        .map_err(kerr)
}

/// The output buffer as the kernels' contiguous view.
fn out_view<B>(o: &GpuOutput<B>) -> k::Contig<'_, B> {
    k::Contig {
        buffer: &o.buffer,
        window: None,
        dtype: o.dtype,
        shape: &o.shape,
    }
}

fn im2col<D: Driver>(p: &Im2col, ev: &mut CustomEval<D>) -> Result<()> {
    let out = out_view(&ev.output);
    ev.kernels
        .im2col(
            &mut ev.batch,
            &view(&ev.inputs[0]),
            &p.geometry,
            p.adjoint,
            f64::from_bits(p.fill),
            &out,
        )
        .map_err(kerr)
}

fn depthwise<D: Driver>(p: &Depthwise, ev: &mut CustomEval<D>) -> Result<()> {
    let out = out_view(&ev.output);
    let (x, w) = (view(&ev.inputs[0]), view(&ev.inputs[1]));
    ev.kernels
        .depthwise(&mut ev.batch, &x, &w, &p.geometry, p.transposed, &out)
        .map_err(kerr)
}

/// An FFT pass: `run(kernels, batch, x, table, out)`; input 1 is its twiddle table.
fn fft<D: Driver>(
    ev: &mut CustomEval<D>,
    run: impl FnOnce(
        &k::Kernels<D>,
        &mut k::Batch<D>,
        &k::Strided<D::Buffer>,
        &k::Strided<D::Buffer>,
        &k::Contig<D::Buffer>,
    ) -> k::Result<()>,
) -> Result<()> {
    let out = out_view(&ev.output);
    let Some(table) = ev.inputs.get(1) else {
        return Err(wmx_core::Error::invalid(
            "fft",
            "the GPU kernel needs its twiddle table (input 1)",
        ));
    };
    let (x, t) = (view(&ev.inputs[0]), view(table));
    run(&ev.kernels, &mut ev.batch, &x, &t, &out).map_err(kerr)
}
