//! Users' WGSL kernels ([`WgslKernel`]) and custom primitives' WebGPU code, on a
//! real adapter (lavapipe in CI), against host references.

mod common;
use common::{data, gpu};
use std::sync::Arc;
use wmx_core::{Array, DType, Slice, f16};
use wmx_webgpu::{CustomEval, Launch, Template, UserModule, WgslKernel};

fn close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            ((*g as f64) - w).abs() <= tol * (1.0 + w.abs()),
            "{i}: {g} vs {w}"
        );
    }
}

/// `y = exp(x) * SCALE + b` reading both inputs through their layouts.
fn scaled_exp() -> WgslKernel {
    WgslKernel::new(
        "scaled_exp",
        &["x", "b"],
        &["y"],
        "let i = global_id.x;
         y[i] = exp(x[x_loc(i)]) * T(SCALE) + b[b_loc(i)];",
    )
    .row_contiguous(false)
}

#[test]
fn kernel_reads_transposed_and_broadcast_views() {
    let Some((dev, _be)) = gpu() else { return };
    let (r, c) = (37, 53);
    let xs = data(r * c, 1);
    let bs = data(c, 2);
    let x = Array::from_slice_on(&xs, &[r, c], &dev).unwrap();
    let b = Array::from_slice_on(&bs, &[c], &dev).unwrap();
    // Output [c, r]: x transposed, b broadcast along the rows of the output's
    // columns (b[j] for output [j, i]).
    let xt = wmx_core::transpose(&x, None).unwrap();
    let bb =
        wmx_core::broadcast_to(&wmx_core::reshape(&b, &[c as isize, 1]).unwrap(), &[c, r]).unwrap();
    let want: Vec<f64> = (0..c * r)
        .map(|k| {
            let (j, i) = (k / r, k % r);
            (xs[i * c + j] as f64).exp() * 2.5 + bs[j] as f64
        })
        .collect();
    for k in [scaled_exp(), scaled_exp().row_contiguous(true)] {
        let launch = Launch::elementwise(&[c, r], DType::F32)
            .template("T", Template::DType(DType::F32))
            .template("SCALE", Template::Float(2.5));
        let y = k.call(&[&xt, &bb], &launch).unwrap().remove(0);
        assert_eq!(y.shape(), &[c, r]);
        close(&y.to_vec::<f32>().unwrap(), &want, 1e-6);
    }
    // A sliced view with an offset and a negative step.
    let xs2 = wmx_core::slice(
        &x,
        &[
            Slice::new(Some(3), Some(20), 2),
            Slice::new(Some(40), Some(5), -3),
        ],
    )
    .unwrap();
    let n: Vec<usize> = xs2.shape().to_vec();
    let z = wmx_core::zeros(&n, DType::F32)
        .unwrap()
        .to_device(&dev)
        .unwrap();
    let launch = Launch::elementwise(&n, DType::F32)
        .template("T", Template::DType(DType::F32))
        .template("SCALE", Template::Float(1.0));
    let y = scaled_exp().call(&[&xs2, &z], &launch).unwrap().remove(0);
    let want: Vec<f64> = xs2
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| (*v as f64).exp())
        .collect();
    close(&y.to_vec::<f32>().unwrap(), &want, 1e-6);
}

