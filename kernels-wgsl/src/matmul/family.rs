//! The product families' modules (tiled and cooperative-matrix matmul, gemv): their
//! checks, prelude lines and files.

use super::coop_vec_cols;
use crate::compose::{Family, Io, ModuleSpec, Target, Variant};
use crate::dtype::DType;
use crate::{Error, Result};
use std::fmt::Write;

const MATMUL_WGSL: &str = include_str!("matmul.wgsl");
const MATMUL_COOP: &str = include_str!("matmul_coop.wgsl");
const MATMUL_COOP_VEC: &str = include_str!("matmul_coop_vec.wgsl");
const MATMUL_TILE: &str = include_str!("matmul_tile.wgsl");
const GEMV_WGSL: &str = include_str!("gemv.wgsl");

/// Tile configurations of the tiled kernel: (invocations along N, along M, K depth).
/// Each invocation computes 8 x 8 outputs, so the tile is 8·WY x 8·WX.
/// 0 and 1 are the defaults for large and small products, 2 for large f32 products
/// read in vec4s; the others are measured alternatives (`WMX_MATMUL_TILE=i` forces
/// one, for tuning).
pub const TILES: [(u32, u32, u32); 5] = [
    (16, 16, 8),
    (8, 8, 8),
    (16, 16, 16),
    (32, 8, 8),
    (8, 16, 16),
];

/// Whether tile configuration `i` moves whole vec4s of A and B per invocation and
/// K step, in K steps of a multiple of 8 (the vec4 variant's k loop is written out
/// eight deep).
pub(crate) fn vec4_tile(i: usize) -> bool {
    let (wx, wy, bk) = TILES[i];
    (8 * bk).is_multiple_of(4 * wx) && (8 * bk).is_multiple_of(4 * wy) && bk.is_multiple_of(8)
}

/// Word loads (with vec4s of words) except in the vec4 variants, word stores; the
/// cooperative-matrix kernels enable their extensions.
fn io(spec: &ModuleSpec) -> Io {
    let coop = matches!(spec.variant, Variant::Coop | Variant::CoopVec(_));
    Io {
        enable: if coop {
            "enable f16;\nenable wgpu_cooperative_matrix;\n"
        } else {
            ""
        },
        vec_of_words: true,
        ..Io::rows(spec)
    }
}

/// Tiled matrix product `alpha * a @ b + beta * c` (c optional).
pub static MATMUL: Family = Family {
    name: "Matmul",
    arity: 2,
    takes: |s| s.inputs.len() == 2 || s.inputs.len() == 3,
    entry: |s| match s.variant {
        Variant::Coop => "matmul_coop",
        Variant::CoopVec(_) => "matmul_coop_vec",
        _ => "matmul",
    },
    raw: |_| false,
    io,
    body: |spec, p| {
        product_prelude(spec, p)?;
        let kernel = match spec.variant {
            Variant::Coop => MATMUL_COOP,
            Variant::CoopVec(_) => MATMUL_COOP_VEC,
            _ => MATMUL_WGSL,
        };
        Ok(vec![kernel, MATMUL_TILE])
    },
    specs: |t| products(t, true),
};

/// Matrix-vector product (variants `Rows`, `RowsVec`, `Cols`, `ColsVec`, and
/// `Finish`, which adds partial sums and applies the epilogue).
pub static GEMV: Family = Family {
    name: "Gemv",
    arity: 2,
    takes: |s| match s.variant {
        Variant::Finish => s.inputs.len() == 1 || s.inputs.len() == 2,
        _ => s.inputs.len() == 2 || s.inputs.len() == 3,
    },
    entry: |s| match s.variant {
        Variant::RowsVec => "gemv_rows_v",
        Variant::Cols => "gemv_cols",
        Variant::ColsVec => "gemv_cols_v",
        Variant::Finish => "gemv_fin",
        _ => "gemv_rows",
    },
    raw: |_| false,
    io,
    body: |spec, p| {
        product_prelude(spec, p)?;
        Ok(vec![GEMV_WGSL])
    },
    specs: |t| products(t, false),
};

