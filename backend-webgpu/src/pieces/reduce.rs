//! Reductions past one binding: rows in pieces, partial results combined (the
//! planner is `split.rs`).

use crate::segments::{Mem, segment_bytes};
use crate::split::*;
use crate::{GpuBackend, GpuBuffer, MAX_BATCH, kerr};
use wmx_core::{ArgReduceOp, DType, ReduceOp, Result, View};
use wmx_kernels as k;
use wmx_kernels::Driver;

impl<D: Driver> GpuBackend<D> {
    /// `op` over `axes` of `x`, in pieces when `x` is larger than a binding or
    /// than 2^30 elements. Tried in order: pieces of whole output rows writing
    /// windows of the output; pieces of whole rows each writing an output of its
    /// own, then placed (few rows, each large); partial results over pieces of the
    /// reduced dims, in the accumulator dtype, combined by the op (a reduction
    /// whose every output reads more than a binding).
    pub(crate) fn reduce_pieces(
        &self,
        op: ReduceOp,
        x: &View<'_, GpuBuffer<D>>,
        axes: &[usize],
    ) -> Result<GpuBuffer<D>> {
        let out_dtype = op.out_dtype(x.dtype);
        let kept: Vec<usize> = (0..x.layout.shape.len())
            .filter(|d| !axes.contains(d))
            .collect();
        let out_shape: Vec<usize> = kept.iter().map(|&d| x.layout.shape[d]).collect();
        let whole =
            |b: &mut k::Batch<D>,
             s: &k::Strided<'_, D::Buffer>,
             raxes: &[usize],
             o: &k::Contig<'_, D::Buffer>| { self.kernels.reduce(b, op, s, raxes, o) };
        if let Some(out) = self.rows_in_pieces(x, &kept, axes, out_dtype, &whole)? {
            return Ok(out);
        }
        self.partials_in_pieces(op, x, &kept, axes, &out_shape)
    }

