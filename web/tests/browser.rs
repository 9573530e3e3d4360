//! wmx's JS API in a real browser, on the browser's WebGPU (headless Chromium's
//! SwiftShader adapter in CI), checked against independent f64 reference loops.
//!
//! Run with `scripts/test.sh` (or `web/test.sh`): wasm-bindgen-test-runner drives
//! Chromium through chromedriver with `--enable-unsafe-webgpu` (web/webdriver.json).
//! Every test goes through the same functions the JS API exports; arrays are
//! passed as JS values, as a page would.
#![cfg(target_arch = "wasm32")]

use js_sys::{Float32Array, Int32Array, Uint8Array, Uint16Array, Uint32Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;
use wmx_core::{bf16, f16};
use wmx_web as wmx;
use wmx_web::{ArrayInput, NdArray, ShapeArg};

wasm_bindgen_test_configure!(run_in_browser);

// ---------------------------------------------------------------- helpers

fn get(o: &JsValue, k: &str) -> JsValue {
    js_sys::Reflect::get(o, &JsValue::from_str(k)).unwrap()
}

/// Opens WebGPU (never the CPU fallback: a missing adapter fails the test) and
/// makes it the default device.
async fn gpu() -> JsValue {
    let info = wmx::init(o(JsValue::from_str("webgpu")))
        .await
        .unwrap_or_else(|e| panic!("WebGPU did not open: {:?}", JsValue::from(e)));
    wmx::set_device(ty(JsValue::from_str("webgpu"))).unwrap();
    info.into()
}

async fn has_f16() -> bool {
    get(&gpu().await, "f16").as_bool().unwrap()
}

fn shape(s: &[usize]) -> ShapeArg {
    s.iter()
        .map(|&d| JsValue::from_f64(d as f64))
        .collect::<js_sys::Array>()
        .unchecked_into()
}

/// A JS value as the extern type an export takes (those types exist for the
/// TypeScript signatures only; the exports check the values themselves).
fn ty<T: JsCast>(v: impl Into<JsValue>) -> T {
    v.into().unchecked_into()
}

/// An optional argument of an export: `undefined` and `null` are `None`.
fn o<T: JsCast>(v: impl Into<JsValue>) -> Option<T> {
    let v = v.into();
    (!v.is_undefined() && !v.is_null()).then(|| v.unchecked_into())
}

/// Awaits a Promise an export returned.
async fn wait(p: impl Into<JsValue>) -> Result<JsValue, JsValue> {
    JsFuture::from(p.into().unchecked_into::<js_sys::Promise>()).await
}

fn v(a: NdArray) -> ArrayInput {
    JsValue::from(a).unchecked_into()
}

fn v_i64(a: NdArray) -> ArrayInput {
    assert_eq!(a.dtype().unwrap(), "i64");
    v(a)
}

/// An array of `dtype` holding `x` (converted as JS numbers would be).
fn typed(x: &[f64], s: &[usize], dtype: &str) -> ArrayInput {
    let data: JsValue = match dtype {
        "f32" => Float32Array::from(&x.iter().map(|&a| a as f32).collect::<Vec<_>>()[..]).into(),
        "i32" => Int32Array::from(&x.iter().map(|&a| a as i32).collect::<Vec<_>>()[..]).into(),
        "u32" => Uint32Array::from(&x.iter().map(|&a| a as u32).collect::<Vec<_>>()[..]).into(),
        "u8" | "bool" => {
            Uint8Array::from(&x.iter().map(|&a| a as u8).collect::<Vec<_>>()[..]).into()
        }
        "f16" => Uint16Array::from(
            &x.iter()
                .map(|&a| f16::from_f64(a).to_bits())
                .collect::<Vec<_>>()[..],
        )
        .into(),
        "bf16" => Uint16Array::from(
            &x.iter()
                .map(|&a| bf16::from_f64(a).to_bits())
                .collect::<Vec<_>>()[..],
        )
        .into(),
        d => panic!("no typed array for {d}"),
    };
    let a = wmx::array(
        data.unchecked_ref(),
        Some(shape(s)),
        o(JsValue::from_str(dtype)),
    )
    .unwrap();
    assert_eq!(a.dtype().unwrap(), dtype);
    v(a)
}

fn nd(a: &JsValue) -> NdArray {
    // Round trip through the API: an op that returns the same array as a handle.
    wmx::reshape(a.unchecked_ref(), ty(get(a, "shape"))).unwrap()
}

/// Reads any array as f64 through `data()`, checking the typed array's class.
async fn read(a: &JsValue) -> Vec<f64> {
    let h = nd(a);
    let dtype = h.dtype().unwrap();
    let data = wait(h.data().unwrap()).await.unwrap();
    let class = get(&get(&data, "constructor"), "name").as_string().unwrap();
    let want = match dtype.as_str() {
        "f32" => "Float32Array",
        "i32" => "Int32Array",
        "u32" => "Uint32Array",
        "u8" | "bool" => "Uint8Array",
        "f16" | "bf16" => "Uint16Array",
        // complex64: the real and imaginary parts in turn.
        "c64" => "Float32Array",
        d => panic!("unexpected dtype {d}"),
    };
    assert_eq!(class, want, "data() of a {dtype} array");
    match dtype.as_str() {
        "f32" | "c64" => data
            .unchecked_into::<Float32Array>()
            .to_vec()
            .into_iter()
            .map(f64::from)
            .collect(),
        "i32" => data
            .unchecked_into::<Int32Array>()
            .to_vec()
            .into_iter()
            .map(f64::from)
            .collect(),
        "u32" => data
            .unchecked_into::<Uint32Array>()
            .to_vec()
            .into_iter()
            .map(f64::from)
            .collect(),
        "u8" | "bool" => data
            .unchecked_into::<Uint8Array>()
            .to_vec()
            .into_iter()
            .map(f64::from)
            .collect(),
        "f16" => data
            .unchecked_into::<Uint16Array>()
            .to_vec()
            .into_iter()
            .map(|b| f16::from_bits(b).to_f64())
            .collect(),
        "bf16" => data
            .unchecked_into::<Uint16Array>()
            .to_vec()
            .into_iter()
            .map(|b| bf16::from_bits(b).to_f64())
            .collect(),
        _ => unreachable!(),
    }
}

fn dtype_of(a: &JsValue) -> String {
    get(a, "dtype").as_string().unwrap()
}

fn shape_of(a: &JsValue) -> Vec<usize> {
    js_sys::Array::from(&get(a, "shape"))
        .iter()
        .map(|x| x.as_f64().unwrap() as usize)
        .collect()
}

/// Rounds an f64 result to `dtype` the way the device stores it.
fn round_to(x: f64, dtype: &str) -> f64 {
    match dtype {
        "f32" => x as f32 as f64,
        "f16" => f16::from_f64(x).to_f64(),
        "bf16" => bf16::from_f64(x).to_f64(),
        _ => x,
    }
}

/// Relative tolerance per float dtype (f16/bf16 are computed in f32 and rounded once).
fn tol(dtype: &str) -> f64 {
    match dtype {
        "f32" => 4e-6,
        "f16" => 2e-3,
        "bf16" => 1.6e-2,
        _ => 0.0,
    }
}

fn close(got: &[f64], want: &[f64], rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        assert!(
            ok,
            "{what}: element {i}: got {g}, want {w} (rtol {rtol}, atol {atol})"
        );
    }
}

/// Deterministic pseudo-random values in [lo, hi).
fn rand(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

fn ints(n: usize, seed: u64, lo: i64, hi: i64) -> Vec<f64> {
    rand(n, seed, lo as f64, hi as f64)
        .into_iter()
        .map(|x| x.floor())
        .collect()
}

fn err_msg(e: wasm_bindgen::JsError) -> String {
    JsValue::from(e)
        .unchecked_into::<js_sys::Error>()
        .message()
        .into()
}

// ---------------------------------------------------------------- device

#[wasm_bindgen_test]
async fn init_chooses_browser_webgpu() {
    let info = wmx::init(None).await.unwrap();
    assert_eq!(
        get(&info, "device").as_string().unwrap(),
        "webgpu",
        "auto must pick WebGPU here"
    );
    assert_eq!(get(&info, "backend").as_string().unwrap(), "BrowserWebGpu");
    assert_eq!(get(&info, "fallback").as_bool(), Some(false));
    let name = get(&info, "adapter").as_string().unwrap();
    assert!(!name.is_empty(), "adapter name");
    web_sys::console::log_1(&JsValue::from_str(&format!(
        "adapter: {name}; f16 {:?}; max buffer {:?}; max binding {:?}",
        get(&info, "f16"),
        get(&info, "maxBufferSize"),
        get(&info, "maxStorageBufferBindingSize")
    )));
    // Arrays created now live on the GPU.
    let a = wmx::ones(shape(&[3]), None).unwrap();
    assert_eq!(a.device().unwrap(), "webgpu");
    // The browser has no subgroups through wgpu: the fallback kernels run.
    assert_eq!(get(&info, "subgroups").as_bool(), Some(false));
}

#[wasm_bindgen_test]
async fn cpu_device_and_transfers() {
    gpu().await;
    let x = rand(1000, 1, -2.0, 2.0);
    let g = typed(&x, &[1000], "f32");
    // GPU → CPU and back without blocking.
    let c: JsValue = wait(nd(&g).to_device(ty(JsValue::from_str("cpu"))).unwrap())
        .await
        .unwrap();
    assert_eq!(get(&c, "device").as_string().unwrap(), "cpu");
    let s_cpu = read(&v(wmx::sum(c.unchecked_ref(), None, None).unwrap())).await[0];
    let s_gpu = read(&v(wmx::sum(&g, None, None).unwrap())).await[0];
    let want: f64 = x.iter().map(|&a| a as f32 as f64).sum();
    close(
        &[s_cpu, s_gpu],
        &[want, want],
        1e-5,
        1e-4,
        "sum on cpu and webgpu",
    );
    // The CPU device as default.
    let info = wmx::init(o(JsValue::from_str("cpu"))).await.unwrap();
    assert_eq!(get(&info, "device").as_string().unwrap(), "cpu");
    assert_eq!(
        wmx::ones(shape(&[2]), None).unwrap().device().unwrap(),
        "cpu"
    );
    gpu().await;
}

// ---------------------------------------------------------------- elementwise

type Ref2 = fn(f64, f64) -> f64;

async fn check_binary(op: &str, dtype: &str, a: &[f64], b: &[f64], reference: Ref2) {
    let n = a.len();
    let (x, y) = (typed(a, &[n], dtype), typed(b, &[n], dtype));
    let r = match op {
        "add" => wmx::add(&x, &y),
        "subtract" => wmx::subtract(&x, &y),
        "multiply" => wmx::multiply(&x, &y),
        "divide" => wmx::divide(&x, &y),
        "maximum" => wmx::maximum(&x, &y),
        "minimum" => wmx::minimum(&x, &y),
        "power" => wmx::power(&x, &y),
        "floorDivide" => wmx::floor_divide(&x, &y),
        "remainder" => wmx::remainder(&x, &y),
        "less" => wmx::less(&x, &y),
        "equal" => wmx::equal(&x, &y),
        "logicalAnd" => wmx::logical_and(&x, &y),
        "bitwiseXor" => wmx::bitwise_xor(&x, &y),
        "rightShift" => wmx::right_shift(&x, &y),
        o => panic!("{o}"),
    }
    .unwrap();
    let r = v(r);
    let out_dtype = dtype_of(&r);
    // Inputs as the device holds them.
    let (qa, qb): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|&t| round_to(t, dtype)).collect(),
        b.iter().map(|&t| round_to(t, dtype)).collect(),
    );
    let want: Vec<f64> = qa
        .iter()
        .zip(&qb)
        .map(|(&p, &q)| round_to(reference(p, q), &out_dtype))
        .collect();
    let got = read(&r).await;
    let what = format!("{op} on {dtype} ({n} elements)");
    close(
        &got,
        &want,
        tol(&out_dtype) * if op == "power" { 4.0 } else { 1.0 },
        0.0,
        &what,
    );
}

