//! Opening a wgpu device for the kernel library: the adapter, its features and
//! limits, and the probes (run as kernels) that decide which hardware paths the
//! kernels take.

use crate::compose::Target;
use crate::driver::Batch;
use crate::driver::Caps;
use crate::kernels::Kernels;
use crate::wgpu_driver::{RequestOptions, Wgpu, encode_passes};
#[cfg(not(target_arch = "wasm32"))] // the probes
use crate::{DType, layout::Contig, layout::Strided};
use crate::{Error, Result};

const WANTED_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SHADER_F64)
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::SUBGROUP_BARRIER)
    .union(wgpu::Features::SHADER_FLOAT32_ATOMIC)
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);

impl Kernels<Wgpu> {
    /// Picks an adapter and opens a device with the adapter's own limits and the
    /// features `SHADER_F16`, `SUBGROUP`, `SHADER_FLOAT32_ATOMIC`,
    /// `TIMESTAMP_QUERY(+_INSIDE_ENCODERS)` where
    /// available.
    pub async fn request(opts: &RequestOptions) -> Result<Kernels> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: opts.backends,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let (adapter, which) = Self::pick_adapter(&instance, opts).await?;
        let mut features = adapter.features() & WANTED_FEATURES;
        if !opts.atomic_f32 {
            features.remove(wgpu::Features::SHADER_FLOAT32_ATOMIC);
        }
        let coop = coop_subgroup(&adapter, opts.cooperative_matrix) > 0;
        if coop {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wmx-kernels"),
                required_features: features,
                required_limits: adapter.limits(),
                // SAFETY: the experimental feature is requested only where the
                // adapter lists the one configuration the kernel uses, and `open`
                // keeps it only if a probe product comes out exact.
                experimental_features: if coop {
                    unsafe { wgpu::ExperimentalFeatures::enabled() }
                } else {
                    wgpu::ExperimentalFeatures::disabled()
                },
                ..Default::default()
            })
            .await
            .map_err(|e| Error::RequestDevice(e.to_string()))?;
        let k = Self::open(&adapter, device, queue, !opts.software_f16, &which)?;
        if opts.force_fallback_reductions {
            return k.with_target(|t| t.subgroups = false);
        }
        Ok(k)
    }

    #[cfg(not(target_arch = "wasm32"))]
    async fn pick_adapter(
        instance: &wgpu::Instance,
        opts: &RequestOptions,
    ) -> Result<(wgpu::Adapter, String)> {
        let mut adapters = instance.enumerate_adapters(opts.backends).await;
        let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
        if let Some(want) = &opts.adapter_name {
            let want = want.to_lowercase();
            adapters.retain(|a| a.get_info().name.to_lowercase().contains(&want));
        }
        let rank = |a: &wgpu::Adapter| {
            use wgpu::DeviceType::*;
            let t = a.get_info().device_type;
            let order: [wgpu::DeviceType; 5] = match opts.power {
                wgpu::PowerPreference::LowPower => {
                    [IntegratedGpu, DiscreteGpu, VirtualGpu, Other, Cpu]
                }
                _ => [DiscreteGpu, IntegratedGpu, VirtualGpu, Other, Cpu],
            };
            order.iter().position(|x| *x == t).unwrap_or(5)
        };
        adapters.sort_by_key(rank);
        let none = || {
            Error::NoAdapter(format!(
                "backends {:?}, name filter {:?}; adapters seen: {:?}",
                opts.backends, opts.adapter_name, names
            ))
        };
        let first = adapters.first().ok_or_else(none)?;
        let (index, of) = match opts.adapter_index {
            Some(i) if i >= adapters.len() => {
                return Err(Error::NoAdapter(format!(
                    "adapter {i} was asked for (WMX_ADAPTER) and there are {}: {:?}",
                    adapters.len(),
                    names
                )));
            }
            Some(i) => (i, adapters.len()),
            None => {
                // Ranks of one host spread over the adapters of the preferred kind.
                let kind = first.get_info().device_type;
                let same = adapters
                    .iter()
                    .take_while(|a| a.get_info().device_type == kind)
                    .count();
                (local_rank().unwrap_or(0) % same, same)
            }
        };
        let which = if of > 1 {
            format!(" #{index} of {of}")
        } else {
            String::new()
        };
        Ok((adapters.swap_remove(index), which))
    }

    #[cfg(target_arch = "wasm32")]
    async fn pick_adapter(
        instance: &wgpu::Instance,
        opts: &RequestOptions,
    ) -> Result<(wgpu::Adapter, String)> {
        instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: opts.power,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map(|a| (a, String::new()))
            .map_err(|e| Error::NoAdapter(e.to_string()))
    }

    /// Wraps a device the caller opened. Capabilities are read from the device's
    /// features and limits (what was actually granted) and the adapter's info.
    /// Where the device has `SHADER_F16` (native, not the browser), f16 values are
    /// converted by the hardware if a probe finds its conversions exact (see
    /// [`Target::f16`]); `WMX_SOFTWARE_F16=1` keeps the software conversions.
    pub fn from_device(
        adapter: &wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
    ) -> Result<Kernels> {
        let probe = std::env::var("WMX_SOFTWARE_F16").as_deref() != Ok("1");
        Self::open(adapter, device, queue, probe, "")
    }

    fn open(
        adapter: &wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
        probe_f16: bool,
        which: &str,
    ) -> Result<Kernels> {
        let info = adapter.get_info();
        let features = device.features();
        let limits = device.limits();
        let subgroups = features.contains(wgpu::Features::SUBGROUP);
        let caps = Caps {
            f16: features.contains(wgpu::Features::SHADER_F16),
            f64: features.contains(wgpu::Features::SHADER_F64),
            subgroups,
            subgroup_size: if subgroups { info.subgroup_min_size } else { 0 },
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            max_storage_binding: binding_cap(
                limits.max_storage_buffer_binding_size,
                std::env::var("WMX_MAX_BINDING").ok().as_deref(),
            ),
            // Never below a binding: a piece's window fits one segment.
            max_buffer: binding_cap(
                limits.max_buffer_size,
                std::env::var("WMX_MAX_BUFFER").ok().as_deref(),
            )
            .max(
                limits
                    .max_storage_buffer_binding_size
                    .min(limits.max_buffer_size),
            ),
            max_workgroups_per_dim: limits.max_compute_workgroups_per_dimension,
            max_invocations: limits.max_compute_invocations_per_workgroup,
            max_storage_buffers: limits.max_storage_buffers_per_shader_stage,
            max_workgroup_storage: limits.max_compute_workgroup_storage_size,
            offset_align: limits.min_storage_buffer_offset_alignment,
            backend: info.backend,
            adapter_name: format!("{}{which}", info.name),
            // Mesa's llvmpipe (lavapipe) ends loops past LP_MAX_TGSI_LOOP_ITERATIONS.
            loop_budget: info.name.contains("llvmpipe").then_some(65_535),
            device_type: info.device_type,
        };
        let max_wg = limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x)
            .min(256);
        // Largest power of two not above the limit (the tree reductions halve it).
        let wg = 1u32 << (31 - max_wg.max(32).leading_zeros());
        let target = Target {
            subgroups,
            subgroup_directive: info.backend == wgpu::Backend::BrowserWebGpu,
            workgroup_size: wg,
            f16: false,
            coop: 0,
            atomic_f32: features.contains(wgpu::Features::SHADER_FLOAT32_ATOMIC),
            radix_wg: if subgroups {
                crate::sort::radix_workgroup(info.subgroup_min_size, info.subgroup_max_size, wg)
            } else {
                0
            },
        };
        let coop_features =
            wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SUBGROUP_BARRIER;
        let coop_sg = if features.contains(coop_features) {
            coop_subgroup(adapter, true)
        } else {
            0
        };
        let caps_f16 = caps.f16;
        let backend = caps.backend;
        let driver = Wgpu::new(device, queue, limits);
        let k = Kernels::with_driver(driver, caps, target)?;
        #[cfg(not(target_arch = "wasm32"))]
        {
            let f16_hw =
                probe_f16 && caps_f16 && backend != wgpu::Backend::BrowserWebGpu && k.probe_f16();
            let mut k = k.with_target(|t| t.f16 = f16_hw)?;
            if coop_sg > 0 {
                k = k.with_target(|t| t.coop = coop_sg)?;
                if !k.probe_coop() {
                    k = k.with_target(|t| t.coop = 0)?;
                }
            }
            Ok(k)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = (probe_f16, caps_f16, backend, coop_sg);
            Ok(k)
        }
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.inner.driver.device
    }
    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.inner.driver.queue
    }

    /// Encodes a batch into `encoder` (one compute pass) without submitting, for
    /// callers that add timestamp queries or other commands. The parameters go into a
    /// fresh buffer (the caller decides when the commands run).
    pub fn encode(&self, batch: Batch<Wgpu>, encoder: &mut wgpu::CommandEncoder) -> Result<()> {
        let mut offsets = Vec::new();
        let mut bytes = Vec::new();
        let d = &self.inner.driver;
        let total = d.layout_params(&batch, &mut offsets, &mut bytes);
        if total == 0 {
            encode_passes(&batch, encoder, |_| unreachable!("no dispatches"));
            return Ok(());
        }
        let params = d.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wmx-kernels params"),
            size: total.div_ceil(4) * 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: true,
        });
        {
            let mut view = params
                .slice(..)
                .get_mapped_range_mut()
                .map_err(|e| Error::Map(e.to_string()))?;
            view.slice(..bytes.len()).copy_from_slice(&bytes);
        }
        params.unmap();
        let groups: Vec<wgpu::BindGroup> = batch
            .dispatches
            .iter()
            .map(|x| d.bind_group(x, &params))
            .collect();
        encode_passes(&batch, encoder, |i| (&groups[i], offsets[i]));
        Ok(())
    }

    /// Multiplies small integer f16 matrices (every product and sum exact) with the
    /// cooperative-matrix kernel, plain and through transposed and broadcast views,
    /// and compares with the host; false on any difference or error (an adapter may
    /// accept a configuration and write zeros).
    #[cfg(not(target_arch = "wasm32"))]
    fn probe_coop(&self) -> bool {
        let (m, k, n) = (70usize, 40usize, 72usize);
        let h = |i: usize, salt: usize| ((i * 7 + salt * 3) % 5) as f32 - 2.0;
        let a: Vec<f32> = (0..m * k).map(|i| h(i, 1)).collect();
        let b: Vec<f32> = (0..k * n).map(|i| h(i, 2)).collect();
        let bits = |v: &[f32]| -> Vec<u8> {
            v.iter()
                .flat_map(|x| half::f16::from_f32(*x).to_bits().to_le_bytes())
                .collect()
        };
        let dev = self.device();
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let run = || -> Result<Vec<u8>> {
            let (ba, bb) = (self.upload(&bits(&a))?, self.upload(&bits(&b))?);
            let out = self.create_buffer((m * n * 2) as u64, Some("coop probe"))?;
            let (sa, sb) = ([m, k], [k, n]);
            let (ta, tb) = ([k as isize, 1], [n as isize, 1]);
            let av = Strided {
                buffer: &ba,
                window: None,
                dtype: DType::F16,
                shape: &sa,
                strides: &ta,
                offset: 0,
            };
            let bv = Strided {
                buffer: &bb,
                window: None,
                dtype: DType::F16,
                shape: &sb,
                strides: &tb,
                offset: 0,
            };
            let so = [m, n];
            let o = Contig {
                buffer: &out,
                window: None,
                dtype: DType::F16,
                shape: &so,
            };
            let mut batch = Batch::new();
            self.matmul(&mut batch, &av, &bv, None, 1.0, 0.0, &o)?;
            self.submit(batch)?;
            self.read_blocking(&out, 0, (m * n * 2) as u64)
        };
        let got = run();
        if pollster::block_on(scope.pop()).is_some() {
            return false;
        }
        let Ok(got) = got else { return false };
        let mut want = Vec::with_capacity(m * n * 2);
        for i in 0..m {
            for j in 0..n {
                let s: f32 = (0..k).map(|kk| a[i * k + kk] * b[kk * n + j]).sum();
                want.extend(half::f16::from_f32(s).to_bits().to_le_bytes());
            }
        }
        got == want
    }

    /// Runs the hardware f16 conversions (`pack2x16float`, `unpack2x16float`, whose
    /// rounding, subnormals and overflow WGSL leaves to the implementation, as the
    /// kernels write them) on every f16 value, every f16 midpoint and its f32 neighbours, the
    /// overflow threshold and NaN/inf, and compares with correctly rounded results.
    /// False on any difference (or any error): the kernels then convert by hand.
    #[cfg(not(target_arch = "wasm32"))]
    fn probe_f16(&self) -> bool {
        let (inputs, want) = f16_probe_cases();
        let dev = self.device();
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let src = "\
            @group(0) @binding(0) var<storage, read> I: array<u32>;\n\
            @group(0) @binding(1) var<storage, read_write> O: array<u32>;\n\
            fn ex_f16(w: u32, j: u32) -> f32 { let h = unpack2x16float(w); return select(h.x, h.y, j != 0u); }\n\
            fn st_f16(v: f32) -> u32 { return pack2x16float(vec2<f32>(v, 0.0)); }\n\
            @compute @workgroup_size(64)\n\
            fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                let i = g.x + g.y * 4194240u;\n\
                if (i < 32768u) {\n\
                    // Every f16 bit pattern, two per word, to f32.\n\
                    O[2u * i] = bitcast<u32>(ex_f16(I[i], 0u));\n\
                    O[2u * i + 1u] = bitcast<u32>(ex_f16(I[i], 1u));\n\
                } else if (i < arrayLength(&I)) {\n\
                    O[32768u + i] = st_f16(bitcast<f32>(I[i]));\n\
                }\n\
            }\n";
        let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("wmx-kernels f16 probe"),
            source: wgpu::ShaderSource::Wgsl(src.into()),
        });
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("wmx-kernels f16 probe"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        if pollster::block_on(scope.pop()).is_some() {
            return false;
        }
        let Ok(input) = self.upload(bytemuck::cast_slice(&inputs)) else {
            return false;
        };
        let out_words = 32768 + inputs.len();
        // Padded: arrayLength(&I) counts the upload's padding words too.
        let Ok(out) = self.create_buffer(out_words as u64 * 4 + 16, Some("f16 probe")) else {
            return false;
        };
        let bg = dev.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: input.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: out.as_entire_binding(),
                },
            ],
        });
        let mut enc = dev.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bg, &[]);
            let Ok(groups) = self.grid((inputs.len() as u64).div_ceil(64)) else {
                return false;
            };
            // The shader's row pitch (4194240 = 65535 * 64) assumes 65535 per row.
            if groups[1] > 1 && groups[0] != 65535 {
                return false;
            }
            pass.dispatch_workgroups(groups[0], groups[1], 1);
        }
        self.queue().submit([enc.finish()]);
        let Ok(bytes) = self.read_blocking(&out, 0, out_words as u64 * 4) else {
            return false;
        };
        let got: &[u32] = bytemuck::cast_slice(&bytes);
        let nan32 = |w: u32| (w & 0x7fff_ffff) > 0x7f80_0000;
        let nan16 = |w: u32| (w & 0x7fff) > 0x7c00;
        for h in 0..65536usize {
            let w = want[h];
            if got[h] != w && !(nan32(w) && nan32(got[h])) {
                return false;
            }
        }
        for i in 32768..inputs.len() {
            let (g, w) = (got[32768 + i], want[32768 + i]);
            // The upper half must be zero (it is ORed into packed words).
            if g != w && !(nan16(w) && nan16(g) && g >> 16 == 0) {
                return false;
            }
        }
        true
    }
}

