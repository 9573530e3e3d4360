//! Fused attention: a flash-attention forward kernel (online softmax over key
//! tiles in workgroup memory), optionally over chunks of the keys whose partial
//! results the caller combines (split-KV decoding); and for f16 prefill where the
//! adapter has cooperative matrices, a kernel on them with each step's keys and
//! values staged in workgroup memory (`flash_coop.wgsl`, bench/NOTES.md runs
//! 167-171 and 190-195); and for decoding
//! of 16-bit k and v with at most four rows per key head, a kernel that streams
//! them in 16-byte loads with every register named (`decode.wgsl`: the 32k-key
//! split-KV pass 131 -> 56 us on an H200, runs 177-179).

use crate::compose::{Family, Io, ModuleSpec, Target, Variant, WORDS, check_out as check_dtype};
use crate::driver::{Batch, Driver};
use crate::dtype::{DType, Words};
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided, check_out, check_view};
use crate::{Error, Result};
use std::fmt::Write;

const FLASH_WGSL: &str = include_str!("flash.wgsl");
const FLASH_COOP_WGSL: &str = include_str!("flash_coop.wgsl");
const DECODE_WGSL: &str = include_str!("decode.wgsl");
const COMBINE_WGSL: &str = include_str!("combine.wgsl");
const GRID_WGSL: &str = include_str!("grid.wgsl");

