//! WGSL kernel modules translated to Metal Shading Language by naga.
//!
//! Each module's resources keep their WGSL binding numbers as Metal buffer indices:
//! binding `b` of group 0 is `[[buffer(b)]]`. The backend then binds the parameters,
//! the outputs and the inputs in the order wmx-kernels records them (binding 0, then
//! 1, 2, ...). Override constants are resolved before translation, so the MSL needs
//! no function constants. Buffers holding runtime-sized arrays get their byte sizes
//! through [`SIZES_SLOT`] where naga asks for them.

use naga::back::msl;
use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet, ValidationFlags, Validator};
use std::collections::BTreeMap;
use wmx_kernels::{ModuleSpec, Target, Variant};

/// Buffer index of the array of buffer sizes naga's MSL reads for runtime-sized
/// arrays (the last of Metal's 31 buffer slots).
pub const SIZES_SLOT: u8 = 30;

/// Metal Shading Language version the translation targets (Apple silicon and recent
/// Intel Macs; simdgroup functions for the subgroup kernels).
pub const MSL_VERSION: (u8, u8) = (2, 4);

/// A kernel translated to MSL, with what the encoder needs to run it.
#[derive(Clone, Debug)]
pub struct MslKernel {
    /// The MSL source of the whole module.
    pub source: String,
    /// The name of the kernel function in `source` (naga may rename entry points).
    pub entry: String,
    /// Buffer bindings of the kernel, in binding order: (binding = buffer index,
    /// writable).
    pub buffers: Vec<(u32, bool)>,
    /// The bindings whose byte sizes go, in this order, into the u32 array at
    /// [`SIZES_SLOT`]; empty when the kernel reads no sizes.
    pub sized: Vec<u32>,
    /// Threads per threadgroup.
    pub workgroup_size: [u32; 3],
}

/// Translation failure: the stage and naga's message.
#[derive(Clone, Debug)]
pub struct MslError(pub String);

impl std::fmt::Display for MslError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MslError {}

/// Whether a kernel family runs on Metal through this translation. The
/// cooperative-matrix matmuls are Vulkan-only (16 x 16 fragments; Metal's
/// simdgroup matrices are 8 x 8 and need their own kernel).
pub fn translatable(spec: &ModuleSpec) -> bool {
    !matches!(spec.variant, Variant::Coop | Variant::CoopVec(_))
}

/// Composes `spec` (wmx-kernels) and translates it to MSL.
pub fn translate(spec: &ModuleSpec) -> Result<MslKernel, MslError> {
    if !translatable(spec) {
        return Err(MslError(format!(
            "{:?} has no Metal translation (cooperative matrices are Vulkan-only)",
            spec.variant
        )));
    }
    let src = wmx_kernels::compose(spec).map_err(|e| MslError(format!("compose: {e}")))?;
    translate_wgsl(&src, spec.entry_point(), &spec.constants(), spec.target)
}

/// Translates one WGSL module's compute entry point `entry` to MSL, with the
/// override constants resolved; `target` says which capabilities it may use. The
/// library's modules bound their own accesses, so no checks are added.
pub fn translate_wgsl(
    src: &str,
    entry: &str,
    overrides: &[(&str, f64)],
    target: Target,
) -> Result<MslKernel, MslError> {
    translate_checked(src, entry, overrides, target, false)
}

