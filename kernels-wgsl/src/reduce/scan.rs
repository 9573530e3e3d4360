//! Scans: cumulative sum, prod, max and min along one axis, inclusive or
//! exclusive, forwards or reversed.
//!
//! A row-major input is `rows x len x inner`. With `inner > 1` one invocation scans
//! one line serially (neighbouring invocations read neighbouring elements). With
//! `inner == 1` one workgroup scans one block of 2048 positions; lines longer than
//! a block take three passes: block totals, an exclusive scan of the totals (the
//! same scan, recursively), and the blocks again with their carries. 32-bit rows
//! that start on a vec4 take the vec4 kernel (`scan_vec.wgsl`): blocks of 16384 in
//! 16-byte loads and stores, and two passes (block totals, then blocks that
//! combine the totals before them). Kernels write 32-bit
//! accumulators (f32 for floats, so f16/bf16 sums are rounded once per element);
//! packed output dtypes get a cast pass.

use super::REDUCE;
use crate::compose::Variant;
use crate::driver::Driver;
use crate::driver::{Batch, Binding};
use crate::dtype::is_wide;
use crate::dtype::{DType, Words};
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided};
use crate::layout::{check_out, check_view, contiguous_strides};
use crate::{Error, Result};
use wmx_spec::ReduceOp;

/// Positions per invocation of `scan_blocks` (SCAN_K in scan.wgsl).
const SCAN_K: u64 = 8;
/// Vec4s per invocation and tile of `scan_blocks_v` (SCAN_V in scan_vec.wgsl).
const SCAN_V: u64 = 4;
/// Tiles per block of `scan_blocks_v` (its prelude's SCAN_ITER): 2 to 8 ran
/// alike on the H200, 1 slower (bench/NOTES.md, runs 131-133).
pub(crate) const SCAN_ITER: u64 = 4;
/// Longest line the serial kernel (`ScanLines`, one invocation per strided line)
/// takes: Mesa's llvmpipe stops a shader's loops after 65 535 iterations per
/// invocation. Longer lines are moved last (a copy) and scanned in blocks.
const SERIAL_LINE_MAX: usize = 16384;

const REVERSE: u32 = 1;
pub(crate) const EXCLUSIVE: u32 = 2;
const CARRY: u32 = 4;
const TOTALS: u32 = 8;
/// Input b holds the block totals (the vec4 kernel combines those before its block).
const TOTALS_IN: u32 = 16;
/// Most blocks in a row of the vec4 kernel, whose blocks each combine the totals
/// before them: 32768 blocks (2^29 elements, a 2 GiB binding of f32) read 2 GiB of
/// totals from the cache in all. Longer rows take the scalar kernel.
const TOTALS_READ_MAX: u64 = 32768;