/// Flash attention: q, k, v of one dtype (f32, f16 or bf16) to the normalised
/// output of their dtype (`flash`), or to f32 partial results (`flash_parts`);
/// and those partial results to the output (`flash_combine`, general variant).
pub static ATTENTION: Family = Family {
    name: "Attention",
    arity: 3,
    takes: |s| s.inputs.len() == if s.op.name() == "flash_combine" { 1 } else { 3 },
    entry: |s| match s.variant {
        _ if s.op.name() == "flash_combine" => "flash_combine",
        Variant::AttentionCoop { .. } => "flash_coop",
        Variant::AttentionDecode { .. } => "flash_decode",
        _ => "flash",
    },
    raw: |_| false,
    io: |spec| {
        let subgroups = spec.target.subgroups && spec.target.subgroup_directive;
        if matches!(spec.variant, Variant::AttentionCoop { .. }) {
            // Its subgroups branch apart (each has its own keys): naga's uniformity
            // rule for cooperative operations is the workgroup's.
            return Io {
                enable: if subgroups {
                    "enable f16;\nenable subgroups;\nenable wgpu_cooperative_matrix;\ndiagnostic(off, derivative_uniformity);\n"
                } else {
                    "enable f16;\nenable wgpu_cooperative_matrix;\ndiagnostic(off, derivative_uniformity);\n"
                },
                // q, k and v in 16-byte loads, as the decode kernel.
                words: false,
                ..Io::rows(spec)
            };
        }
        Io {
            enable: if subgroups { "enable subgroups;\n" } else { "" },
            // The decode kernel reads k and v in 16-byte loads.
            words: !matches!(spec.variant, Variant::AttentionDecode { .. }),
            ..Io::rows(spec)
        }
    },
    body: |spec, p| {
        let d = spec.inputs[0];
        if spec.op.name() == "flash_combine" {
            if d != DType::F32 || spec.variant != Variant::General {
                return Err(Error::Shape(format!(
                    "flash_combine reads f32 partial results (general variant), got {:?} ({:?})",
                    spec.inputs, spec.variant
                )));
            }
            if !matches!(spec.output, DType::F32 | DType::F16 | DType::BF16) {
                return Err(Error::Shape(format!(
                    "flash_combine writes f32, f16 or bf16, got {}",
                    spec.output
                )));
            }
            // The reductions start from subgroups' where the module has them.
            p.push_str(if spec.target.subgroups {
                "fn comb_group(x: f32, max_: bool) -> f32 { if (max_) { return subgroupMax(x); } return subgroupAdd(x); }\nfn comb_group_size() -> u32 { return subgroupAdd(1u); }\n"
            } else {
                "fn comb_group(x: f32, max_: bool) -> f32 { return x; }\nfn comb_group_size() -> u32 { return 1u; }\n"
            });
            return Ok(vec![WORDS, COMBINE_WGSL]);
        }
        if let Variant::AttentionCoop { dim } = spec.variant {
            let ok = d == DType::F16
                && spec.inputs[1..] == [d, d]
                && spec.op.name() == "flash"
                && spec.output == d
                && spec.target.coop == 32
                && dim % 16 == 0
                && (16..=128).contains(&dim);
            if !ok {
                return Err(Error::Shape(format!(
                    "cooperative attention: f16 q, k, v to f16, head dimension a multiple of 16 up to 128, subgroups of 32; got {:?} -> {} ({:?}, coop {})",
                    spec.inputs, spec.output, spec.variant, spec.target.coop
                )));
            }
            writeln!(p, "const DH: u32 = {dim}u;").unwrap();
            return Ok(vec![WORDS, GRID_WGSL, FLASH_COOP_WGSL]);
        }
        if let Variant::AttentionDecode { dim } = spec.variant {
            let parts = spec.op.name() == "flash_parts";
            let ok = matches!(d, DType::F16 | DType::BF16)
                && spec.inputs[1..] == [d, d]
                && (parts || spec.op.name() == "flash")
                && spec.output == if parts { DType::F32 } else { d }
                && spec.target.subgroups
                && matches!(dim, 32 | 64 | 128);
            if !ok {
                return Err(Error::Shape(format!(
                    "decode attention: f16 or bf16 q, k, v, head dimension 32, 64 or 128, subgroups; got {:?} -> {} ({:?}, subgroups {})",
                    spec.inputs, spec.output, spec.variant, spec.target.subgroups
                )));
            }
            writeln!(
                p,
                "const DH: u32 = {dim}u;\nconst LANES: u32 = {}u;\nconst PARTS: bool = {parts};",
                dim / 8
            )
            .unwrap();
            return Ok(vec![WORDS, GRID_WGSL, DECODE_WGSL]);
        }
        let Variant::Attention {
            dim,
            split,
            rows,
            keys,
        } = spec.variant
        else {
            return Err(Error::Shape(format!(
                "attention takes an attention variant, got {:?}",
                spec.variant
            )));
        };
        if !matches!(d, DType::F32 | DType::F16 | DType::BF16) || spec.inputs[1..] != [d, d] {
            return Err(Error::Shape(format!(
                "attention reads q, k and v of one dtype (f32, f16 or bf16), got {:?}",
                spec.inputs
            )));
        }
        let parts = match spec.op.name() {
            "flash" => false,
            "flash_parts" => true,
            op => return Err(Error::Shape(format!("attention has no op {op}"))),
        };
        check_dtype(spec, if parts { DType::F32 } else { d })?;
        let (dim, split, rows, keys) = (dim as u32, split as u32, rows as u32, keys as u32);
        let shape_ok = split.is_power_of_two()
            && dim.is_multiple_of(4 * split)
            && rows > 0
            && keys > 0
            && rows * split <= 256
            && (split == 1 || spec.target.subgroups);
        if !shape_ok {
            return Err(Error::Shape(format!(
                "attention: no kernel for {:?} (subgroups: {})",
                spec.variant, spec.target.subgroups
            )));
        }
        writeln!(
            p,
            "const DH: u32 = {dim}u;\nconst SPLIT: u32 = {split}u;\nconst BQ: u32 = {rows}u;\nconst BK: u32 = {keys}u;\nconst PARTS: bool = {parts};"
        )
        .unwrap();
        // Four elements from whole words (16-bit: two words; f32: four).
        for l in ['a', 'b', 'c'] {
            if d.size() == 2 {
                writeln!(
                    p,
                    "fn flash_words_{l}(e: u32) -> vec4<f32> {{ let w = e >> 1u; return vec4<f32>(vec2<f32>(x2{l}(w{l}(w))), vec2<f32>(x2{l}(w{l}(w + 1u)))); }}"
                )
                .unwrap();
            } else {
                writeln!(
                    p,
                    "fn flash_words_{l}(e: u32) -> vec4<f32> {{ return vec4<f32>(bitcast<f32>(w{l}(e)), bitcast<f32>(w{l}(e + 1u)), bitcast<f32>(w{l}(e + 2u)), bitcast<f32>(w{l}(e + 3u))); }}"
                )
                .unwrap();
            }
        }
        // One invocation per row needs no shuffles (and no subgroups).
        if split == 1 {
            p.push_str("fn flash_row_sum(x: f32) -> f32 { return x; }\n");
        } else {
            p.push_str(
                "fn flash_row_sum(x: f32) -> f32 {\n    var s = x;\n    for (var m = 1u; m < SPLIT; m <<= 1u) { s += subgroupShuffleXor(s, m); }\n    return s;\n}\n",
            );
        }
        Ok(vec![WORDS, GRID_WGSL, FLASH_WGSL])
    },
    specs: |t| {
        let mut v = Vec::new();
        let sg = t.subgroups.then_some(32);
        for dim in [64usize, 80, 128, 256] {
            for rows in [4usize, 64] {
                for storage in [16384, 49152] {
                    let variant = flash_variant(dim, rows, sg, storage, 256).unwrap();
                    for d in [DType::F32, DType::F16, DType::BF16] {
                        for (op, out) in [("flash", d), ("flash_parts", DType::F32)] {
                            v.push(ModuleSpec::new(
                                &ATTENTION,
                                op,
                                vec![d, d, d],
                                out,
                                variant,
                                t,
                            ));
                        }
                    }
                }
            }
        }
        if t.subgroups {
            for dim in DECODE_DIMS {
                for d in [DType::F16, DType::BF16] {
                    let variant = Variant::AttentionDecode { dim: dim as u16 };
                    for (op, out) in [("flash", d), ("flash_parts", DType::F32)] {
                        v.push(ModuleSpec::new(&ATTENTION, op, vec![d; 3], out, variant, t));
                    }
                }
            }
        }
        if t.coop == 32 {
            for dim in [16u16, 64, 80, 128] {
                let f16 = DType::F16;
                let variant = Variant::AttentionCoop { dim };
                v.push(ModuleSpec::new(
                    &ATTENTION,
                    "flash",
                    vec![f16; 3],
                    f16,
                    variant,
                    t,
                ));
            }
        }
        for d in [DType::F32, DType::F16, DType::BF16] {
            v.push(ModuleSpec::new(
                &ATTENTION,
                "flash_combine",
                vec![DType::F32],
                d,
                Variant::General,
                t,
            ));
        }
        v
    },
};

