//! Reductions (sum, prod, max, min, all, any) and arg reductions (argmax, argmin).
//!
//! Kept and reduced dims are collapsed separately. If reduced elements are closer in
//! memory than neighbouring outputs (row reduction, reduce-all) one workgroup
//! reduces one output, split into chunks with a second pass when there are few
//! outputs (reduce-all: ~2048 first-pass workgroups). Otherwise (column reduction)
//! 32 neighbouring outputs share a workgroup, 8 invocations each.
//!
//! Kernels write 32-bit accumulators; packed output dtypes (bool, u8, f16, bf16) get
//! a final cast pass from a scratch buffer.

mod family;
pub(crate) mod wide;
pub(crate) use wide::reduce_code as wide_reduce_code;
mod scan;

pub use family::{ARG_REDUCE, REDUCE};
pub(crate) use scan::EXCLUSIVE;

use crate::compose::{ModuleSpec, Variant};
use crate::driver::Driver;
use crate::driver::{Batch, Binding, Work};
use crate::dtype::is_wide;
use crate::dtype::{DType, Words};
use crate::fused::Prologue;
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided};
use crate::layout::{check_out, check_view, collapse};
use crate::{Error, Result};
use wmx_spec::{ArgReduceOp, ReduceOp};

/// Outputs per workgroup of the column kernels (`TX` in reduce.wgsl).
const TX: u64 = 32;
/// vec4 columns per workgroup of the vectorised column kernel (`TXV`).
const TXV: u64 = 16;
/// First-pass workgroups aimed for when outputs are few: about one full wave of
/// 256-invocation groups on a 132-SM GPU. Measured on an H200 (bench/NOTES.md,
/// run 11) against 2048: sums over 1024 rows became one pass (f32 sum_last 2^24
/// 26.2 -> 20.0 µs, f16 18.5 -> 11.0 µs) and no case got slower.
const TARGET_GROUPS: u64 = 1024;
/// Minimum elements per chunk of a split row.
const MIN_CHUNK: u64 = 4096;

struct Plan {
    k: u64,
    r: u64,
    shape_k: Vec<usize>,
    stride_k: Vec<isize>,
    shape_r: Vec<usize>,
    stride_r: Vec<isize>,
}

impl Plan {
    /// The rows of `k` outputs' `s` partials, contiguous ([K, S]).
    fn partials(k: u64, s: u64) -> Plan {
        Plan {
            k,
            r: s,
            shape_k: vec![k as usize],
            stride_k: vec![s as isize],
            shape_r: vec![s as usize],
            stride_r: vec![1],
        }
    }

    fn new<B>(x: &Strided<B>, reduced: &[bool]) -> Plan {
        let pick = |want: bool| -> (Vec<usize>, Vec<isize>) {
            let sh: Vec<usize> = (0..x.shape.len())
                .filter(|d| reduced[*d] == want)
                .map(|d| x.shape[d])
                .collect();
            let st: Vec<isize> = (0..x.shape.len())
                .filter(|d| reduced[*d] == want)
                .map(|d| x.strides[d])
                .collect();
            let (sh, mut st) = collapse(&sh, &[&st]);
            (sh, st.pop().unwrap_or_default())
        };
        let (shape_k, stride_k) = pick(false);
        let (shape_r, stride_r) = pick(true);
        Plan {
            k: crate::layout::numel(&shape_k) as u64,
            r: crate::layout::numel(&shape_r) as u64,
            shape_k,
            stride_k,
            shape_r,
            stride_r,
        }
    }

    /// The row kernel may use vec4 loads: one contiguous reduced dim, and the buffer
    /// padded to 16 bytes past the last element read.
    fn vec_rows<B: crate::DriverBuffer>(&self, x: &Strided<B>) -> bool {
        if self.shape_r.len() != 1 || self.stride_r[0] != 1 {
            return false;
        }
        match check_view(x, "reduce input") {
            Ok(hi) => x.bytes() >= (hi / x.dtype.epw() as u64 / 4 + 1) * 16,
            Err(_) => false,
        }
    }

