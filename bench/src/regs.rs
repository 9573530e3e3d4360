//! `--regs`: what the driver's compiler made of each kernel module: its registers,
//! spills and whatever else the driver reports through Vulkan's
//! `VK_KHR_pipeline_executable_properties` (wgpu exposes none of it). Residency
//! questions (is a kernel bound by its registers per invocation? does it spill?)
//! were guesswork before (bench/NOTES.md, runs 139, 216).
//!
//! Each module the library can build for this adapter's target (filtered by
//! `--ops`: substrings of its label, `family:op:[inputs]->output:variant`) is composed, translated to SPIR-V by
//! naga with the options wgpu uses for the library's trusted modules (no bounds
//! checks, no loop bounding, no division guards, no workgroup zeroing), and built
//! into a compute pipeline of its own on a second Vulkan device that asks for the
//! statistics.

use crate::Res;
use ash::vk;
use std::ffi::{CStr, CString};
use wmx_kernels as k;

/// A module's group-0 bindings: (binding, whether it is a uniform buffer).
type Bindings = Vec<(u32, bool)>;

/// The SPIR-V version wgpu writes for a Vulkan 1.3 device (the probe asks for 1.3).
const SPIRV: (u8, u8) = (1, 6);

/// A Vulkan device that keeps its pipelines' statistics.
struct Probe {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    /// `None` where the driver keeps no statistics.
    exe: Option<ash::khr::pipeline_executable_properties::Device>,
    name: String,
}

