//! Extensions on every backend: a custom primitive with CPU and WebGPU code inside
//! grad, jvp and vmap, and custom functions' rules, against f64 references.

use super::{expect_err, ok};
use crate::rng::Rng;
use std::sync::Arc;
use wmx_core::{
    self as wmx, Array, CpuOutput, CustomFunction, CustomPrimitive, DType, Device, GpuContext,
    Result, View, cpu::CpuBuffer,
};

/// `x^3` of an f32 array of any layout, with its own CPU and WGSL code.
#[derive(Debug, PartialEq)]
struct Cube;

/// Strided elementwise cube; parameters `[n, ndim, offset, shape.., strides..]`.
const CUBE_WGSL: &str = "
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x;
    if (i >= p[0]) { return; }
    let nd = p[1];
    var r = i;
    var o = i32(p[2]);
    for (var d = i32(nd) - 1; d >= 0; d--) {
        let e = p[3u + u32(d)];
        o += i32(r % e) * bitcast<i32>(p[3u + nd + u32(d)]);
        r /= e;
    }
    let v = x[u32(o)];
    y[i] = v * v * v;
}";

/// A primitive whose code fails on every backend (for error-reporting tests).
#[derive(Debug)]
pub(crate) struct Failing;

impl CustomPrimitive for Failing {
    fn name(&self) -> &str {
        "failing"
    }
    fn eval_cpu(&self, _: &[View<'_, CpuBuffer>], _: &mut CpuOutput<'_>) -> Result<()> {
        Err(wmx::Error::invalid(
            "failing primitive",
            "fails when computed",
        ))
    }
    fn eval_webgpu(&self, _: &mut GpuContext<'_>) -> Result<()> {
        Err(wmx::Error::invalid(
            "failing primitive",
            "fails when computed",
        ))
    }
}

fn cube(x: &Array) -> Result<Array> {
    wmx::custom(
        Arc::new(Cube),
        std::slice::from_ref(x),
        x.shape(),
        x.dtype(),
    )
}

impl CustomPrimitive for Cube {
    fn name(&self) -> &str {
        "cube"
    }
    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let x = &inputs[0];
        if x.dtype != DType::F32 {
            return Err(wmx::Error::invalid(
                "cube",
                format!("takes f32, not {}", x.dtype),
            ));
        }
        let (src, l) = (x.buffer.as_slice::<f32>(), x.layout);
        for (i, o) in out.buffer.as_mut_slice::<f32>().iter_mut().enumerate() {
            let (mut r, mut off) = (i, l.offset as isize);
            for d in (0..l.ndim()).rev() {
                off += (r % l.shape[d]) as isize * l.strides[d];
                r /= l.shape[d];
            }
            let v = src[off as usize];
            *o = v * v * v;
        }
        Ok(())
    }
    fn eval_webgpu(&self, gpu: &mut GpuContext<'_>) -> Result<()> {
        let ev = gpu.get::<wmx_webgpu::CustomEval>()?;
        let x = ev.inputs()[0].clone();
        if x.dtype != DType::F32 {
            return Err(wmx::Error::invalid(
                "cube",
                format!("takes f32, not {}", x.dtype),
            ));
        }
        let pipe = ev.pipeline(&wmx_webgpu::UserModule {
            label: "cube",
            source: CUBE_WGSL,
            entry: "main",
            outputs: 1,
            inputs: 1,
        })?;
        let n = x.layout.numel() as u32;
        let mut params = vec![n, x.layout.ndim() as u32, x.layout.offset as u32];
        params.extend(x.layout.shape.iter().map(|&d| d as u32));
        params.extend(x.layout.strides.iter().map(|&s| s as i32 as u32));
        let y = ev.output().buffer.clone();
        ev.dispatch(&pipe, &[&y, &x.buffer], &params, [n.div_ceil(64), 1, 1])
    }
    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Self>()
            .is_some_and(|o| o == self)
    }
    fn jvp(&self, x: &[Array], _: &Array, t: &[Option<Array>]) -> Result<Option<Array>> {
        let Some(t) = &t[0] else { return Ok(None) };
        Ok(Some(wmx::multiply(t, &three_x2(&x[0])?)?))
    }
    fn vjp(&self, x: &[Array], _: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        Ok(vec![Some(wmx::multiply(ct, &three_x2(&x[0])?)?)])
    }
    fn vmap(&self, x: &[Array], _: &[bool]) -> Result<Array> {
        cube(&x[0])
    }
}