    /// The column kernel may use vec4 loads: contiguous outputs, one reduced dim, the
    /// offset and the reduced stride multiples of a vec4, the buffer padded past the
    /// last vec4 read.
    fn vec_cols<B: crate::DriverBuffer>(&self, x: &Strided<B>) -> bool {
        let blk = 4 * x.dtype.epw();
        if self.shape_k.len() != 1
            || self.stride_k[0] != 1
            || self.shape_r.len() != 1
            || self.stride_r[0] <= 0
            || !(self.stride_r[0] as usize).is_multiple_of(blk)
            || !x.offset.is_multiple_of(blk)
        {
            return false;
        }
        let last = x.offset as u64
            + self.k.div_ceil(blk as u64) * blk as u64
            + (self.r.max(1) - 1) * self.stride_r[0] as u64;
        x.bytes() >= last.div_ceil(blk as u64) * 16
    }

    /// Row kernel when reduced elements are closer together than neighbouring outputs.
    fn rows(&self) -> bool {
        let min = |s: &[isize]| {
            s.iter()
                .map(|v| v.unsigned_abs())
                .min()
                .unwrap_or(usize::MAX)
        };
        self.k == 1 || (self.r >= 16 && min(&self.stride_r) < min(&self.stride_k))
    }

    fn params(&self, s: u64, chunk: u64, x_off: usize, out_off: u32) -> Vec<u32> {
        let mut p = vec![
            self.k as u32,
            self.r as u32,
            s as u32,
            chunk as u32,
            x_off as u32,
            self.shape_k.len() as u32,
            self.shape_r.len() as u32,
            out_off,
        ];
        p.extend(self.shape_k.iter().map(|v| *v as u32));
        p.extend(self.stride_k.iter().map(|v| *v as i32 as u32));
        p.extend(self.shape_r.iter().map(|v| *v as u32));
        p.extend(self.stride_r.iter().map(|v| *v as i32 as u32));
        p
    }
}

impl<D: Driver> Kernels<D> {
    /// Reduces `x` over `axes` (sorted, unique) by `op`. `out` holds the kept dims
    /// in order (its element count must equal their product) and has the dtype
    /// given by [`ReduceOp::out_dtype`], or the accumulator dtype given by
    /// [`ReduceOp::acc_dtype`] (partial results, not rounded). Empty reductions give 0 (sum), 1 (prod), true
    /// (all), false (any); max/min of nothing is an error.
    pub fn reduce(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        x: &Strided<D::Buffer>,
        axes: &[usize],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let first = b.dispatches.len();
        self.reduce_with(b, op, x, axes, out, None)?;
        // For profiles: the input's shape and axes on every pass, the bytes (input
        // read once, output written once) on the first.
        if self.describing() {
            let mut bytes = (crate::layout::numel(x.shape) * x.dtype.size()) as f64
                + (out.numel() * out.dtype.size()) as f64;
            let shape = format!("{:?} {} over {axes:?}", x.shape, x.dtype);
            for d in &mut b.dispatches[first..] {
                d.work = Some(Work {
                    shape: shape.clone(),
                    flop: 0.0,
                    bytes,
                });
                bytes = 0.0;
            }
        }
        Ok(())
    }