/// Inputs of the f16 probe (32768 words holding every f16 pattern, then f32 values)
/// and the wanted outputs, indexed like the probe's output buffer.
#[cfg(not(target_arch = "wasm32"))]
fn f16_probe_cases() -> (Vec<u32>, Vec<u32>) {
    use half::f16;
    let mut inputs: Vec<u32> = (0..32768u32)
        .map(|i| (2 * i) | ((2 * i + 1) << 16))
        .collect();
    let mut vals: Vec<f32> = Vec::new();
    for h in 0..0x7bffu16 {
        let a = f16::from_bits(h).to_f32();
        let b = f16::from_bits(h + 1).to_f32();
        // Exact: the midpoint of two neighbouring f16 values fits in an f32.
        let mid = ((a as f64 + b as f64) / 2.0) as f32;
        for v in [a, mid, next_down(mid), next_up(mid)] {
            vals.push(v);
            vals.push(-v);
        }
    }
    vals.extend([
        65504.0,
        65519.996,
        65520.0,
        65536.0,
        1e30,
        f32::MAX,
        -65520.0,
    ]);
    vals.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN]);
    vals.extend([
        2.0f32.powi(-25),
        next_up(2.0f32.powi(-25)),
        2.0f32.powi(-26),
    ]);
    inputs.extend(vals.iter().map(|v| v.to_bits()));
    // Output word h < 65536: f32 bits of f16 pattern h; word 32768 + i: st_f16(input i).
    let mut want = vec![0u32; 32768 + inputs.len()];
    for (h, w) in want.iter_mut().take(65536).enumerate() {
        *w = f16::from_bits(h as u16).to_f32().to_bits();
    }
    for i in 32768..inputs.len() {
        want[32768 + i] = f16::from_f32(f32::from_bits(inputs[i])).to_bits() as u32;
    }
    (inputs, want)
}

