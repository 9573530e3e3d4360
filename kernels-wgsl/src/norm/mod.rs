//! Row operations over the last axis (`norm.wgsl`): softmax, log_softmax,
//! layer_norm, rms_norm, and the vjp of the last two (`vjp.wgsl`); one workgroup
//! per row, inputs read in place.

mod family;
pub(crate) mod wide;

pub use family::{NORM, NORM_VJP};

use crate::compose::Variant;
use crate::driver::Driver;
use crate::driver::{Batch, Binding};
use crate::dtype::{DType, Words};
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided};
use crate::layout::{check_out, check_view, collapse};
use crate::{Error, Result};
use wmx_spec::NormOp;

impl<D: Driver> Kernels<D> {
    /// `out = op(x)` over the last axis of `x`;
    /// `params` are the op's per-column inputs of shape `[L]` (layer_norm: weight,
    /// bias; rms_norm: weight), all of `x`'s float dtype, as is `out` (`x`'s shape).
    pub fn normalize(
        &self,
        b: &mut Batch<D>,
        op: NormOp,
        x: &Strided<D::Buffer>,
        params: &[&Strided<D::Buffer>],
        eps: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let nd = x.shape.len();
        let l = x.shape.last().copied().unwrap_or(0);
        if nd == 0 || out.shape != x.shape || params.iter().any(|p| p.shape != [l]) {
            return Err(Error::Shape(format!(
                "{op}: x {:?}, parameters {:?}, output {:?}",
                x.shape,
                params.iter().map(|p| p.shape).collect::<Vec<_>>(),
                out.shape
            )));
        }
        let inputs: Vec<&Strided<D::Buffer>> =
            std::iter::once(x).chain(params.iter().copied()).collect();
        self.check_rows(&op.to_string(), &inputs, out)?;
        if x.dtype == DType::F64 {
            if params.iter().any(|p| p.dtype != DType::F64) || out.dtype != DType::F64 {
                return Err(Error::Shape(format!("{op}: f64 x with other dtypes")));
            }
            return self.f64_normalize(b, op, x, params, eps, out);
        }
        let mut inputs = vec![x.dtype];
        inputs.extend(params.iter().map(|p| p.dtype));
        // 16-bit rows of odd length would share words between workgroups: compute
        // in f32 and round in a copy.
        let tmp = self.f32_result(out, out.dtype.epw() == 2 && l % 2 == 1)?;
        let odt = if tmp.is_some() { DType::F32 } else { out.dtype };
        // vec4-of-words loads for contiguous rows aligned to a vec4 (4 f32 or 8
        // 16-bit elements): offset, length and every row stride.
        let e4 = 4 * x.dtype.epw() as isize;
        let vec4 = x.strides[nd - 1] == 1
            && x.offset as isize % e4 == 0
            && l as isize % e4 == 0
            && x.strides[..nd - 1].iter().all(|s| s % e4 == 0)
            && x.bytes().is_multiple_of(16);
        let variant = if vec4 {
            Variant::RowsVec
        } else {
            Variant::Rows
        };
        let spec = self.spec(&NORM, op, inputs, odt, variant, 0);
        let n = out.numel();
        if n == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let rows = (n / l) as u64;
        // Vectorised rows that fit in registers (four vec4 loads per invocation)
        // take the fewest invocations that hold them, several rows a workgroup;
        // others take the whole workgroup.
        let wg = self.wg();
        let mut per_row = wg;
        if vec4 {
            let nq = (l as u64 / e4 as u64).max(1);
            while per_row > 1 && nq <= 4 * (per_row as u64 / 2) {
                per_row /= 2;
            }
        }
        let groups = rows.div_ceil((wg / per_row) as u64);
        let (bshape, bst) = collapse(&x.shape[..nd - 1], &[&x.strides[..nd - 1]]);
        let (w, bb) = (params.first(), params.get(1));
        let mut p = vec![
            l as u32,
            rows as u32,
            bshape.len() as u32,
            x.offset as u32,
            x.strides[nd - 1] as i32 as u32,
            w.map_or(0, |w| w.offset as u32),
            w.map_or(0, |w| w.strides[0] as i32 as u32),
            bb.map_or(0, |v| v.offset as u32),
            bb.map_or(0, |v| v.strides[0] as i32 as u32),
            (eps as f32).to_bits(),
            per_row.trailing_zeros(),
        ];
        p.extend(bshape.iter().map(|&d| d as u32));
        p.extend(bst[0].iter().map(|&s| s as i32 as u32));
        let target = tmp.as_ref().map_or_else(|| out.binding(), Binding::from);
        let mut buffers = vec![target.clone(), x.binding()];
        buffers.extend(params.iter().map(|p| p.binding()));
        self.record(b, &spec, buffers, p, groups)?;
        if let Some(t) = &tmp {
            self.round_from_f32(b, t, out)?;
        }
        Ok(())
    }

