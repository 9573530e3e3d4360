//! The f64 factorisations: `linalg.wgsl` over `wide.wgsl`'s f64 scalar (the
//! shared core is `crate::wide`).

use crate::Result;
use crate::driver::{Batch, Driver};
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided, check_out, check_view};
use crate::wide::{Listed, Module, Ty};
use wmx_spec::LinalgBlock;

/// The f64 scalar, then the family's kernels.
pub(super) const SRC: &[&str] = &[include_str!("wide.wgsl"), super::LINALG_WGSL];

/// The family's f64 modules, for the naga tests.
pub(crate) fn listed() -> Vec<Listed> {
    LinalgBlock::ALL
        .iter()
        .map(|b| Listed {
            entry: b.name(),
            elem: Ty::F64,
            out: Ty::F64,
            ins: vec![Ty::F64],
            code: String::new(),
            src: SRC,
        })
        .collect()
}

impl<D: Driver> Kernels<D> {
    /// `block` of f64 `x` into `out` (checked by `linalg_block`; `params` are its
    /// `[count, n, a0, m]`).
    pub(crate) fn f64_linalg_block(
        &self,
        b: &mut Batch<D>,
        block: LinalgBlock,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
        params: Vec<u32>,
    ) -> Result<()> {
        let module = Module {
            entry: block.name(),
            elem: Ty::F64,
            out: Ty::F64,
            ins: &[Ty::F64],
            code: "",
            src: SRC,
        };
        let count = params[0] as u64;
        if count == 0 || out.numel() == 0 {
            return self.wide_pipe(&module).map(drop);
        }
        check_view(x, "linalg block input")?;
        check_out(out)?;
        let buffers = vec![out.binding(), x.binding()];
        // One workgroup a matrix (no grid-stride loop): the grid holds them all.
        self.wide_record(b, &module, buffers, params, count)
    }
}