#[test]
fn kernel_specialises_per_dtype_and_template() {
    let Some((dev, be)) = gpu() else { return };
    let k = WgslKernel::new(
        "axpb",
        &["x"],
        &["y"],
        "let i = global_id.x; y[i] = T(A) * x[i] + T(B);",
    );
    let xs = data(1000, 3);
    let x = Array::from_slice_on(&xs, &[1000], &dev).unwrap();
    let run = |x: &Array, d: DType, a: i32| {
        let l = Launch::elementwise(x.shape(), d)
            .template("T", Template::DType(d))
            .template("A", Template::Int(a))
            .template("B", Template::Int(1));
        k.call(&[x], &l).unwrap().remove(0)
    };
    let before = be.kernels().user_pipeline_count();
    let y = run(&x, DType::F32, 3);
    let want: Vec<f64> = xs.iter().map(|v| 3.0 * *v as f64 + 1.0).collect();
    close(&y.to_vec::<f32>().unwrap(), &want, 1e-6);
    // Same specialisation: no new pipeline. Another constant: one more.
    run(&x, DType::F32, 3).eval().unwrap();
    assert_eq!(be.kernels().user_pipeline_count(), before + 1);
    let y = run(&x, DType::F32, -2);
    let want: Vec<f64> = xs.iter().map(|v| -2.0 * *v as f64 + 1.0).collect();
    close(&y.to_vec::<f32>().unwrap(), &want, 1e-6);
    assert_eq!(be.kernels().user_pipeline_count(), before + 2);
    // i32 data.
    let xi: Vec<i32> = (0..1000).map(|i| i * 7 - 3000).collect();
    let x = Array::from_slice_on(&xi, &[1000], &dev).unwrap();
    let y = run(&x, DType::I32, 5);
    let want: Vec<i32> = xi.iter().map(|v| 5 * v + 1).collect();
    assert_eq!(y.to_vec::<i32>().unwrap(), want);
    // f16 where the adapter has it, rounded as the host rounds.
    if be.kernels().caps().f16 {
        let xh: Vec<f16> = xs.iter().map(|v| f16::from_f32(*v)).collect();
        let x = Array::from_slice_on(&xh, &[1000], &dev).unwrap();
        let y = run(&x, DType::F16, 3).to_vec::<f16>().unwrap();
        for (i, (g, v)) in y.iter().zip(&xh).enumerate() {
            let w = 3.0 * v.to_f64() + 1.0;
            assert!(
                (g.to_f64() - w).abs() <= 2e-3 * (1.0 + w.abs()),
                "{i}: {g} vs {w}"
            );
        }
    }
}

#[test]
fn kernel_grid_past_65535_workgroups() {
    let Some((dev, be)) = gpu() else { return };
    let wg = 64u32;
    let n = (be.kernels().caps().max_workgroups_per_dim as usize + 5) * wg as usize + 3;
    let k = WgslKernel::new("iota", &[], &["y"], "y[global_id.x] = global_id.x * 3u;");
    let mut l = Launch::elementwise(&[n], DType::U32);
    l.workgroup = [wg, 1, 1];
    let y = wmx_core::with_device(&dev, || k.call(&[], &l))
        .unwrap()
        .remove(0);
    let got = y.to_vec::<u32>().unwrap();
    assert_eq!(got.len(), n);
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, (i as u32).wrapping_mul(3), "{i}");
    }
}

#[test]
fn kernel_2d_grid_and_workgroup_memory() {
    let Some((dev, _be)) = gpu() else { return };
    // Row sums of a [rows, 64] matrix: one workgroup per row, a tree in workgroup
    // memory with barriers (so no guard: every thread reaches them).
    let (rows, cols) = (300, 64);
    let xs = data(rows * cols, 4);
    let x = Array::from_slice_on(&xs, &[rows, cols], &dev).unwrap();
    let k = WgslKernel::new(
        "row_sum",
        &["x"],
        &["y"],
        "let row = group_id.y;
         let live = row < grid.y;
         let r = min(row, grid.y - 1u);
         acc[local_index] = x[r * 64u + local_index];
         workgroupBarrier();
         for (var s = 32u; s > 0u; s >>= 1u) {
             if (local_index < s) { acc[local_index] += acc[local_index + s]; }
             workgroupBarrier();
         }
         if (live && local_index == 0u) { y[row] = acc[0]; }",
    )
    .header("var<workgroup> acc: array<f32, 64>;")
    .guard(false);
    let l = Launch {
        outputs: vec![(vec![rows], DType::F32)],
        grid: [64, rows as u32, 1],
        workgroup: [64, 1, 1],
        template: vec![],
        init_value: None,
    };
    let y = k.call(&[&x], &l).unwrap().remove(0);
    let want: Vec<f64> = (0..rows)
        .map(|r| xs[r * cols..(r + 1) * cols].iter().map(|v| *v as f64).sum())
        .collect();
    close(&y.to_vec::<f32>().unwrap(), &want, 1e-5);
}