fn three_x2(x: &Array) -> Result<Array> {
    wmx::multiply(&wmx::square(x)?, &wmx::scalar(3.0, x.dtype())?)
}

fn read(a: &Array) -> Vec<f64> {
    ok("read", a.to_vec::<f32>())
        .iter()
        .map(|v| *v as f64)
        .collect()
}

fn close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

/// `x^3`, whose code first reads another pending array of its device (a nested
/// eval inside the primitive's code) and keeps what it read.
struct CubeAfterPeek {
    other: Array,
    seen: std::sync::Mutex<Option<f32>>,
}

impl std::fmt::Debug for CubeAfterPeek {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CubeAfterPeek")
    }
}

impl CubeAfterPeek {
    fn peek(&self) -> Result<()> {
        *self.seen.lock().unwrap() = Some(self.other.item::<f32>()?);
        Ok(())
    }
}

impl CustomPrimitive for CubeAfterPeek {
    fn name(&self) -> &str {
        "cube_after_peek"
    }
    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        self.peek()?;
        Cube.eval_cpu(inputs, out)
    }
    fn eval_webgpu(&self, gpu: &mut GpuContext<'_>) -> Result<()> {
        self.peek()?;
        Cube.eval_webgpu(gpu)
    }
}

/// Cube's code without derivative or batching rules (as a GPU kernel's).
#[derive(Debug)]
struct CubeNoRules;

impl CustomPrimitive for CubeNoRules {
    fn name(&self) -> &str {
        "cube_no_rules"
    }
    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        Cube.eval_cpu(inputs, out)
    }
    fn eval_webgpu(&self, gpu: &mut GpuContext<'_>) -> Result<()> {
        Cube.eval_webgpu(gpu)
    }
}

/// A primitive's code may evaluate other arrays of its device, as user code may
/// anywhere: on the GPU the peeked array's work is recorded after what came before
/// the primitive, and the primitive's after it (it deadlocked on the recording
/// lock).
pub fn custom_code_may_evaluate_other_arrays(dev: &Device) {
    // On a thread of its own, so a deadlock fails the case instead of hanging it.
    let (done, finished) = std::sync::mpsc::channel();
    let dev = dev.clone();
    std::thread::spawn(move || {
        nested_eval(&dev);
        let _ = done.send(());
    });
    match finished.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("a custom primitive reading another array did not finish in 120 s")
        }
        Err(_) => panic!("the nested eval case failed (its panic is printed above)"),
    }
}

fn nested_eval(dev: &Device) {
    let x = ok("x", Array::from_slice_on(&[1.0f32, -2.0, 3.0], &[3], dev));
    // Pending work on both sides: the input is computed before the primitive, the
    // peeked value only when its code asks for it.
    let x2 = ok(
        "x + 1",
        wmx::add(&x, &ok("one", wmx::scalar(1.0, DType::F32))),
    );
    let other = ok(
        "sum",
        wmx::sum(
            &ok(
                "x * 10",
                wmx::multiply(&x, &ok("ten", wmx::scalar(10.0, DType::F32))),
            ),
            None,
            false,
        ),
    );
    let prim = Arc::new(CubeAfterPeek {
        other,
        seen: std::sync::Mutex::new(None),
    });
    let y = ok(
        "custom",
        wmx::custom(prim.clone(), std::slice::from_ref(&x2), &[3], DType::F32),
    );
    close("cube(x + 1)", &read(&y), &[8.0, -1.0, 64.0]);
    assert_eq!(*prim.seen.lock().unwrap(), Some(20.0));
}

