//! The f64 product: 16 x 16 tiles, one output an invocation (`wide.wgsl`; the
//! shared core is `crate::wide`).

use crate::Result;
use crate::driver::{Batch, Driver};
use crate::dtype::DType;
use crate::kernels::{Kernels, MAX_GROUPS};
use crate::layout::{Contig, Strided};
use crate::wide::{Listed, Module, Ty, bits, unsupported};

/// The family's f64 kernel.
const SRC: &[&str] = &[include_str!("wide.wgsl")];

/// The family's f64 module, for the naga tests.
pub(crate) fn listed() -> Vec<Listed> {
    let f = Ty::F64;
    vec![Listed {
        entry: "matmul",
        elem: f,
        out: f,
        ins: vec![f, f, f],
        code: String::new(),
        src: SRC,
    }]
}

impl<D: Driver> Kernels<D> {
    /// `out = alpha * a @ bb + beta * c` in f64 (shapes checked by `matmul`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn f64_matmul(
        &self,
        b: &mut Batch<D>,
        a: &Strided<D::Buffer>,
        bb: &Strided<D::Buffer>,
        c: Option<&Strided<D::Buffer>>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if self.inner.caps.max_invocations < 256 {
            return Err(unsupported(
                DType::F64,
                "matmul on an adapter with fewer than 256 invocations",
            ));
        }
        let nd = a.shape.len();
        let (m, k, n) = (a.shape[nd - 2], a.shape[nd - 1], bb.shape[nd - 1]);
        let batch = &out.shape[..nd - 2];
        let nb: usize = batch.iter().product();
        let (ab, bbits) = (bits(alpha), bits(beta));
        let cs = c.map_or([0, 0], |c| [c.strides[nd - 2], c.strides[nd - 1]]);
        let mut p = vec![
            m as u32,
            n as u32,
            k as u32,
            nb as u32,
            batch.len() as u32,
            a.offset as u32,
            bb.offset as u32,
            c.map_or(0, |c| c.offset as u32),
            ab[0],
            ab[1],
            bbits[0],
            bbits[1],
            a.strides[nd - 2] as i32 as u32,
            a.strides[nd - 1] as i32 as u32,
            bb.strides[nd - 2] as i32 as u32,
            bb.strides[nd - 1] as i32 as u32,
            cs[0] as i32 as u32,
            cs[1] as i32 as u32,
            c.is_some() as u32,
        ];
        p.extend(batch.iter().map(|&d| d as u32));
        for v in [Some(a), Some(bb), c] {
            let s = v.map_or(&a.strides[..nd - 2], |v| &v.strides[..nd - 2]);
            p.extend(s.iter().map(|&s| s as i32 as u32));
        }
        let module = Module {
            entry: "matmul",
            elem: Ty::F64,
            out: Ty::F64,
            ins: &[Ty::F64, Ty::F64, Ty::F64],
            code: "",
            src: SRC,
        };
        let tiles = (nb * m.div_ceil(16) * n.div_ceil(16)) as u64;
        let cbind = c.map_or_else(|| a.binding(), |c| c.binding());
        let buffers = vec![out.binding(), a.binding(), bb.binding(), cbind];
        self.wide_record(b, &module, buffers, p, tiles.min(MAX_GROUPS))
    }
}
