//! Matrix products past one binding: pieces of A's rows, parts of B's columns,
//! partial products over parts of K (the planner is `split.rs`).

use crate::split::*;
use crate::{GpuBackend, GpuBuffer, MAX_BATCH, kerr};
use wmx_core::{Result, View};
use wmx_kernels as k;
use wmx_kernels::Driver;

impl<D: Driver> GpuBackend<D> {
    /// A matmul whose A or output is larger than a binding: pieces of A's rows
    /// (boxes of its batch and M dims, K whole), each writing its rows of the
    /// output through a window; B (and C) must fit a binding and are bound whole,
    /// offset to each piece's batch (and rows).
    pub(crate) fn matmul_pieces(
        &self,
        a: View<'_, GpuBuffer<D>>,
        b: View<'_, GpuBuffer<D>>,
        c: Option<View<'_, GpuBuffer<D>>>,
        alpha: f64,
        beta: f64,
        shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let (y, z) = (self.input(&b)?, c.map(|c| self.input(&c)).transpose()?);
        let nd = shape.len();
        let (k_len, n) = (a.layout.shape[nd - 1], shape[nd - 1]);
        let kd = a.dtype;
        let size = kd.size() as u64;
        let amem = self.mem(a.buffer)?;
        let op = Operand {
            strides: &a.layout.strides,
            offset: a.layout.offset,
            size,
            buffer: amem.byte_size(),
            seg: amem.seg,
        };
        let lim = self.limits();
        let row = size * n as u64;
        let (out, g) = self.output_mem(wmx_core::layout::numel(shape), a.dtype)?;
        let pieces = plan_segmented(&a.layout.shape, &[op], nd - 1, Out::Window(row), g.seg, lim)
            .map_err(|msg| self.cannot_split(shape, a.dtype, &msg))?;
        let mut batch = self.lock_batch();
        for p in &pieces {
            let idx = unravel(p.out_start, &shape[..nd - 1]);
            let part = &p.ins[0];
            let a_bound = self.bind_in(&mut batch, &amem, part.window)?;
            let (buffer, window) = a_bound.binding();
            let av = k::Strided {
                window,
                ..part.strided(buffer, kd, &p.shape)
            };
            let b_shape: Vec<usize> = p.shape[..nd - 2]
                .iter()
                .copied()
                .chain([k_len, n])
                .collect();
            let bv = k::Strided {
                shape: &b_shape,
                offset: moved(y.offset, &y.strides, &idx[..nd - 2]).map_err(kerr)?,
                ..y.strided()
            };
            let o_shape: Vec<usize> = p.shape[..nd - 1].iter().copied().chain([n]).collect();
            let cv = match &z {
                Some(z) => Some(k::Strided {
                    shape: &o_shape,
                    offset: moved(z.offset, &z.strides, &idx).map_err(kerr)?,
                    ..z.strided()
                }),
                None => None,
            };
            let w = out_window(pieces.len(), p, nd - 1, row, g.byte_size(), lim);
            let rows = wmx_core::layout::numel(&p.shape[..nd - 1]) as u64;
            let o_bound = self.bind_out(&g, w, rows * row)?;
            let (buffer, window) = o_bound.binding();
            let o = k::Contig {
                buffer,
                window,
                dtype: kd,
                shape: &o_shape,
            };
            self.kernels
                .matmul(&mut batch, &av, &bv, cv.as_ref(), alpha, beta, &o)
                .map_err(kerr)?;
            self.unbind_out(&mut batch, &g, o_bound)?;
            self.unbind_in(vec![a_bound]);
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
        }
        Ok(out)
    }