/// [`translate_wgsl`], with `checked`: out-of-bounds indices read zero and skip
/// their writes, and workgroup memory starts zeroed (users' modules, as wgpu
/// treats them).
pub fn translate_checked(
    src: &str,
    entry: &str,
    overrides: &[(&str, f64)],
    target: Target,
    checked: bool,
) -> Result<MslKernel, MslError> {
    let module = naga::front::wgsl::parse_str(src)
        .map_err(|e| MslError(format!("parse: {}", e.emit_to_string(src))))?;
    let mut caps = Capabilities::default();
    if target.subgroups {
        caps |= Capabilities::SUBGROUP;
    }
    if target.f16 {
        caps |= Capabilities::SHADER_FLOAT16 | Capabilities::SHADER_FLOAT16_IN_FLOAT32;
    }
    let mut validator = Validator::new(ValidationFlags::all(), caps);
    if target.subgroups {
        validator.subgroup_stages(ShaderStages::COMPUTE);
        validator.subgroup_operations(SubgroupOperationSet::all());
    }
    let info = validator
        .validate(&module)
        .map_err(|e| MslError(format!("validate: {}", e.emit_to_string(src))))?;
    let mut constants = naga::back::PipelineConstants::default();
    for &(k, v) in overrides {
        constants.insert(k.to_string(), v);
    }
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        Some((naga::ShaderStage::Compute, entry)),
        &constants,
    )
    .map_err(|e| MslError(format!("overrides: {e:?}")))?;
    let ep_index = module
        .entry_points
        .iter()
        .position(|e| e.name == entry)
        .ok_or_else(|| MslError(format!("no entry point {entry}")))?;
    let workgroup_size = module.entry_points[ep_index].workgroup_size;

    // Every resource of group 0 at the buffer index of its binding.
    let mut resources = BTreeMap::new();
    let mut buffers = vec![];
    let mut sized = vec![];
    for (_, var) in module.global_variables.iter() {
        let Some(rb) = &var.binding else { continue };
        if rb.group != 0 || rb.binding >= SIZES_SLOT as u32 {
            return Err(MslError(format!(
                "binding {}:{} does not fit Metal's buffer table",
                rb.group, rb.binding
            )));
        }
        let writable = match var.space {
            naga::AddressSpace::Storage { access } => access.contains(naga::StorageAccess::STORE),
            _ => false,
        };
        resources.insert(
            *rb,
            msl::BindTarget {
                buffer: Some(rb.binding as u8),
                mutable: writable,
                ..Default::default()
            },
        );
        buffers.push((rb.binding, writable));
        let runtime = matches!(
            module.types[var.ty].inner,
            naga::TypeInner::Array {
                size: naga::ArraySize::Dynamic,
                ..
            }
        );
        if runtime {
            sized.push(rb.binding);
        }
    }
    buffers.sort_unstable();
    let mut per_entry_point_map = msl::EntryPointResourceMap::new();
    per_entry_point_map.insert(
        entry.to_string(),
        msl::EntryPointResources {
            resources,
            immediates_buffer: None,
            sizes_buffer: Some(SIZES_SLOT),
        },
    );
    let options = msl::Options {
        lang_version: MSL_VERSION,
        per_entry_point_map,
        fake_missing_bindings: false,
        zero_initialize_workgroup_memory: checked,
        bounds_check_policies: if checked {
            let p = naga::proc::BoundsCheckPolicy::ReadZeroSkipWrite;
            naga::proc::BoundsCheckPolicies {
                index: p,
                buffer: p,
                image_load: p,
                binding_array: p,
            }
        } else {
            Default::default()
        },
        ..Default::default()
    };
    let pipeline = msl::PipelineOptions {
        entry_point: Some((naga::ShaderStage::Compute, entry.to_string())),
        ..Default::default()
    };
    let (source, tinfo) = msl::write_string(&module, &info, &options, &pipeline)
        .map_err(|e| MslError(format!("msl: {e:?}")))?;
    // One name per entry point written: all of them, or only the one asked for.
    let names = &tinfo.entry_point_names;
    let at = if names.len() == module.entry_points.len() {
        ep_index
    } else {
        0
    };
    let name = match names.get(at) {
        Some(Ok(n)) => n.clone(),
        other => return Err(MslError(format!("msl entry point: {other:?}"))),
    };
    if !source.contains("_buffer_sizes") {
        sized.clear();
    }
    Ok(MslKernel {
        source,
        entry: name,
        buffers,
        sized,
        workgroup_size,
    })
}