#[test]
fn invalid_kernels_fail_at_the_call_and_the_next_op_is_clean() {
    let Some((dev, _be)) = gpu() else { return };
    let x = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    let l = Launch::elementwise(&[3], DType::F32);
    // A WGSL error: naga's message, naming the kernel and pointing at the line.
    let bad = WgslKernel::new(
        "broken",
        &["x"],
        &["y"],
        "y[global_id.x] = x[global_id.x] +* 1.0;",
    );
    let e = bad.call(&[&x], &l).unwrap_err().to_string();
    assert!(e.contains("broken"), "{e}");
    assert!(e.contains("+* 1.0"), "{e}");
    // A type error is caught by naga's validator too.
    let bad = WgslKernel::new(
        "types",
        &["x"],
        &["y"],
        "y[global_id.x] = x[global_id.x] + 1u;",
    );
    let e = bad.call(&[&x], &l).unwrap_err().to_string();
    assert!(e.contains("types"), "{e}");
    // The next op is clean, and the input intact.
    let z = wmx_core::add(&x, &x).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    // Bad calls: input count, names, dtypes, devices.
    let k = WgslKernel::new("copy", &["x"], &["y"], "y[global_id.x] = x[global_id.x];");
    let errs = [
        k.call(&[], &l).unwrap_err(),
        k.call(&[&x, &x], &l).unwrap_err(),
        WgslKernel::new("n", &["x y"], &["y"], "")
            .call(&[&x], &l)
            .unwrap_err(),
        WgslKernel::new("n", &["x"], &["x"], "")
            .call(&[&x], &l)
            .unwrap_err(),
        WgslKernel::new("n", &["wmx_p"], &["y"], "")
            .call(&[&x], &l)
            .unwrap_err(),
        k.call(&[&wmx_core::astype(&x, DType::Bool).unwrap()], &l)
            .unwrap_err(),
        k.call(&[&x], &Launch::elementwise(&[3], DType::BF16))
            .unwrap_err(),
        k.call(
            &[&x],
            &Launch::elementwise(&[3], DType::F32).template("T", Template::DType(DType::I64)),
        )
        .unwrap_err(),
        k.call(&[&x.to_device(&wmx_core::Device::cpu()).unwrap()], &l)
            .unwrap_err(),
    ];
    let want = [
        "takes 1 inputs (x), got 0",
        "got 2",
        "`x y` is not a WGSL identifier",
        "`x` is used twice",
        "reserved",
        "bool",
        "bf16",
        "template type T is i64",
        "runs on a WebGPU device",
    ];
    for (e, w) in errs.iter().zip(want) {
        assert!(e.to_string().contains(w), "{e} (wanted {w})");
    }
    // A grid no dispatch can cover.
    let mut l2 = Launch::elementwise(&[3], DType::F32);
    l2.grid = [u32::MAX, u32::MAX, 1];
    let e = k.call(&[&x], &l2).unwrap()[0]
        .eval()
        .unwrap_err()
        .to_string();
    assert!(e.contains("workgroups per dimension"), "{e}");
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
}