/// The modules of matmul (`tiled`) or of gemv.
fn products(t: Target, tiled: bool) -> Vec<ModuleSpec> {
    let mut v = Vec::new();
    let op = if tiled { "matmul" } else { "gemv" };
    for d in DType::WORDS.into_iter().filter(|d| d.is_float()) {
        for out in [d, DType::F32] {
            for ins in [vec![d, d], vec![d, d, d]] {
                let mut push =
                    |family, var| v.push(ModuleSpec::new(family, op, ins.clone(), out, var, t));
                if !tiled {
                    for var in [
                        Variant::Rows,
                        Variant::RowsVec,
                        Variant::Cols,
                        Variant::ColsVec,
                    ] {
                        push(&GEMV, var);
                    }
                    continue;
                }
                for i in 0..TILES.len() {
                    push(&MATMUL, Variant::Tiled(i as u8));
                    if d == DType::F32 && vec4_tile(i) {
                        push(&MATMUL, Variant::TiledVec(i as u8));
                    }
                }
                if t.coop > 0 && d == DType::F16 {
                    push(&MATMUL, Variant::Coop);
                    for i in 0..8 {
                        push(&MATMUL, Variant::CoopVec(i));
                    }
                }
            }
        }
        if !tiled {
            for ins in [vec![DType::F32], vec![DType::F32, d]] {
                v.push(ModuleSpec::new(&GEMV, "gemv", ins, d, Variant::Finish, t));
            }
        }
    }
    v
}

/// Dtype checks and constants of the product families: float operands of one dtype,
/// output of that dtype or f32 (partial sums, or a 16-bit result rounded later), the
/// tile shape, and `ld_c` for the optional bias.
fn product_prelude(spec: &ModuleSpec, p: &mut String) -> Result<()> {
    let ins = &spec.inputs;
    let fin = spec.variant == Variant::Finish;
    let d = if fin {
        ins.get(1).copied().unwrap_or(spec.output)
    } else {
        ins[0]
    };
    let ok = d.is_float()
        && (fin && ins[0] == DType::F32 || !fin && ins[1] == d)
        && ins.iter().skip(if fin { 1 } else { 2 }).all(|&c| c == d)
        && (spec.output == d || spec.output == DType::F32);
    if !ok {
        return Err(Error::Shape(format!(
            "{:?} needs float operands of one dtype and an output of that dtype or f32, got {ins:?} -> {}",
            spec.family, spec.output
        )));
    }
    if matches!(spec.variant, Variant::Coop | Variant::CoopVec(_)) {
        if spec.target.coop == 0 || ins[0] != DType::F16 {
            return Err(Error::Shape(format!(
                "the cooperative-matrix matmul needs f16 operands and a target with cooperative matrices, got {ins:?} on {:?}",
                spec.target
            )));
        }
        writeln!(p, "const SG: u32 = {}u;", spec.target.coop).unwrap();
        if let Variant::CoopVec(i) = spec.variant {
            // Subgroups of 32 share out the tile, 32 x 64 each.
            if spec.target.coop != 32 || i > 7 {
                return Err(Error::Shape(format!(
                    "the vec4 cooperative matmul needs subgroups of 32 and a variant below 8, got {} and {i}",
                    spec.target.coop
                )));
            }
            writeln!(p, "const A_MFAST: bool = {};", i & 1 != 0).unwrap();
            writeln!(p, "const B_KFAST: bool = {};", i & 2 != 0).unwrap();
            writeln!(p, "const VBN: u32 = {}u;", coop_vec_cols(i)).unwrap();
        }
    } else if spec.family == &MATMUL {
        let (Variant::Tiled(i) | Variant::TiledVec(i)) = spec.variant else {
            return Err(Error::Shape("matmul has only tiled variants".into()));
        };
        let vec = matches!(spec.variant, Variant::TiledVec(_));
        if vec && (ins[0] != DType::F32 || !vec4_tile(i as usize)) {
            return Err(Error::Shape(format!(
                "the vec4 matmul reads f32 operands in whole vec4s per invocation, got {ins:?}, tile {i}"
            )));
        }
        writeln!(p, "const MM_VEC: bool = {vec};").unwrap();
        let (wx, wy, bk) = TILES
            .get(i as usize)
            .copied()
            .ok_or_else(|| Error::Shape(format!("no matmul tile configuration {i}")))?;
        writeln!(
            p,
            "const WX: u32 = {wx}u;\nconst WY: u32 = {wy}u;\nconst BK: u32 = {bk}u;"
        )
        .unwrap();
    } else if !matches!(
        spec.variant,
        Variant::Rows | Variant::RowsVec | Variant::Cols | Variant::ColsVec | Variant::Finish
    ) {
        return Err(Error::Shape(format!(
            "gemv has no variant {:?}",
            spec.variant
        )));
    }
    let c = if fin { 1 } else { 2 };
    if ins.len() == c + 1 {
        if fin {
            p.push_str("fn ld_c(i: u32) -> f32 { return ld_b(i); }\n");
        }
    } else {
        p.push_str("fn ld_c(i: u32) -> f32 { return 0.0; } // no c: never read\n");
    }
    Ok(())
}
