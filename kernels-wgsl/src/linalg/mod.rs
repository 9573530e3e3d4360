//! Batched factorisations of f32 and f64 matrices (`LinalgBlock`), one workgroup
//! per matrix: Cholesky, the inverse of a lower-triangular matrix and LU with
//! partial pivoting of blocks up to [`LinalgBlock::side`] held in workgroup
//! memory; LU of tall panels and Householder QR in global memory. Core's blocked
//! algorithms call them on diagonal blocks and panels and do the rest with matrix
//! products. One WGSL file over a scalar `R`: `scalar32.wgsl` makes it f32 (a
//! composed module), `wide.wgsl` f64 (a `crate::wide` module).

pub(crate) mod wide;

use crate::compose::{Family, Io, ModuleSpec, Variant, check_out as check_dtype};
use crate::driver::{Batch, Driver};
use crate::dtype::DType;
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided, check_out, check_view, is_row_major};
use crate::{Error, Result};
use wmx_spec::LinalgBlock;

const LINALG_WGSL: &str = include_str!("linalg.wgsl");
const SCALAR32_WGSL: &str = include_str!("scalar32.wgsl");

/// The block kernels: f32 matrices in, f32 matrices out.
pub static LINALG: Family = Family {
    name: "Linalg",
    arity: 1,
    takes: |s| s.inputs.len() == 1,
    entry: |s| s.op.name(),
    raw: |_| false,
    io: Io::rows,
    body: |spec, _| {
        if spec.inputs != [DType::F32]
            || spec.variant != Variant::General
            || !LinalgBlock::ALL.iter().any(|b| b.name() == spec.op.name())
        {
            return Err(Error::Shape(format!(
                "linalg blocks read f32 (general variant), got {:?} ({:?}) for {}",
                spec.inputs, spec.variant, spec.op
            )));
        }
        check_dtype(spec, DType::F32)?;
        Ok(vec![SCALAR32_WGSL, LINALG_WGSL])
    },
    specs: |t| {
        LinalgBlock::ALL
            .iter()
            .map(|b| {
                ModuleSpec::new(
                    &LINALG,
                    b.name(),
                    vec![DType::F32],
                    DType::F32,
                    Variant::General,
                    t,
                )
            })
            .collect()
    },
};

impl<D: Driver> Kernels<D> {
    /// `block` of each matrix of the row-major f32 or f64 batch `x` (`[..., m,
    /// n]`, a shape [`LinalgBlock::takes`]) into `out` (`[..., block.out_shape(m,
    /// n)]`, the same dtype): lower-triangular results with zeros above the
    /// diagonal, LU's packed rows, or QR's flat Q and R. f64 needs `SHADER_F64`.
    pub fn linalg_block(
        &self,
        b: &mut Batch<D>,
        block: LinalgBlock,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let nd = x.shape.len();
        let (m, n) = if nd >= 2 {
            (x.shape[nd - 2], x.shape[nd - 1])
        } else {
            (0, 0)
        };
        let mut want = if nd >= 2 {
            x.shape[..nd - 2].to_vec()
        } else {
            vec![]
        };
        want.extend(block.out_shape(m, n));
        let ok = nd >= 2
            && matches!(x.dtype, DType::F32 | DType::F64)
            && block.takes(x.dtype, m, n)
            && out.dtype == x.dtype
            && out.shape == want
            && is_row_major(x);
        if !ok {
            return Err(Error::Shape(format!(
                "linalg block {block:?}: x {:?} {} (strides {:?}), out {:?} {}: needs row-major f32 or f64 matrices of a shape it takes and out {want:?} of their dtype",
                x.shape, x.dtype, x.strides, out.shape, out.dtype,
            )));
        }
        let count: usize = x.shape[..nd - 2].iter().product();
        let bad = || Error::Shape(format!("linalg block: {count} matrices exceed u32"));
        let params = vec![
            u32::try_from(count).map_err(|_| bad())?,
            n as u32,
            u32::try_from(x.offset).map_err(|_| bad())?,
            u32::try_from(m).map_err(|_| bad())?,
        ];
        if x.dtype == DType::F64 {
            return self.f64_linalg_block(b, block, x, out, params);
        }
        let spec = self.spec(
            &LINALG,
            block.name(),
            vec![DType::F32],
            DType::F32,
            Variant::General,
            0,
        );
        if count == 0 || out.shape.iter().product::<usize>() == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        check_view(x, "linalg block input")?;
        check_out(out)?;
        self.record(b, &spec, [out.binding(), x.binding()], params, count as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WGSL scalars' block sides are the spec's (the workgroup arrays and
    /// core's blocked algorithms agree).
    #[test]
    fn block_sides_match_the_spec() {
        for (src, dt) in [(SCALAR32_WGSL, DType::F32), (wide::SRC[0], DType::F64)] {
            let want = format!("const BS: u32 = {}u;", LinalgBlock::side(dt));
            assert!(src.contains(&want), "{dt}: {want} missing");
        }
    }
}
