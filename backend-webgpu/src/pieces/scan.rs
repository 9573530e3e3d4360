//! Scans along lines past one binding: blocks, their totals, the tail (the planner
//! is `split.rs`).

use crate::split::*;
use crate::{GpuBackend, GpuBuffer};
use wmx_core::{DType, Error, Layout, ReduceOp, Result, View};
use wmx_kernels::Driver;

impl<D: Driver> GpuBackend<D> {
    /// Whether one line along `axis` of `shape` (with the dims after it) fits a
    /// piece, in elements of `size` bytes.
    pub(crate) fn line_fits(&self, shape: &[usize], axis: usize, size: usize) -> bool {
        let n: u128 = shape[axis..].iter().map(|&e| e as u128).product();
        let lim = self.limits();
        n <= MAX_ELEMS as u128 && n * size as u128 + lim.align as u128 + 16 <= lim.bytes as u128
    }

    /// A scan whose lines are larger than a binding (a cumsum over a 1-D array past
    /// one), line by line: the line cut into blocks `[nb, B, inner]` and a tail of
    /// `len - nb * B`, all in the accumulator dtype. Blocks are scanned along B (in
    /// pieces of whole blocks), their totals scanned exclusively along nb (small),
    /// and each block combined with its carry; the tail is scanned with the carry of
    /// every block before it (a reverse scan: after it). Every step is an op that
    /// computes in pieces, so `x` may also be held in segments.
    pub(crate) fn scan_blocked(
        &self,
        op: ReduceOp,
        x: View<'_, GpuBuffer<D>>,
        axis: usize,
        reverse: bool,
        inclusive: bool,
    ) -> Result<GpuBuffer<D>> {
        use wmx_core::Backend;
        let out_dtype = op.out_dtype(x.dtype);
        let acc = match x.dtype {
            DType::F16 | DType::BF16 => DType::F32,
            DType::Bool | DType::U8 => DType::U32,
            d => d,
        };
        if matches!(op, ReduceOp::Any | ReduceOp::All) {
            return Err(Error::invalid("scan", "any/all have no cumulative form"));
        }
        let combine = op.combiner();
        let shape = x.layout.shape.clone();
        let outer: usize = shape[..axis].iter().product();
        let len = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        if outer > 1 {
            // Line by line (each larger than a binding, so few): a tail view across
            // rows would be rows of any length, which pieces may not be able to cut.
            let line = Layout::contiguous(&[1, len, inner]);
            let mut held = Vec::with_capacity(outer);
            for o in 0..outer {
                let l = Layout {
                    offset: x.layout.offset + o * len * inner,
                    ..line.clone()
                };
                let v = View {
                    buffer: x.buffer,
                    dtype: x.dtype,
                    layout: &l,
                };
                held.push(self.scan_blocked(op, v, 1, reverse, inclusive)?);
            }
            return self.join(&held, out_dtype, &line, 0);
        }
        // Blocks of a power of two positions whose [B, inner] takes at most a quarter
        // of a binding (room for a piece's slack, and several blocks a piece).
        let per = (self.limits().bytes / 4 / (inner as u64 * 8).max(1)).min(1 << 24);
        if per < 2 {
            return Err(self.cannot_split(
                &shape,
                x.dtype,
                "the dims after the scanned axis are larger than a binding",
            ));
        }
        let block = 1usize << (63 - per.leading_zeros());
        let nb = len / block;
        let tail = len - nb * block;
        fn view<'a, B>(buffer: &'a B, dtype: DType, layout: &'a Layout) -> View<'a, B> {
            View {
                buffer,
                dtype,
                layout,
            }
        }
        let dense = |shape: &[usize]| Layout::contiguous(shape);
        // x in the accumulator dtype, row-major [outer, len, inner] (x itself when
        // it is in that dtype).
        let xl = dense(&[outer, len, inner]);
        let held;
        let (xa, base) = if x.dtype == acc {
            (x.buffer, x.layout.offset)
        } else {
            let xv = Layout {
                offset: x.layout.offset,
                ..xl.clone()
            };
            held = Backend::copy(self, view(x.buffer, x.dtype, &xv), acc)?;
            (&held, 0)
        };
        // The blocks, scanned, and their totals.
        let bl = Layout {
            shape: vec![outer, nb, block, inner],
            strides: vec![
                (len * inner) as isize,
                (block * inner) as isize,
                inner as isize,
                1,
            ],
            offset: base,
        };
        let blocks = view(xa, acc, &bl);
        let mut parts = Vec::new();
        let tl = Layout {
            shape: vec![outer, tail, inner],
            strides: vec![(len * inner) as isize, inner as isize, 1],
            offset: base + nb * block * inner,
        };
        let tail_in = view(xa, acc, &tl);
        let tail_total = if tail > 0 {
            Some(Backend::reduce(self, op, tail_in, &[1])?)
        } else {
            None
        };
        let mut block_total = None;
        if nb > 0 {
            let scanned = Backend::scan(self, op, blocks, 2, reverse, inclusive)?;
            let totals = Backend::reduce(self, op, blocks, &[2])?;
            let tot_l = dense(&[outer, nb, inner]);
            let carries = Backend::scan(self, op, view(&totals, acc, &tot_l), 1, reverse, false)?;
            // A reverse scan's blocks come after the tail: its total joins their carries.
            let carries = match (&tail_total, reverse) {
                (Some(t), true) => Backend::binary(
                    self,
                    combine,
                    view(&carries, acc, &tot_l),
                    view(
                        t,
                        acc,
                        &Layout {
                            shape: vec![outer, nb, inner],
                            strides: vec![inner as isize, 0, 1],
                            offset: 0,
                        },
                    ),
                    acc,
                )?,
                _ => carries,
            };
            let cl = Layout {
                shape: vec![outer, nb, block, inner],
                strides: vec![(nb * inner) as isize, inner as isize, 0, 1],
                offset: 0,
            };
            let sl = dense(&[outer, nb, block, inner]);
            let out = Backend::binary(
                self,
                combine,
                view(&carries, acc, &cl),
                view(&scanned, acc, &sl),
                acc,
            )?;
            if tail > 0 && !reverse {
                // The tail's carry: every block's total.
                block_total = Some(Backend::reduce(self, op, view(&totals, acc, &tot_l), &[1])?);
            }
            parts.push((out, nb * block));
        }
        if tail > 0 {
            let t_dense = dense(&[outer, tail, inner]);
            let scanned = Backend::scan(self, op, tail_in, 1, reverse, inclusive)?;
            let out = match &block_total {
                Some(t) => {
                    let tb = Layout {
                        shape: vec![outer, tail, inner],
                        strides: vec![inner as isize, 0, 1],
                        offset: 0,
                    };
                    Backend::binary(
                        self,
                        combine,
                        view(t, acc, &tb),
                        view(&scanned, acc, &t_dense),
                        acc,
                    )?
                }
                None => scanned,
            };
            parts.push((out, tail));
        }
        let layouts: Vec<Layout> = parts
            .iter()
            .map(|(_, n)| dense(&[outer, *n, inner]))
            .collect();
        let views: Vec<View<'_, GpuBuffer<D>>> = parts
            .iter()
            .zip(&layouts)
            .map(|((b, _), l)| view(b, acc, l))
            .collect();
        let joined = if views.len() == 1 {
            None
        } else {
            Some(Backend::concatenate(self, &views, 1)?)
        };
        let result = joined.as_ref().unwrap_or(&parts[0].0);
        if acc == out_dtype {
            // One part: it is the result already.
            return match joined {
                Some(j) => Ok(j),
                None => Ok(parts.swap_remove(0).0),
            };
        }
        Backend::copy(self, view(result, acc, &xl), out_dtype)
    }
}
