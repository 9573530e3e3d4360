//! Elementwise families: unary, binary, select, copy/cast, fill, arange, axpby.
//!
//! Dims are collapsed first; then each input is classified once as a broadcast
//! scalar, contiguous, or general. All-scalar/contiguous launches use the vec4
//! kernels (`contig1..3`), anything else the general strided kernels.

mod family;
pub(crate) mod wide;

pub use family::{ARANGE, AXPBY, BINARY, COPY, FILL, SELECT, SLICE_UPDATE, UNARY};
pub(crate) use family::{BINARY_WGSL, UNARY_WGSL};

use crate::compose::{Family, InputMode, ModuleSpec, Op, Variant};
use crate::driver::Batch;
use crate::driver::Driver;
use crate::dtype::is_wide;
use crate::dtype::{DType, Words, scalar_bits};
use crate::kernels::{Kernels, MAX_GROUPS};
use crate::layout::{Contig, Strided};
use crate::layout::{check_out, check_view, collapse, contiguous_strides, dense_or_scalar};
use crate::{Error, Result};
use wmx_spec::{BinaryOp, UnaryOp};

impl<D: Driver> Kernels<D> {
    /// `out = op(x)` for a unary op. `x` has `out`'s shape
    /// (broadcast through zero strides). Output dtype: bool for `logical_not`, `isnan`,
    /// `isinf`, else `x.dtype`.
    pub fn unary(
        &self,
        b: &mut Batch<D>,
        op: UnaryOp,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if !op.supports(x.dtype) {
            return Err(Error::OpNotDefined {
                op: op.name().into(),
                dtype: x.dtype.name(),
            });
        }
        self.elementwise(b, &UNARY, op, &[x], out, [0, 0])
    }

    /// `out = op(a, bb)` for a binary op. Both inputs have
    /// the same dtype and `out`'s shape (broadcast via zero strides). Output dtype:
    /// bool for comparisons and logical ops, else the input dtype.
    pub fn binary(
        &self,
        b: &mut Batch<D>,
        op: BinaryOp,
        a: &Strided<D::Buffer>,
        bb: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if !op.supports(a.dtype) {
            return Err(Error::OpNotDefined {
                op: op.name().into(),
                dtype: a.dtype.name(),
            });
        }
        self.elementwise(b, &BINARY, op, &[a, bb], out, [0, 0])
    }

    /// `out = cond ? x : y`; `cond` is bool, `x`, `y` and `out` share a dtype.
    pub fn select(
        &self,
        b: &mut Batch<D>,
        cond: &Strided<D::Buffer>,
        x: &Strided<D::Buffer>,
        y: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        self.elementwise(b, &SELECT, "select", &[cond, x, y], out, [0, 0])
    }

    /// Strided → contiguous copy, casting when `out.dtype != x.dtype` (SEMANTICS.md
    /// cast rules). Same-dtype copies move bits unchanged.
    pub fn copy(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        self.elementwise(b, &COPY, "copy", &[x], out, [0, 0])
    }

    /// An f32 buffer for `out`'s elements when `needed`: kernels whose 16-bit results
    /// would share words between invocations write f32 there, and
    /// [`Kernels::round_from_f32`] rounds it into `out`.
    pub(crate) fn f32_result(
        &self,
        out: &Contig<D::Buffer>,
        needed: bool,
    ) -> Result<Option<D::Buffer>> {
        if !needed {
            return Ok(None);
        }
        let bytes = out.numel().max(1) as u64 * 4;
        self.create_buffer(bytes, Some("wmx f32 result")).map(Some)
    }

    /// `out` = the row-major f32 elements of `tmp`, rounded to `out`'s dtype.
    pub(crate) fn round_from_f32(
        &self,
        b: &mut Batch<D>,
        tmp: &D::Buffer,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let strides = contiguous_strides(out.shape);
        let src = Strided {
            buffer: tmp,
            window: None,
            dtype: DType::F32,
            shape: out.shape,
            strides: &strides,
            offset: 0,
        };
        self.copy(b, &src, out)
    }

    /// `out = alpha * x + beta * y` in one pass (float dtypes; computed in f32).
    pub fn axpby(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        y: &Strided<D::Buffer>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if !x.dtype.is_float() {
            return Err(Error::OpNotDefined {
                op: "axpby".into(),
                dtype: x.dtype.name(),
            });
        }
        if x.dtype == DType::F64 {
            self.elementwise_checks(&AXPBY, Op::Named("axpby"), &[x, y], out)?;
            return self.f64_axpby(b, x, y, alpha, beta, out);
        }
        let s = [(alpha as f32).to_bits(), (beta as f32).to_bits()];
        self.elementwise(b, &AXPBY, "axpby", &[x, y], out, s)
    }