    /// [`Kernels::reduce`]; with a prologue, `x` is the prologue's row-major
    /// output (its buffer is never bound) and the first pass computes each element
    /// as it reads it.
    pub(crate) fn reduce_with(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        x: &Strided<D::Buffer>,
        axes: &[usize],
        out: &Contig<D::Buffer>,
        pro: Option<&Prologue<'_, D::Buffer>>,
    ) -> Result<()> {
        self.check_dtype(x.dtype)?;
        let want = op.out_dtype(x.dtype);
        let acc = op.acc_dtype(x.dtype);
        if out.dtype != want && out.dtype != acc {
            return Err(Error::Shape(format!(
                "reduce '{op}' of {} gives {want} (accumulated in {acc}), but the output is {}",
                x.dtype, out.dtype
            )));
        }
        let reduced = axes_mask(x, axes)?;
        let plan = self.prepare(x, &reduced, out, pro.is_some())?;
        if plan.k == 0 {
            return Ok(());
        }
        if plan.r == 0 && matches!(op, ReduceOp::Max | ReduceOp::Min) {
            return Err(Error::Shape(format!(
                "reduce '{op}' over zero elements (shape {:?}, axes {axes:?})",
                x.shape
            )));
        }
        if is_wide(x.dtype) && pro.is_none() {
            check_view(x, "reduce input")?;
            return self.wide_reduce(b, op, x, axes, out);
        }
        // Where the accumulators go: the output itself, or scratch 1 then a cast.
        // f16/bf16 results are rounded and stored by the final pass itself, saving
        // the cast dispatch, where no other invocation writes their word: a single
        // result over rows, or any over columns (the column kernels store pairs).
        let narrow = acc == DType::F32 && out.dtype != acc && (plan.k == 1 || !plan.rows());
        let direct = out.dtype == acc || narrow;
        let target = if direct {
            out.binding()
        } else {
            self.scratch(1, plan.k * 4)?.into()
        };
        let final_out = if narrow { out.dtype } else { acc };
        let spec =
            |input: DType, variant, output| self.spec(&REDUCE, op, vec![input], output, variant, 0);
        if plan.rows() {
            let rows = if pro.is_none() && plan.vec_rows(x) {
                Variant::RowsVec
            } else {
                Variant::Rows
            };
            let (s, chunk) = chunks(plan.k, plan.r, self.wg() as u64);
            if s == 1 {
                let params = plan.params(1, plan.r.max(1), x.offset, 0);
                self.first_pass(
                    b,
                    &spec(x.dtype, rows, final_out),
                    [target.clone(), x.binding()],
                    params,
                    plan.k,
                    pro,
                )?;
            } else {
                let partial = self.scratch(0, plan.k * s * 4)?;
                let params = plan.params(s, chunk, x.offset, 0);
                self.first_pass(
                    b,
                    &spec(x.dtype, rows, acc),
                    [partial.clone().into(), x.binding()],
                    params,
                    plan.k * s,
                    pro,
                )?;
                // Second pass: rows of the [K, S] partials (contiguous, in a scratch
                // buffer of a power-of-two size: vec4 loads).
                let params = Plan::partials(plan.k, s).params(1, s, 0, 0);
                self.record(
                    b,
                    &spec(acc, Variant::RowsVec, final_out),
                    [target.clone(), partial.into()],
                    params,
                    plan.k,
                )?;
            }
        } else if pro.is_none() && plan.vec_cols(x) {
            let per_group = TXV * 4 * x.dtype.epw() as u64;
            let groups = plan.k.div_ceil(per_group);
            // A tall matrix (few column groups, many rows): chunks of rows, each
            // writing partials [K, S], then the rows kernel over them. Very few
            // groups (a bias gradient: 768 f32 columns are 12) take short chunks.
            let (s, chunk) = if groups < FEW_VEC_COL_GROUPS {
                col_chunks(groups, plan.r, MIN_VEC_COL_CHUNK)
            } else {
                chunks(groups, plan.r, 1)
            };
            if s == 1 {
                let params = plan.params(1, plan.r, x.offset, 0);
                self.record(
                    b,
                    &spec(x.dtype, Variant::ColsVec, final_out),
                    [target.clone(), x.binding()],
                    params,
                    groups,
                )?;
            } else {
                let partial = self.scratch(0, plan.k * s * 4)?;
                self.record(
                    b,
                    &spec(x.dtype, Variant::ColsVec, acc),
                    [partial.clone().into(), x.binding()],
                    plan.params(s, chunk, x.offset, 0),
                    groups * s,
                )?;
                self.cols_of_partials(b, op, &target, partial, plan.k, s, final_out)?;
            }
        } else {
            let groups = plan.k.div_ceil(TX);
            // Few column groups over many rows (a bias gradient: 768 columns, 2048
            // rows): chunks of rows writing partials [K, S], then rows over them.
            let (s, chunk) = col_chunks(groups, plan.r, MIN_COL_CHUNK);
            if s == 1 {
                let params = plan.params(1, plan.r, x.offset, 0);
                self.first_pass(
                    b,
                    &spec(x.dtype, Variant::Cols, final_out),
                    [target.clone(), x.binding()],
                    params,
                    groups,
                    pro,
                )?;
            } else {
                let partial = self.scratch(0, plan.k * s * 4)?;
                self.first_pass(
                    b,
                    &spec(x.dtype, Variant::Cols, acc),
                    [partial.clone().into(), x.binding()],
                    plan.params(s, chunk, x.offset, 0),
                    groups * s,
                    pro,
                )?;
                self.cols_of_partials(b, op, &target, partial, plan.k, s, final_out)?;
            }
        }
        if !direct {
            let shape = [plan.k as usize];
            let src = Strided {
                buffer: &target.buffer,
                window: target.window,
                dtype: acc,
                shape: &shape,
                strides: &[1],
                offset: 0,
            };
            self.copy(
                b,
                &src,
                &Contig {
                    buffer: out.buffer,
                    window: out.window,
                    dtype: out.dtype,
                    shape: &shape,
                },
            )?;
        }
        Ok(())
    }