    /// A matmul whose B is larger than a binding (A, C and the output fit one): B is
    /// cut along N into parts that each fit, K whole (a transposed view of a
    /// row-major weight, `x @ w.t()`: the output layer of a large vocabulary); each
    /// part's product goes to an output of its own, and the parts are placed side
    /// by side along the last axis. A B whose column blocks each span more than a
    /// binding (row-major with long rows) is an `Err` naming the pieces.
    pub(crate) fn matmul_b_parts(
        &self,
        a: View<'_, GpuBuffer<D>>,
        b: View<'_, GpuBuffer<D>>,
        c: Option<View<'_, GpuBuffer<D>>>,
        alpha: f64,
        beta: f64,
        shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let (x, z) = (self.input(&a)?, c.map(|c| self.input(&c)).transpose()?);
        let nd = shape.len();
        let kd = a.dtype;
        let (bmem, parts) = self.parts_along(&b, nd - 1)?;
        let mut outs = Vec::with_capacity(parts.len());
        for p in &parts {
            let (nb, n0) = (p.shape[nd - 1], p.lo);
            let b_bound = self.bind_in(&mut self.lock_batch(), &bmem, p.window)?;
            let (buffer, window) = b_bound.binding();
            let bv = k::Strided {
                window,
                ..p.strided(buffer, kd)
            };
            let mut o_shape = shape.to_vec();
            o_shape[nd - 1] = nb;
            let mut at = vec![0; nd];
            at[nd - 1] = n0;
            let cv = match &z {
                Some(z) => Some(k::Strided {
                    shape: &o_shape,
                    offset: moved(z.offset, &z.strides, &at).map_err(kerr)?,
                    ..z.strided()
                }),
                None => None,
            };
            let (part_out, g) = self.output(wmx_core::layout::numel(&o_shape), a.dtype)?;
            let o = k::Contig {
                buffer: &g,
                window: None,
                dtype: kd,
                shape: &o_shape,
            };
            let mut batch = self.lock_batch();
            self.kernels
                .matmul(&mut batch, &x.strided(), &bv, cv.as_ref(), alpha, beta, &o)
                .map_err(kerr)?;
            self.unbind_in(vec![b_bound]);
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
            let strides = wmx_core::Layout::contiguous(&o_shape).strides;
            outs.push((part_out, g, o_shape, strides));
        }
        let (out, g) = self.output(wmx_core::layout::numel(shape), a.dtype)?;
        let views: Vec<k::Strided<'_, D::Buffer>> = outs
            .iter()
            .map(|(_, g, shape, strides)| k::Strided {
                buffer: g,
                window: None,
                dtype: kd,
                shape,
                strides,
                offset: 0,
            })
            .collect();
        let o = k::Contig {
            buffer: &g,
            window: None,
            dtype: kd,
            shape,
        };
        let mut batch = self.lock_batch();
        self.kernels
            .concatenate(&mut batch, &views, nd - 1, &o)
            .map_err(kerr)?;
        Ok(out)
    }

    /// A matmul whose B is larger than a binding and cut along K (a row-major B,
    /// whose column blocks each span all of it; A, C and the output fit a binding):
    /// `Kernels::matmul_parts` over parts of K, each part of B bound through its
    /// window.
    pub(crate) fn matmul_k_parts(
        &self,
        a: View<'_, GpuBuffer<D>>,
        b: View<'_, GpuBuffer<D>>,
        c: Option<View<'_, GpuBuffer<D>>>,
        alpha: f64,
        beta: f64,
        shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let (x, z) = (self.input(&a)?, c.map(|c| self.input(&c)).transpose()?);
        let nd = shape.len();
        let kd = a.dtype;
        let (bmem, parts) = self.parts_along(&b, nd - 2)?;
        let a_shapes: Vec<Vec<usize>> = parts
            .iter()
            .map(|p| {
                let mut s = a.layout.shape.clone();
                s[nd - 1] = p.shape[nd - 2];
                s
            })
            .collect();
        let mut batch = self.lock_batch();
        let bound = parts
            .iter()
            .map(|p| self.bind_in(&mut batch, &bmem, p.window))
            .collect::<Result<Vec<_>>>()?;
        let mut views = Vec::with_capacity(parts.len());
        for ((p, a_shape), b) in parts.iter().zip(&a_shapes).zip(&bound) {
            let mut at = vec![0; nd];
            at[nd - 1] = p.lo;
            let av = k::Strided {
                shape: a_shape,
                offset: moved(x.offset, &x.strides, &at).map_err(kerr)?,
                ..x.strided()
            };
            let (buffer, window) = b.binding();
            views.push((
                av,
                k::Strided {
                    window,
                    ..p.strided(buffer, kd)
                },
            ));
        }
        drop(batch);
        let (out, g) = self.output(wmx_core::layout::numel(shape), a.dtype)?;
        let o = out_to(&g, kd, shape);
        let zs = z.as_ref().map(|z| z.strided());
        let mut batch = self.lock_batch();
        self.kernels
            .matmul_parts(&mut batch, &views, zs.as_ref(), alpha, beta, &o)
            .map_err(kerr)?;
        drop(views);
        self.unbind_in(bound);
        Ok(out)
    }
}