/// The kernel configuration for head dimension `dim` and `rows` rows per key head,
/// given the subgroup size (None without subgroups), the workgroup memory and the
/// invocations a workgroup may have; `None` where no kernel takes the dimension.
fn flash_variant(
    dim: usize,
    rows: usize,
    subgroup: Option<u32>,
    storage: u32,
    invocations: u32,
) -> Option<Variant> {
    if dim == 0 || dim > 256 || !dim.is_multiple_of(4) {
        return None;
    }
    // Few rows (decoding): up to a subgroup per row, 4 dims each, so a workgroup
    // has invocations enough to stream its key tiles; many rows: at most 64 dims
    // each (the query and output stay in registers).
    let per = if rows < 32 { 4 } else { 64 };
    let mut split = 1usize;
    if let Some(sg) = subgroup {
        while dim / split > per && dim.is_multiple_of(8 * split) && 2 * split <= sg as usize {
            split *= 2;
        }
    }
    // The kernel takes at most 256 invocations (NVIDIA's adapters allow 1024).
    let invocations = invocations.min(256);
    let bq = rows.next_power_of_two().clamp(1, 64);
    let mut bq = bq.min(invocations as usize / split).max(1);
    if bq * split < 32 {
        bq = (32 / split).min(64);
    }
    // Key and value tiles of f32 in workgroup memory, small enough that several
    // workgroups share a compute unit (run 68 on an H200: decoding 356 -> 113 us
    // with 8 keys instead of 32, an 8k prefill 50 -> 41 ms with 16).
    let mut keys = if rows < 32 { 8usize } else { 16 };
    while keys > 1 && 2 * keys * dim * 4 > storage as usize {
        keys /= 2;
    }
    (2 * keys * dim * 4 <= storage as usize).then_some(Variant::Attention {
        dim: dim as u16,
        split: split as u8,
        rows: bq as u8,
        keys: keys as u8,
    })
}