#[cfg(not(target_arch = "wasm32"))]
fn next_up(x: f32) -> f32 {
    f32::from_bits(x.to_bits() + 1)
}

#[cfg(not(target_arch = "wasm32"))]
fn next_down(x: f32) -> f32 {
    f32::from_bits(x.to_bits() - 1)
}

/// The subgroup size the cooperative-matrix kernels would run with on `adapter`, or 0:
/// they need `wanted`, the experimental feature, f16, subgroups and their barrier
/// (the attention kernel's subgroups work alone), a 16 x 16 x 16
/// configuration with f16 operands and f32 accumulators, and one fixed subgroup size.
fn coop_subgroup(adapter: &wgpu::Adapter, wanted: bool) -> u32 {
    let need = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
        | wgpu::Features::SHADER_F16
        | wgpu::Features::SUBGROUP
        | wgpu::Features::SUBGROUP_BARRIER;
    if !wanted || !adapter.features().contains(need) {
        return 0;
    }
    let listed = adapter.cooperative_matrix_properties().iter().any(|p| {
        (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
            && p.ab_type == wgpu::CooperativeScalarType::F16
            && p.cr_type == wgpu::CooperativeScalarType::F32
    });
    let info = adapter.get_info();
    let sg = info.subgroup_min_size;
    if listed && sg == info.subgroup_max_size && (8..=128).contains(&sg) {
        sg
    } else {
        0
    }
}

/// The binding limit wmx plans with: the device's, or less with
/// `WMX_MAX_BINDING=bytes` (at least 1 MiB, a multiple of 256): a testing aid that
/// makes the paths for arrays past a binding run on any device (the large-array
/// tests on an NVIDIA GPU, whose own limit is 2 GiB). `WMX_MAX_BUFFER` caps the
/// buffer size the same way (arrays past it are held in segments).
fn binding_cap(device: u64, env: Option<&str>) -> u64 {
    let cap = env
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(u64::MAX, |b| b.max(1 << 20) & !255);
    device.min(cap)
}

/// This process's rank among those a launcher (mpirun, mpiexec, srun) started on
/// this host.
#[cfg(not(target_arch = "wasm32"))]
fn local_rank() -> Option<usize> {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "SLURM_LOCALID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_binding_cap_only_lowers_the_limit_and_stays_aligned() {
        let cap = super::binding_cap;
        let nvidia = (1u64 << 31) - 4;
        assert_eq!(cap(nvidia, None), nvidia);
        assert_eq!(cap(nvidia, Some("134217728")), 1 << 27);
        assert_eq!(cap(1 << 27, Some("4294967296")), 1 << 27);
        assert_eq!(cap(nvidia, Some("1000")), 1 << 20);
        assert_eq!(cap(nvidia, Some("1048577")), 1 << 20);
        assert_eq!(cap(nvidia, Some("lots")), nvidia);
    }
}
