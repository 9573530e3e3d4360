//! Every kernel module the library builds is translated to MSL the way the Metal
//! backend will compile it, on Linux: the kernel function naga names exists, every
//! buffer sits at the index of its WGSL binding (parameters at 0, the output at 1 and
//! writable, the inputs after it and read-only), and threadgroups are the module's
//! workgroup size (matmul tiles choose their own). On Apple, the same translations compile and run (tests at the end).

use wmx_kernels::{ModuleSpec, Target, check_specs, module_specs};
use wmx_metal::msl::{self, SIZES_SLOT};

fn check(spec: &ModuleSpec) -> Result<(), String> {
    let k = msl::translate(spec).map_err(|e| e.0)?;
    if !k.source.contains(&format!("kernel void {}(", k.entry)) {
        return Err(format!("no kernel function {}", k.entry));
    }
    let inputs = spec.input_bindings() as u32;
    if k.buffers.first() != Some(&(0, false)) || k.buffers.get(1) != Some(&(1, true)) {
        return Err(format!(
            "parameters at 0 and a writable output at 1 expected, got {:?}",
            k.buffers
        ));
    }
    for &(b, writable) in &k.buffers[2..] {
        if writable || b < 2 || b >= 2 + inputs {
            return Err(format!(
                "binding {b} (writable {writable}) outside the {inputs} read-only inputs"
            ));
        }
    }
    for &(b, _) in &k.buffers {
        if !k.source.contains(&format!("[[buffer({b})]]")) {
            return Err(format!("binding {b} is not [[buffer({b})]] in the MSL"));
        }
    }
    if !k.sized.is_empty() && !k.source.contains(&format!("[[buffer({SIZES_SLOT})]]")) {
        return Err("buffer sizes read but not bound".into());
    }
    // Matmul tiles choose their own threadgroup sizes; every other family runs WG.
    let [x, y, z] = k.workgroup_size;
    let want_x = spec.family != wmx_kernels::Family::Matmul;
    if (want_x && x != spec.target.workgroup_size) || x == 0 || x > 1024 || y != 1 || z != 1 {
        return Err(format!("workgroup size {:?}", k.workgroup_size));
    }
    Ok(())
}

fn run_all(target: Target) -> usize {
    let specs: Vec<ModuleSpec> = module_specs(target)
        .into_iter()
        .filter(msl::translatable)
        .collect();
    let failures = check_specs(&specs, check);
    assert!(
        failures.is_empty(),
        "{} of {} modules failed; first:\n{}",
        failures.len(),
        specs.len(),
        failures[..failures.len().min(3)].join("\n\n")
    );
    specs.len()
}

/// What a Metal device composes with (simdgroup functions), hardware f16.
#[test]
fn every_module_translates_for_metal() {
    let n = run_all(Target {
        subgroups: true,
        f16: true,
        ..Target::default()
    });
    assert!(n > 1000, "only {n} modules");
}

/// The workgroup-memory paths too (kept for adapters without simdgroup functions).
#[test]
fn every_module_translates_without_subgroups() {
    run_all(Target::default());
}

/// The checks above fail on a wrong translation: a module whose output binding is
/// read-only, and an entry point that does not exist.
#[test]
fn the_checks_catch_a_bad_translation() {
    let src = "@group(0) @binding(0) var<storage, read> P: array<u32>;\n\
               @group(0) @binding(1) var<storage, read> O: array<u32>;\n\
               @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) { _ = O[i.x] + P[0]; }";
    let k = msl::translate_wgsl(src, "main", &[], Target::default()).unwrap();
    assert_eq!(k.buffers, [(0, false), (1, false)]);
    assert_eq!(k.workgroup_size, [64, 1, 1]);
    assert!(msl::translate_wgsl(src, "nope", &[], Target::default()).is_err());
}

#[cfg(target_vendor = "apple")]
mod on_apple {
    use wmx_kernels::Target;
    use wmx_metal::msl;
    use wmx_metal::{Dispatch, MetalDevice};

    /// A translated kernel compiles, runs and writes what it should.
    #[test]
    fn a_translated_kernel_runs() {
        let dev = MetalDevice::new().expect("a Metal device");
        let src = "@group(0) @binding(0) var<storage, read> P: array<u32>;\n\
                   @group(0) @binding(1) var<storage, read_write> O: array<f32>;\n\
                   @group(0) @binding(2) var<storage, read> A: array<f32>;\n\
                   @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {\n\
                     if (i.x < P[0]) { O[i.x] = A[i.x] * 2.0 + f32(P[1]); }\n\
                   }";
        let k = msl::translate_wgsl(src, "main", &[], Target::default()).unwrap();
        let pipe = std::sync::Arc::new(dev.compile(k).unwrap());
        let n = 1000usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let ab = dev.upload(bytemuck_cast(&a)).unwrap();
        let ob = dev.buffer(n * 4).unwrap();
        let d = Dispatch {
            buffers: &[&ob, &ab],
            params: &[n as u32, 3],
            groups: [n.div_ceil(64) as u32, 1, 1],
        };
        dev.run(&[(pipe, d)]).unwrap();
        let out = dev.read(&ob);
        for i in 0..n {
            let v = f32::from_le_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
            assert_eq!(v, 2.0 * i as f32 + 3.0, "element {i}");
        }
    }

    fn bytemuck_cast(v: &[f32]) -> &[u8] {
        // SAFETY: f32 has no padding and any byte is a valid u8.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
    }
}
