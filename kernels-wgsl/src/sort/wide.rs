//! The 64-bit sorts: an order-preserving key of each element, sorted as two
//! stable u32 passes (`wide.wgsl`; the shared core is `crate::wide`).

use crate::Result;
use crate::driver::{Batch, Driver};
use crate::dtype::DType;
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided};
use crate::wide::{Listed, Module, Ty, map_params};

/// The family's 64-bit kernel.
const SRC: &[&str] = &[include_str!("wide.wgsl")];

/// `[2, shape..]`: two arrays of `shape`.
fn pair_shape_front(shape: &[usize]) -> Vec<usize> {
    std::iter::once(2).chain(shape.iter().copied()).collect()
}

/// `key` of the sort keys of elements of `t`.
fn key_code(t: Ty) -> String {
    let s = t.suffix();
    format!("fn key(lo: u32, hi: u32) -> vec2<u32> {{ return key_{s}(lo, hi); }}\n")
}

/// The family's 64-bit modules, for the naga tests.
pub(crate) fn listed() -> Vec<Listed> {
    [Ty::F64, Ty::I64, Ty::U64]
        .into_iter()
        .map(|t| Listed {
            entry: "keys",
            elem: t,
            out: Ty::U32,
            ins: vec![Ty::U32],
            code: key_code(t),
            src: SRC,
        })
        .collect()
}

impl<D: Driver> Kernels<D> {
    /// Stable argsort of the rows of 64-bit `x` (row-major): two stable passes of
    /// the u32 sort, by the low then the high words of an order-preserving key.
    pub(crate) fn wide_argsort(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let n = out.numel();
        let t = Ty::of(x.dtype);
        let code = key_code(t);
        let m = Module {
            entry: "keys",
            elem: t,
            out: Ty::U32,
            ins: &[Ty::U32],
            code: &code,
            src: SRC,
        };
        if n == 0 {
            return self.wide_pipe(&m).map(drop);
        }
        // The low key words, then the high ones.
        let keys = self.wide_temp(&pair_shape_front(x.shape), DType::U32)?;
        let params = map_params(x.shape, &[x], [0.0; 2]);
        let kb = keys.out().binding();
        self.wide_record(b, &m, vec![kb, x.binding()], params, self.wide_groups(n))?;
        let first = self.wide_temp(x.shape, DType::U32)?;
        let high = self.wide_temp(x.shape, DType::U32)?;
        let second = self.wide_temp(x.shape, DType::U32)?;
        let axis = x.shape.len() - 1;
        self.argsort(b, &keys.part(0), &first.out())?;
        self.gather(b, &keys.part(1), &first.view(), axis, &high.out())?;
        self.argsort(b, &high.view(), &second.out())?;
        self.gather(b, &first.view(), &second.view(), axis, out)
    }
}
