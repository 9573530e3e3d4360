//! The 64-bit scatter-add, without 64-bit atomics (`wide.wgsl`; the shared core
//! is `crate::wide`).

use crate::Result;
use crate::driver::{Batch, Driver};
use crate::dtype::DType;
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided};
use crate::reduce::wide_reduce_code;
use crate::wide::{Listed, Module, Ty, unsupported};
use wmx_spec::ReduceOp;

/// The family's 64-bit kernel.
const SRC: &[&str] = &[include_str!("wide.wgsl")];

/// The family's 64-bit modules, for the naga tests.
pub(crate) fn listed() -> Vec<Listed> {
    [Ty::F64, Ty::I64, Ty::U64]
        .into_iter()
        .filter_map(|t| {
            let code = wide_reduce_code(ReduceOp::Sum, t)?.to_string();
            Some(Listed {
                entry: "scatter_add",
                elem: t,
                out: t,
                ins: vec![t, Ty::U32, t],
                code,
                src: SRC,
            })
        })
        .collect()
}

impl<D: Driver> Kernels<D> {
    /// `out = base` with `updates` added at `indices` along `axis`, in `out`'s
    /// 64-bit dtype without atomics: each output element sums the updates aimed at it, in index order
    /// (cost: the output's size times the index extent along `axis`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wide_scatter_add(
        &self,
        b: &mut Batch<D>,
        base: &Strided<D::Buffer>,
        indices: &Strided<D::Buffer>,
        updates: &Strided<D::Buffer>,
        axis: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if !matches!(indices.dtype, DType::I32 | DType::U32) {
            // The kernel reads whole words: widen u8 indices first.
            let t = self.wide_widen(b, indices, DType::U32)?;
            return self.wide_scatter_add(b, base, &t.view(), updates, axis, out);
        }
        let t = Ty::of(out.dtype);
        let code = wide_reduce_code(ReduceOp::Sum, t)
            .ok_or_else(|| unsupported(out.dtype, "scatter_add"))?;
        let module = Module {
            entry: "scatter_add",
            elem: t,
            out: t,
            ins: &[t, Ty::U32, t],
            code,
            src: SRC,
        };
        let n = out.numel();
        if n == 0 {
            return self.wide_pipe(&module).map(drop);
        }
        let rank = out.shape.len();
        let mut p = vec![
            n as u32,
            rank as u32,
            axis as u32,
            indices.shape[axis] as u32,
            base.offset as u32,
            indices.offset as u32,
            updates.offset as u32,
        ];
        p.extend(out.shape.iter().map(|&d| d as u32));
        for v in [base, indices, updates] {
            p.extend(v.strides.iter().map(|&s| s as i32 as u32));
        }
        let buffers = vec![
            out.binding(),
            base.binding(),
            indices.binding(),
            updates.binding(),
        ];
        self.wide_record(b, &module, buffers, p, self.wide_groups(n))
    }
}