/// Head dimensions of the decode kernel (decode.wgsl: 8 dims an invocation, at most
/// 16 invocations a key row).
const DECODE_DIMS: [usize; 3] = [32, 64, 128];

/// Most rows per key head the decode kernel takes (decode.wgsl's four).
const DECODE_ROWS: usize = 4;

/// Whether every element of `x` lies in a whole 16-byte vector of its binding (the
/// decode kernel binds its inputs as `array<vec4<u32>>`).
fn vec4_reach<B: crate::driver::DriverBuffer>(x: &Strided<B>) -> bool {
    let last = x.offset
        + x.shape
            .iter()
            .zip(x.strides)
            .map(|(&n, &s)| n.saturating_sub(1) * s as usize)
            .sum::<usize>();
    let end = ((last + 1) * x.dtype.size()) as u64;
    x.bytes() >= end.div_ceil(16) * 16
}

/// Rows a workgroup of the cooperative-matrix kernel takes (flash_coop.wgsl's CR).
const COOP_ROWS: u8 = 128;

/// Fewest rows per key head (query positions times grouped heads) that take the
/// cooperative-matrix kernel (a workgroup's rows past the end idle); decoding
/// keeps the other.
const COOP_MIN_ROWS: usize = 64;

/// Workgroup memory of the cooperative kernel (flash_coop.wgsl): a step's 32 keys
/// and values (at first 64 query rows at a time) in f16 rows padded by 8, and per
/// subgroup of eight 16 x 32 weights in f16 and scores in f32.
fn coop_storage(dim: usize) -> usize {
    2 * 32 * (dim + 8) * 2 + 8 * 16 * 32 * 2 + 8 * 16 * 32 * 4
}

/// How [`Kernels::flash_attention`] attends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlashParams {
    /// Multiplies the scores.
    pub scale: f32,
    /// 0: every key; 1: causal (query `i` sees keys `j <= i + Lk - Lq`); 2: causal
    /// within the last `window` keys.
    pub mask: u8,
    /// The sliding window's keys (mask 2).
    pub window: usize,
    /// Chunks of the keys, each giving partial results (1: the normalised output).
    pub splits: usize,
    /// Keys per chunk (with `splits` above 1).
    pub chunk: usize,
}