fn wrap_i32(x: f64) -> f64 {
    (x as i64 as i32) as f64
}
fn wrap_u32(x: f64) -> f64 {
    (x as i64 as u32) as f64
}
fn wrap_u8(x: f64) -> f64 {
    (x as i64 as u8) as f64
}

#[wasm_bindgen_test]
async fn binary_ops_every_dtype() {
    let f16 = has_f16().await;
    // 3001: not a multiple of 4 or of a workgroup, so tails are exercised.
    let n = 3001;
    let a = rand(n, 2, -8.0, 8.0);
    let b = rand(n, 3, 0.25, 4.0);
    let mut floats = vec!["f32", "bf16"];
    if f16 {
        floats.push("f16");
    }
    for dt in floats {
        check_binary("add", dt, &a, &b, |p, q| p + q).await;
        check_binary("subtract", dt, &a, &b, |p, q| p - q).await;
        check_binary("multiply", dt, &a, &b, |p, q| p * q).await;
        check_binary("divide", dt, &a, &b, |p, q| p / q).await;
        check_binary("maximum", dt, &a, &b, f64::max).await;
        check_binary("minimum", dt, &a, &b, f64::min).await;
        check_binary("less", dt, &a, &b, |p, q| (p < q) as u8 as f64).await;
    }
    check_binary("power", "f32", &b, &rand(n, 4, -2.0, 2.0), f64::powf).await;

    let ia = ints(n, 5, -1000, 1000);
    let ib: Vec<f64> = ints(n, 6, -50, 50)
        .into_iter()
        .map(|x| if x == 0.0 { 7.0 } else { x })
        .collect();
    check_binary("add", "i32", &ia, &ib, |p, q| wrap_i32(p + q)).await;
    check_binary("multiply", "i32", &ia, &ib, |p, q| wrap_i32(p * q)).await;
    check_binary("floorDivide", "i32", &ia, &ib, |p, q| (p / q).floor()).await;
    check_binary("remainder", "i32", &ia, &ib, |p, q| p - q * (p / q).floor()).await;
    check_binary("bitwiseXor", "i32", &ia, &ib, |p, q| {
        ((p as i32) ^ (q as i32)) as f64
    })
    .await;
    // Shifts by -50..50: past the bit width (or negative) 0, or -1 for a
    // negative value shifted right.
    check_binary("rightShift", "i32", &ia, &ib, |p, q| {
        if (0.0..32.0).contains(&q) {
            ((p as i32) >> (q as u32)) as f64
        } else if p < 0.0 {
            -1.0
        } else {
            0.0
        }
    })
    .await;
    // i32 wraps (two's complement).
    let big = [2147483647.0, -2147483648.0, 2000000000.0];
    let one = [1.0, -1.0, 2000000000.0];
    check_binary("add", "i32", &big, &one, |p, q| wrap_i32(p + q)).await;

    let ua = ints(n, 7, 0, 100000);
    let ub = ints(n, 8, 1, 100000);
    check_binary("subtract", "u32", &ua, &ub, |p, q| wrap_u32(p - q)).await;
    check_binary("multiply", "u32", &ua, &ub, |p, q| wrap_u32(p * q)).await;
    check_binary("floorDivide", "u32", &ua, &ub, |p, q| (p / q).floor()).await;

    let ba = ints(n, 9, 0, 256);
    let bb = ints(n, 10, 0, 256);
    check_binary("add", "u8", &ba, &bb, |p, q| wrap_u8(p + q)).await;
    check_binary("maximum", "u8", &ba, &bb, f64::max).await;
    check_binary("equal", "u8", &ba, &ba, |p, q| (p == q) as u8 as f64).await;

    let la = ints(n, 11, 0, 2);
    let lb = ints(n, 12, 0, 2);
    check_binary("logicalAnd", "bool", &la, &lb, |p, q| {
        (p != 0.0 && q != 0.0) as u8 as f64
    })
    .await;
}

#[wasm_bindgen_test]
async fn unary_ops_and_broadcasting() {
    gpu().await;
    let n = 2049;
    let pos = rand(n, 13, 0.1, 6.0);
    let sym = rand(n, 21, -std::f64::consts::PI, std::f64::consts::PI);
    type Op = fn(&ArrayInput) -> Result<NdArray, wasm_bindgen::JsError>;
    // Tolerances from the WGSL spec's accuracy table (f32): exp 3 + 2|x| ULP,
    // log 2^-21 absolute near 1 else 3 ULP, sin 2^-11 absolute on [-π, π], sqrt and
    // tanh inherited from their formulas; the rest exact.
    type Case<'a> = (&'a str, Op, fn(f64) -> f64, &'a [f64], f64, f64);
    let cases: [Case; 9] = [
        ("exp", wmx::exp, f64::exp, &sym, 1e-6, 0.0),
        ("log", wmx::log, f64::ln, &pos, 1e-6, 1e-6),
        ("sqrt", wmx::sqrt, f64::sqrt, &pos, 1e-6, 0.0),
        ("sin", wmx::sin, f64::sin, &sym, 0.0, 1.0 / 2048.0),
        ("cos", wmx::cos, f64::cos, &sym, 0.0, 1.0 / 2048.0),
        ("tanh", wmx::tanh, f64::tanh, &sym, 1e-5, 1e-5),
        ("negative", wmx::negative, |t| -t, &sym, 0.0, 0.0),
        ("square", wmx::square, |t| t * t, &sym, 1.2e-7, 0.0),
        ("floor", wmx::floor, f64::floor, &sym, 0.0, 0.0),
    ];
    for (name, f, r, x, rtol, atol) in cases {
        let xa = typed(x, &[n], "f32");
        let got = read(&v(f(&xa).unwrap())).await;
        let want: Vec<f64> = x.iter().map(|&t| r(t as f32 as f64)).collect();
        // exp: 3 + 2|x| ULP of f32, with |x| <= π.
        let rtol = if name == "exp" {
            rtol.max((3.0 + 2.0 * 3.2) * f32::EPSILON as f64)
        } else {
            rtol
        };
        close(&got, &want, rtol, atol, name);
    }
    // [3, 1] + [4] broadcasts to [3, 4]; a number operand keeps the dtype.
    let col = typed(&[1.0, 2.0, 3.0], &[3, 1], "f32");
    let row = typed(&[10.0, 20.0, 30.0, 40.0], &[4], "f32");
    let s = v(wmx::add(&col, &row).unwrap());
    assert_eq!(shape_of(&s), vec![3, 4]);
    let want: Vec<f64> = (1..=3)
        .flat_map(|i| (1..=4).map(move |j| (i + 10 * j) as f64))
        .collect();
    close(&read(&s).await, &want, 0.0, 0.0, "broadcast add");
    let h = nd(&s).multiply(&ty(JsValue::from_f64(0.5))).unwrap();
    assert_eq!(h.dtype().unwrap(), "f32");
    let want2: Vec<f64> = want.iter().map(|t| t * 0.5).collect();
    close(&read(&v(h)).await, &want2, 0.0, 0.0, "array * number");
}

#[wasm_bindgen_test]
async fn axpby_fused() {
    let f16 = has_f16().await;
    let n = 100_003;
    let x = rand(n, 14, -1.0, 1.0);
    let y = rand(n, 15, -1.0, 1.0);
    let mut dts = vec!["f32", "bf16"];
    if f16 {
        dts.push("f16");
    }
    for dt in dts {
        let r = v(wmx::axpby(&typed(&x, &[n], dt), &typed(&y, &[n], dt), 2.0, -0.5).unwrap());
        assert_eq!(dtype_of(&r), dt);
        let want: Vec<f64> = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| round_to(2.0 * round_to(a, dt) - 0.5 * round_to(b, dt), dt))
            .collect();
        close(
            &read(&r).await,
            &want,
            tol(dt),
            1e-6,
            &format!("axpby {dt}"),
        );
    }
    // Broadcast: [1000, 3] with [3].
    let m = typed(&rand(3000, 16, -1.0, 1.0), &[1000, 3], "f32");
    let b = typed(&[1.0, 2.0, 3.0], &[3], "f32");
    let r = v(wmx::axpby(&m, &b, 1.0, 1.0).unwrap());
    let mv = read(&m).await;
    let want: Vec<f64> = mv
        .iter()
        .enumerate()
        .map(|(i, &t)| round_to(t + (i % 3 + 1) as f64, "f32"))
        .collect();
    close(&read(&r).await, &want, 0.0, 0.0, "axpby broadcast");
}

// ---------------------------------------------------------------- reductions

