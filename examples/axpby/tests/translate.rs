//! The kernel's every specialisation parses, validates and translates to SPIR-V,
//! MSL and HLSL with naga (Vulkan, Metal and DX12 see what wgpu makes of it).

use naga::valid::{Capabilities, ValidationFlags, Validator};
use wmx::DType;

#[test]
fn axpby_wgsl_translates_for_every_backend() {
    for (dtype, vec4) in [
        (DType::F32, false),
        (DType::F32, true),
        (DType::F16, false),
        (DType::F16, true),
    ] {
        let src = wmx_axpby::gpu_source(dtype, vec4).unwrap();
        let module = naga::front::wgsl::parse_str(&src)
            .unwrap_or_else(|e| panic!("{dtype}: {}", e.emit_to_string(&src)));
        let info = Validator::new(ValidationFlags::all(), Capabilities::all())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{dtype}: {}", e.emit_to_string(&src)));
        for entry in ["axpby_contiguous", "axpby_general"] {
            let stage = naga::ShaderStage::Compute;
            naga::back::spv::write_vec(
                &module,
                &info,
                &naga::back::spv::Options::default(),
                Some(&naga::back::spv::PipelineOptions {
                    shader_stage: stage,
                    entry_point: entry.into(),
                }),
            )
            .unwrap_or_else(|e| panic!("{dtype} {entry} spv: {e:?}"));
            let (_, t) = naga::back::msl::write_string(
                &module,
                &info,
                &naga::back::msl::Options {
                    lang_version: (2, 4),
                    fake_missing_bindings: true,
                    ..Default::default()
                },
                &naga::back::msl::PipelineOptions {
                    entry_point: Some((stage, entry.into())),
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("{dtype} {entry} msl: {e:?}"));
            assert!(
                t.entry_point_names.iter().all(|r| r.is_ok()),
                "{dtype} {entry}"
            );
            let mut out = String::new();
            naga::back::hlsl::Writer::new(
                &mut out,
                &naga::back::hlsl::Options {
                    shader_model: naga::back::hlsl::ShaderModel::V6_2,
                    ..Default::default()
                },
                &naga::back::hlsl::PipelineOptions {
                    entry_point: Some((stage, entry.into())),
                },
            )
            .write(&module, &info, None)
            .unwrap_or_else(|e| panic!("{dtype} {entry} hlsl: {e:?}"));
        }
    }
    let e = wmx_axpby::gpu_source(DType::BF16, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bf16"), "{e}");
}
