//! The random bits' modules: their checks and files.

use crate::compose::{Family, Io, ModuleSpec, Variant};
use crate::dtype::DType;
use crate::{Error, Result};

const RANDOM_WGSL: &str = include_str!("random.wgsl");

/// Threefry-2x32 u32 bits from u32 keys (MLX's layout).
pub static RANDOM_BITS: Family = Family {
    name: "RandomBits",
    arity: 1,
    takes: |s| s.inputs.len() == 1,
    entry: |s| s.op.name(),
    raw: |_| false,
    io: Io::elementwise,
    body: random_body,
    specs: |t| {
        let (g, u) = (Variant::General, DType::U32);
        ["random_bits", "random_bits_part"]
            .map(|op| ModuleSpec::new(&RANDOM_BITS, op, vec![u], u, g, t))
            .into()
    },
};

fn random_body(spec: &ModuleSpec, _: &mut String) -> Result<Vec<&'static str>> {
    if spec.inputs[..] != [DType::U32]
        || spec.output != DType::U32
        || spec.variant != Variant::General
        || !["random_bits", "random_bits_part"].contains(&spec.op.name())
    {
        return Err(Error::Shape(format!(
            "random_bits reads u32 keys and writes u32 (general variant), got {} {:?} -> {} ({:?})",
            spec.op, spec.inputs, spec.output, spec.variant
        )));
    }
    Ok(vec![RANDOM_WGSL])
}