#[wasm_bindgen_test]
async fn reductions_larger_than_a_workgroup() {
    gpu().await;
    // 1 Mi + 17 elements: many workgroups and a second pass.
    let n = (1 << 20) + 17;
    let x = rand(n, 17, -1.0, 1.0);
    let q: Vec<f64> = x.iter().map(|&t| t as f32 as f64).collect();
    let a = typed(&x, &[n], "f32");
    let sum: f64 = q.iter().sum();
    let got = read(&v(wmx::sum(&a, None, None).unwrap())).await[0];
    // f32 accumulation in a tree: error ~ sqrt(n) ulps of the partial sums.
    close(&[got], &[sum], 1e-4, 0.05, "sum of 1 Mi f32");
    let mx = q.iter().cloned().fold(f64::MIN, f64::max);
    let mn = q.iter().cloned().fold(f64::MAX, f64::min);
    assert_eq!(
        read(&v(wmx::max(&a, None, None).unwrap())).await[0],
        mx,
        "max"
    );
    assert_eq!(
        read(&v(wmx::min(&a, None, None).unwrap())).await[0],
        mn,
        "min"
    );
    let am = read(&v(wmx::argmax(&a, None, None).unwrap())).await[0] as usize;
    assert_eq!(q[am], mx, "argmax points at the max");
    assert_eq!(
        am,
        q.iter().position(|&t| t == mx).unwrap(),
        "argmax is the first max"
    );
    let mean = read(&v(wmx::mean(&a, None, None).unwrap())).await[0];
    close(&[mean], &[sum / n as f64], 1e-3, 1e-6, "mean");

    // Integer sum: exact.
    let ix = ints(n, 18, -1000, 1000);
    let isum: f64 = ix.iter().sum();
    let r = v(wmx::sum(&typed(&ix, &[n], "i32"), None, None).unwrap());
    assert_eq!(dtype_of(&r), "i32");
    assert_eq!(read(&r).await[0], isum, "i32 sum");

    // Rows and columns of a 2-D array; keepdims.
    let (rows, cols) = (300, 517);
    let m = rand(rows * cols, 19, 0.0, 1.0);
    let mq: Vec<f64> = m.iter().map(|&t| t as f32 as f64).collect();
    let ma = typed(&m, &[rows, cols], "f32");
    let by_row: Vec<f64> = (0..rows)
        .map(|i| mq[i * cols..(i + 1) * cols].iter().sum())
        .collect();
    let by_col: Vec<f64> = (0..cols)
        .map(|j| (0..rows).map(|i| mq[i * cols + j]).sum())
        .collect();
    let r1 = v(wmx::sum(&ma, o(JsValue::from_f64(1.0)), Some(true)).unwrap());
    assert_eq!(shape_of(&r1), vec![rows, 1]);
    close(&read(&r1).await, &by_row, 1e-5, 1e-4, "row sums");
    let r0 = v(wmx::sum(&ma, o(JsValue::from_f64(0.0)), None).unwrap());
    close(&read(&r0).await, &by_col, 1e-5, 1e-4, "column sums");
    let maxcol: Vec<f64> = (0..cols)
        .map(|j| (0..rows).map(|i| mq[i * cols + j]).fold(f64::MIN, f64::max))
        .collect();
    close(
        &read(&v(wmx::max(&ma, o(JsValue::from_f64(0.0)), None).unwrap())).await,
        &maxcol,
        0.0,
        0.0,
        "column max",
    );
    // prod and all/any on small inputs.
    let p = typed(&[1.5, -2.0, 3.0, 0.5], &[4], "f32");
    assert_eq!(read(&v(wmx::prod(&p, None, None).unwrap())).await[0], -4.5);
    let bo = typed(&[1.0, 0.0, 1.0], &[3], "bool");
    assert_eq!(read(&v(wmx::all(&bo, None, None).unwrap())).await[0], 0.0);
    assert_eq!(read(&v(wmx::any(&bo, None, None).unwrap())).await[0], 1.0);
}

#[wasm_bindgen_test]
async fn f16_reduction_if_available() {
    if !has_f16().await {
        // Then f16 is a clear error, not wrong numbers.
        let e = err_msg(
            wmx::zeros(shape(&[2]), o(JsValue::from_str("float16")))
                .err()
                .unwrap(),
        );
        assert!(e.contains("does not support dtype f16"), "{e}");
        web_sys::console::log_1(&"adapter lacks SHADER_F16: f16 kernels not run".into());
        return;
    }
    let n = 70_000;
    let x = rand(n, 20, 0.0, 1.0);
    let q: Vec<f64> = x.iter().map(|&t| round_to(t, "f16")).collect();
    let r = v(wmx::sum(&typed(&x, &[n], "f16"), None, None).unwrap());
    assert_eq!(dtype_of(&r), "f16");
    let want = round_to(q.iter().sum::<f64>(), "f16");
    close(
        &read(&r).await,
        &[want],
        2e-3,
        0.0,
        "f16 sum (accumulated in f32)",
    );
}

// ---------------------------------------------------------------- views and casts

#[wasm_bindgen_test]
async fn views_without_copies() {
    gpu().await;
    let (r, c) = (37, 53);
    let base: Vec<f64> = (0..r * c).map(|i| i as f64).collect();
    let a = typed(&base, &[r, c], "f32");
    // Transpose, then an op reads it strided.
    let t = v(nd(&a).t().unwrap());
    assert_eq!(shape_of(&t), vec![c, r]);
    let want_t: Vec<f64> = (0..c)
        .flat_map(|j| (0..r).map(move |i| (i * c + j) as f64))
        .collect();
    close(&read(&t).await, &want_t, 0.0, 0.0, "transpose");
    let t1 = v(wmx::add(&t, &ty(JsValue::from_f64(1.0))).unwrap());
    let want_t1: Vec<f64> = want_t.iter().map(|x| x + 1.0).collect();
    close(&read(&t1).await, &want_t1, 0.0, 0.0, "transpose + 1");
    // Slices with steps, negative included: a[1:30:3, ::-2].
    let sl = js_sys::Array::of2(
        &js_sys::Array::of3(&1.into(), &30.into(), &3.into()),
        &js_sys::Array::of3(&JsValue::NULL, &JsValue::NULL, &(-2).into()),
    );
    let s = v(wmx::slice(&a, ty(sl)).unwrap());
    let rows: Vec<usize> = (1..30).step_by(3).collect();
    let colsr: Vec<usize> = (0..c).rev().step_by(2).collect();
    assert_eq!(shape_of(&s), vec![rows.len(), colsr.len()]);
    let want_s: Vec<f64> = rows
        .iter()
        .flat_map(|&i| colsr.iter().map(move |&j| (i * c + j) as f64))
        .collect();
    close(&read(&s).await, &want_s, 0.0, 0.0, "slice [1:30:3, ::-2]");
    // A reduction over a sliced view.
    let ss = read(&v(wmx::sum(&s, o(JsValue::from_f64(1.0)), None).unwrap())).await;
    let want_ss: Vec<f64> = rows
        .iter()
        .map(|&i| colsr.iter().map(|&j| (i * c + j) as f64).sum())
        .collect();
    close(&ss, &want_ss, 1e-6, 0.0, "sum over a slice");
    // Broadcast view and reshape of a non-contiguous view (a copy).
    let b = v(wmx::broadcast_to(&typed(&[1.0, 2.0], &[2, 1], "f32"), shape(&[2, 3])).unwrap());
    close(
        &read(&b).await,
        &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
        0.0,
        0.0,
        "broadcastTo",
    );
    let rs = v(wmx::reshape(&t, ty(js_sys::Array::of1(&(-1).into()))).unwrap());
    close(
        &read(&rs).await,
        &want_t,
        0.0,
        0.0,
        "reshape of a transpose",
    );
    let e = v(nd(&a).expand_dims(0).unwrap());
    assert_eq!(shape_of(&e), vec![1, r, c]);
    assert_eq!(shape_of(&v(nd(&e).squeeze(None).unwrap())), vec![r, c]);
}

#[wasm_bindgen_test]
async fn astype_casts() {
    let f16 = has_f16().await;
    let x = [-3.7, -0.5, 0.0, 0.5, 2.5, 3.99, 300.0, -1e10, 1e10];
    let a = typed(&x, &[x.len()], "f32");
    let to = |d: &str| v(wmx::astype(&a, ty(JsValue::from_str(d))).unwrap());
    // float → int truncates toward zero and saturates.
    let i32s: Vec<f64> = x.iter().map(|&t| (t as f32 as i32) as f64).collect();
    close(&read(&to("i32")).await, &i32s, 0.0, 0.0, "f32 → i32");
    let u8s: Vec<f64> = x.iter().map(|&t| (t as f32 as u8) as f64).collect();
    close(&read(&to("u8")).await, &u8s, 0.0, 0.0, "f32 → u8");
    let bools: Vec<f64> = x.iter().map(|&t| (t != 0.0) as u8 as f64).collect();
    close(&read(&to("bool")).await, &bools, 0.0, 0.0, "f32 → bool");
    let bf: Vec<f64> = x
        .iter()
        .map(|&t| round_to(t as f32 as f64, "bf16"))
        .collect();
    close(&read(&to("bf16")).await, &bf, 0.0, 0.0, "f32 → bf16");
    if f16 {
        let h: Vec<f64> = x
            .iter()
            .map(|&t| round_to(t as f32 as f64, "f16"))
            .collect();
        close(
            &read(&to("f16")).await,
            &h,
            0.0,
            0.0,
            "f32 → f16 (overflow → inf)",
        );
    }
    // int → f32, and dtype promotion of mixed inputs (i32 + f32 → f32).
    let i = typed(&[1.0, -2.0, 3.0], &[3], "i32");
    let s = v(wmx::add(&i, &typed(&[0.5, 0.5, 0.5], &[3], "f32")).unwrap());
    assert_eq!(dtype_of(&s), "f32");
    close(&read(&s).await, &[1.5, -1.5, 3.5], 0.0, 0.0, "i32 + f32");
}

// ---------------------------------------------------------------- big grids

#[wasm_bindgen_test]
async fn grid_over_65535_workgroups() {
    let info = gpu().await;
    let max_wg = get(&info, "maxWorkgroupsPerDimension").as_f64().unwrap();
    let binding = get(&info, "maxStorageBufferBindingSize").as_f64().unwrap();
    // A strided copy (transpose to row-major) runs one invocation per element,
    // 256 per workgroup: 4096 × 4100 elements need 65 600 workgroups > 65 535.
    let (r, c) = (4096usize, 4100usize);
    let bytes = (r * c * 4) as f64;
    assert!(max_wg <= 65535.0 || max_wg > 0.0);
    if bytes > binding {
        web_sys::console::log_1(
            &format!("binding limit {binding} < {bytes}: >65535-workgroup test not possible here")
                .into(),
        );
        return;
    }
    let a = v(wmx::arange(0.0, Some((r * c) as f64), None, o(JsValue::from_str("i32"))).unwrap());
    let a = v(wmx::reshape(&a, shape(&[r, c])).unwrap());
    let t = v(wmx::transpose(&a, None).unwrap());
    let tc = v(nd(&t).contiguous().unwrap());
    let got = read(&tc).await;
    assert_eq!(got.len(), r * c);
    for j in 0..c {
        for i in 0..r {
            let g = got[j * r + i];
            let w = (i * c + j) as f64;
            assert!(g == w, "transpose copy at [{j}, {i}]: got {g}, want {w}");
        }
    }
}

