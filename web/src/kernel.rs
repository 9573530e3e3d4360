//! Users' WGSL kernels from JavaScript: `wgslKernel({...})` makes a kernel from a
//! body of WGSL (wmx writes the bindings, the shape/stride helpers and the entry
//! point, see `wmx_webgpu::WgslKernel`), `kernel.call(inputs, launch)` runs it
//! lazily on the GPU.

use crate::api::{JsResult, NdArray, lead};
use crate::convert::{self as cv, err, is_nullish, js_err};
use crate::types::*;
use wasm_bindgen::prelude::*;
use wmx_core::DType;
use wmx_webgpu::{Launch, Template, WgslKernel};

fn get(o: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(o, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

fn string(what: &str, v: &JsValue) -> JsResult<String> {
    v.as_string()
        .ok_or_else(|| js_err(format!("wgslKernel: {what} must be a string")))
}

fn strings(what: &str, v: &JsValue) -> JsResult<Vec<String>> {
    if !js_sys::Array::is_array(v) {
        return Err(js_err(format!(
            "wgslKernel: {what} must be an array of names"
        )));
    }
    js_sys::Array::from(v)
        .iter()
        .map(|s| string(what, &s))
        .collect()
}

fn dims3(what: &str, v: &JsValue, default: [u32; 3]) -> JsResult<[u32; 3]> {
    if is_nullish(v) {
        return Ok(default);
    }
    let d = cv::shape(what, v)?;
    if d.is_empty() || d.len() > 3 || d.iter().any(|&x| x > u32::MAX as usize) {
        return Err(js_err(format!(
            "{what}: 1 to 3 sizes below 2^32, got {d:?}"
        )));
    }
    let mut out = [1; 3];
    for (o, x) in out.iter_mut().zip(d) {
        *o = x as u32;
    }
    Ok(out)
}

/// A kernel made by [`wgsl_kernel`].
#[wasm_bindgen(js_name = WgslKernel)]
pub struct JsWgslKernel(WgslKernel);

/// `wgslKernel({name, inputs: ["x", ...], outputs: ["y", ...], body, header?,
/// rowContiguous?, guard?, atomicOutputs?})`: a kernel whose body sees each input `x` as
/// `x: array<T>` with `x_shape(d)`, `x_stride(d)`, `x_offset()`, `x_size()`,
/// `x_loc(i)`, each output `y` with `y_shape(d)`, `y_size()`, and `global_id`,
/// `local_id`, `group_id`, `local_index`, `grid`. Invalid WGSL throws at `call`,
/// with naga's message.
#[wasm_bindgen(js_name = wgslKernel)]
pub fn wgsl_kernel(spec: KernelSpecArg) -> JsResult<JsWgslKernel> {
    let name = string("name", &get(&spec, "name"))?;
    let inputs = strings("inputs", &get(&spec, "inputs"))?;
    let outputs = strings("outputs", &get(&spec, "outputs"))?;
    let body = string("body", &get(&spec, "body"))?;
    let ins: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let outs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    let mut k = WgslKernel::new(&name, &ins, &outs, &body);
    let header = get(&spec, "header");
    if !is_nullish(&header) {
        k = k.header(&string("header", &header)?);
    }
    if let Some(b) = get(&spec, "rowContiguous").as_bool() {
        k = k.row_contiguous(b);
    }
    if let Some(b) = get(&spec, "guard").as_bool() {
        k = k.guard(b);
    }
    if let Some(b) = get(&spec, "atomicOutputs").as_bool() {
        k = k.atomic_outputs(b);
    }
    Ok(JsWgslKernel(k))
}

/// `{outputs: [{shape, dtype?}, ...] (or shape and dtype? for one output), grid?,
/// workgroup?, template?, initValue?}`: each output's shape and dtype (default f32), the
/// threads (default one per element of the first output) and workgroup size
/// (default 256), template parameters (`{T: "f32", N: 4, SCALE: 0.5, FAST: true}`:
/// strings are dtypes, integers i32 constants, other numbers f32 ones).
fn launch(v: &JsValue) -> JsResult<Launch> {
    let outs = get(v, "outputs");
    let specs: Vec<JsValue> = if is_nullish(&outs) {
        vec![v.clone()]
    } else if js_sys::Array::is_array(&outs) {
        js_sys::Array::from(&outs).iter().collect()
    } else {
        return Err(js_err(
            "launch.outputs: expected an array of {shape, dtype}",
        ));
    };
    let mut outputs = Vec::new();
    for o in &specs {
        let shape = cv::shape("launch shape", &get(o, "shape"))?;
        outputs.push((shape, cv::dtype(&get(o, "dtype"), DType::F32)?));
    }
    let Some((shape, dtype)) = outputs.first().cloned() else {
        return Err(js_err("launch.outputs: at least one output"));
    };
    let mut l = Launch::elementwise(&shape, dtype);
    l.outputs = outputs;
    l.grid = dims3("launch.grid", &get(v, "grid"), l.grid)?;
    l.workgroup = dims3("launch.workgroup", &get(v, "workgroup"), l.workgroup)?;
    l.init_value = cv::opt_f64("launch.initValue", &get(v, "initValue"))?;
    let t = get(v, "template");
    if !is_nullish(&t) {
        let obj = js_sys::Object::from(t);
        for e in js_sys::Object::entries(&obj).iter() {
            let e = js_sys::Array::from(&e);
            let name = string("template name", &e.get(0))?;
            let val = e.get(1);
            let arg = if let Some(b) = val.as_bool() {
                Template::Bool(b)
            } else if let Some(x) = val.as_f64() {
                if x.fract() == 0.0 && x.abs() < 2f64.powi(31) {
                    Template::Int(x as i32)
                } else {
                    Template::Float(x as f32)
                }
            } else {
                Template::DType(cv::dtype(&val, DType::F32)?)
            };
            l = l.template(&name, arg);
        }
    }
    Ok(l)
}

fn inputs(v: &JsValue) -> JsResult<Vec<wmx_core::Array>> {
    if !js_sys::Array::is_array(v) {
        return Err(js_err("WgslKernel.call: inputs must be an array of arrays"));
    }
    js_sys::Array::from(v).iter().map(|a| lead(&a)).collect()
}

#[wasm_bindgen(js_class = WgslKernel)]
impl JsWgslKernel {
    /// Runs the kernel on `inputs` (lazily, on their WebGPU device): an array of
    /// its outputs.
    pub fn call(&self, inputs_: ArrayInputs, launch_: LaunchArg) -> JsResult<NdArrays> {
        let xs = inputs(&inputs_)?;
        let refs: Vec<&wmx_core::Array> = xs.iter().collect();
        let outs = self.0.call(&refs, &launch(&launch_)?).map_err(err)?;
        Ok(outs
            .into_iter()
            .map(|a| JsValue::from(NdArray::wrap(a)))
            .collect::<js_sys::Array>()
            .unchecked_into())
    }

    /// The generated WGSL for these inputs and launch, for reading and debugging.
    pub fn source(&self, inputs_: ArrayInputs, launch_: LaunchArg) -> JsResult<String> {
        let xs = inputs(&inputs_)?;
        let refs: Vec<&wmx_core::Array> = xs.iter().collect();
        self.0.source(&refs, &launch(&launch_)?).map_err(err)
    }
}