/// A custom primitive (CPU code, WGSL code, rules) on views, inside grad, jvp,
/// vmap and grad of vmap, against f64 references.
pub fn custom_primitive_in_transforms(dev: &Device) {
    let mut rng = Rng::new(41);
    let (r, c) = (7, 33);
    let xs: Vec<f32> = (0..r * c).map(|_| rng.uniform(-2.0, 2.0) as f32).collect();
    let x = ok("x", Array::from_slice_on(&xs, &[r, c], dev));
    let xt = ok("transpose", wmx::transpose(&x, None));
    // Row-major values of x^T, the reference's input.
    let xtv: Vec<f64> = (0..c * r).map(|k| xs[(k % r) * c + k / r] as f64).collect();
    close(
        "cube(x^T)",
        &read(&ok("cube", cube(&xt))),
        &xtv.iter().map(|v| v.powi(3)).collect::<Vec<_>>(),
    );
    // grad of sum(cube(x^T) * w): 3 x^2 w, through the transpose.
    let ws: Vec<f32> = (0..r * c).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
    let w = ok("w", Array::from_slice_on(&ws, &[c, r], dev));
    let loss = |a: &[Array]| -> Result<Vec<Array>> {
        let y = cube(&wmx::transpose(&a[0], None)?)?;
        Ok(vec![wmx::sum(&wmx::multiply(&y, &w)?, None, false)?])
    };
    let g = ok("grad", wmx::grad(loss, &[0])(std::slice::from_ref(&x)));
    let want: Vec<f64> = (0..r * c)
        .map(|k| {
            let (i, j) = (k / c, k % c);
            3.0 * (xs[k] as f64).powi(2) * ws[j * r + i] as f64
        })
        .collect();
    close("grad", &read(&g[0]), &want);
    // jvp with tangent ones: 3 x^2.
    let ones = ok(
        "ones",
        wmx::with_device(dev, || wmx::ones(&[r, c], DType::F32)),
    );
    let (_, t) = ok(
        "jvp",
        wmx::jvp(
            |a: &[Array]| Ok(vec![cube(&a[0])?]),
            std::slice::from_ref(&x),
            &[ones],
        ),
    );
    close(
        "jvp",
        &read(&t[0]),
        &xs.iter()
            .map(|v| 3.0 * (*v as f64).powi(2))
            .collect::<Vec<_>>(),
    );
    // vmap over columns (batch axis 1), then grad of that vmap.
    let v = ok(
        "vmap",
        wmx::vmap(|a: &[Array]| Ok(vec![cube(&a[0])?]), &[Some(1)], &[0])(std::slice::from_ref(&x)),
    );
    close(
        "vmap",
        &read(&v[0]),
        &xtv.iter().map(|v| v.powi(3)).collect::<Vec<_>>(),
    );
    let gv = ok(
        "grad of vmap",
        wmx::grad(
            |a: &[Array]| {
                let v = wmx::vmap(|b: &[Array]| Ok(vec![cube(&b[0])?]), &[Some(0)], &[0])(a)?;
                Ok(vec![wmx::sum(&v[0], None, false)?])
            },
            &[0],
        )(std::slice::from_ref(&x)),
    );
    close(
        "grad of vmap",
        &read(&gv[0]),
        &xs.iter()
            .map(|v| 3.0 * (*v as f64).powi(2))
            .collect::<Vec<_>>(),
    );
    // Equivalence, and an error from the code reaching the user at that op.
    assert!(Cube.is_equivalent(&Cube));
    let xi = ok("xi", wmx::astype(&x, DType::I32));
    expect_err(
        "cube of i32",
        cube(&xi).and_then(|y| y.eval()),
        &["cube", "takes f32", "i32"],
    );
    close(
        "after the error",
        &read(&ok("cube", cube(&x))),
        &xs.iter().map(|v| (*v as f64).powi(3)).collect::<Vec<_>>(),
    );
}