// ---------------------------------------------------------------- errors and lifetime

#[wasm_bindgen_test]
async fn errors_are_js_exceptions_with_wmx_messages() {
    gpu().await;
    let a = typed(&[1.0, 2.0], &[2], "f32");
    let b = typed(&[1.0, 2.0, 3.0], &[3], "f32");
    let e = err_msg(
        wmx::add(&a, &b)
            .err()
            .expect("shapes [2] and [3] must not broadcast"),
    );
    assert_eq!(e, "shape mismatch in add: [2] vs [3]");
    let e = err_msg(wmx::sum(&a, o(JsValue::from_f64(3.0)), None).err().unwrap());
    assert!(e.contains("bad axis 3"), "{e}");
    let e = err_msg(
        wmx::array(
            &ty(Float32Array::from(&[1.0f32, 2.0][..])),
            Some(shape(&[3])),
            None,
        )
        .err()
        .unwrap(),
    );
    assert!(e.contains("do not fill shape [3]"), "{e}");
    let e = err_msg(
        wmx::zeros(shape(&[2]), o(JsValue::from_str("float65")))
            .err()
            .unwrap(),
    );
    assert!(e.contains("unknown dtype \"float65\""), "{e}");
    // Browsers have no f64 on the GPU (no SHADER_F64): the CPU backend has it.
    let e = err_msg(
        wmx::zeros(shape(&[2]), o(JsValue::from_str("float64")))
            .err()
            .unwrap(),
    );
    assert!(e.contains("does not support dtype f64"), "{e}");
    assert!(e.contains("SHADER_F64"), "{e}");
    let e = err_msg(wmx::bitwise_and(&a, &a).err().unwrap());
    assert_eq!(e, "bitwise_and is not defined for dtype f32");
    // A disposed array throws instead of crashing.
    let d = wmx::ones(shape(&[2]), None).unwrap();
    let dj = v(d);
    let live = wmx::live_arrays();
    let dd = nd(&dj);
    drop(dd);
    assert_eq!(wmx::live_arrays(), live);
    js_sys::Reflect::apply(
        get(&dj, "dispose").unchecked_ref::<js_sys::Function>(),
        &dj,
        &js_sys::Array::new(),
    )
    .unwrap();
    assert_eq!(wmx::live_arrays(), live - 1);
    let e = err_msg(wmx::add(&a, &dj).err().unwrap());
    assert!(e.contains("released"), "{e}");
}

// ---------------------------------------------------------------- transforms

/// A JS function of two arrays, written with the JS API: `sum(sin(w) * x)`.
fn js_loss() -> js_sys::Function {
    let f = |w: JsValue, x: JsValue| -> Result<JsValue, wasm_bindgen::JsError> {
        let p = v(wmx::multiply(
            &v(wmx::sin(w.unchecked_ref())?),
            x.unchecked_ref(),
        )?);
        Ok(v(wmx::sum(&p, None, None)?).into())
    };
    wasm_bindgen::closure::Closure::<
        dyn Fn(JsValue, JsValue) -> Result<JsValue, wasm_bindgen::JsError>,
    >::new(f)
    .into_js_value()
    .unchecked_into()
}

#[wasm_bindgen_test]
async fn grad_and_value_and_grad_of_js_functions() {
    gpu().await;
    let n = 1000;
    let (wv, xv) = (rand(n, 40, -2.0, 2.0), rand(n, 41, -1.0, 1.0));
    let (w, x) = (typed(&wv, &[n], "f32"), typed(&xv, &[n], "f32"));
    let (wr, xr): (Vec<f64>, Vec<f64>) = (
        wv.iter().map(|&a| round_to(a, "f32")).collect(),
        xv.iter().map(|&a| round_to(a, "f32")).collect(),
    );
    let args: JsValue = js_sys::Array::of2(&w, &x).into();
    // d/dw sum(sin(w) x) = cos(w) x; d/dx = sin(w).
    let g: js_sys::Function = ty(wmx::grad(ty(js_loss()), o(JsValue::from_f64(0.0))).unwrap());
    let out = js_sys::Array::from(&g.call1(&JsValue::NULL, &args).unwrap());
    assert_eq!(out.length(), 1);
    let want: Vec<f64> = wr.iter().zip(&xr).map(|(w, x)| w.cos() * x).collect();
    close(
        &read(&out.get(0)).await,
        &want,
        1e-5,
        1e-6,
        "grad w of sum(sin(w) x)",
    );

    let both: JsValue = [0, 1]
        .iter()
        .map(|&i| JsValue::from_f64(i as f64))
        .collect::<js_sys::Array>()
        .into();
    let vg: js_sys::Function = ty(wmx::value_and_grad(ty(js_loss()), o(both)).unwrap());
    let out = js_sys::Array::from(&vg.call1(&JsValue::NULL, &args).unwrap());
    let value = read(&out.get(0)).await;
    let want_v: f64 = wr.iter().zip(&xr).map(|(w, x)| w.sin() * x).sum();
    close(&value, &[want_v], 1e-4, 1e-4, "value of sum(sin(w) x)");
    let grads = js_sys::Array::from(&out.get(1));
    assert_eq!(grads.length(), 2);
    let want_x: Vec<f64> = wr.iter().map(|w| w.sin()).collect();
    close(
        &read(&grads.get(0)).await,
        &want,
        1e-5,
        1e-6,
        "valueAndGrad: w",
    );
    close(
        &read(&grads.get(1)).await,
        &want_x,
        1e-5,
        1e-6,
        "valueAndGrad: x",
    );

    // A function that throws, and a non-scalar result: JS errors with the reason.
    let throws: js_sys::Function = js_sys::Function::new_with_args("w", "throw new Error('boom')");
    let e = ty::<js_sys::Function>(wmx::grad(ty(throws), None).unwrap())
        .call1(&JsValue::NULL, &args)
        .unwrap_err();
    let msg = get(&e, "message").as_string().unwrap();
    assert!(msg.contains("the function threw: boom"), "{msg}");
    let ident: js_sys::Function = js_sys::Function::new_with_args("w", "return w");
    let e = ty::<js_sys::Function>(wmx::grad(ty(ident), None).unwrap())
        .call1(&JsValue::NULL, &args)
        .unwrap_err();
    let msg = get(&e, "message").as_string().unwrap();
    assert!(msg.contains("one element"), "{msg}");
}

// ---------------------------------------------------------------- products and norms

/// `a @ b` in f64 for row-major `a` [m, k] and `b` [k, n].
fn mm_ref(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
        }
    }
    out
}

#[wasm_bindgen_test]
async fn matmul_gemv_and_addmm() {
    gpu().await;
    // Tiled (odd sizes around the tile), matrix-vector, vector-matrix, K > tile.
    for (m, k, n) in [(65, 33, 129), (130, 7, 1), (1, 300, 67), (5, 1000, 3)] {
        let a: Vec<f64> = rand(m * k, 40 + m as u64, -1.0, 1.0)
            .iter()
            .map(|&x| round_to(x, "f32"))
            .collect();
        let b: Vec<f64> = rand(k * n, 41 + n as u64, -1.0, 1.0)
            .iter()
            .map(|&x| round_to(x, "f32"))
            .collect();
        let r = v(wmx::matmul(&typed(&a, &[m, k], "f32"), &typed(&b, &[k, n], "f32")).unwrap());
        assert_eq!(shape_of(&r), vec![m, n]);
        let want = mm_ref(&a, &b, m, k, n);
        close(
            &read(&r).await,
            &want,
            1e-5,
            1e-5 * k as f64,
            &format!("matmul {m}x{k}x{n}"),
        );
        // The same from a transposed view, plus a bias row (addmm).
        let at = wmx::transpose(&typed(&a, &[m, k], "f32"), None)
            .unwrap()
            .contiguous()
            .unwrap();
        let at_t = v(at.t().unwrap());
        let bias: Vec<f64> = (0..n).map(|j| j as f64 * 0.5).collect();
        let r = v(wmx::addmm(
            &typed(&bias, &[n], "f32"),
            &at_t,
            &typed(&b, &[k, n], "f32"),
            Some(2.0),
            Some(-1.0),
        )
        .unwrap());
        let want: Vec<f64> = want
            .iter()
            .enumerate()
            .map(|(i, &x)| 2.0 * x - bias[i % n])
            .collect();
        close(
            &read(&r).await,
            &want,
            1e-5,
            2e-5 * k as f64,
            &format!("addmm {m}x{k}x{n}"),
        );
    }
    let e = wmx::matmul(
        &typed(&[1.0; 6], &[2, 3], "f32"),
        &typed(&[1.0; 6], &[2, 3], "f32"),
    )
    .err()
    .map(err_msg)
    .unwrap_or_default();
    assert!(e.contains("matmul") && e.contains("[2, 3]"), "{e}");
}

#[wasm_bindgen_test]
async fn softmax_and_norms() {
    gpu().await;
    let (r, l) = (7, 301);
    let x: Vec<f64> = rand(r * l, 50, -5.0, 5.0)
        .iter()
        .map(|&t| round_to(t, "f32"))
        .collect();
    let xa = typed(&x, &[r, l], "f32");
    let rows = |f: &dyn Fn(&[f64]) -> Vec<f64>| -> Vec<f64> { x.chunks(l).flat_map(f).collect() };
    let sm = |row: &[f64]| -> Vec<f64> {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
        row.iter().map(|v| (v - m).exp() / s).collect()
    };
    let y = v(wmx::softmax(&xa, None).unwrap());
    close(&read(&y).await, &rows(&sm), 2e-6, 1e-7, "softmax");
    let y = v(wmx::log_softmax(&xa, None).unwrap());
    let want = rows(&|row: &[f64]| sm(row).iter().map(|p| p.ln()).collect());
    close(&read(&y).await, &want, 2e-6, 1e-5, "log_softmax");
    let ln = |row: &[f64]| -> Vec<f64> {
        let n = row.len() as f64;
        let mean = row.iter().sum::<f64>() / n;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        row.iter()
            .map(|v| (v - mean) / (var + 1e-5).sqrt())
            .collect()
    };
    let y = v(wmx::layer_norm(&xa, None, None, None).unwrap());
    close(&read(&y).await, &rows(&ln), 1e-5, 1e-5, "layer_norm");
    let w: Vec<f64> = (0..l).map(|j| 0.5 + j as f64 / l as f64).collect();
    let rms = |row: &[f64]| -> Vec<f64> {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64;
        row.iter()
            .zip(&w)
            .map(|(v, w)| v / (ms + 1e-5).sqrt() * w)
            .collect()
    };
    let y = v(wmx::rms_norm(&xa, Some(typed(&w, &[l], "f32")), None).unwrap());
    close(&read(&y).await, &rows(&rms), 1e-5, 1e-6, "rms_norm");
}

