//! Affine quantization in MLX's format: a group's scale and bias, its values
//! packed as a bit stream of u32 words, the values back, and the quantized
//! matrix-vector product (decoding's bandwidth-bound case).

use crate::compose::{Family, Io, ModuleSpec, Variant, WORDS, check_out as check_dtype};
use crate::driver::{Batch, Driver};
use crate::dtype::{DType, Words};
use crate::kernels::{Kernels, MAX_GROUPS};
use crate::layout::{Contig, Strided, check_out, check_view, is_row_major};
use crate::{Error, Result};
use std::fmt::Write;

const QUANT_WGSL: &str = include_str!("quant.wgsl");

/// Bits per value the kernels take (MLX's: 2 to 8 but 7).
pub const QUANT_BITS: [usize; 6] = [2, 3, 4, 5, 6, 8];
/// Values per group the kernels take (MLX's).
pub const QUANT_GROUPS: [usize; 3] = [32, 64, 128];

/// Affine quantization: `quantize_params` (f32/f16/bf16 weights to f32 scale and
/// bias pairs), `quantize_words` (to u32 words), `dequantize` (words, scales and
/// biases to values of the scales' dtype) and `qmv` (x, words, scales, biases to
/// x's dtype), each specialised by a quant variant.
pub static QUANT: Family = Family {
    name: "Quant",
    arity: 4,
    takes: |s| match s.op.name() {
        "quantize_params" | "quantize_words" => s.inputs.len() == 1,
        "dequantize" => s.inputs.len() == 3,
        // An addend last, where the product has one.
        _ => matches!(s.inputs.len(), 4 | 5),
    },
    entry: |s| match s.op.name() {
        "quantize_params" => "quantize_params",
        "quantize_words" => "quantize_words",
        "dequantize" => "dequantize",
        "qmv1" => "qmv1",
        _ => "qmv",
    },
    raw: |_| false,
    io: Io::rows,
    body: |spec, p| {
        let Variant::Quant { bits, group, rows } = spec.variant else {
            return Err(Error::Shape(format!(
                "quant takes a quant variant, got {:?}",
                spec.variant
            )));
        };
        let (bits, group) = (bits as usize, group as usize);
        if !QUANT_BITS.contains(&bits) || !QUANT_GROUPS.contains(&group) {
            return Err(Error::Shape(format!(
                "quant: no kernel for {bits} bits in groups of {group}"
            )));
        }
        let float = |d: DType| matches!(d, DType::F32 | DType::F16 | DType::BF16);
        let d = spec.inputs[spec.inputs.len().min(4) - 1];
        let addend = spec.inputs.len() == 5;
        if addend && spec.inputs[4] != d {
            return Err(Error::Shape(format!(
                "quant '{}': the addend must be {d}, got {:?}",
                spec.op, spec.inputs
            )));
        }
        let (ok, out) = match spec.op.name() {
            "quantize_params" => (rows == 0, DType::F32),
            "quantize_words" => (rows == 0, DType::U32),
            "dequantize" => (rows == 0 && spec.inputs[..2] == [DType::U32, d], d),
            "qmv" => (
                matches!(rows, 1 | 8) && spec.inputs[..3] == [d, DType::U32, d],
                d,
            ),
            "qmv1" => (
                rows == 1 && bits.is_power_of_two() && spec.inputs[..3] == [d, DType::U32, d],
                d,
            ),
            op => return Err(Error::Shape(format!("quant has no op {op}"))),
        };
        if !ok || !float(d) {
            return Err(Error::Shape(format!(
                "quant '{}' reads {:?} ({:?}): not a kernel of this family",
                spec.op, spec.inputs, spec.variant
            )));
        }
        check_dtype(spec, out)?;
        writeln!(
            p,
            "const BITS: u32 = {bits}u;\nconst GROUP: u32 = {group}u;\nconst QMV_M: u32 = {}u;",
            rows.max(1)
        )
        .unwrap();
        // The products' addend at an output element (P[9]: its offset), or none.
        p.push_str(if addend {
            "fn qmv_add(i: u32) -> f32 { return f32(ld_e(P[9] + i)); }\n"
        } else {
            "fn qmv_add(i: u32) -> f32 { return 0.0; }\n"
        });
        Ok(vec![WORDS, QUANT_WGSL])
    },
    specs: |t| {
        let mut v = Vec::new();
        for d in [DType::F32, DType::F16, DType::BF16] {
            for bits in QUANT_BITS {
                for group in QUANT_GROUPS {
                    let q = |rows| Variant::Quant {
                        bits: bits as u8,
                        group: group as u8,
                        rows,
                    };
                    let mut add = |op, inputs, out, rows| {
                        v.push(ModuleSpec::new(&QUANT, op, inputs, out, q(rows), t))
                    };
                    add("quantize_params", vec![d], DType::F32, 0);
                    add("quantize_words", vec![d], DType::U32, 0);
                    add("dequantize", vec![DType::U32, d, d], d, 0);
                    for inputs in [vec![d, DType::U32, d, d], vec![d, DType::U32, d, d, d]] {
                        for rows in [1, 8] {
                            add("qmv", inputs.clone(), d, rows);
                        }
                        if bits.is_power_of_two() {
                            add("qmv1", inputs, d, 1);
                        }
                    }
                }
            }
        }
        v
    },
};

