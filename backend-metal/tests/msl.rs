//! Every kernel module the library builds is translated to MSL the way the Metal
//! backend will compile it, on Linux: the kernel function naga names exists, every
//! buffer sits at the index of its WGSL binding (parameters at 0, the output at 1 and
//! writable, the inputs after it and read-only), and threadgroups are the module's
//! workgroup size (matmul tiles, flash attention and the linalg blocks choose their own). On Apple, the same translations compile and run (tests at the end).

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
    // Matmul tiles, flash attention's rows and the linalg blocks (an invocation
    // per column) choose their own threadgroup sizes; every other kernel runs WG.
    let [x, y, z] = k.workgroup_size;
    let own = spec.family == &wmx_kernels::families::MATMUL
        || spec.family == &wmx_kernels::families::LINALG
        || (spec.family == &wmx_kernels::families::ATTENTION && k.entry == "flash");
    let want_x = !own;
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

/// What a Metal device composes with (simdgroup functions, the 8-bit radix sort on
/// eight simdgroups of 32), hardware f16.
#[test]
fn every_module_translates_for_metal() {
    let n = run_all(Target {
        subgroups: true,
        f16: true,
        radix_wg: 256,
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
    use wmx_kernels::{Batch, Contig, DType, Kernels, Strided};
    use wmx_metal::Metal;

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A library kernel runs through the Metal driver: a binary op on a
    /// transposed view, read back and compared with the host.
    #[test]
    fn a_library_kernel_runs_on_metal() {
        let k: Kernels<Metal> = Metal::open().expect("a Metal device");
        let (r, c) = (37usize, 53usize);
        let a: Vec<f32> = (0..r * c).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..r * c).map(|i| 3.0 - i as f32).collect();
        let (ab, bb) = (k.upload(&bytes(&a)).unwrap(), k.upload(&bytes(&b)).unwrap());
        let out = k.create_buffer((r * c * 4) as u64, None).unwrap();
        let shape = [c, r];
        let (ta, tb) = ([1isize, c as isize], [1isize, c as isize]);
        let view = |buffer, strides| Strided {
            buffer,
            window: None,
            dtype: DType::F32,
            shape: &shape,
            strides,
            offset: 0,
        };
        let o = Contig {
            buffer: &out,
            window: None,
            dtype: DType::F32,
            shape: &shape,
        };
        let mut batch = Batch::new();
        k.binary(
            &mut batch,
            wmx_kernels::BinaryOp::Add,
            &view(&ab, &ta),
            &view(&bb, &tb),
            &o,
        )
        .unwrap();
        k.submit(batch).unwrap();
        let got = k.read_blocking(&out, 0, (r * c * 4) as u64).unwrap();
        for j in 0..c {
            for i in 0..r {
                let at = 4 * (j * r + i);
                let v = f32::from_le_bytes(got[at..at + 4].try_into().unwrap());
                assert_eq!(v, a[i * c + j] + b[i * c + j], "element [{j}, {i}]");
            }
        }
    }

    /// wmx arrays on `Device::metal()`'s backend: a reduction of an expression.
    #[test]
    fn arrays_compute_on_the_metal_backend() {
        let dev = wmx_metal::open().expect("a Metal device");
        wmx_core::with_device(&dev, || {
            let x = wmx_core::Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
            let y = wmx_core::ops::exp(&x).unwrap();
            let s = wmx_core::ops::sum(&y, None, false).unwrap();
            let want: f32 = [1.0f32, 2.0, 3.0, 4.0].iter().map(|v| v.exp()).sum();
            let got = s.item::<f32>().unwrap();
            assert!((got - want).abs() <= want * 1e-6, "{got} vs {want}");
        });
    }
}