/// Custom functions: the rule given is the one used (a deliberately different
/// derivative shows it), a missing rule falls back to `f` itself, several outputs,
/// vmap rules, rules over a forward whose primitive has none, and rules returning
/// the wrong number of arrays.
pub fn custom_function_rules(dev: &Device) {
    let xs = [0.5f32, -1.25, 2.0, 3.5];
    let x = ok("x", Array::from_slice_on(&xs, &[4], dev));
    let cube_fn = |a: &[Array]| Ok(vec![wmx::multiply(&wmx::square(&a[0])?, &a[0])?]);
    let sum0 = |f: CustomFunction| {
        move |a: &[Array]| -> Result<Vec<Array>> {
            Ok(vec![wmx::sum(&f.call(a)?[0], None, false)?])
        }
    };
    // vjp rule: 7 * ct instead of 3x^2 ct, so the result tells which ran.
    let seven = CustomFunction::new(cube_fn).name("seven").vjp(|_, _, ct| {
        Ok(vec![Some(wmx::multiply(
            &ct[0],
            &wmx::scalar(7.0, DType::F32)?,
        )?)])
    });
    let g = ok(
        "grad with the vjp rule",
        wmx::grad(sum0(seven.clone()), &[0])(std::slice::from_ref(&x)),
    );
    close("vjp rule", &read(&g[0]), &[7.0; 4]);
    // The values are f's.
    close(
        "values",
        &read(&seven.call(std::slice::from_ref(&x)).unwrap()[0]),
        &xs.map(|v| (v as f64).powi(3)),
    );
    // No jvp rule: forward mode differentiates f (3x^2).
    let ones = ok(
        "ones",
        wmx::with_device(dev, || wmx::ones(&[4], DType::F32)),
    );
    let (_, t) = ok(
        "jvp fallback",
        wmx::jvp(
            |a: &[Array]| seven.call(a),
            std::slice::from_ref(&x),
            std::slice::from_ref(&ones),
        ),
    );
    close(
        "jvp fallback",
        &read(&t[0]),
        &xs.map(|v| 3.0 * (v as f64).powi(2)),
    );
    // A jvp rule and no vjp rule: forward uses the rule, reverse falls back.
    let jv = CustomFunction::new(cube_fn).jvp(|_, t| {
        Ok(vec![wmx::multiply(
            t[0].as_ref().unwrap(),
            &wmx::scalar(5.0, DType::F32)?,
        )?])
    });
    let (_, t) = ok(
        "jvp rule",
        wmx::jvp(
            |a: &[Array]| jv.call(a),
            std::slice::from_ref(&x),
            std::slice::from_ref(&ones),
        ),
    );
    close("jvp rule", &read(&t[0]), &[5.0; 4]);
    let g = ok(
        "vjp fallback",
        wmx::grad(sum0(jv), &[0])(std::slice::from_ref(&x)),
    );
    close(
        "vjp fallback",
        &read(&g[0]),
        &xs.map(|v| 3.0 * (v as f64).powi(2)),
    );
    // Grad of grad through a rule built of ops: d/dx sum(ct * 3x^2) = 6x.
    let exact = CustomFunction::new(cube_fn)
        .vjp(|x, _, ct| Ok(vec![Some(wmx::multiply(&ct[0], &three_x2(&x[0])?)?)]));
    let inner = wmx::grad(sum0(exact), &[0]);
    let gg = ok(
        "grad of grad",
        wmx::grad(
            move |a: &[Array]| Ok(vec![wmx::sum(&inner(a)?[0], None, false)?]),
            &[0],
        )(std::slice::from_ref(&x)),
    );
    close("grad of grad", &read(&gg[0]), &xs.map(|v| 6.0 * v as f64));
    // Two inputs, two outputs: (a*b, a+b) with the exact rule; loss 2 sum(p) + 3 sum(s).
    let two = CustomFunction::new(|a: &[Array]| {
        Ok(vec![wmx::multiply(&a[0], &a[1])?, wmx::add(&a[0], &a[1])?])
    })
    .vjp(|p, _, ct| {
        let ga = wmx::add(&wmx::multiply(&ct[0], &p[1])?, &ct[1])?;
        let gb = wmx::add(&wmx::multiply(&ct[0], &p[0])?, &ct[1])?;
        Ok(vec![Some(ga), Some(gb)])
    });
    let bs = [1.5f32, 0.25, -2.0, 4.0];
    let b = ok("b", Array::from_slice_on(&bs, &[4], dev));
    let g = ok(
        "two outputs",
        wmx::grad(
            |a: &[Array]| {
                let o = two.call(a)?;
                let l = wmx::add(
                    &wmx::multiply(
                        &wmx::sum(&o[0], None, false)?,
                        &wmx::scalar(2.0, DType::F32)?,
                    )?,
                    &wmx::multiply(
                        &wmx::sum(&o[1], None, false)?,
                        &wmx::scalar(3.0, DType::F32)?,
                    )?,
                )?;
                Ok(vec![l])
            },
            &[0, 1],
        )(&[x.clone(), b.clone()]),
    );
    close("d/da", &read(&g[0]), &bs.map(|v| 2.0 * v as f64 + 3.0));
    close("d/db", &read(&g[1]), &xs.map(|v| 2.0 * v as f64 + 3.0));
    // vmap: the rule runs (it adds 100, so it shows), or f is batched without one.
    let m = ok(
        "m",
        Array::from_slice_on(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], dev),
    );
    let with_rule = CustomFunction::new(cube_fn).vmap(|a, batched| {
        assert!(batched[0]);
        Ok(vec![wmx::add(
            &wmx::multiply(&wmx::square(&a[0])?, &a[0])?,
            &wmx::scalar(100.0, DType::F32)?,
        )?])
    });
    let v = ok(
        "vmap rule",
        wmx::vmap(|a: &[Array]| with_rule.call(a), &[Some(0)], &[0])(std::slice::from_ref(&m)),
    );
    close(
        "vmap rule",
        &read(&v[0]),
        &[101.0, 108.0, 127.0, 164.0, 225.0, 316.0],
    );
    let v = ok(
        "vmap fallback",
        wmx::vmap(|a: &[Array]| seven.call(a), &[Some(1)], &[0])(std::slice::from_ref(&m)),
    );
    close(
        "vmap fallback",
        &read(&v[0]),
        &[1.0, 64.0, 8.0, 125.0, 27.0, 216.0],
    );
    // Rules over a forward whose primitive has none (as linalg's GPU kernels):
    // forward mode and vmap use the function's rules and never reach it.
    let opaque = CustomFunction::new(|a: &[Array]| {
        Ok(vec![wmx::custom(
            Arc::new(CubeNoRules),
            &a[..1],
            a[0].shape(),
            a[0].dtype(),
        )?])
    })
    .jvp(|x, t| Ok(vec![wmx::multiply(t[0].as_ref().unwrap(), &three_x2(&x[0])?)?]))
    .vmap(|a, _| Ok(vec![cube(&a[0])?]));
    let (y, t) = ok(
        "jvp over a primitive without rules",
        wmx::jvp(
            |a: &[Array]| opaque.call(a),
            std::slice::from_ref(&x),
            std::slice::from_ref(&ones),
        ),
    );
    close("its values", &read(&y[0]), &xs.map(|v| (v as f64).powi(3)));
    close("its jvp", &read(&t[0]), &xs.map(|v| 3.0 * (v as f64).powi(2)));
    let v = ok(
        "vmap over a primitive without rules",
        wmx::vmap(|a: &[Array]| opaque.call(a), &[Some(0)], &[0])(std::slice::from_ref(&m)),
    );
    close("its vmap", &read(&v[0]), &[1.0, 8.0, 27.0, 64.0, 125.0, 216.0]);
    // A rule returning the wrong number of arrays: an Err naming the function.
    let bad = CustomFunction::new(cube_fn)
        .name("bad_rule")
        .vjp(|_, _, _| Ok(vec![]));
    expect_err(
        "vjp count",
        wmx::grad(sum0(bad), &[0])(std::slice::from_ref(&x)),
        &["bad_rule", "vjp", "0"],
    );
    let bad = CustomFunction::new(cube_fn)
        .name("bad_jvp")
        .jvp(|_, _| Ok(vec![]));
    expect_err(
        "jvp count",
        wmx::jvp(
            |a: &[Array]| bad.call(a),
            std::slice::from_ref(&x),
            std::slice::from_ref(&ones),
        ),
        &["bad_jvp", "jvp"],
    );
}