#[test]
fn many_kernels_in_one_eval_share_one_submit() {
    let Some((dev, be)) = gpu() else { return };
    let k = WgslKernel::new(
        "inc",
        &["x"],
        &["y"],
        "y[global_id.x] = x[global_id.x] + 1.0;",
    );
    let x = Array::from_slice_on(&data(4096, 5), &[4096], &dev).unwrap();
    x.eval().unwrap();
    let l = Launch::elementwise(&[4096], DType::F32);
    let mut y = x.clone();
    for _ in 0..50 {
        y = k.call(&[&y], &l).unwrap().remove(0);
        y = wmx_core::multiply(&y, &wmx_core::scalar(1.0, DType::F32).unwrap()).unwrap();
    }
    dev.synchronize().unwrap();
    let s0 = be.stats();
    y.eval().unwrap();
    dev.synchronize().unwrap();
    let s1 = be.stats();
    assert_eq!(s1.submits - s0.submits, 1, "{s0:?} -> {s1:?}");
    assert_eq!(s1.dispatches - s0.dispatches, 100);
    assert_eq!(s1.downloads, s0.downloads);
    let want: Vec<f64> = data(4096, 5).iter().map(|v| *v as f64 + 50.0).collect();
    close(&y.to_vec::<f32>().unwrap(), &want, 1e-6);
}

/// A custom primitive whose WebGPU code is a whole module of its own, binding a
/// uniform-free parameter list.
#[derive(Debug)]
struct AddOffset(u32);
impl wmx_core::CustomPrimitive for AddOffset {
    fn name(&self) -> &str {
        "add_offset"
    }
    fn eval_webgpu(&self, gpu: &mut wmx_core::GpuContext<'_>) -> wmx_core::Result<()> {
        let ev = gpu.get::<CustomEval>()?;
        let pipe = ev.pipeline(&UserModule {
            label: "add_offset",
            source: "@group(0) @binding(0) var<storage, read> p: array<u32>;
                     @group(0) @binding(1) var<storage, read_write> y: array<u32>;
                     @group(0) @binding(2) var<storage, read> x: array<u32>;
                     @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
                         if (i.x < p[0]) { y[i.x] = x[i.x] + p[1]; }
                     }",
            entry: "main",
            outputs: 1,
            inputs: 1,
        })?;
        let n = ev.output().shape.iter().product::<usize>() as u32;
        let (y, x) = (ev.output().buffer.clone(), ev.inputs()[0].buffer.clone());
        ev.dispatch(&pipe, &[&y, &x], &[n, self.0], [n.div_ceil(64), 1, 1])?;
        // Binding an output twice is refused (nothing recorded).
        let e = ev.dispatch(&pipe, &[&y, &y], &[n, self.0], [1, 1, 1]);
        assert!(e.unwrap_err().to_string().contains("bound twice"));
        Ok(())
    }
}

#[test]
fn custom_primitive_records_its_own_module() {
    let Some((dev, be)) = gpu() else { return };
    let xs: Vec<u32> = (0..1000).collect();
    let x = Array::from_slice_on(&xs, &[1000], &dev).unwrap();
    let y = wmx_core::custom(Arc::new(AddOffset(7)), &[x], &[1000], DType::U32).unwrap();
    let s0 = be.stats();
    assert_eq!(
        y.to_vec::<u32>().unwrap(),
        xs.iter().map(|v| v + 7).collect::<Vec<_>>()
    );
    // One dispatch, no submit of its own beyond the read's.
    let s1 = be.stats();
    assert_eq!(s1.submits - s0.submits, 1);
}