/// rope's JavaScript defaults (half-split pairs, base 10000, offset a number), and
/// the per-batch offsets of a decode step, against an f64 loop over pairs.
#[wasm_bindgen_test]
async fn rope_defaults_and_offsets() {
    gpu().await;
    let (b, l, d, dims) = (2usize, 3usize, 8usize, 6usize);
    let x: Vec<f64> = rand(b * l * d, 77, -2.0, 2.0)
        .iter()
        .map(|&t| round_to(t, "f32"))
        .collect();
    let want = |offs: &[f64]| -> Vec<f64> {
        let mut out = x.clone();
        for row in 0..b * l {
            let p = (offs[row / l] as f32 + (row % l) as f32) as f64;
            for k in 0..dims / 2 {
                let inv = 10000f64.powf(-2.0 * k as f64 / dims as f64) as f32;
                let th = (p as f32 * inv) as f64;
                let (i, j) = (row * d + k, row * d + k + dims / 2);
                out[i] = x[i] * th.cos() - x[j] * th.sin();
                out[j] = x[i] * th.sin() + x[j] * th.cos();
            }
        }
        out
    };
    let xa = || typed(&x, &[b, 1, l, d], "f32");
    let offset: ArrayInput = JsValue::from(5.0).unchecked_into();
    let y = v(wmx::rope(&xa(), dims, None, None, None, Some(offset), None).unwrap());
    close(
        &read(&y).await,
        &want(&[5.0, 5.0]),
        1e-5,
        1e-6,
        "rope, offset 5",
    );
    let offs = typed(&[2.0, 40.0], &[2], "i32");
    let y = v(wmx::rope(&xa(), dims, None, None, None, Some(offs), None).unwrap());
    close(
        &read(&y).await,
        &want(&[2.0, 40.0]),
        1e-5,
        1e-6,
        "rope, offsets per batch",
    );
    let bad: ArrayInput = JsValue::from(1.5).unchecked_into();
    let e = wmx::rope(&xa(), dims, None, None, None, Some(bad), None)
        .err()
        .map(err_msg)
        .unwrap_or_default();
    assert!(e.contains("offset"), "{e}");
}

/// A 2-D convolution by its definition, channels last: x [n, h, w, c], wt [o, kh,
/// kw, c / g], stride, symmetric padding, dilation, groups.
fn conv2d_ref(
    x: &[f64],
    [n, h, w, c]: [usize; 4],
    wt: &[f64],
    [o, kh, kw]: [usize; 3],
    (s, p, d, g): (usize, usize, usize, usize),
) -> (Vec<f64>, [usize; 4]) {
    let oh = (h + 2 * p - d * (kh - 1) - 1) / s + 1;
    let ow = (w + 2 * p - d * (kw - 1) - 1) / s + 1;
    let (cg, og) = (c / g, o / g);
    let mut y = vec![0.0; n * oh * ow * o];
    for b in 0..n {
        for i in 0..oh {
            for j in 0..ow {
                for oc in 0..o {
                    let grp = oc / og;
                    let mut acc = 0.0;
                    for a in 0..kh {
                        for e in 0..kw {
                            let (r, q) = (
                                (i * s + a * d) as i64 - p as i64,
                                (j * s + e * d) as i64 - p as i64,
                            );
                            if r < 0 || q < 0 || r >= h as i64 || q >= w as i64 {
                                continue;
                            }
                            for ci in 0..cg {
                                let xi =
                                    ((b * h + r as usize) * w + q as usize) * c + grp * cg + ci;
                                acc += x[xi] * wt[((oc * kh + a) * kw + e) * cg + ci];
                            }
                        }
                    }
                    y[((b * oh + i) * ow + j) * o + oc] = acc;
                }
            }
        }
    }
    (y, [n, oh, ow, o])
}

/// conv (grouped and depthwise, through the im2col and depthwise kernels), maxPool
/// and avgPool with their options objects, against f64 loops; a bad option throws.
#[wasm_bindgen_test]
async fn convolution_and_pooling() {
    gpu().await;
    let (n, h, w) = (2usize, 7usize, 6usize);
    for (c, o, g) in [(4usize, 6usize, 2usize), (3, 3, 3)] {
        let x: Vec<f64> = rand(n * h * w * c, 5 + c as u64, -1.0, 1.0);
        let wt: Vec<f64> = rand(o * 9 * (c / g), 9 + c as u64, -1.0, 1.0);
        let x: Vec<f64> = x.iter().map(|&t| round_to(t, "f32")).collect();
        let wt: Vec<f64> = wt.iter().map(|&t| round_to(t, "f32")).collect();
        let (want, shp) = conv2d_ref(&x, [n, h, w, c], &wt, [o, 3, 3], (2, 1, 2, g));
        let opts = obj(&[
            ("stride", JsValue::from(2)),
            ("padding", JsValue::from(1)),
            ("dilation", JsValue::from(2)),
            ("groups", JsValue::from(g as u32)),
        ]);
        let y = v(wmx::conv(
            &typed(&x, &[n, h, w, c], "f32"),
            &typed(&wt, &[o, 3, 3, c / g], "f32"),
            Some(opts.unchecked_into()),
        )
        .unwrap());
        assert_eq!(shape_of(&y), shp.to_vec(), "conv shape");
        close(
            &read(&y).await,
            &want,
            1e-5,
            1e-5,
            &format!("conv, {g} groups"),
        );
    }
    // Max and average pooling, 3x3 windows, stride 2, padding 1, ceil mode.
    let c = 2usize;
    let x: Vec<f64> = rand(n * h * w * c, 21, -1.0, 1.0)
        .iter()
        .map(|&t| round_to(t, "f32"))
        .collect();
    let (oh, ow) = (4usize, 4usize);
    let (mut mx, mut av) = (vec![], vec![]);
    for b in 0..n {
        for i in 0..oh {
            for j in 0..ow {
                for ch in 0..c {
                    let (mut m, mut sum, mut cnt) = (f64::NEG_INFINITY, 0.0, 0.0);
                    for a in 0..3i64 {
                        for e in 0..3i64 {
                            let (r, q) = (2 * i as i64 + a - 1, 2 * j as i64 + e - 1);
                            // The divisor counts taps inside the padded input only.
                            if r < h as i64 + 1 && q < w as i64 + 1 {
                                cnt += 1.0;
                            }
                            if r < 0 || q < 0 || r >= h as i64 || q >= w as i64 {
                                continue;
                            }
                            let t = x[((b * h + r as usize) * w + q as usize) * c + ch];
                            m = m.max(t);
                            sum += t;
                        }
                    }
                    mx.push(m);
                    av.push(sum / cnt);
                }
            }
        }
    }
    let popts = || -> JsValue {
        obj(&[
            ("stride", JsValue::from(2)),
            ("padding", JsValue::from(1)),
            ("ceilMode", JsValue::from(true)),
        ])
    };
    let xa = || typed(&x, &[n, h, w, c], "f32");
    let y = v(wmx::max_pool(&xa(), shape(&[3, 3]), Some(popts().unchecked_into())).unwrap());
    assert_eq!(shape_of(&y), vec![n, oh, ow, c], "maxPool shape");
    close(&read(&y).await, &mx, 0.0, 0.0, "maxPool");
    let y = v(wmx::avg_pool(&xa(), shape(&[3, 3]), Some(popts().unchecked_into())).unwrap());
    close(&read(&y).await, &av, 1e-6, 1e-6, "avgPool");
    let bad = obj(&[("groups", JsValue::from(1.5))]);
    let e = wmx::conv(
        &xa(),
        &typed(&[0.0; 18], &[1, 3, 3, 2], "f32"),
        Some(bad.unchecked_into()),
    )
    .err()
    .map(err_msg)
    .unwrap_or_default();
    assert!(e.contains("groups"), "{e}");
}

/// `scaledDotProductAttention`: grouped-query heads with a causal mask (the fused
/// kernel; a query with no key left gets zeros), a sliding window, and a boolean
/// mask (the composed path), against an f64 loop.
#[wasm_bindgen_test]
async fn attention() {
    gpu().await;
    let (b, hq, hkv, lq, lk, d) = (1usize, 4usize, 2usize, 5usize, 4usize, 8usize);
    let r = |n: usize, seed: u64| -> Vec<f64> {
        rand(n, seed, -1.0, 1.0)
            .iter()
            .map(|&t| round_to(t, "f32"))
            .collect()
    };
    let (q, k, vv) = (
        r(b * hq * lq * d, 31),
        r(b * hkv * lk * d, 32),
        r(b * hkv * lk * d, 33),
    );
    // Keys each query sees: j <= i + lk - lq, and above i + lk - lq - window.
    let reference = |window: Option<usize>| -> Vec<f64> {
        let mut out = vec![0.0; b * hq * lq * d];
        for h in 0..hq {
            let kv = h / (hq / hkv) * lk * d;
            for i in 0..lq {
                let end = i as i64 + lk as i64 - lq as i64;
                let sees = |j: usize| {
                    let j = j as i64;
                    j <= end && window.is_none_or(|w| j > end - w as i64)
                };
                let s: Vec<f64> = (0..lk)
                    .map(|j| {
                        (0..d)
                            .map(|t| q[(h * lq + i) * d + t] * k[kv + j * d + t])
                            .sum::<f64>()
                            / (d as f64).sqrt()
                    })
                    .collect();
                let top = (0..lk)
                    .filter(|&j| sees(j))
                    .map(|j| s[j])
                    .fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = (0..lk)
                    .filter(|&j| sees(j))
                    .map(|j| (s[j] - top).exp())
                    .sum();
                for j in (0..lk).filter(|&j| sees(j)) {
                    for t in 0..d {
                        out[(h * lq + i) * d + t] +=
                            (s[j] - top).exp() / total * vv[kv + j * d + t];
                    }
                }
            }
        }
        out
    };
    let arrays = || {
        (
            typed(&q, &[b, hq, lq, d], "f32"),
            typed(&k, &[b, hkv, lk, d], "f32"),
            typed(&vv, &[b, hkv, lk, d], "f32"),
        )
    };
    let run = |mask: JsValue| {
        let (qa, ka, va) = arrays();
        wmx::scaled_dot_product_attention(
            &qa,
            &ka,
            &va,
            Some(obj(&[("mask", mask)]).unchecked_into()),
        )
    };
    let causal = v(run(JsValue::from_str("causal")).unwrap());
    assert_eq!(shape_of(&causal), vec![b, hq, lq, d]);
    let want = reference(None);
    close(&read(&causal).await, &want, 1e-5, 1e-5, "attention, causal");
    let window = v(run(obj(&[("window", JsValue::from(2))])).unwrap());
    close(
        &read(&window).await,
        &reference(Some(2)),
        1e-5,
        1e-5,
        "attention, window 2",
    );
    // The causal band as a boolean array: the composed path, the same values.
    let band: Vec<f64> = (0..lq * lk)
        .map(|e| ((e % lk) as i64 <= (e / lk) as i64 + lk as i64 - lq as i64) as u8 as f64)
        .collect();
    let m = typed(&band, &[lq, lk], "bool");
    let boolean = v(run(m.into()).unwrap());
    close(
        &read(&boolean).await,
        &want,
        1e-5,
        1e-5,
        "attention, boolean mask",
    );
    let e = run(JsValue::from_str("sideways"))
        .err()
        .map(err_msg)
        .unwrap_or_default();
    assert!(e.contains("mask"), "{e}");
}

