//! The f64 row ops (softmax, log-softmax, layer and RMS norms): one workgroup a
//! row (`wide.wgsl`; the shared core is `crate::wide`).

use crate::Result;
use crate::driver::{Batch, Driver};
use crate::kernels::{Kernels, MAX_GROUPS};
use crate::layout::{Contig, Strided};
use crate::wide::{Listed, Module, Ty, bits};
use wmx_spec::NormOp;

/// The family's f64 kernel.
const SRC: &[&str] = &[include_str!("wide.wgsl")];

/// The family's f64 modules, for the naga tests.
pub(crate) fn listed() -> Vec<Listed> {
    let f = Ty::F64;
    (0..NormOp::ALL.len())
        .map(|i| Listed {
            entry: "norm",
            elem: f,
            out: f,
            ins: vec![f, f, f],
            code: format!("const NORM_OP: u32 = {i}u;\n"),
            src: SRC,
        })
        .collect()
}

impl<D: Driver> Kernels<D> {
    /// Row op `op` of f64 `x` over its last axis.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn f64_normalize(
        &self,
        b: &mut Batch<D>,
        op: NormOp,
        x: &Strided<D::Buffer>,
        params: &[&Strided<D::Buffer>],
        eps: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let code = format!("const NORM_OP: u32 = {}u;\n", op as u32);
        let module = Module {
            entry: "norm",
            elem: Ty::F64,
            out: Ty::F64,
            ins: &[Ty::F64, Ty::F64, Ty::F64],
            code: &code,
            src: SRC,
        };
        let nd = x.shape.len();
        let len = x.shape[nd - 1];
        let n = out.numel();
        if n == 0 {
            return self.wide_pipe(&module).map(drop);
        }
        let rows = n / len;
        // layer_norm has weight and bias, rms_norm weight: absent ones are marked.
        let (w, bias) = match (op, params) {
            (NormOp::LayerNorm, [w, bias]) => (Some(*w), Some(*bias)),
            (NormOp::LayerNorm | NormOp::RmsNorm, [w]) => (Some(*w), None),
            _ => (None, None),
        };
        let e = bits(eps);
        let none = 0xffff_ffff;
        let mut p = vec![
            len as u32,
            rows as u32,
            (nd - 1) as u32,
            x.offset as u32,
            x.strides[nd - 1] as i32 as u32,
            w.map_or(0, |w| w.offset as u32),
            w.map_or(none, |w| w.strides[0] as i32 as u32),
            bias.map_or(0, |v| v.offset as u32),
            bias.map_or(none, |v| v.strides[0] as i32 as u32),
            e[0],
            e[1],
        ];
        p.extend(x.shape[..nd - 1].iter().map(|&d| d as u32));
        p.extend(x.strides[..nd - 1].iter().map(|&s| s as i32 as u32));
        let bind = |v: Option<&Strided<D::Buffer>>| v.map_or_else(|| x.binding(), |v| v.binding());
        let buffers = vec![out.binding(), x.binding(), bind(w), bind(bias)];
        self.wide_record(b, &module, buffers, p, (rows as u64).min(MAX_GROUPS))
    }
}