    /// Index (u32) of the largest (`argmax`) or smallest (`argmin`) element along
    /// `axis`; the first NaN if there is one, else the first extreme element. `out`
    /// holds the other dims in order, dtype `U32`.
    pub fn arg_reduce(
        &self,
        b: &mut Batch<D>,
        op: ArgReduceOp,
        x: &Strided<D::Buffer>,
        axis: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        self.check_dtype(x.dtype)?;
        if out.dtype != DType::U32 {
            return Err(Error::Shape(format!(
                "arg_reduce '{op}' writes u32, but the output is {}",
                out.dtype
            )));
        }
        let reduced = axes_mask(x, &[axis])?;
        let mut plan = self.prepare(x, &reduced, out, false)?;
        if plan.k == 0 {
            return Ok(());
        }
        if x.shape[axis] == 0 {
            return Err(Error::Shape(format!(
                "arg_reduce '{op}' over an empty axis {axis} of {:?}",
                x.shape
            )));
        }
        if is_wide(x.dtype) {
            check_view(x, "arg_reduce input")?;
            return self.wide_arg_reduce(b, op, x, axis, out);
        }
        // Keep the axis itself (even of size 1): the index counts along it.
        plan.shape_r = vec![x.shape[axis]];
        plan.stride_r = vec![x.strides[axis]];
        plan.r = x.shape[axis] as u64;
        let params = plan.params(1, plan.r, x.offset, 0);
        let (variant, groups) = if plan.rows() && plan.vec_rows(x) {
            (Variant::RowsVec, plan.k)
        } else if plan.rows() {
            (Variant::Rows, plan.k)
        } else {
            (Variant::Cols, plan.k.div_ceil(TX))
        };
        let spec = self.spec(&ARG_REDUCE, op, vec![x.dtype], DType::U32, variant, 0);
        self.record(b, &spec, [out.binding(), x.binding()], params, groups)
    }

    /// Checks and the plan; `virtual_x`: `x` is a prologue's output, not in a buffer.
    fn prepare(
        &self,
        x: &Strided<D::Buffer>,
        reduced: &[bool],
        out: &Contig<D::Buffer>,
        virtual_x: bool,
    ) -> Result<Plan> {
        if !virtual_x {
            check_view(x, "reduce input")?;
        }
        check_out(out)?;
        if !virtual_x && x.buffer == out.buffer {
            return Err(Error::Shape(
                "reduction output shares the input buffer".into(),
            ));
        }
        let kept: usize = (0..x.shape.len())
            .filter(|d| !reduced[*d])
            .map(|d| x.shape[d])
            .product();
        if out.numel() != kept {
            return Err(Error::Shape(format!(
                "reduction of {:?} keeps {kept} elements, output shape {:?} has {}",
                x.shape,
                out.shape,
                out.numel()
            )));
        }
        Ok(Plan::new(x, reduced))
    }
}

impl<D: Driver> Kernels<D> {
    /// The second pass of a column reduction in row chunks: the `[k, s]` partials'
    /// rows combined by the column kernel (adjacent invocations take adjacent
    /// outputs, so f16/bf16 results are stored in pairs) into `target` as `dtype`.
    #[allow(clippy::too_many_arguments)]
    fn cols_of_partials(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        target: &Binding<D::Buffer>,
        partial: D::Buffer,
        k: u64,
        s: u64,
        dtype: DType,
    ) -> Result<()> {
        let acc = op.acc_dtype(dtype);
        let spec = self.spec(&REDUCE, op, vec![acc], dtype, Variant::Cols, 0);
        self.record(
            b,
            &spec,
            [target.clone(), partial.into()],
            Plan::partials(k, s).params(1, s, 0, 0),
            k.div_ceil(TX),
        )
    }