#[wasm_bindgen_test]
async fn building_blocks() {
    gpu().await;
    // concatenate along the last axis (packed u8 words shared between inputs), take
    // with negative and out-of-range indices, scatterAdd with duplicates.
    let a = typed(&[1.0, 2.0, 3.0, 4.0], &[2, 2], "u8");
    let b = typed(&[5.0, 6.0], &[2, 1], "u8");
    let c = v(wmx::concatenate(ty(js_sys::Array::of2(&a, &b)), Some(-1)).unwrap());
    assert_eq!(shape_of(&c), vec![2, 3]);
    assert_eq!(
        read(&c).await,
        vec![1.0, 2.0, 5.0, 3.0, 4.0, 6.0],
        "concatenate"
    );
    let x = typed(&[10.0, 20.0, 30.0, 40.0], &[4], "f32");
    let t = v(wmx::take(&x, &typed(&[-1.0, 0.0, 4.0], &[3], "i32"), Some(0)).unwrap());
    let got = read(&t).await;
    assert!(
        got[0] == 40.0 && got[1] == 10.0 && got[2].is_nan(),
        "take: {got:?}"
    );
    let z = typed(&[0.0; 3], &[3], "f32");
    let s = v(wmx::scatter_add(
        &z,
        &typed(&[2.0, 0.0, 2.0, 2.0], &[4], "i32"),
        &typed(&[1.0, 2.0, 3.0, 4.0], &[4], "f32"),
        0,
    )
    .unwrap());
    assert_eq!(read(&s).await, vec![2.0, 0.0, 8.0], "scatterAdd");
    // cumsum over several GPU blocks (exact on integers), sort with NaN, topk.
    let n = 5000;
    let xs: Vec<f64> = (0..n).map(|i| (i % 7) as f64 - 3.0).collect();
    let cs = read(&v(
        wmx::cumsum(&typed(&xs, &[n], "f32"), None, None, None).unwrap()
    ))
    .await;
    let mut acc = 0.0;
    for (i, &g) in cs.iter().enumerate() {
        acc += xs[i];
        assert_eq!(g, acc, "cumsum element {i}");
    }
    let u = typed(&[3.0, f64::NAN, -1.0, 3.0, 0.5], &[5], "f32");
    let idx = read(&v(wmx::argsort(&u, None).unwrap())).await;
    assert_eq!(idx, vec![2.0, 4.0, 0.0, 3.0, 1.0], "argsort");
    let tk: js_sys::Array =
        ty(wmx::topk(&typed(&[1.0, 9.0, 4.0, 7.0], &[4], "f32"), 2, None).unwrap());
    assert_eq!(read(&tk.get(0)).await, vec![9.0, 7.0], "topk values");
    assert_eq!(read(&tk.get(1)).await, vec![1.0, 3.0], "topk indices");
    // Random numbers: MLX's values for the same keys (tests/goldens/mlx_random.txt).
    let k0 = v(wmx::random_key(0.0).unwrap());
    let bits = read(&v(wmx::random_bits(&k0, shape(&[10])).unwrap())).await;
    let want = [
        1524306142.0,
        2595015335.0,
        1836460763.0,
        990488084.0,
        1416732029.0,
        1887795613.0,
        1078027127.0,
        1191019179.0,
        3297765038.0,
        3069809391.0,
    ];
    assert_eq!(bits, want, "randomBits");
    let k21 = v(wmx::random_key(21.0).unwrap());
    let p = read(&v(wmx::random_permutation(&k21, 10).unwrap())).await;
    assert_eq!(
        p,
        vec![9.0, 2.0, 4.0, 7.0, 3.0, 5.0, 1.0, 0.0, 6.0, 8.0],
        "randomPermutation"
    );
    let k1 = v(wmx::random_key(1.0).unwrap());
    let uni = read(&v(
        wmx::random_uniform(&k1, shape(&[6]), None, None, None).unwrap()
    ))
    .await;
    assert_eq!(uni[0], 0.8307938575744629, "randomUniform");
    assert!(wmx::random_key(-1.0).is_err(), "randomKey(-1) is an error");
}

fn obj(pairs: &[(&str, JsValue)]) -> JsValue {
    let o = js_sys::Object::new();
    for (k, val) in pairs {
        js_sys::Reflect::set(&o, &JsValue::from_str(k), val).unwrap();
    }
    o.into()
}

fn names(n: &[&str]) -> JsValue {
    n.iter()
        .map(|s| JsValue::from_str(s))
        .collect::<js_sys::Array>()
        .into()
}

#[wasm_bindgen_test]
async fn user_wgsl_kernels() {
    gpu().await;
    // y = exp(x) * SCALE + b on a transposed x and a broadcast b, read in place.
    let k = wmx::wgsl_kernel(ty(obj(&[
        ("name", "scaled_exp".into()),
        ("inputs", names(&["x", "b"])),
        ("outputs", names(&["y"])),
        (
            "body",
            "let i = global_id.x; y[i] = exp(x[x_loc(i)]) * T(SCALE) + b[b_loc(i)];".into(),
        ),
        ("rowContiguous", false.into()),
    ])))
    .unwrap();
    let (r, c) = (5usize, 7usize);
    let xs: Vec<f64> = (0..r * c).map(|i| (i as f64) * 0.1 - 1.5).collect();
    let bs: Vec<f64> = (0..r).map(|i| i as f64 * 10.0).collect();
    let x = typed(&xs, &[r, c], "f32");
    let xt = v(nd(&x).t().unwrap());
    let b = typed(&bs, &[r], "f32");
    let bb = v(nd(&b).broadcast_to(shape(&[c, r])).unwrap());
    let launch = obj(&[
        ("shape", shape(&[c, r]).into()),
        (
            "template",
            obj(&[("T", "f32".into()), ("SCALE", 2.5.into())]),
        ),
    ]);
    let inputs: JsValue = js_sys::Array::of2(&xt, &bb).into();
    let y = ty::<js_sys::Array>(k.call(ty(inputs.clone()), ty(launch.clone())).unwrap()).get(0);
    let got = read(&y).await;
    for (idx, g) in got.iter().enumerate() {
        let (j, i) = (idx / r, idx % r);
        let want = ((xs[i * c + j] as f32 as f64).exp() * 2.5 + bs[i]) as f32 as f64;
        assert!(
            (g - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "{idx}: {g} vs {want}"
        );
    }
    let src = k.source(ty(inputs), ty(launch)).unwrap();
    assert!(
        src.contains("fn x_loc") && src.contains("const SCALE: f32 = 2.5;"),
        "{src}"
    );
    // Two outputs of different dtypes from one dispatch.
    let two = wmx::wgsl_kernel(ty(obj(&[
        ("name", "split_parts".into()),
        ("inputs", names(&["x"])),
        ("outputs", names(&["whole", "sgn"])),
        (
            "body",
            "let i = global_id.x; let v = x[i]; whole[i] = trunc(v); sgn[i] = i32(sign(v));".into(),
        ),
    ])))
    .unwrap();
    let outs_spec: JsValue = js_sys::Array::of2(
        &obj(&[("shape", shape(&[r, c]).into())]),
        &obj(&[("shape", shape(&[r, c]).into()), ("dtype", "i32".into())]),
    )
    .into();
    let outs: js_sys::Array = ty(two
        .call(
            ty(js_sys::Array::of1(&x)),
            ty(obj(&[("outputs", outs_spec)])),
        )
        .unwrap());
    let (whole, sign) = (read(&outs.get(0)).await, read(&outs.get(1)).await);
    for (i, v) in xs.iter().enumerate() {
        let f = *v as f32;
        assert_eq!(whole[i], f.trunc() as f64, "whole {i}");
        let sg = if f > 0.0 {
            1.0
        } else if f < 0.0 {
            -1.0
        } else {
            0.0
        };
        assert_eq!(sign[i], sg, "sign {i}");
    }
    // Invalid WGSL throws at the call with naga's message; the next op is clean.
    let bad = wmx::wgsl_kernel(ty(obj(&[
        ("name", "broken".into()),
        ("inputs", names(&["x"])),
        ("outputs", names(&["y"])),
        ("body", "y[global_id.x] = x[global_id.x] +* 1.0;".into()),
    ])))
    .unwrap();
    let e = bad
        .call(
            ty(js_sys::Array::of1(&x)),
            ty(obj(&[("shape", shape(&[r, c]).into())])),
        )
        .err()
        .map(|e| format!("{:?}", JsValue::from(e)))
        .expect("invalid WGSL must throw");
    assert!(e.contains("broken") && e.contains("+* 1.0"), "{e}");
    let z = v(wmx::add(&x, &x).unwrap());
    let want: Vec<f64> = xs.iter().map(|v| 2.0 * (*v as f32) as f64).collect();
    assert_eq!(read(&z).await, want);
}

#[wasm_bindgen_test]
async fn compiled_functions() {
    gpu().await;
    // tanh-GELU written out in JS, compiled: one fused kernel, the values of the
    // uncompiled function (within the multiply-add contraction a GPU compiler may
    // apply inside one kernel) and of f64.
    let body = "return x.multiply(x).multiply(x).multiply(0.044715).add(x).multiply(0.7978845608)\
                .tanh().add(1).multiply(x).multiply(0.5);";
    let gelu = js_sys::Function::new_with_args("x", body);
    let f = wmx::compile(ty(gelu.clone()));
    let xs: Vec<f64> = (0..1000).map(|i| i as f64 / 125.0 - 4.0).collect();
    let x = typed(&xs, &[1000], "f32");
    let args: JsValue = js_sys::Array::of1(&x).into();
    let y = ty::<js_sys::Array>(f.call(ty(args.clone())).unwrap()).get(0);
    let plain = gelu.call1(&JsValue::NULL, &x).unwrap();
    let (got, want) = (read(&y).await, read(&plain).await);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let v = xs[i] as f32 as f64;
        let exact = 0.5 * v * (1.0 + (0.7978845608 * (v + 0.044715 * v * v * v)).tanh());
        assert!(
            (g - w).abs() <= 4e-6 * 4.0,
            "{i}: compiled {g}, uncompiled {w}"
        );
        assert!(
            (g - exact).abs() <= 2e-6 * (1.0 + exact.abs()),
            "{i}: {g} vs f64 {exact}"
        );
    }
    let report = f.report(ty(args.clone())).unwrap();
    let kernels = js_sys::Array::from(&get(&report, "kernels"));
    assert_eq!(kernels.length(), 1, "one fused kernel");
    let src = kernels.get(0).as_string().unwrap();
    assert!(
        src.contains("fn fused") && src.contains("tanh_f32"),
        "{src}"
    );
    assert_eq!(f.traces(), 1);
    // Two results, a broadcast argument, and a JS error surfacing as one.
    let two = wmx::compile(ty(js_sys::Function::new_with_args(
        "a, b",
        "const s = a.add(b); return [s.exp(), s.multiply(s).sum()];",
    )));
    let b = typed(&[0.5, -0.25], &[2, 1], "f32");
    let a = typed(&[1.0, 2.0, 3.0], &[3], "f32");
    let outs: js_sys::Array = ty(two.call(ty(js_sys::Array::of2(&a, &b))).unwrap());
    let e = read(&outs.get(0)).await;
    let s = read(&outs.get(1)).await;
    let sums: Vec<f64> = [0.5, -0.25]
        .iter()
        .flat_map(|bv| [1.0, 2.0, 3.0].map(|av: f64| av + bv))
        .collect();
    for (g, w) in e.iter().zip(&sums) {
        assert!((g - w.exp()).abs() <= 1e-5 * w.exp(), "{g} vs {}", w.exp());
    }
    let sq: f64 = sums.iter().map(|v| v * v).sum();
    assert!((s[0] - sq).abs() <= 1e-5 * sq);
    let bad = wmx::compile(ty(js_sys::Function::new_with_args(
        "x",
        "throw new Error('no');",
    )));
    assert!(bad.call(ty(js_sys::Array::of1(&x))).is_err());
    wmx::set_mode(ty(JsValue::from_str("eager"))).unwrap();
    assert!(wmx::set_mode(ty(JsValue::from_str("fast"))).is_err());
    wmx::set_mode(ty(JsValue::from_str("lazy"))).unwrap();
}