    /// `out` = `base` (of `out`'s shape) with `update` written over the region that
    /// starts at `starts` and steps by `steps` on each axis, `update.shape` long.
    /// All three share a dtype; bits move unchanged. Reads both inputs in place.
    pub fn slice_update(
        &self,
        b: &mut Batch<D>,
        base: &Strided<D::Buffer>,
        update: &Strided<D::Buffer>,
        starts: &[usize],
        steps: &[isize],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let rank = out.shape.len();
        if base.shape != out.shape
            || update.shape.len() != rank
            || starts.len() != rank
            || steps.len() != rank
        {
            return Err(Error::Shape(format!(
                "slice_update: base {:?}, update {:?}, {} starts, {} steps for output {:?}",
                base.shape,
                update.shape,
                starts.len(),
                steps.len(),
                out.shape
            )));
        }
        for d in 0..rank {
            let (a, st, c) = (starts[d] as i64, steps[d] as i64, update.shape[d] as i64);
            let last = a + (c - 1) * st;
            if c > 0
                && (st == 0 || a >= out.shape[d] as i64 || last < 0 || last >= out.shape[d] as i64)
            {
                return Err(Error::Shape(format!(
                    "slice_update: region start {a}, step {st}, count {c} leaves axis {d} of {}",
                    out.shape[d]
                )));
            }
        }
        if is_wide(out.dtype) && base.dtype == out.dtype && update.dtype == out.dtype {
            use crate::layout::{Pairs, pair_out, pair_shape};
            let (bw, uw) = (Pairs::of(base), Pairs::of(update));
            let (mut st, mut sp) = (starts.to_vec(), steps.to_vec());
            st.push(0);
            sp.push(1);
            let shape = pair_shape(out.shape);
            let o = pair_out(out, &shape);
            return self.slice_update(b, &bw.view(base), &uw.view(update), &st, &sp, &o);
        }
        let Some(spec) =
            self.gathering_module(&SLICE_UPDATE, "slice_update", &[base, update], out)?
        else {
            return Ok(());
        };
        let n = out.numel();
        let mut params = vec![
            n as u32,
            rank as u32,
            0,
            0,
            base.offset as u32,
            update.offset as u32,
            0,
        ];
        params.extend(out.shape.iter().map(|&d| d as u32));
        params.extend(base.strides.iter().map(|&s| s as i32 as u32));
        params.extend(update.strides.iter().map(|&s| s as i32 as u32));
        params.extend(starts.iter().map(|&a| a as u32));
        params.extend(steps.iter().map(|&s| s as i32 as u32));
        params.extend(update.shape.iter().map(|&c| c as u32));
        let items = n.div_ceil(out.dtype.epw()) as u64;
        let groups = items.div_ceil(self.wg() as u64).min(MAX_GROUPS);
        let buffers = [out.binding(), base.binding(), update.binding()];
        self.record(b, &spec, buffers, params, groups)
    }

    /// Fills `out` with `value` cast to `out.dtype` (cast rules of SEMANTICS.md).
    pub fn fill(&self, b: &mut Batch<D>, out: &Contig<D::Buffer>, value: f64) -> Result<()> {
        self.check_dtype(out.dtype)?;
        check_out(out)?;
        if is_wide(out.dtype) {
            return self.wide_generate(b, out, value, 0.0, true);
        }
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        let bits = scalar_bits(value, out.dtype);
        let pattern = match out.dtype.size() {
            1 => bits * 0x0101_0101,
            2 => bits | (bits << 16),
            _ => bits,
        };
        self.output_only(b, &FILL, out, [pattern, 0], 0)
    }

    /// `out[i] = start + i * step`: in f32 for float outputs (then rounded to the
    /// dtype), in wrapping i32 arithmetic for integer and bool outputs (start and step
    /// truncated to integers).
    pub fn arange(
        &self,
        b: &mut Batch<D>,
        out: &Contig<D::Buffer>,
        start: f64,
        step: f64,
    ) -> Result<()> {
        self.check_dtype(out.dtype)?;
        check_out(out)?;
        if is_wide(out.dtype) {
            return self.wide_generate(b, out, start, step, false);
        }
        if out.numel() == 0 {
            return Ok(());
        }
        let (s, lo) = if out.dtype.is_float() {
            let hi = step as f32;
            let lo = (step - hi as f64) as f32;
            ([(start as f32).to_bits(), hi.to_bits()], lo.to_bits())
        } else {
            ([(start as i64) as u32, (step as i64) as u32], 0)
        };
        self.output_only(b, &ARANGE, out, s, lo)
    }