#[test]
fn kernel_with_several_outputs() {
    let Some((dev, be)) = gpu() else { return };
    // One dispatch writes the rounded value (f32, same shape) and the index of each
    // row's largest element (i32, one per row).
    let (r, c) = (33, 17);
    let xs = data(r * c, 6);
    let x = Array::from_slice_on(&xs, &[r, c], &dev).unwrap();
    let k = WgslKernel::new(
        "round_and_argmax",
        &["x"],
        &["rounded", "best"],
        "let row = global_id.x;
         var b = 0u;
         for (var j = 0u; j < x_shape(1u); j++) {
             let v = x[x_loc(row * x_shape(1u) + j)];
             rounded[row * x_shape(1u) + j] = round(v * 8.0) / 8.0;
             if (v > x[x_loc(row * x_shape(1u) + b)]) { b = j; }
         }
         best[row] = i32(b);",
    );
    let l = Launch {
        outputs: vec![(vec![r, c], DType::F32), (vec![r], DType::I32)],
        grid: [r as u32, 1, 1],
        workgroup: [32, 1, 1],
        template: vec![],
        init_value: None,
    };
    let s0 = be.stats();
    let outs = k.call(&[&x], &l).unwrap();
    assert_eq!(outs.len(), 2);
    assert_eq!((outs[1].shape(), outs[1].dtype()), (&[r][..], DType::I32));
    // Reading the second output first evaluates the kernel once, for both.
    let best = outs[1].to_vec::<i32>().unwrap();
    let rounded = outs[0].to_vec::<f32>().unwrap();
    assert_eq!(be.stats().dispatches - s0.dispatches, 1);
    for i in 0..r {
        let row = &xs[i * c..(i + 1) * c];
        let want = (0..c).fold(0, |b, j| if row[j] > row[b] { j } else { b });
        assert_eq!(best[i], want as i32, "row {i}");
        for j in 0..c {
            assert_eq!(rounded[i * c + j], (row[j] * 8.0).round_ties_even() / 8.0);
        }
    }
    // A launch describing another number of outputs is refused at the call.
    let e = k
        .call(&[&x], &Launch::elementwise(&[r], DType::F32))
        .unwrap_err();
    assert!(
        e.to_string().contains("writes 2 outputs (rounded, best)"),
        "{e}"
    );
}

#[test]
fn atomic_outputs_and_init_value() {
    let Some((dev, _be)) = gpu() else { return };
    // A histogram of 20 000 values into 37 bins, accumulated with atomicAdd onto
    // an output that starts at 5.
    let xs: Vec<u32> = (0..20_000u32)
        .map(|i| i.wrapping_mul(2654435761) >> 7)
        .collect();
    let x = Array::from_slice_on(&xs, &[xs.len()], &dev).unwrap();
    let k = WgslKernel::new(
        "histogram",
        &["x"],
        &["hist"],
        "atomicAdd(&hist[x[global_id.x] % hist_size()], 1i);",
    )
    .atomic_outputs(true);
    let mut l = Launch::elementwise(&[37], DType::I32).init_value(5.0);
    l.grid = [xs.len() as u32, 1, 1];
    let h = k
        .call(&[&x], &l)
        .unwrap()
        .remove(0)
        .to_vec::<i32>()
        .unwrap();
    let mut want = vec![5i32; 37];
    for v in &xs {
        want[(*v % 37) as usize] += 1;
    }
    assert_eq!(h, want);
    // init_value alone, on f32 and f16 outputs the body writes only in part.
    let part = WgslKernel::new(
        "part",
        &[],
        &["y"],
        "if (global_id.x % 3u == 0u) { y[global_id.x] = T(1); }",
    );
    for d in [DType::F32, DType::F16] {
        if dev.check_dtype(d).is_err() {
            continue;
        }
        let l = Launch::elementwise(&[10], d)
            .init_value(-2.5)
            .template("T", Template::DType(d));
        let y = wmx_core::with_device(&dev, || part.call(&[], &l))
            .unwrap()
            .remove(0);
        let y = wmx_core::astype(&y, DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let want: Vec<f32> = (0..10)
            .map(|i| if i % 3 == 0 { 1.0 } else { -2.5 })
            .collect();
        assert_eq!(y, want, "{d}");
    }
    // Atomics on a float output are refused at the call.
    let e = k
        .call(&[&x], &Launch::elementwise(&[37], DType::F32))
        .unwrap_err();
    assert!(e.to_string().contains("atomics are i32 or u32"), "{e}");
}