#[wasm_bindgen_test]
async fn f64_on_the_cpu_backend_and_an_error_on_webgpu() {
    gpu().await;
    let data = js_sys::Float64Array::from(&[0.1, 0.2][..]);
    let f64_dtype = || o(JsValue::from_str("float64"));
    // Browsers have no f64 on the GPU: a clear error naming the dtype.
    let e = err_msg(
        wmx::array(data.unchecked_ref(), None, f64_dtype())
            .err()
            .unwrap(),
    );
    assert!(e.contains("f64"), "{e}");
    // wmx's CPU backend inside wasm has it: 0.1 + 0.2 rounds as in f64, not f32.
    wmx::set_device(ty(JsValue::from_str("cpu"))).unwrap();
    let a = wmx::array(data.unchecked_ref(), None, f64_dtype()).unwrap();
    assert_eq!(a.dtype().unwrap(), "f64");
    let s = wmx::sum(&v(a), None, None).unwrap();
    let got = wait(s.data().unwrap()).await.unwrap();
    let got = got
        .dyn_into::<js_sys::Float64Array>()
        .expect("data() of f64 is a Float64Array");
    assert_eq!(got.to_vec(), vec![0.1 + 0.2]);
    assert_eq!(
        wait(s.item().unwrap()).await.unwrap().as_f64(),
        Some(0.1 + 0.2)
    );
    wmx::set_device(ty(JsValue::from_str("webgpu"))).unwrap();
}

/// i64 and u64 on WebGPU (pairs of words, exact): BigInt64Array and
/// BigUint64Array in and out, arithmetic that wraps, floor division, a sum, a
/// sort and the cast to f32, against Rust's integers here.
#[wasm_bindgen_test]
async fn int64_on_webgpu() {
    gpu().await;
    let xs = [i64::MIN, -7, (1 << 53) + 1, i64::MAX, 1 << 32];
    let ys = [-1i64, 2, -3, 1, -(1 << 31)];
    let arr = |v: &[i64]| {
        let data = js_sys::BigInt64Array::from(v);
        v_i64(wmx::array(data.unchecked_ref(), None, None).unwrap())
    };
    let (x, y) = (arr(&xs), arr(&ys));
    let read_i64 = |a: NdArray| async move {
        assert_eq!(a.dtype().unwrap(), "i64");
        let d = wait(a.data().unwrap()).await.unwrap();
        d.dyn_into::<js_sys::BigInt64Array>()
            .expect("data() of i64 is a BigInt64Array")
            .to_vec()
    };
    let pair = |f: fn(i64, i64) -> i64| {
        xs.iter()
            .zip(&ys)
            .map(|(&a, &b)| f(a, b))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        read_i64(wmx::add(&x, &y).unwrap()).await,
        pair(i64::wrapping_add)
    );
    assert_eq!(
        read_i64(wmx::multiply(&x, &y).unwrap()).await,
        pair(i64::wrapping_mul)
    );
    let floor_div = |a: i64, b: i64| {
        let q = a.wrapping_div(b);
        if a.wrapping_rem(b) != 0 && (a < 0) != (b < 0) {
            q - 1
        } else {
            q
        }
    };
    assert_eq!(
        read_i64(wmx::floor_divide(&x, &y).unwrap()).await,
        pair(floor_div)
    );
    let total = xs.iter().fold(0i64, |s, &a| s.wrapping_add(a));
    assert_eq!(read_i64(wmx::sum(&x, None, None).unwrap()).await, [total]);
    let mut sorted = xs.to_vec();
    sorted.sort();
    assert_eq!(read_i64(wmx::sort(&x, None).unwrap()).await, sorted);
    let f = read(&v(wmx::astype(&x, ty(JsValue::from_str("f32"))).unwrap())).await;
    assert_eq!(f, xs.iter().map(|&a| a as f32 as f64).collect::<Vec<_>>());

    // u64: BigUint64Array, values past i64's range, unsigned order and division.
    let us = [u64::MAX, 1 << 63, 7, (1 << 32) + 1];
    let ws = [2u64, 3, u64::MAX, 1 << 31];
    let arr_u = |xs: &[u64]| {
        let data = js_sys::BigUint64Array::from(xs);
        let a = wmx::array(data.unchecked_ref(), None, None).unwrap();
        assert_eq!(a.dtype().unwrap(), "u64");
        v(a)
    };
    let (a, b) = (arr_u(&us), arr_u(&ws));
    let read_u64 = |a: NdArray| async move {
        let d = wait(a.data().unwrap()).await.unwrap();
        d.dyn_into::<js_sys::BigUint64Array>()
            .expect("data() of u64 is a BigUint64Array")
            .to_vec()
    };
    let pair_u = |f: fn(u64, u64) -> u64| {
        us.iter()
            .zip(&ws)
            .map(|(&a, &b)| f(a, b))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        read_u64(wmx::add(&a, &b).unwrap()).await,
        pair_u(u64::wrapping_add)
    );
    assert_eq!(
        read_u64(wmx::floor_divide(&a, &b).unwrap()).await,
        pair_u(|a, b| a / b)
    );
    assert_eq!(
        read_u64(wmx::maximum(&a, &b).unwrap()).await,
        pair_u(u64::max)
    );
    let mut sorted = us.to_vec();
    sorted.sort();
    assert_eq!(read_u64(wmx::sort(&a, None).unwrap()).await, sorted);
}