    /// `argmax`/`argmin` along `axis` in pieces of whole rows.
    pub(crate) fn arg_reduce_pieces(
        &self,
        op: ArgReduceOp,
        x: &View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        let kept: Vec<usize> = (0..x.layout.shape.len()).filter(|&d| d != axis).collect();
        let f = |b: &mut k::Batch<D>,
                 s: &k::Strided<'_, D::Buffer>,
                 raxes: &[usize],
                 o: &k::Contig<'_, D::Buffer>| {
            self.kernels.arg_reduce(b, op, s, raxes[0], o)
        };
        match self.rows_in_pieces(x, &kept, &[axis], DType::U32, &f)? {
            Some(out) => Ok(out),
            None => Err(self.cannot_split(
                &x.layout.shape,
                x.dtype,
                &format!("{} of a row larger than one binding", op.name()),
            )),
        }
    }

    /// Runs `f` (a reduction over the trailing `raxes` of a view whose kept dims
    /// lead) on pieces of whole rows; `None` when a row does not fit a binding.
    #[allow(clippy::type_complexity)]
    fn rows_in_pieces(
        &self,
        x: &View<'_, GpuBuffer<D>>,
        kept: &[usize],
        axes: &[usize],
        out_dtype: DType,
        f: &dyn Fn(
            &mut k::Batch<D>,
            &k::Strided<'_, D::Buffer>,
            &[usize],
            &k::Contig<'_, D::Buffer>,
        ) -> k::Result<()>,
    ) -> Result<Option<GpuBuffer<D>>> {
        let (shape, strides, buf, kd) = self.permuted(x, kept, axes)?;
        let od = out_dtype;
        let operand = || Operand {
            strides: &strides,
            offset: x.layout.offset,
            size: kd.size() as u64,
            buffer: buf.byte_size(),
            seg: buf.seg,
        };
        let lim = self.limits();
        let cut = kept.len();
        let raxes: Vec<usize> = (cut..shape.len()).collect();
        let size = od.size() as u64;
        let n = wmx_core::layout::numel(&shape[..cut]);
        let out_seg = match self.segmented(n as u64 * size) {
            true => segment_bytes(self.kernels.caps().max_buffer),
            false => u64::MAX,
        };
        if let Ok(pieces) =
            plan_segmented(&shape, &[operand()], cut, Out::Window(size), out_seg, lim)
        {
            let (out, g) = self.output_mem(n, out_dtype)?;
            let mut batch = self.lock_batch();
            for p in &pieces {
                let b = self.bind_in(&mut batch, &buf, p.ins[0].window)?;
                let (buffer, window) = b.binding();
                let s = k::Strided {
                    window,
                    ..p.ins[0].strided(buffer, kd, &p.shape)
                };
                let w = out_window(pieces.len(), p, cut, size, g.byte_size(), lim);
                let bytes = wmx_core::layout::numel(&p.shape[..cut]) as u64 * size;
                let o_bound = self.bind_out(&g, w, bytes)?;
                let (buffer, window) = o_bound.binding();
                let o = k::Contig {
                    buffer,
                    window,
                    dtype: od,
                    shape: &p.shape[..cut],
                };
                f(&mut batch, &s, &raxes, &o).map_err(kerr)?;
                self.unbind_out(&mut batch, &g, o_bound)?;
                self.unbind_in(vec![b]);
                if batch.len() >= MAX_BATCH {
                    self.submit(&mut batch)?;
                }
            }
            return Ok(Some(out));
        }
        // Few large rows: each piece writes its own output, then they are placed
        // side by side (the output is small: each of its elements reads a lot).
        let fits_out =
            (n as u64) <= MAX_ELEMS && ((n as u64) * size).div_ceil(16) * 16 <= lim.bytes;
        let Ok(pieces) = plan(&shape, &[operand()], cut, Out::Own(size), lim) else {
            return Ok(None);
        };
        if !fits_out {
            return Ok(None);
        }
        let mut parts = Vec::with_capacity(pieces.len());
        for p in &pieces {
            let np = wmx_core::layout::numel(&p.shape[..cut]);
            let (part, g) = self.output(np, out_dtype)?;
            let mut batch = self.lock_batch();
            let b = self.bind_in(&mut batch, &buf, p.ins[0].window)?;
            let (buffer, window) = b.binding();
            let s = k::Strided {
                window,
                ..p.ins[0].strided(buffer, kd, &p.shape)
            };
            let o = k::Contig {
                buffer: &g,
                window: None,
                dtype: od,
                shape: &p.shape[..cut],
            };
            f(&mut batch, &s, &raxes, &o).map_err(kerr)?;
            self.unbind_in(vec![b]);
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
            parts.push((part, g, np));
        }
        let (out, g) = self.output(n, out_dtype)?;
        let shapes: Vec<[usize; 1]> = parts.iter().map(|p| [p.2]).collect();
        let views: Vec<k::Strided<'_, D::Buffer>> = parts
            .iter()
            .zip(&shapes)
            .map(|((_, g, _), shape)| k::Strided {
                buffer: g,
                window: None,
                dtype: od,
                shape,
                strides: &[1],
                offset: 0,
            })
            .collect();
        let o = k::Contig {
            buffer: &g,
            window: None,
            dtype: od,
            shape: &[n],
        };
        let mut batch = self.lock_batch();
        self.kernels
            .concatenate(&mut batch, &views, 0, &o)
            .map_err(kerr)?;
        Ok(Some(out))
    }

    /// `x`'s dims `first` then `then` (shape and strides), its GPU memory and dtype.
    #[allow(clippy::type_complexity)] // four named parts, used once
    fn permuted(
        &self,
        x: &View<'_, GpuBuffer<D>>,
        first: &[usize],
        then: &[usize],
    ) -> Result<(Vec<usize>, Vec<isize>, Mem<D::Buffer>, k::DType)> {
        let l = x.layout;
        let order = first.iter().chain(then);
        let shape = order.clone().map(|&d| l.shape[d]).collect();
        let strides = order.map(|&d| l.strides[d]).collect();
        Ok((shape, strides, self.mem(x.buffer)?, x.dtype))
    }

    /// A reduction whose rows are each larger than a binding: partial results of
    /// the whole output over pieces of the reduced dims, in the accumulator dtype,
    /// combined by the op, then cast.
    fn partials_in_pieces(
        &self,
        op: ReduceOp,
        x: &View<'_, GpuBuffer<D>>,
        kept: &[usize],
        axes: &[usize],
        out_shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        let l = x.layout;
        let (shape, strides, buf, kd) = self.permuted(x, axes, kept)?;
        let out_dtype = op.out_dtype(x.dtype);
        let od = out_dtype;
        let acc = op.acc_dtype(kd);
        let lim = self.limits();
        let n = wmx_core::layout::numel(out_shape);
        let fail = |msg: &str| self.cannot_split(&l.shape, x.dtype, msg);
        if n as u64 > MAX_ELEMS || (n as u64 * 4).div_ceil(16) * 16 > lim.bytes {
            return Err(fail(
                "both the output and each of its rows are larger than one binding",
            ));
        }
        let operand = Operand {
            strides: &strides,
            offset: l.offset,
            size: kd.size() as u64,
            buffer: buf.byte_size(),
            seg: buf.seg,
        };
        let cut = axes.len();
        let pieces = plan(&shape, &[operand], cut, Out::Unchecked, lim).map_err(|m| fail(&m))?;
        let combine = op.combiner();
        let raxes: Vec<usize> = (0..cut).collect();
        // The running total alternates between two buffers (a one-element total would
        // not be combined in place: the kernels read it as a broadcast scalar).
        let bytes = n as u64 * 4;
        let make = |what| self.kernels.create_buffer(bytes, Some(what)).map_err(kerr);
        let mut totals = [make("wmx partials")?, make("wmx partials")?];
        let part = make("wmx partial")?;
        let flat = [n];
        for (i, p) in pieces.iter().enumerate() {
            let mut batch = self.lock_batch();
            let b = self.bind_in(&mut batch, &buf, p.ins[0].window)?;
            let (buffer, window) = b.binding();
            let s = k::Strided {
                window,
                ..p.ins[0].strided(buffer, kd, &p.shape)
            };
            let target = if i == 0 { &totals[0] } else { &part };
            let o = k::Contig {
                buffer: target,
                window: None,
                dtype: acc,
                shape: &p.shape[cut..],
            };
            self.kernels
                .reduce(&mut batch, op, &s, &raxes, &o)
                .map_err(kerr)?;
            self.unbind_in(vec![b]);
            if i > 0 {
                let [cur, next] = totals.clone();
                self.kernels
                    .binary(
                        &mut batch,
                        combine,
                        &dense(&cur, acc, &flat),
                        &dense(&part, acc, &flat),
                        &out_to(&next, acc, &flat),
                    )
                    .map_err(kerr)?;
                totals.swap(0, 1);
            }
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
        }
        let (out, g) = self.output(n, out_dtype)?;
        let mut batch = self.lock_batch();
        self.kernels
            .copy(
                &mut batch,
                &dense(&totals[0], acc, &flat),
                &out_to(&g, od, &flat),
            )
            .map_err(kerr)?;
        Ok(out)
    }
}
