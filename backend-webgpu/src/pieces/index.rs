//! Joining and indexing arrays past one binding or one buffer: concatenation,
//! gathers, slice updates and scatters in pieces (the planner is `split.rs`).

use crate::split::*;
use crate::{GpuBackend, GpuBuffer, In, MAX_BATCH, kerr};
use wmx_core::{DType, Error, Layout, Result, View};
use wmx_kernels::Driver;
use wmx_kernels::{self as k, Window};

impl<D: Driver> GpuBackend<D> {
    /// Concatenation whose output or an input is larger than a binding (or 2^30
    /// elements). The output is seen as `[rows, A, inner]` (rows: the dims before
    /// `axis`, inner: those after) and cut into pieces of whole rows, or, when one
    /// row is larger than a binding, a single row into ranges of the axis; each
    /// piece starts aligned, so it writes a window of the one output. Inputs are
    /// made row-major first (a copy, itself in pieces) and each piece binds the
    /// window of each input it reads.
    pub(crate) fn concatenate_pieces(
        &self,
        inputs: &[View<'_, GpuBuffer<D>>],
        axis: usize,
        shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let dtype = inputs[0].dtype;
        let kd = dtype;
        let size = kd.size() as u64;
        let lim = self.limits();
        let rows: usize = shape[..axis].iter().product();
        let slots = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        if rows == 1 && inner > 1 {
            // One row: the inputs follow each other, so they are joined as flat
            // arrays (cut anywhere, not only between slots of `inner`).
            let mut held = Vec::new();
            for v in inputs {
                if !v.layout.is_row_contiguous() {
                    held.push(wmx_core::Backend::copy(self, *v, dtype)?);
                }
            }
            let mut copies = held.iter();
            let flat: Vec<(Layout, &GpuBuffer<D>)> = inputs
                .iter()
                .map(|v| {
                    let n = wmx_core::layout::numel(&v.layout.shape);
                    match v.layout.is_row_contiguous() {
                        true => (
                            Layout {
                                offset: v.layout.offset,
                                ..Layout::contiguous(&[n])
                            },
                            v.buffer,
                        ),
                        false => (
                            Layout::contiguous(&[n]),
                            copies.next().expect("a copy each"),
                        ),
                    }
                })
                .collect();
            let views: Vec<View<'_, GpuBuffer<D>>> = flat
                .iter()
                .map(|(layout, buffer)| View {
                    buffer: *buffer,
                    dtype,
                    layout,
                })
                .collect();
            let n = wmx_core::layout::numel(shape);
            return self.concatenate_pieces(&views, 0, &[n]);
        }
        let unit = inner as u64 * size;
        // Less one alignment: an input's window starts up to that far before its part.
        let max_slots = (lim.bytes.saturating_sub(lim.align) / unit).min(MAX_ELEMS / inner as u64);
        let cannot = |msg: &str| self.cannot_split(shape, dtype, msg);
        // Pieces (rows r0..r1, axis slots a0..a1) with aligned starts.
        let mut pieces = Vec::new();
        if slots as u64 <= max_slots {
            let step = lim.align / gcd(lim.align, slots as u64 * unit);
            let r = (max_slots / slots as u64) / step * step;
            if r == 0 {
                return Err(cannot("no aligned run of whole rows fits a binding"));
            }
            for r0 in (0..rows).step_by(r as usize) {
                pieces.push((r0, (r0 + r as usize).min(rows), 0, slots));
            }
        } else if rows == 1 {
            let step = lim.align / gcd(lim.align, unit);
            let p = max_slots / step * step;
            if p == 0 {
                return Err(cannot("no aligned range of the axis fits a binding"));
            }
            for a0 in (0..slots).step_by(p as usize) {
                pieces.push((0, 1, a0, (a0 + p as usize).min(slots)));
            }
        } else {
            return Err(cannot(
                "each row of the output is larger than a binding (concatenate along the \
                 first axis, or in parts)",
            ));
        }
        // Row-major inputs: (memory, offset in elements, extent along the axis).
        let mut held = Vec::new();
        let mut ins = Vec::new();
        for v in inputs {
            let n_i = v.layout.shape[axis];
            if v.layout.is_row_contiguous() {
                ins.push((self.mem(v.buffer)?, v.layout.offset, n_i));
            } else {
                let c = wmx_core::Backend::copy(self, *v, dtype)?;
                ins.push((self.mem(&c)?, 0, n_i));
                held.push(c);
            }
        }
        let n = wmx_core::layout::numel(shape);
        let (out, g) = self.output_mem(n, dtype)?;
        let window = |first: u64, end: u64, buffer: u64| -> Result<(Window, usize)> {
            // Bytes [first, end) of a buffer, through a window starting aligned below.
            let start = first / lim.align * lim.align;
            let len = (end.div_ceil(4) * 4).min(buffer) - start;
            if len > lim.bytes {
                return Err(cannot("an input's part is larger than a binding"));
            }
            Ok((Window { start, len }, ((first - start) / size) as usize))
        };
        let mut batch = self.lock_batch();
        for (r0, r1, a0, a1) in pieces {
            let mut parts = Vec::new();
            let mut c = 0;
            for (mem, off, n_i) in &ins {
                let (lo, hi) = (a0.max(c), a1.min(c + n_i));
                if lo < hi {
                    let row = (n_i * inner) as u64;
                    let first = *off as u64 + r0 as u64 * row + ((lo - c) * inner) as u64;
                    let last = *off as u64 + (r1 - 1) as u64 * row + ((hi - c) * inner) as u64;
                    let (w, offset) = window(first * size, last * size, mem.byte_size())?;
                    let bound = self.bind_in(&mut batch, mem, Some(w))?;
                    let strides = [row as isize, inner as isize, 1];
                    parts.push((bound, [r1 - r0, hi - lo, inner], strides, offset));
                }
                c += n_i;
            }
            let views: Vec<k::Strided<'_, D::Buffer>> = parts
                .iter()
                .map(|(bound, shape, strides, offset)| {
                    let (buffer, window) = bound.binding();
                    k::Strided {
                        buffer,
                        window,
                        dtype: kd,
                        shape,
                        strides,
                        offset: *offset,
                    }
                })
                .collect();
            let o_shape = [r1 - r0, a1 - a0, inner];
            let first = (r0 * slots + a0) as u64 * unit;
            let end = first + ((r1 - r0) * (a1 - a0)) as u64 * unit;
            let (w, _) = window(first, end, g.byte_size())?;
            let o_bound = self.bind_out(&g, Some(w), end - first)?;
            let (buffer, window) = o_bound.binding();
            let o = k::Contig {
                buffer,
                window,
                dtype: kd,
                shape: &o_shape,
            };
            self.kernels
                .concatenate(&mut batch, &views, 1, &o)
                .map_err(kerr)?;
            self.unbind_out(&mut batch, &g, o_bound)?;
            drop(views);
            self.unbind_in(parts.into_iter().map(|p| p.0).collect());
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
        }
        drop(held);
        Ok(out)
    }

    /// A gather whose `x` and indices have one shape (`sort` takes along its
    /// `argsort`), past a binding or one buffer: pieces of whole lines along `axis`
    /// (boxes of the dims before it), each reading the same lines of both.
    pub(crate) fn gather_lines(
        &self,
        x: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        let shape = indices.layout.shape.clone();
        self.record_rows(&shape, axis, 1, x.dtype, &[&indices, &x], |b, s, o, _| {
            self.kernels.gather(b, &s[1], &s[0], axis, o)
        })
    }

    /// A gather (`take_along_axis`) whose indices or output are larger than a
    /// binding: pieces of the indices' index space, each writing its range of the
    /// output through a window; `x` (as one input, `xi`, of `dtype`) fits a binding and is bound
    /// whole, offset to each piece's start off `axis` (all of `axis` stays readable).
    pub(crate) fn gather_pieces(
        &self,
        xi: In<'_, D::Buffer>,
        dtype: DType,
        indices: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        let shape = indices.layout.shape.clone();
        let x_axis = xi.layout.shape[axis];
        self.record_rows(
            &shape,
            shape.len(),
            1,
            dtype,
            &[&indices],
            |b, s, o, start| {
                // x moved to the piece's first index, off `axis`.
                let mut idx = unravel(start, &shape);
                idx[axis] = 0;
                let mut x_shape = s[0].shape.to_vec();
                x_shape[axis] = x_axis;
                let xv = k::Strided {
                    shape: &x_shape,
                    offset: moved(xi.offset, &xi.strides, &idx)?,
                    ..xi.strided()
                };
                self.kernels.gather(b, &xv, &s[0], axis, o)
            },
        )
    }

    /// A gather whose `x` is larger than a binding (the indices and the output fit
    /// one): `x` is cut along `axis` into parts that each fit (its other dims
    /// whole), and each part gathers the indices that fall in it into the one
    /// output (`Kernels::gather_rows`). The embedding lookup of a large table.
    pub(crate) fn gather_parts(
        &self,
        x: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let ii = self.input(&indices)?;
        let out_shape = indices.layout.shape.clone();
        if !self.fits_one(&out_shape, x.dtype) {
            return Err(self.cannot_split(
                &out_shape,
                x.dtype,
                "a gather whose array and indices are both past a binding",
            ));
        }
        let kd = x.dtype;
        let (xm, parts) = self.parts_along(&x, axis)?;
        let axis_len = x.layout.shape[axis];
        let (out, g) = self.output(wmx_core::layout::numel(&out_shape), x.dtype)?;
        let o = k::Contig {
            buffer: &g,
            window: None,
            dtype: kd,
            shape: &out_shape,
        };
        let mut batch = self.lock_batch();
        for p in &parts {
            let bound = self.bind_in(&mut batch, &xm, p.window)?;
            let (buffer, window) = bound.binding();
            let xv = k::Strided {
                window,
                ..p.strided(buffer, kd)
            };
            self.kernels
                .gather_rows(&mut batch, &xv, &ii.strided(), axis, axis_len, p.lo, &o)
                .map_err(kerr)?;
            self.unbind_in(vec![bound]);
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
        }
        Ok(out)
    }

    /// A slice update whose base is larger than a binding: pieces of the base
    /// (record_pieces), each writing its range of the output with the part of the
    /// update that falls inside it (a copy where none does). The update must fit a
    /// binding.
    pub(crate) fn slice_update_pieces(
        &self,
        base: View<'_, GpuBuffer<D>>,
        update: View<'_, GpuBuffer<D>>,
        starts: &[usize],
        steps: &[isize],
    ) -> Result<GpuBuffer<D>> {
        let ui = self.input(&update)?;
        let shape = base.layout.shape.clone();
        let rank = shape.len();
        let counts = &update.layout.shape;
        self.record_rows(
            &shape,
            shape.len(),
            1,
            base.dtype,
            &[&base],
            |b, s, o, start| {
                let lo = unravel(start, &shape);
                let (mut first, mut count, mut at) = (vec![], vec![], vec![]);
                for d in 0..rank {
                    let (a, st, c) = (starts[d] as i64, steps[d] as i64, counts[d] as i64);
                    let (plo, phi) = (lo[d] as i64, (lo[d] + s[0].shape[d]) as i64);
                    // The update's indices i with a + i * st in [plo, phi).
                    let (i0, i1) = if st > 0 {
                        let ceil = |x: i64| -((-x).div_euclid(st));
                        (ceil(plo - a).max(0), ceil(phi - a).min(c))
                    } else {
                        let m = -st;
                        (
                            ((a - phi).div_euclid(m) + 1).max(0),
                            ((a - plo).div_euclid(m) + 1).min(c),
                        )
                    };
                    if i0 >= i1 {
                        return self.kernels.copy(b, &s[0], o);
                    }
                    first.push(i0 as usize);
                    count.push((i1 - i0) as usize);
                    at.push((a + i0 * st - plo) as usize);
                }
                let uv = k::Strided {
                    shape: &count,
                    offset: moved(ui.offset, &ui.strides, &first)?,
                    ..ui.strided()
                };
                self.kernels.slice_update(b, &s[0], &uv, &at, steps, o)
            },
        )
    }

    /// A scatter into a base larger than a binding: pieces of the base's dims
    /// before `axis` (record_rows; `axis` and the dims after it whole, since an
    /// index may land anywhere along `axis`), each with the same rows of the
    /// indices and updates, which must fit a binding. Where a row from `axis` on is
    /// itself past a binding (a scatter along the first axis of a large table: an
    /// embedding's gradient), pieces cut `axis` too, and each takes the updates
    /// whose index falls in its range of it (`Kernels::scatter_rows`; not f64).
    pub(crate) fn scatter_pieces(
        &self,
        op: wmx_core::ScatterOp,
        base: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        updates: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        match self.scatter_cut(op, base, indices, updates, axis, axis) {
            Err(Error::OutOfRange { .. }) if base.dtype != DType::F64 => {
                self.scatter_cut(op, base, indices, updates, axis, axis + 1)
            }
            r => r,
        }
    }

    /// [`GpuBackend::scatter_pieces`] with pieces cut within the dims before `cut`
    /// (`axis` or `axis + 1`).
    fn scatter_cut(
        &self,
        op: wmx_core::ScatterOp,
        base: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        updates: View<'_, GpuBuffer<D>>,
        axis: usize,
        cut: usize,
    ) -> Result<GpuBuffer<D>> {
        let (ii, ui) = (self.input(&indices)?, self.input(&updates)?);
        let shape = base.layout.shape.clone();
        let lead = &shape[..cut];
        let own = &indices.layout.shape;
        self.record_rows(&shape, cut, 1, base.dtype, &[&base], |b, s, o, start| {
            let mut idx = unravel(start, lead);
            // The piece's range of `axis` (all of it unless cut), and the rows of
            // the indices and updates it reads (all of them along `axis`).
            let lo = idx.get(axis).copied().unwrap_or(0);
            idx.truncate(axis);
            let part_shape: Vec<usize> = s[0].shape[..axis]
                .iter()
                .chain(&own[axis..])
                .copied()
                .collect();
            let iv = k::Strided {
                shape: &part_shape,
                offset: moved(ii.offset, &ii.strides, &idx)?,
                ..ii.strided()
            };
            let uv = k::Strided {
                shape: &part_shape,
                offset: moved(ui.offset, &ui.strides, &idx)?,
                ..ui.strided()
            };
            self.kernels
                .scatter_rows(b, op, &s[0], &iv, &uv, axis, shape[axis], lo, o)
        })
    }
}