impl<D: Driver> Kernels<D> {
    /// `out` = the scan of `x` by `op` (`sum`, `prod`, `max`, `min`) along `axis`:
    /// `inclusive` or exclusive (the first element is the identity), `reverse`
    /// from the end. `x` is row-major (any offset); `out` has its shape and the
    /// dtype of [`ReduceOp::out_dtype`]. Floats accumulate in f32, integers
    /// wrap; max/min propagate NaN.
    #[allow(clippy::too_many_arguments)]
    pub fn scan(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        x: &Strided<D::Buffer>,
        axis: usize,
        reverse: bool,
        inclusive: bool,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if matches!(op, ReduceOp::All | ReduceOp::Any) {
            return Err(Error::OpNotDefined {
                op: format!("cumulative {op}"),
                dtype: x.dtype.name(),
            });
        }
        let rank = x.shape.len();
        let dense = crate::layout::is_row_major(x);
        let want = op.out_dtype(x.dtype);
        if axis >= rank || out.shape != x.shape || !dense || want != out.dtype {
            return Err(Error::Shape(format!(
                "scan {op}: {} {:?} (strides {:?}) along axis {axis} into {} {:?} (needs a row-major input and a {} output)",
                x.dtype, x.shape, x.strides, out.dtype, out.shape, want
            )));
        }
        self.check_dtype(x.dtype)?;
        self.check_dtype(out.dtype)?;
        check_view(x, "scan input")?;
        check_out(out)?;
        if is_wide(x.dtype) {
            return self.wide_scan(b, op, x, axis, reverse, inclusive, out);
        }
        let acc = x.dtype.acc();
        let n = out.numel();
        let spec = self.spec(&REDUCE, op, vec![x.dtype], acc, Variant::ScanBlocks, 0);
        if n == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let rows: usize = x.shape[..axis].iter().product();
        let len = x.shape[axis];
        let inner: usize = x.shape[axis + 1..].iter().product();
        if inner > 1 && len > SERIAL_LINE_MAX {
            return self.scan_moved_last(b, op, x, axis, reverse, inclusive, out);
        }
        let flags = if reverse { REVERSE } else { 0 } | if inclusive { 0 } else { EXCLUSIVE };
        let tmp = if out.dtype == acc {
            None
        } else {
            Some(self.create_buffer(n as u64 * 4, Some("wmx scan accumulators"))?)
        };
        let dst = tmp.as_ref().map_or_else(|| out.binding(), Binding::from);
        let src = (x.binding(), x.dtype, x.offset);
        if inner > 1 {
            let lines = (rows * inner) as u64;
            let spec = self.scan_spec(op, x.dtype, None, Variant::ScanLines);
            let params = vec![
                rows as u32,
                len as u32,
                inner as u32,
                1,
                x.offset as u32,
                flags,
                0,
                0,
            ];
            let groups = lines
                .div_ceil(self.wg() as u64)
                .min(crate::kernels::MAX_GROUPS);
            self.record(b, &spec, [dst.clone(), x.binding()], params, groups)?;
        } else {
            self.scan_rows(b, op, src, rows, len, flags, &dst)?;
        }
        if let Some(t) = &tmp {
            let strides = contiguous_strides(out.shape);
            let from = Strided {
                buffer: t,
                window: None,
                dtype: acc,
                shape: out.shape,
                strides: &strides,
                offset: 0,
            };
            self.copy(b, &from, out)?;
        }
        Ok(())
    }

    /// [`Kernels::scan`] of long strided lines: `x` copied with `axis` last, scanned
    /// along it in blocks, and copied back.
    #[allow(clippy::too_many_arguments)]
    fn scan_moved_last(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        x: &Strided<D::Buffer>,
        axis: usize,
        reverse: bool,
        inclusive: bool,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let rank = x.shape.len();
        let order: Vec<usize> = (0..rank).filter(|&d| d != axis).chain([axis]).collect();
        let shape: Vec<usize> = order.iter().map(|&d| x.shape[d]).collect();
        let n = out.numel() as u64;
        let moved_in = Strided {
            shape: &shape,
            strides: &order.iter().map(|&d| x.strides[d]).collect::<Vec<_>>(),
            ..*x
        };
        let xt = self.create_buffer(n * x.dtype.size() as u64, Some("wmx scan input"))?;
        let yt = self.create_buffer(n * out.dtype.size() as u64, Some("wmx scan output"))?;
        let contig = |buffer, dtype| Contig {
            buffer,
            window: None,
            dtype,
            shape: &shape,
        };
        self.copy(b, &moved_in, &contig(&xt, x.dtype))?;
        let st = contiguous_strides(&shape);
        let xs = Strided {
            buffer: &xt,
            window: None,
            dtype: x.dtype,
            shape: &shape,
            strides: &st,
            offset: 0,
        };
        self.scan(
            b,
            op,
            &xs,
            rank - 1,
            reverse,
            inclusive,
            &contig(&yt, out.dtype),
        )?;
        // Back: the scanned array's strides for out's dims.
        let mut back = vec![0isize; rank];
        for (j, &d) in order.iter().enumerate() {
            back[d] = st[j];
        }
        let ys = Strided {
            buffer: &yt,
            window: None,
            dtype: out.dtype,
            shape: out.shape,
            strides: &back,
            offset: 0,
        };
        self.copy(b, &ys, out)
    }