    /// Records a reduction's first pass: the plain module reading `buffers[1]`, or
    /// with a prologue the fused module reading the prologue's inputs.
    fn first_pass(
        &self,
        b: &mut Batch<D>,
        spec: &ModuleSpec,
        buffers: [Binding<D::Buffer>; 2],
        mut params: Vec<u32>,
        groups: u64,
        pro: Option<&Prologue<'_, D::Buffer>>,
    ) -> Result<()> {
        let Some(pro) = pro else {
            return self.record(b, spec, buffers, params, groups);
        };
        let base = params.len();
        crate::fused::value_params(pro.shape, pro.inputs, &pro.constants, &mut params);
        let mut key = pro.key.clone();
        key.reduce = Some((spec.clone(), base));
        let pipe = self.fused_pipeline(&key, pro.buffers.len())?;
        let [target, _] = buffers;
        let bound = std::iter::once(target).chain(pro.buffers.iter().cloned());
        self.record_pipe(b, pipe, bound, params, groups)
    }
}

/// Chunks of the reduced range `r` for `groups` workgroups' worth of outputs:
/// (count, rows each). More than one when the outputs alone fill fewer than
/// `TARGET_GROUPS` workgroups and `r` is long (more than twice `MIN_CHUNK` and
/// `at_least`).
fn chunks(groups: u64, r: u64, at_least: u64) -> (u64, u64) {
    let mut s = 1;
    if groups < TARGET_GROUPS && r > 2 * MIN_CHUNK.max(at_least) {
        s = TARGET_GROUPS
            .div_ceil(groups)
            .min(r.div_ceil(MIN_CHUNK))
            .max(1);
    }
    let chunk = r.div_ceil(s).max(1);
    (r.div_ceil(chunk).max(1), chunk)
}

/// [`chunks`] for the column kernels, whose workgroups each read a band of
/// columns of every row: rows are split down to `min_chunk`, so a bias gradient of
/// a few hundred columns fills the GPU instead of 12-24 workgroups (bench/NOTES.md,
/// runs 52 and 81).
fn col_chunks(groups: u64, r: u64, min_chunk: u64) -> (u64, u64) {
    if groups >= TARGET_GROUPS || r < 2 * min_chunk {
        return (1, r.max(1));
    }
    let s = TARGET_GROUPS.div_ceil(groups).min(r / min_chunk).max(1);
    let chunk = r.div_ceil(s).max(1);
    (r.div_ceil(chunk).max(1), chunk)
}

/// Fewest rows in a chunk of the column kernel.
const MIN_COL_CHUNK: u64 = 256;
/// Workgroups of the vec4 column kernel below which its rows are cut into chunks
/// of at least [`MIN_VEC_COL_CHUNK`] rows: a bias gradient of 768 columns over 2048
/// rows ran on 12 workgroups for ~60 us (run 80). Wider sums keep the one-pass
/// plan: chunking all of them made a 4096 x 4096 sum 2.2x slower (run 53).
const FEW_VEC_COL_GROUPS: u64 = 32;
/// Fewest rows in a chunk of the vec4 column kernel (its 16 row lanes then read 8
/// rows each).
const MIN_VEC_COL_CHUNK: u64 = 128;

fn axes_mask<B>(x: &Strided<B>, axes: &[usize]) -> Result<Vec<bool>> {
    if x.shape.len() != x.strides.len() {
        return Err(Error::Shape(format!(
            "shape {:?} and strides {:?} differ in rank",
            x.shape, x.strides
        )));
    }
    let mut m = vec![false; x.shape.len()];
    for (i, &a) in axes.iter().enumerate() {
        if a >= x.shape.len() || (i > 0 && axes[i - 1] >= a) {
            return Err(Error::Shape(format!(
                "axes {axes:?} must be sorted, unique and below the rank {}",
                x.shape.len()
            )));
        }
        m[a] = true;
    }
    Ok(m)
}