    fn output_only(
        &self,
        b: &mut Batch<D>,
        family: &'static Family,
        out: &Contig<D::Buffer>,
        s: [u32; 2],
        extra: u32,
    ) -> Result<()> {
        let n = out.numel();
        let blk = 4 * out.dtype.epw();
        let nv = n.div_ceil(blk) as u64;
        if out.bytes() < nv * 16 {
            return Err(Error::Shape(format!(
                "output buffer of {} bytes is not padded to 16 bytes for {n} elements of {} \
                 (create buffers with Kernels::create_buffer)",
                out.bytes(),
                out.dtype
            )));
        }
        let spec = ModuleSpec {
            family,
            op: Op::Named(if family == &FILL { "fill" } else { "arange" }),
            inputs: vec![],
            output: out.dtype,
            variant: Variant::Contig([InputMode::Scalar; 3]),
            alias: 0,
            target: self.inner.target,
        };
        let params = vec![n as u32, extra, s[0], s[1]];
        let groups = nv.div_ceil(self.wg() as u64).min(MAX_GROUPS);
        self.record(b, &spec, [out.binding()], params, groups)
    }

    /// The dtypes, shapes and views of an elementwise launch; each input's highest
    /// element offset.
    fn elementwise_checks(
        &self,
        family: &'static Family,
        op: Op,
        inputs: &[&Strided<D::Buffer>],
        out: &Contig<D::Buffer>,
    ) -> Result<[u64; 3]> {
        self.check_dtype(out.dtype)?;
        for x in inputs {
            self.check_dtype(x.dtype)?;
            if x.shape != out.shape {
                return Err(Error::Shape(format!(
                    "{family:?} '{op}': input shape {:?} differs from output shape {:?} \
                     (broadcast inputs with zero strides)",
                    x.shape, out.shape
                )));
            }
        }
        check_out(out)?;
        let mut hi = [0u64; 3];
        for (k, x) in inputs.iter().enumerate() {
            hi[k] = check_view(x, "input")?;
        }
        Ok(hi)
    }