    /// Scans `rows` contiguous lines of `len` elements of `src` (buffer, dtype,
    /// element offset) into the accumulator buffer `dst`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scan_rows(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        src: (Binding<D::Buffer>, DType, usize),
        rows: usize,
        len: usize,
        flags: u32,
        dst: &Binding<D::Buffer>,
    ) -> Result<()> {
        let (buf, dtype, off) = src;
        let acc = dtype.acc();
        // 32-bit rows that start on a vec4 (reversed: and end on one), in bindings
        // padded past the last vec4: the vec4 kernel.
        let padded = |b: &Binding<D::Buffer>, end: u64| {
            crate::driver::bound_len(&b.buffer, b.window) >= end.div_ceil(4) * 16
        };
        let n = (rows * len) as u64;
        let vec = dtype.epw() == 1
            && (len as u64).div_ceil(4 * SCAN_V * SCAN_ITER * self.wg() as u64) <= TOTALS_READ_MAX
            && off.is_multiple_of(4)
            && (len.is_multiple_of(4) || rows == 1 && flags & REVERSE == 0)
            && padded(&buf, off as u64 + n)
            && padded(dst, n);
        let (variant, per) = if vec {
            (Variant::ScanBlocksVec, 4 * SCAN_V * SCAN_ITER)
        } else {
            (Variant::ScanBlocks, SCAN_K)
        };
        let block = self.wg() as u64 * per;
        let nb = (len as u64).div_ceil(block).max(1);
        let params = |nb: u64, flags: u32| {
            vec![
                rows as u32,
                len as u32,
                1,
                nb as u32,
                off as u32,
                flags,
                0,
                0,
            ]
        };
        let groups = rows as u64 * nb;
        if nb == 1 {
            let spec = self.scan_spec(op, dtype, None, variant);
            return self.record(
                b,
                &spec,
                [dst.clone(), buf.clone()],
                params(1, flags),
                groups,
            );
        }
        // Block totals (in logical order); the vec4 kernel's blocks then combine the
        // totals before them, the other's take their exclusive scan as carries.
        let totals = self.create_buffer(groups * 4, Some("wmx scan block totals"))?;
        let totals_variant = if vec {
            Variant::ScanTotalsVec
        } else {
            Variant::ScanBlocks
        };
        let spec = self.scan_spec(op, dtype, None, totals_variant);
        let first = params(nb, (flags & REVERSE) | TOTALS);
        self.record(
            b,
            &spec,
            [totals.clone().into(), buf.clone()],
            first,
            groups,
        )?;
        if vec {
            let spec = self.scan_spec(op, dtype, Some(acc), variant);
            let last = params(nb, flags | TOTALS_IN);
            return self.record(b, &spec, [dst.clone(), buf, totals.into()], last, groups);
        }
        let carries = self.create_buffer(groups * 4, Some("wmx scan carries"))?;
        self.scan_rows(
            b,
            op,
            (totals.clone().into(), acc, 0),
            rows,
            nb as usize,
            EXCLUSIVE,
            &carries.clone().into(),
        )?;
        let spec = self.scan_spec(op, dtype, Some(acc), variant);
        let last = params(nb, flags | CARRY);
        self.record(
            b,
            &spec,
            [dst.clone(), buf.clone(), carries.into()],
            last,
            groups,
        )
    }
}

impl<D: Driver> Kernels<D> {
    /// The scan module of `op` over `dtype`, with `carry` as its second input.
    fn scan_spec(
        &self,
        op: ReduceOp,
        dtype: DType,
        carry: Option<DType>,
        variant: Variant,
    ) -> crate::compose::ModuleSpec {
        let mut inputs = vec![dtype];
        inputs.extend(carry);
        self.spec(&REDUCE, op, inputs, dtype.acc(), variant, 0)
    }
}