impl Probe {
    fn new() -> Res<Probe> {
        let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("no Vulkan loader: {e}"))?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        let instance = unsafe {
            entry.create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
        }
        .map_err(|e| format!("vkCreateInstance: {e}"))?;
        let pds = unsafe { instance.enumerate_physical_devices() }.map_err(|e| format!("{e}"))?;
        let props = |pd| unsafe { instance.get_physical_device_properties(pd) };
        // The adapter wgpu picks by default: a discrete GPU first.
        let pd = pds
            .iter()
            .copied()
            .find(|&pd| props(pd).device_type == vk::PhysicalDeviceType::DISCRETE_GPU)
            .or_else(|| pds.first().copied())
            .ok_or("no Vulkan device")?;
        let p = props(pd);
        let name = p
            .device_name_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let api = p.api_version;
        if api < vk::API_VERSION_1_3 {
            return Err(format!(
                "{name}: Vulkan 1.3 needed, the device has {}.{}",
                vk::api_version_major(api),
                vk::api_version_minor(api)
            ));
        }
        let exts = unsafe { instance.enumerate_device_extension_properties(pd) }
            .map_err(|e| format!("{e}"))?;
        let has = |n: &CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(n));
        // Without the extension (Mesa 22's lavapipe) the pipelines are still built:
        // a check of this probe's SPIR-V and layouts.
        let exe_name = ash::khr::pipeline_executable_properties::NAME;
        let stats = has(exe_name);
        let coop = has(ash::khr::cooperative_matrix::NAME);
        let atomic = has(ash::ext::shader_atomic_float::NAME);
        let mut names = Vec::new();
        if stats {
            names.push(exe_name.as_ptr());
        }
        if coop {
            names.push(ash::khr::cooperative_matrix::NAME.as_ptr());
        }
        if atomic {
            names.push(ash::ext::shader_atomic_float::NAME.as_ptr());
        }
        // Every feature the device has, so that any module's capabilities are on.
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut exe_f = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
        let mut coop_f = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut atomic_f = vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut v11)
            .push_next(&mut v12)
            .push_next(&mut v13);
        if stats {
            f2 = f2.push_next(&mut exe_f);
        }
        if coop {
            f2 = f2.push_next(&mut coop_f);
        }
        if atomic {
            f2 = f2.push_next(&mut atomic_f);
        }
        unsafe { instance.get_physical_device_features2(pd, &mut f2) };
        let family = unsafe { instance.get_physical_device_queue_family_properties(pd) }
            .iter()
            .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("no compute queue")? as u32;
        let prio = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&names)
            .push_next(&mut f2);
        let device = unsafe { instance.create_device(pd, &info, None) }
            .map_err(|e| format!("vkCreateDevice: {e}"))?;
        let exe = stats
            .then(|| ash::khr::pipeline_executable_properties::Device::new(&instance, &device));
        Ok(Probe {
            _entry: entry,
            instance,
            device,
            exe,
            name,
        })
    }

    /// The statistics of `words` (a SPIR-V module) built as a compute pipeline for
    /// `entry`, whose group-0 bindings are `bindings`.
    fn stats(&self, words: &[u32], entry: &str, bindings: &Bindings) -> Res<Vec<(String, String)>> {
        let d = &self.device;
        let module = unsafe {
            d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(words), None)
        }
        .map_err(|e| format!("vkCreateShaderModule: {e}"))?;
        let lb: Vec<_> = bindings
            .iter()
            .map(|&(b, uniform)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(if uniform {
                        vk::DescriptorType::UNIFORM_BUFFER
                    } else {
                        vk::DescriptorType::STORAGE_BUFFER
                    })
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let set = unsafe {
            d.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&lb),
                None,
            )
        }
        .map_err(|e| format!("{e}"))?;
        let sets = [set];
        let layout = unsafe {
            d.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&sets),
                None,
            )
        }
        .map_err(|e| format!("{e}"))?;
        let name = CString::new(entry).map_err(|e| format!("{e}"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .flags(vk::PipelineShaderStageCreateFlags::ALLOW_VARYING_SUBGROUP_SIZE)
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(&name);
        let flags = if self.exe.is_some() {
            vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
        } else {
            vk::PipelineCreateFlags::empty()
        };
        let info = vk::ComputePipelineCreateInfo::default()
            .flags(flags)
            .stage(stage)
            .layout(layout);
        let made = unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) };
        let out = match made {
            Ok(p) => {
                let r = self.read(p[0]);
                unsafe { d.destroy_pipeline(p[0], None) };
                r
            }
            Err((_, e)) => Err(format!("vkCreateComputePipelines: {e}")),
        };
        unsafe {
            d.destroy_pipeline_layout(layout, None);
            d.destroy_descriptor_set_layout(set, None);
            d.destroy_shader_module(module, None);
        }
        out
    }

    fn read(&self, pipeline: vk::Pipeline) -> Res<Vec<(String, String)>> {
        let Some(exe) = &self.exe else {
            return Ok(vec![(
                "built (the driver keeps no statistics)".into(),
                "yes".into(),
            )]);
        };
        let pi = vk::PipelineInfoKHR::default().pipeline(pipeline);
        let n = unsafe { exe.get_pipeline_executable_properties(&pi) }
            .map_err(|e| format!("{e}"))?
            .len();
        let mut out = Vec::new();
        for i in 0..n as u32 {
            let ei = vk::PipelineExecutableInfoKHR::default()
                .pipeline(pipeline)
                .executable_index(i);
            let stats = unsafe { exe.get_pipeline_executable_statistics(&ei) }
                .map_err(|e| format!("{e}"))?;
            for s in &stats {
                let name = s
                    .name_as_c_str()
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let v = unsafe {
                    match s.format {
                        vk::PipelineExecutableStatisticFormatKHR::BOOL32 => {
                            (s.value.b32 != 0).to_string()
                        }
                        vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => {
                            format!("{:.3}", s.value.f64)
                        }
                        _ => "?".into(),
                    }
                };
                out.push((name, v));
            }
        }
        Ok(out)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

/// One module as SPIR-V with wgpu's options for trusted modules, and its group-0
/// bindings.
fn spirv(spec: &k::ModuleSpec) -> Res<(Vec<u32>, Bindings)> {
    use naga::back::spv;
    let src = k::compose(spec).map_err(|e| format!("compose: {e}"))?;
    let module = naga::front::wgsl::parse_str(&src).map_err(|e| format!("parse: {e}"))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
    .subgroup_operations(naga::valid::SubgroupOperationSet::all())
    .validate(&module)
    .map_err(|e| format!("validate: {e}"))?;
    let mut constants = naga::back::PipelineConstants::default();
    for (k, v) in spec.constants() {
        constants.insert(k.to_string(), v);
    }
    let entry = spec.entry_point();
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        Some((naga::ShaderStage::Compute, entry)),
        &constants,
    )
    .map_err(|e| format!("overrides: {e:?}"))?;
    let opts = spv::Options {
        lang_version: SPIRV,
        capabilities: None,
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::Unchecked,
            buffer: naga::proc::BoundsCheckPolicy::Unchecked,
            image_load: naga::proc::BoundsCheckPolicy::Unchecked,
            binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
        },
        zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: false,
        emit_int_div_checks: false,
        use_storage_input_output_16: false,
        ..Default::default()
    };
    let pipe = spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: entry.to_string(),
    };
    let words =
        spv::write_vec(&module, &info, &opts, Some(&pipe)).map_err(|e| format!("spv: {e:?}"))?;
    let mut bindings: Bindings = module
        .global_variables
        .iter()
        .filter_map(|(_, g)| {
            let b = g.binding.as_ref()?;
            (b.group == 0).then_some((b.binding, matches!(g.space, naga::AddressSpace::Uniform)))
        })
        .collect();
    bindings.sort_unstable();
    bindings.dedup();
    Ok((words, bindings))
}

/// Prints the driver's statistics of every module for `target` whose label
/// (`family:op:[inputs]->output:variant`) contains one of `filters` (all if empty).
pub fn bench_regs(target: k::Target, filters: &[String]) -> Res<()> {
    let probe = Probe::new()?;
    println!(
        "pipeline statistics from {} (SPIR-V {}.{})",
        probe.name, SPIRV.0, SPIRV.1
    );
    let mut seen = 0;
    for spec in k::module_specs(target) {
        let label = format!(
            "{:?}:{}:{:?}->{}:{:?}",
            spec.family, spec.op, spec.inputs, spec.output, spec.variant
        );
        if !filters.is_empty() && !filters.iter().any(|f| label.contains(f.as_str())) {
            continue;
        }
        seen += 1;
        let line = spirv(&spec).and_then(|(w, b)| probe.stats(&w, spec.entry_point(), &b));
        match line {
            Ok(stats) => {
                let s: Vec<String> = stats.iter().map(|(n, v)| format!("{n}={v}")).collect();
                println!("{label}  {}", s.join(", "));
            }
            Err(e) => println!("{label}  error: {e}"),
        }
    }
    println!("{seen} modules");
    Ok(())
}
