//! Batched factorisations of f32 matrices (`LinalgBlock`), one workgroup per
//! matrix: Cholesky, the inverse of a lower-triangular matrix and LU with partial
//! pivoting of blocks up to 64×64 held in workgroup memory; LU of tall panels and
//! Householder QR in global memory. Core's blocked algorithms call them on
//! diagonal blocks and panels and do the rest with matrix products.

use crate::compose::{Family, Io, ModuleSpec, Variant, check_out as check_dtype};
use crate::driver::{Batch, Driver};
use crate::dtype::DType;
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided, check_out, check_view, is_row_major};
use crate::{Error, Result};
use wmx_spec::LinalgBlock;

const LINALG_WGSL: &str = include_str!("linalg.wgsl");

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
        Ok(vec![LINALG_WGSL])
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
    /// `block` of each matrix of the row-major f32 batch `x` (`[..., m, n]`, a
    /// shape [`LinalgBlock::takes`]) into `out` (`[..., block.out_shape(m, n)]`):
    /// lower-triangular results with zeros above the diagonal, LU's packed rows,
    /// or QR's flat Q and R.
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
            && block.takes(m, n)
            && x.dtype == DType::F32
            && out.dtype == DType::F32
            && out.shape == want
            && is_row_major(x);
        if !ok {
            return Err(Error::Shape(format!(
                "linalg block {block:?}: x {:?} {} (strides {:?}), out {:?} {}: needs row-major f32 matrices of a shape it takes and out {want:?}",
                x.shape, x.dtype, x.strides, out.shape, out.dtype,
            )));
        }
        let count: usize = x.shape[..nd - 2].iter().product();
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
        let bad = || Error::Shape(format!("linalg block: {count} matrices exceed u32"));
        let params = vec![
            u32::try_from(count).map_err(|_| bad())?,
            n as u32,
            u32::try_from(x.offset).map_err(|_| bad())?,
            u32::try_from(m).map_err(|_| bad())?,
        ];
        self.record(b, &spec, [out.binding(), x.binding()], params, count as u64)
    }
}