impl<D: Driver> Kernels<D> {
    /// Attention of `q` `[B, Hq, Lq, D]` over `k`, `v` `[B, Hkv, Lk, D]` (each with
    /// its last axis contiguous, other strides any non-negative) into `out`: the
    /// normalised `[B, Hq, Lq, D]` of q's dtype, or with `p.splits > 1` f32
    /// `[splits, B, Hq, Lq, D + 2]` (per chunk of `p.chunk` keys: the unnormalised
    /// sum, the maximum score and the sum of weights).
    pub fn flash_attention(
        &self,
        b: &mut Batch<D>,
        q: &Strided<D::Buffer>,
        k: &Strided<D::Buffer>,
        v: &Strided<D::Buffer>,
        p: FlashParams,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let bad = || {
            Error::Shape(format!(
                "flash_attention: q {:?} {:?}, k {:?} {:?}, v {:?} {:?}, {p:?}, out {:?}",
                q.shape, q.strides, k.shape, k.strides, v.shape, v.strides, out.shape
            ))
        };
        if q.shape.len() != 4 || k.shape.len() != 4 || v.shape.len() != 4 {
            return Err(bad());
        }
        let (bsz, hq, lq, dim) = (q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
        let (hkv, lk) = (k.shape[1], k.shape[2]);
        let parts = p.splits > 1;
        let want: Vec<usize> = if parts {
            vec![p.splits, bsz, hq, lq, dim + 2]
        } else {
            vec![bsz, hq, lq, dim]
        };
        let ok = k.shape == [bsz, hkv, lk, dim]
            && v.shape == k.shape
            && hkv > 0
            && hq.is_multiple_of(hkv)
            && [q, k, v]
                .iter()
                .all(|x| x.strides[3] == 1 && x.strides.iter().all(|&s| s >= 0))
            && k.dtype == q.dtype
            && v.dtype == q.dtype
            && out.shape == want.as_slice()
            && out.dtype == if parts { DType::F32 } else { q.dtype }
            && p.splits >= 1
            && (!parts || p.chunk * p.splits >= lk)
            && p.mask <= 2
            && (p.mask != 2 || p.window > 0);
        if !ok {
            return Err(bad());
        }
        check_view(q, "attention q")?;
        check_view(k, "attention k")?;
        check_view(v, "attention v")?;
        check_out(out)?;
        let g = hq / hkv;
        let rows = g * lq;
        let caps = &self.inner.caps;
        // f16 prefill on tensor cores where the adapter has them: key and value rows
        // start on 16 bytes (read in 16-byte loads, as are q's elements), at least 16
        // keys (a block past the end reads the last 16).
        let rows16 = |x: &Strided<D::Buffer>| {
            x.offset.is_multiple_of(8) && x.strides[..3].iter().all(|&s| s % 8 == 0)
        };
        let coop = !parts
            && q.dtype == DType::F16
            && self.inner.target.coop == 32
            && dim.is_multiple_of(16)
            && dim <= 128
            && rows >= COOP_MIN_ROWS
            && lk >= 16
            && rows16(k)
            && rows16(v)
            && [q, k, v].iter().all(|x| vec4_reach(x))
            && caps.max_workgroup_storage as usize >= coop_storage(dim)
            && std::env::var("WMX_ATTENTION_COOP").as_deref() != Ok("0");
        // Decoding (at most four rows per key head) over 16-bit k and v whose rows
        // start on 16 bytes: the streaming kernel, where subgroups hold a key row's
        // dim / 8 invocations.
        let decode = !coop
            && matches!(q.dtype, DType::F16 | DType::BF16)
            && rows <= DECODE_ROWS
            && DECODE_DIMS.contains(&dim)
            && self.subgroup().is_some_and(|s| s as usize >= dim / 8)
            && caps.max_invocations >= 256
            && rows16(k)
            && rows16(v)
            && vec4_reach(q)
            && std::env::var("WMX_ATTENTION_DECODE").as_deref() != Ok("0");
        let variant = if coop {
            Variant::AttentionCoop { dim: dim as u16 }
        } else if decode {
            Variant::AttentionDecode { dim: dim as u16 }
        } else {
            flash_variant(
                dim,
                rows,
                self.subgroup(),
                caps.max_workgroup_storage,
                caps.max_invocations,
            )
            .ok_or_else(|| {
                Error::Shape(format!(
                    "flash_attention: no kernel for head dimension {dim}"
                ))
            })?
        };
        // Rows a workgroup, and keys a tile (the chunks' unit; the cooperative kernel
        // takes no chunks).
        let (bq, keys) = match variant {
            Variant::Attention { rows, keys, .. } => (rows, keys),
            Variant::AttentionDecode { .. } => (DECODE_ROWS as u8, 1),
            _ => (COOP_ROWS, 1),
        };
        let chunk = if parts {
            p.chunk.div_ceil(keys as usize) * keys as usize
        } else {
            lk.max(1)
        };
        let op = if parts { "flash_parts" } else { "flash" };
        let spec = self.spec(&ATTENTION, op, vec![q.dtype; 3], out.dtype, variant, 0);
        let n: usize = out.shape.iter().product();
        if n == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let blocks = rows.div_ceil(bq as usize);
        let groups = (blocks * hkv * bsz * p.splits) as u64;
        let u = |x: usize| -> Result<u32> {
            u32::try_from(x).map_err(|_| Error::Shape(format!("flash_attention: {x} exceeds u32")))
        };
        let st = |x: &Strided<D::Buffer>| -> Result<[u32; 4]> {
            Ok([
                u(x.offset)?,
                u(x.strides[0] as usize)?,
                u(x.strides[1] as usize)?,
                u(x.strides[2] as usize)?,
            ])
        };
        let mut params = vec![
            u(rows)?,
            g as u32,
            u(lq)?,
            u(lk)?,
            hkv as u32,
            u(blocks)?,
            u32::try_from(groups).map_err(|_| bad())?,
            (p.scale * std::f32::consts::LOG2_E).to_bits(),
            p.mask as u32,
            u(p.window.min(lk + lq))?,
        ];
        params.extend(st(q)?);
        params.extend(st(k)?);
        params.extend(st(v)?);
        // Rows start on word boundaries: offsets and row strides multiples of the
        // elements per word (the dims are multiples of 4).
        let epw = q.dtype.epw();
        let aligned = |x: &Strided<D::Buffer>| {
            x.offset.is_multiple_of(epw)
                && x.strides[..3]
                    .iter()
                    .all(|&s| (s as usize).is_multiple_of(epw))
        };
        let words = aligned(q) as u32 | (aligned(k) as u32) << 1 | (aligned(v) as u32) << 2;
        params.extend([u(chunk)?, u(bsz)?, (keys as u32).div_ceil(8), words]);
        let buffers = [out.binding(), q.binding(), k.binding(), v.binding()];
        self.record(b, &spec, buffers, params, groups)
    }

    /// The split-KV combine: `parts` f32 `[splits, rows..., D + 2]` (as
    /// [`Kernels::flash_attention`] writes them) into `out` `[rows..., D]`, the
    /// normalised output of its dtype (f32, f16 or bf16; D a multiple of 4).
    pub fn flash_combine(
        &self,
        b: &mut Batch<D>,
        parts: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let ps = parts.shape;
        let dim = out.shape.last().copied().unwrap_or(0);
        let rows: usize = out.shape[..out.shape.len().saturating_sub(1)]
            .iter()
            .product();
        let ok = ps.len() == out.shape.len() + 1
            && ps[1..ps.len() - 1] == out.shape[..out.shape.len() - 1]
            && ps.last() == Some(&(dim + 2))
            && dim.is_multiple_of(4)
            && parts.dtype == DType::F32
            && crate::layout::is_row_major(parts)
            && parts.offset == 0
            && ps[0] > 0;
        if !ok {
            return Err(Error::Shape(format!(
                "flash_combine: parts {:?} (strides {:?}, offset {}), out {:?}",
                ps, parts.strides, parts.offset, out.shape
            )));
        }
        check_view(parts, "flash_combine parts")?;
        check_out(out)?;
        let spec = self.spec(
            &ATTENTION,
            "flash_combine",
            vec![DType::F32],
            out.dtype,
            Variant::General,
            0,
        );
        let n = rows * dim;
        if n == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let u = |x: usize| -> Result<u32> {
            u32::try_from(x).map_err(|_| Error::Shape(format!("flash_combine: {x} exceeds u32")))
        };
        let params = vec![u(ps[0])?, u(rows)?, u(dim)?];
        // A workgroup per row and 16 output words (combine.wgsl's CW).
        let words = dim / out.dtype.epw();
        let groups = (rows as u64 * words.div_ceil(16) as u64).min(crate::kernels::MAX_GROUPS);
        self.record(b, &spec, [out.binding(), parts.binding()], params, groups)
    }

    /// The subgroup size the kernels may assume, `None` without subgroups.
    fn subgroup(&self) -> Option<u32> {
        let t: Target = self.inner.target;
        (t.subgroups && self.inner.caps.subgroup_size >= 2).then_some(self.inner.caps.subgroup_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_fit_the_limits() {
        for dim in (4..=256).step_by(4) {
            for rows in [1, 4, 8, 31, 64, 1000] {
                for (sg, invocations) in [
                    (None, 256),
                    (Some(4), 256),
                    (Some(32), 256),
                    (Some(32), 1024),
                ] {
                    for storage in [16384, 32768, 49152] {
                        let Some(Variant::Attention {
                            dim: d,
                            split,
                            rows: r,
                            keys,
                        }) = flash_variant(dim, rows, sg, storage, invocations)
                        else {
                            panic!("no kernel for {dim}");
                        };
                        let (split, r, keys) = (split as usize, r as usize, keys as usize);
                        assert_eq!(d as usize, dim);
                        assert!(dim.is_multiple_of(4 * split), "{dim} {split}");
                        assert!(split == 1 || sg.is_some_and(|s| split <= s as usize));
                        assert!(r * split <= 256 && r >= 1);
                        assert!(2 * keys * dim * 4 <= storage as usize);
                    }
                }
            }
        }
        assert!(flash_variant(258, 64, None, 16384, 256).is_none());
        assert!(flash_variant(6, 64, None, 16384, 256).is_none());
    }
}