    /// The vjp of `op` (layer_norm or rms_norm over the last axis, `eps` as the
    /// forward's) at `x` with weight `w` (`[L]`, any stride) and output cotangent
    /// `dy` (`x`'s shape): `out` is `[k, ..x's shape]`, `k` 1 (dx) or 2 (dx, then
    /// dy times the normalised x, whose sum over the rows is the weight's
    /// gradient). One float dtype for the inputs; `out` in it or f32.
    #[allow(clippy::too_many_arguments)]
    pub fn normalize_vjp(
        &self,
        b: &mut Batch<D>,
        op: NormOp,
        x: &Strided<D::Buffer>,
        w: &Strided<D::Buffer>,
        dy: &Strided<D::Buffer>,
        eps: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let nd = x.shape.len();
        let l = x.shape.last().copied().unwrap_or(0);
        let k = out.shape.first().copied().unwrap_or(0);
        if !matches!(op, NormOp::LayerNorm | NormOp::RmsNorm)
            || nd == 0
            || w.shape != [l]
            || dy.shape != x.shape
            || !(1..=2).contains(&k)
            || out.shape[1..] != *x.shape
        {
            return Err(Error::Shape(format!(
                "the vjp of {op}: x {:?}, weight {:?}, dy {:?}, output {:?}",
                x.shape, w.shape, dy.shape, out.shape
            )));
        }
        self.check_rows(&format!("the vjp of {op}"), &[x, w, dy], out)?;
        // 16-bit rows of odd length would share words between workgroups: compute
        // in f32 and round in a copy.
        let tmp = self.f32_result(out, out.dtype.epw() == 2 && l % 2 == 1)?;
        let odt = if tmp.is_some() { DType::F32 } else { out.dtype };
        let spec = self.spec(
            &NORM_VJP,
            op,
            vec![x.dtype, w.dtype, dy.dtype],
            odt,
            Variant::Rows,
            0,
        );
        let rows = (x.shape[..nd - 1].iter().product::<usize>()) as u64;
        if rows == 0 || l == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let (bshape, bst) = collapse(
            &x.shape[..nd - 1],
            &[&x.strides[..nd - 1], &dy.strides[..nd - 1]],
        );
        let mut p = vec![
            l as u32,
            rows as u32,
            bshape.len() as u32,
            x.offset as u32,
            x.strides[nd - 1] as i32 as u32,
            w.offset as u32,
            w.strides[0] as i32 as u32,
            dy.offset as u32,
            dy.strides[nd - 1] as i32 as u32,
            (eps as f32).to_bits(),
            k as u32,
        ];
        p.extend(bshape.iter().map(|&d| d as u32));
        for s in &bst {
            p.extend(s.iter().map(|&s| s as i32 as u32));
        }
        let target = tmp.as_ref().map_or_else(|| out.binding(), Binding::from);
        let buffers = vec![target, x.binding(), w.binding(), dy.binding()];
        self.record(b, &spec, buffers, p, rows)?;
        if let Some(t) = &tmp {
            self.round_from_f32(b, t, out)?;
        }
        Ok(())
    }

    /// The checks the row kernels share: dtypes the device holds, views inside
    /// their buffers, no input bound as the output.
    fn check_rows(
        &self,
        what: &str,
        inputs: &[&Strided<D::Buffer>],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        for v in inputs {
            self.check_dtype(v.dtype)?;
            check_view(v, what)?;
            if v.buffer == out.buffer {
                return Err(Error::Shape(format!(
                    "{what}: inputs must not share the output buffer"
                )));
            }
        }
        check_out(out)
    }
}