/// How values are quantized: bits per value and values per group (MLX's
/// `bits` and `group_size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantParams {
    /// Bits per value: one of [`QUANT_BITS`].
    pub bits: usize,
    /// Values per scale and bias: one of [`QUANT_GROUPS`].
    pub group: usize,
}

impl QuantParams {
    fn variant(&self, rows: u8) -> Result<Variant> {
        if !QUANT_BITS.contains(&self.bits) || !QUANT_GROUPS.contains(&self.group) {
            return Err(Error::Shape(format!(
                "quant: bits must be one of {QUANT_BITS:?} and the group one of {QUANT_GROUPS:?}, got {self:?}"
            )));
        }
        Ok(Variant::Quant {
            bits: self.bits as u8,
            group: self.group as u8,
            rows,
        })
    }

    /// Words per group.
    fn words(&self) -> usize {
        self.group * self.bits / 32
    }
}

fn u32_of(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Shape(format!("quant: {what} {n} exceeds u32")))
}

fn shape_err(what: &str, detail: String) -> Error {
    Error::Shape(format!("{what}: {detail}"))
}

impl<D: Driver> Kernels<D> {
    /// The groups of the row-major `w` (f32, f16 or bf16, its element count a
    /// multiple of the group size): with `params`, each group's f32 scale and bias
    /// (`out` f32, two per group); else its values packed (`out` u32, the group's
    /// `group * bits / 32` words).
    pub fn quantize(
        &self,
        b: &mut Batch<D>,
        w: &Strided<D::Buffer>,
        q: QuantParams,
        params: bool,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let variant = q.variant(0)?;
        let n: usize = w.shape.iter().product();
        let groups = n / q.group;
        let (op, out_dtype, out_n) = if params {
            ("quantize_params", DType::F32, 2 * groups)
        } else {
            ("quantize_words", DType::U32, groups * q.words())
        };
        if !n.is_multiple_of(q.group) || !is_row_major(w) || out.numel() != out_n {
            return Err(shape_err(
                "quantize",
                format!(
                    "w {:?} (strides {:?}) in groups of {}, out {:?}",
                    w.shape, w.strides, q.group, out.shape
                ),
            ));
        }
        check_view(w, "quantize w")?;
        check_out(out)?;
        let spec = self.spec(&QUANT, op, vec![w.dtype], out_dtype, variant, 0);
        if groups == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let params = vec![u32_of(groups, "groups")?, u32_of(w.offset, "offset")?];
        let wg = (groups as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
        self.record(b, &spec, [out.binding(), w.binding()], params, wg)
    }

    /// The values of the packed `wq` (u32, row-major) as `scales * q + biases`
    /// in the scales' dtype (f32, f16 or bf16): `out` has `group` values per
    /// element of the row-major `scales` and `biases`.
    pub fn dequantize(
        &self,
        b: &mut Batch<D>,
        wq: &Strided<D::Buffer>,
        scales: &Strided<D::Buffer>,
        biases: &Strided<D::Buffer>,
        q: QuantParams,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let variant = q.variant(0)?;
        let n = out.numel();
        let groups: usize = scales.shape.iter().product();
        let words: usize = wq.shape.iter().product();
        let ok = groups * q.group == n
            && words == groups * q.words()
            && biases.shape == scales.shape
            && biases.dtype == scales.dtype
            && out.dtype == scales.dtype
            && wq.dtype == DType::U32
            && is_row_major(wq)
            && is_row_major(scales)
            && is_row_major(biases);
        if !ok {
            return Err(shape_err(
                "dequantize",
                format!(
                    "{words} words, scales {:?} {}, biases {:?} {}, {q:?}, out {:?} {}",
                    scales.shape, scales.dtype, biases.shape, biases.dtype, out.shape, out.dtype
                ),
            ));
        }
        check_view(wq, "dequantize words")?;
        check_view(scales, "dequantize scales")?;
        check_view(biases, "dequantize biases")?;
        check_out(out)?;
        let inputs = vec![DType::U32, scales.dtype, biases.dtype];
        let spec = self.spec(&QUANT, "dequantize", inputs, out.dtype, variant, 0);
        if n == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let params = vec![
            u32_of(n, "elements")?,
            u32_of(wq.offset, "offset")?,
            u32_of(scales.offset, "offset")?,
            u32_of(biases.offset, "offset")?,
            0,
        ];
        let nw = n.div_ceil(out.dtype.epw());
        let wg = (nw as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
        let buffers = [
            out.binding(),
            wq.binding(),
            scales.binding(),
            biases.binding(),
        ];
        self.record(b, &spec, buffers, params, wg)
    }

    /// `out[m, n] = sum_k x[m, k] * (scales * q + biases)[n, k]`: the row-major
    /// `x` (`[m, k]`, at most 8 rows) times the transpose of the quantized matrix
    /// `[n, k]` (words `[n, k * bits / 32]`, scales and biases `[n, k / group]`,
    /// row-major), accumulated in f32. 16-bit outputs need `n` even.
    #[allow(clippy::too_many_arguments)]
    pub fn qmv(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        wq: &Strided<D::Buffer>,
        scales: &Strided<D::Buffer>,
        biases: &Strided<D::Buffer>,
        addend: Option<&Strided<D::Buffer>>,
        q: QuantParams,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let (m, k) = match x.shape {
            [m, k] => (*m, *k),
            _ => (0, 0),
        };
        let n = out.shape.last().copied().unwrap_or(0);
        let ok = x.shape.len() == 2
            && out.shape == [m, n]
            && (1..=8).contains(&m)
            && k.is_multiple_of(q.group)
            && wq.shape == [n, k * q.bits / 32]
            && scales.shape == [n, k / q.group]
            && biases.shape == scales.shape
            && x.dtype == scales.dtype
            && biases.dtype == x.dtype
            && out.dtype == x.dtype
            && wq.dtype == DType::U32
            && n.is_multiple_of(x.dtype.epw())
            && [x, wq, scales, biases].iter().all(|v| is_row_major(v))
            && addend.is_none_or(|c| c.shape == [m, n] && c.dtype == x.dtype && is_row_major(c));
        if !ok {
            return Err(shape_err(
                "qmv",
                format!(
                    "x {:?} {}, words {:?}, scales {:?}, biases {:?}, addend {:?}, {q:?}, out {:?} {}",
                    x.shape,
                    x.dtype,
                    wq.shape,
                    scales.shape,
                    biases.shape,
                    addend.map(|c| c.shape),
                    out.shape,
                    out.dtype
                ),
            ));
        }
        let named = [
            (Some(x), "x"),
            (Some(wq), "words"),
            (Some(scales), "scales"),
            (Some(biases), "biases"),
            (addend, "addend"),
        ];
        for (v, what) in named.iter().filter_map(|(v, w)| v.map(|v| (v, w))) {
            check_view(v, &format!("qmv {what}"))?;
        }
        check_out(out)?;
        if self.wg() < 64 {
            return Err(Error::Shape(format!(
                "qmv needs workgroups of at least 64 invocations, the device's are {}",
                self.wg()
            )));
        }
        let rows = if m == 1 { 1 } else { 8 };
        // One row and whole values per word: the word-by-word kernel.
        let op = if m == 1 && q.bits.is_power_of_two() {
            "qmv1"
        } else {
            "qmv"
        };
        let mut inputs = vec![x.dtype, DType::U32, x.dtype, x.dtype];
        if addend.is_some() {
            inputs.push(x.dtype);
        }
        let spec = self.spec(&QUANT, op, inputs, out.dtype, q.variant(rows)?, 0);
        let mut params = vec![
            m as u32,
            u32_of(n, "rows")?,
            u32_of(k, "inner length")?,
            u32_of(x.offset, "offset")?,
            u32_of(wq.offset, "offset")?,
            u32_of(scales.offset, "offset")?,
            u32_of(biases.offset, "offset")?,
            x.offset.is_multiple_of(2) as u32,
        ];
        // qmv: a team of 32 invocations per output row. qmv1: two rows per team,
        // about one invocation per four words of a row (32 to a workgroup).
        let wg = self.wg() as usize;
        let rows_per_group = if op == "qmv1" {
            let quads = (k * q.bits / 32).div_ceil(4);
            let team = quads.next_power_of_two().clamp(32, wg);
            params.push(team.trailing_zeros());
            2 * (wg / team)
        } else {
            params.push(0);
            wg / 32
        };
        params.push(u32_of(addend.map_or(0, |c| c.offset), "offset")?);
        let mut buffers = vec![
            out.binding(),
            x.binding(),
            wq.binding(),
            scales.binding(),
            biases.binding(),
        ];
        buffers.extend(addend.map(|c| c.binding()));
        let groups = n.div_ceil(rows_per_group.max(1)) as u64;
        self.record(b, &spec, buffers, params, groups)
    }
}