    pub(crate) fn elementwise(
        &self,
        b: &mut Batch<D>,
        family: &'static Family,
        op: impl Into<Op>,
        inputs: &[&Strided<D::Buffer>],
        out: &Contig<D::Buffer>,
        s: [u32; 2],
    ) -> Result<()> {
        let op = op.into();
        let hi = self.elementwise_checks(family, op, inputs, out)?;
        if is_wide(out.dtype) || inputs.iter().any(|x| is_wide(x.dtype)) {
            return self.wide_elementwise(b, family, op, inputs, out);
        }
        let n = out.numel();
        let spec_dtypes: Vec<DType> = inputs.iter().map(|x| x.dtype).collect();
        if n == 0 {
            // Still validate the op/dtype combination.
            let spec = self.spec(family, op, spec_dtypes, out.dtype, Variant::General, 0);
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        // Dense or broadcast-scalar inputs (the common case) are classified from
        // their strides directly; others need the collapsed dims.
        let mut kinds = [Some(true); 3];
        for (k, x) in inputs.iter().enumerate() {
            kinds[k] = dense_or_scalar(x.shape, x.strides);
        }
        let collapsed = || {
            let out_strides = contiguous_strides(out.shape);
            let mut all: Vec<&[isize]> = vec![&out_strides];
            all.extend(inputs.iter().map(|x| x.strides));
            collapse(out.shape, &all)
        };
        let mut general = if kinds[..inputs.len()].iter().all(Option::is_some) {
            None
        } else {
            Some(collapsed())
        };
        let od = out.dtype;
        let blk = 4 * od.epw();
        let nv = n.div_ceil(blk) as u64;

        // Classify each input once.
        let mut modes = [InputMode::Scalar; 3];
        let mut contig_ok = out.bytes() >= nv * 16;
        let mut alias = 0u8;
        for (k, x) in inputs.iter().enumerate() {
            let (scalar, contiguous) = match (&general, kinds[k]) {
                (None, Some(scalar)) => (scalar, true),
                (Some((shape, strides)), _) => {
                    let st = &strides[k + 1];
                    let rank = shape.len();
                    (
                        st.iter().all(|s| *s == 0),
                        rank == 0 || (rank == 1 && st[0] == 1),
                    )
                }
                (None, None) => unreachable!("collapsed when an input is not dense"),
            };
            modes[k] = if scalar {
                InputMode::Scalar
            } else if contiguous {
                let aligned = x.offset % (4 * x.dtype.epw()) == 0;
                if aligned && x.dtype.log_epw() == od.log_epw() {
                    InputMode::Vec4
                } else {
                    InputMode::Elem
                }
            } else {
                contig_ok = false;
                InputMode::Elem
            };
            // The vec4 binding must cover the last word read.
            let last_word = hi[k] / x.dtype.epw() as u64;
            if x.bytes() < (last_word / 4 + 1) * 16 {
                contig_ok = false;
            }
            if x.buffer == out.buffer {
                // In place: only element i of the input may feed element i of the output,
                // read by the invocation that writes it.
                let same_place = !scalar
                    && contiguous
                    && x.offset == 0
                    && out.same_binding(x)
                    && x.dtype.size() == od.size();
                if !same_place {
                    return Err(Error::Shape(format!(
                        "{family:?} '{op}': an input shares the output buffer but is not the same \
                         contiguous range (in-place operation only on identical layouts)"
                    )));
                }
                alias |= 1 << k;
            }
        }
        if alias != 0 && !contig_ok {
            return Err(Error::Shape(format!(
                "{family:?} '{op}': in-place operation needs 16-byte padded buffers"
            )));
        }
        let variant = if contig_ok {
            Variant::Contig(modes)
        } else {
            Variant::General
        };
        let spec = self.spec(family, op, spec_dtypes, od, variant, alias);
        let mut params = vec![n as u32, 0, s[0], s[1], 0, 0, 0];
        for (k, x) in inputs.iter().enumerate() {
            params[4 + k] = x.offset as u32;
        }
        let items = if contig_ok {
            nv
        } else {
            let (shape, strides) = general.get_or_insert_with(collapsed);
            let rank = shape.len();
            params[1] = rank as u32;
            params.extend(shape.iter().map(|d| *d as u32));
            for st in &strides[1..] {
                params.extend(st.iter().map(|s| *s as i32 as u32));
            }
            n.div_ceil(od.epw()) as u64
        };
        let buffers = inputs.iter().enumerate().map(|(k, x)| {
            if alias & (1 << k) != 0 {
                self.inner.dummy.clone().into()
            } else {
                x.binding()
            }
        });
        let groups = items.div_ceil(self.wg() as u64).min(MAX_GROUPS);
        let out_buf = std::iter::once(out.binding());
        self.record(b, &spec, out_buf.chain(buffers), params, groups)
    }

    /// The general-variant module of a kernel that computes each output word from
    /// strided `inputs` (slice update, gather), after the checks they share: dtypes
    /// the device holds, views inside their buffers, no input bound as the output.
    /// `None` for an empty output (the module is still composed, so a bad dtype is an
    /// error there too).
    pub(crate) fn gathering_module(
        &self,
        family: &'static Family,
        op: impl Into<Op>,
        inputs: &[&Strided<D::Buffer>],
        out: &Contig<D::Buffer>,
    ) -> Result<Option<ModuleSpec>> {
        let op = op.into();
        for x in inputs {
            self.check_dtype(x.dtype)?;
            check_view(x, &format!("{op} input"))?;
        }
        self.check_dtype(out.dtype)?;
        check_out(out)?;
        let dtypes = inputs.iter().map(|x| x.dtype).collect();
        let spec = self.spec(family, op, dtypes, out.dtype, Variant::General, 0);
        if out.numel() == 0 {
            crate::compose::compose(&spec)?;
            return Ok(None);
        }
        if inputs.iter().any(|x| x.buffer == out.buffer) {
            return Err(Error::Shape(format!(
                "{op}: inputs must not share the output buffer"
            )));
        }
        Ok(Some(spec))
    }

    pub(crate) fn spec(
        &self,
        family: &'static Family,
        op: impl Into<Op>,
        inputs: Vec<DType>,
        output: DType,
        variant: Variant,
        alias: u8,
    ) -> ModuleSpec {
        let target = self.inner.target;
        ModuleSpec {
            alias,
            ..ModuleSpec::new(family, op, inputs, output, variant, target)
        }
    }
}