/// complex64 and the FFT on the browser's WebGPU (SwiftShader: no f16, no
/// subgroups, 16 KiB of workgroup memory): `complex`, `fft` of 6 points
/// (Bluestein) and 4096 (two passes), `rfft`/`irfft` with options, against direct
/// sums here.
#[wasm_bindgen_test]
async fn complex_and_fft_on_webgpu() {
    gpu().await;
    for n in [6usize, 4096] {
        let re: Vec<f64> = (0..n).map(|k| ((k * 7) % 11) as f64 / 11.0 - 0.5).collect();
        let im: Vec<f64> = (0..n).map(|k| ((k * 5) % 13) as f64 / 13.0 - 0.5).collect();
        let z = wmx::complex(&typed(&re, &[n], "f32"), &typed(&im, &[n], "f32")).unwrap();
        assert_eq!(z.dtype().unwrap(), "c64");
        let got = read(&wmx::fft(&v(z), None).unwrap().into()).await;
        assert_eq!(got.len(), 2 * n, "fft of {n}: the parts of n values");
        let l2 = re.iter().chain(&im).map(|a| a * a).sum::<f64>().sqrt();
        for k in [0, 1, n / 2, n - 1] {
            let (mut a, mut b) = (0.0, 0.0);
            for j in 0..n {
                let t = -std::f64::consts::TAU * ((j * k) % n) as f64 / n as f64;
                a += re[j] * t.cos() - im[j] * t.sin();
                b += re[j] * t.sin() + im[j] * t.cos();
            }
            let e = (got[2 * k] - a).hypot(got[2 * k + 1] - b);
            assert!(
                e <= 2e-6 * (1.0 + (n as f64).log2()) * l2,
                "fft of {n}, output {k}: ({}, {}) vs ({a}, {b})",
                got[2 * k],
                got[2 * k + 1]
            );
        }
    }
    // rfft then irfft with options: the input back (64: the real pass of a
    // power of two; 10: through the complex transform).
    for n in [10usize, 64] {
        let x: Vec<f64> = (0..n).map(|k| (k as f64 * 0.7).sin()).collect();
        let opts = js_sys::Object::new();
        js_sys::Reflect::set(&opts, &"norm".into(), &"ortho".into()).unwrap();
        let spec = wmx::rfft(&typed(&x, &[n], "f32"), o(opts.clone())).unwrap();
        assert_eq!(spec.dtype().unwrap(), "c64");
        // Output 1 against its direct sum (ortho: scaled by 1 / sqrt(n)).
        let again = wmx::rfft(&typed(&x, &[n], "f32"), o(opts.clone())).unwrap();
        let s = read(&again.into()).await;
        assert_eq!(s.len(), 2 * (n / 2 + 1), "rfft of {n}: n / 2 + 1 values");
        let (mut a, mut b) = (0.0, 0.0);
        for (j, xj) in x.iter().enumerate() {
            let t = -std::f64::consts::TAU * j as f64 / n as f64;
            a += xj * t.cos() / (n as f64).sqrt();
            b += xj * t.sin() / (n as f64).sqrt();
        }
        assert!(
            (s[2] - a).hypot(s[3] - b) < 1e-5,
            "rfft of {n}, output 1: ({}, {}) vs ({a}, {b})",
            s[2],
            s[3]
        );
        js_sys::Reflect::set(&opts, &"n".into(), &JsValue::from_f64(n as f64)).unwrap();
        let back = read(&wmx::irfft(&v(spec), o(opts)).unwrap().into()).await;
        for (k, (g, w)) in back.iter().zip(&x).enumerate() {
            assert!(
                (g - w).abs() < 1e-5,
                "irfft(rfft(x)) of {n}, element {k}: {g} vs {w}"
            );
        }
    }
    let x: Vec<f64> = (0..10).map(|k| (k as f64 * 0.7).sin()).collect();
    let bad = js_sys::Object::new();
    js_sys::Reflect::set(&bad, &"norm".into(), &"unitary".into()).unwrap();
    assert!(
        wmx::fft(&typed(&x, &[10], "f32"), o(bad)).is_err(),
        "an unknown norm is an error"
    );
}

/// `quantize`, `dequantize` and `quantizedMatmul` (one row: the matrix-vector
/// kernel; three rows; untransposed) against MLX's rule and f64 loops written
/// here.
#[wasm_bindgen_test]
async fn quantization() {
    gpu().await;
    let (n, k, group, bits) = (6usize, 64usize, 32usize, 4usize);
    let w: Vec<f64> = rand(n * k, 41, -1.0, 1.0)
        .iter()
        .map(|&t| round_to(t, "f32"))
        .collect();
    let parts = wmx::quantize(
        &typed(&w, &[n, k], "f32"),
        Some(group as u32),
        Some(bits as u32),
    )
    .unwrap();
    let parts: js_sys::Array = JsValue::from(parts).unchecked_into();
    let (wq, s, b) = (parts.get(0), parts.get(1), parts.get(2));
    let (qv, sv, bv) = (read(&wq).await, read(&s).await, read(&b).await);
    assert_eq!(qv.len(), n * k * bits / 32);
    // MLX's rule in f32 per group, and the values packed 8 to a word.
    for g in 0..n * k / group {
        let vals: Vec<f32> = w[g * group..(g + 1) * group]
            .iter()
            .map(|&x| x as f32)
            .collect();
        let (lo, hi) = vals
            .iter()
            .fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
        let mask = lo.abs() > hi.abs();
        let mut scale = ((hi - lo) / 15.0).max(1e-7);
        if !mask {
            scale = -scale;
        }
        let edge = if mask { lo } else { hi };
        let q0 = (edge / scale).round_ties_even();
        let (scale, bias) = if q0 != 0.0 {
            (edge / q0, edge)
        } else {
            (scale, 0.0)
        };
        assert_eq!(
            (sv[g] as f32, bv[g] as f32),
            (scale, bias),
            "group {g}'s scale and bias"
        );
        for (i, &v) in vals.iter().enumerate() {
            let q = ((v - bias) / scale).round_ties_even().clamp(0.0, 15.0) as u32;
            let word = qv[(g * group + i) / 8] as u32;
            assert_eq!((word >> (4 * (i % 8))) & 15, q, "group {g} value {i}");
        }
    }
    let deq: Vec<f64> = (0..n * k)
        .map(|e| {
            let q = (qv[e / 8] as u32 >> (4 * (e % 8))) & 15;
            (sv[e / group] as f32 * q as f32 + bv[e / group] as f32) as f64
        })
        .collect();
    let got = wmx::dequantize(
        &ty(wq.clone()),
        &ty(s.clone()),
        &ty(b.clone()),
        Some(32),
        Some(4),
    )
    .unwrap();
    assert_eq!(read(&got.into()).await, deq, "dequantize");
    for (m, transpose) in [(1usize, true), (3, true), (2, false)] {
        // Untransposed, the matrix is [k', n'] = [6, 64]: x has 6 columns.
        let (inner, outer) = if transpose { (k, n) } else { (n, k) };
        let x: Vec<f64> = rand(m * inner, 42 + m as u64, -1.0, 1.0)
            .iter()
            .map(|&t| round_to(t, "f32"))
            .collect();
        let y = wmx::quantized_matmul(
            &typed(&x, &[m, inner], "f32"),
            &ty(wq.clone()),
            &ty(s.clone()),
            &ty(b.clone()),
            Some(transpose),
            Some(32),
            Some(4),
        )
        .unwrap();
        let want: Vec<f64> = (0..m * outer)
            .map(|e| {
                let (i, j) = (e / outer, e % outer);
                (0..inner)
                    .map(|p| {
                        let wv = if transpose {
                            deq[j * k + p]
                        } else {
                            deq[p * k + j]
                        };
                        x[i * inner + p] * wv
                    })
                    .sum()
            })
            .collect();
        close(
            &read(&y.into()).await,
            &want,
            1e-5,
            1e-5,
            &format!("quantizedMatmul, {m} rows, transpose {transpose}"),
        );
    }
}

/// A golden line `name|shape|values` of `tests/goldens/mlx_llama.txt` (mlx-lm).
fn mlx_llama(name: &str) -> Vec<f64> {
    include_str!("../../tests/goldens/mlx_llama.txt")
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}|")))
        .and_then(|rest| rest.split_once('|'))
        .map(|(_, v)| v.split(',').map(|x| x.parse().unwrap()).collect())
        .unwrap_or_else(|| panic!("no golden {name}"))
}

/// `model.generate(prompt, options)`'s tokens.
async fn generated(m: &wmx::LanguageModelJs, prompt: &[u32], options: js_sys::Object) -> Vec<f64> {
    let ids: wmx::TokensArg = ty(Uint32Array::from(prompt));
    let toks = wait(JsValue::from(m.generate(&ids, o(options)).unwrap()))
        .await
        .unwrap();
    Uint32Array::from(toks)
        .to_vec()
        .iter()
        .map(|&t| t as f64)
        .collect()
}

/// `LanguageModel` from a checkpoint's bytes, f32 and MLX's 4-bit: logits, 32
/// greedy tokens, and sampled tokens streamed to `onToken`, each equal to
/// mlx-lm's (which the native suite matches too).
#[wasm_bindgen_test]
async fn language_model() {
    gpu().await;
    const PROMPT: [u32; 9] = [1, 17, 42, 99, 5, 63, 120, 7, 33];
    let checkpoints: [(&str, &str, &[u8]); 2] = [
        (
            "llama_tiny",
            include_str!("../../tests/goldens/llama_tiny/config.json"),
            include_bytes!("../../tests/goldens/llama_tiny/model.safetensors"),
        ),
        (
            "llama_tiny_q4",
            include_str!("../../tests/goldens/llama_tiny_q4/config.json"),
            include_bytes!("../../tests/goldens/llama_tiny_q4/model.safetensors"),
        ),
    ];
    for (name, config, bytes) in checkpoints {
        let m = wmx::LanguageModelJs::from_safetensors(config, &ty(Uint8Array::from(bytes)))
            .unwrap_or_else(|e| panic!("{name}: {:?}", JsValue::from(e)));
        let ids: Vec<f64> = PROMPT.iter().map(|&t| t as f64).collect();
        let logits: JsValue = m.logits(&typed(&ids, &[1, 9], "i32")).unwrap().into();
        let got = read(&logits).await;
        let want = mlx_llama(&format!("{name}.logits"));
        assert_eq!(got.len(), want.len(), "{name}: logits");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{name} logit {i}: {g} vs {w}"
            );
        }
        let opts = js_sys::Object::new();
        js_sys::Reflect::set(&opts, &"maxTokens".into(), &32.into()).unwrap();
        let toks = generated(&m, &PROMPT, opts).await;
        assert_eq!(
            toks,
            mlx_llama(&format!("{name}.tokens")),
            "{name}: greedy tokens"
        );
    }
    // mlx-lm's "all" sampler setting (tests/goldens/mlx_llama.py), streamed.
    let (_, config, bytes) = checkpoints[0];
    let m = wmx::LanguageModelJs::from_safetensors(config, &ty(Uint8Array::from(bytes))).unwrap();
    let seen = js_sys::Array::new();
    let push = js_sys::Function::new_with_args("t", "this.push(t); return true;").bind0(&seen);
    let opts = js_sys::Object::new();
    for (k, v) in [
        ("maxTokens", 24.0),
        ("temperature", 0.7),
        ("topP", 0.95),
        ("minP", 0.05),
        ("topK", 20.0),
        ("repetitionPenalty", 1.3),
        ("repetitionContext", 10.0),
        ("seed", 9.0),
    ] {
        js_sys::Reflect::set(&opts, &k.into(), &v.into()).unwrap();
    }
    js_sys::Reflect::set(&opts, &"onToken".into(), &push).unwrap();
    let toks = generated(&m, &PROMPT, opts).await;
    assert_eq!(toks, mlx_llama("sample.all"), "sampled tokens");
    let streamed: Vec<f64> = seen.iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(streamed, toks, "onToken saw each token");
    let bad = wmx::LanguageModelJs::from_safetensors(config, &ty(Uint8Array::from(&bytes[..100])));
    assert!(bad.is_err(), "truncated safetensors must be an error");
}
