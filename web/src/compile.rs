//! Compiled functions from JavaScript: `compile(fn)` traces a JS function of
//! arrays once per signature and replays it, fusing elementwise chains into one
//! generated kernel on WebGPU (`wmx_core::compile`); `setMode("compiled" | "lazy" |
//! "eager")` sets the execution mode.

use crate::api::{JsResult, NdArray, lead};
use crate::convert::{err, js_err};
use crate::types::*;
use wasm_bindgen::prelude::*;
use wmx_core::{self as wc, Array, Compiled, Mode};

/// A JS function held by a compiled function. wasm32 without threads runs on one
/// thread, so the Send/Sync that `wmx_core::compile` asks of its function hold.
struct JsFn(js_sys::Function);
// SAFETY: this crate is built for wasm32 without atomics (one thread).
unsafe impl Send for JsFn {}
// SAFETY: as above.
unsafe impl Sync for JsFn {}

/// The arrays a JS function returned: one array, or an array of them.
fn results(v: JsValue) -> JsResult<Vec<Array>> {
    if js_sys::Array::is_array(&v) {
        js_sys::Array::from(&v).iter().map(|a| lead(&a)).collect()
    } else {
        Ok(vec![lead(&v)?])
    }
}

fn inputs(v: &JsValue) -> JsResult<Vec<Array>> {
    if !js_sys::Array::is_array(v) {
        return Err(js_err(
            "CompiledFunction: arguments must be an array of arrays",
        ));
    }
    js_sys::Array::from(v).iter().map(|a| lead(&a)).collect()
}

/// A function made by [`compile`].
#[wasm_bindgen(js_name = CompiledFunction)]
pub struct JsCompiled(Compiled);

/// `compile(fn)`: `fn` takes arrays and returns an array or an array of arrays;
/// `compiled.call([x, y])` returns the results as an array (lazy). The first
/// call per signature (shapes, strides, dtypes, device) runs `fn` on tracers; it
/// must not read data (`await x.data()` cannot run inside it anyway).
#[wasm_bindgen]
pub fn compile(f: ArrayFunction) -> JsCompiled {
    let f = JsFn(f.unchecked_into());
    JsCompiled(wc::compile(move |xs: &[Array]| {
        let args: js_sys::Array = xs
            .iter()
            .map(|a| JsValue::from(NdArray::wrap(a.clone())))
            .collect();
        let out =
            f.0.apply(&JsValue::NULL, &args)
                .map_err(|e| wc::Error::invalid("compile", format!("the function threw: {e:?}")))?;
        results(out).map_err(|e| {
            wc::Error::invalid(
                "compile",
                format!(
                    "the function must return an array or an array of arrays: {:?}",
                    JsValue::from(e)
                ),
            )
        })
    }))
}

#[wasm_bindgen(js_class = CompiledFunction)]
impl JsCompiled {
    /// Calls the function on `args` (an array of arrays): an array of its results.
    pub fn call(&self, args: ArrayInputs) -> JsResult<NdArrays> {
        let xs = inputs(&args)?;
        let outs = self.0.call(&xs).map_err(err)?;
        Ok(outs
            .into_iter()
            .map(|a| JsValue::from(NdArray::wrap(a)))
            .collect::<js_sys::Array>()
            .unchecked_into())
    }

    /// Traces made so far.
    #[wasm_bindgen(getter)]
    pub fn traces(&self) -> usize {
        self.0.traces()
    }

    /// What compiling does for `args`' signature: `{tracedOps, nodes, kernels:
    /// [wgsl, ...]}`.
    pub fn report(&self, args: ArrayInputs) -> JsResult<CompileReportJs> {
        let r = self.0.report(&inputs(&args)?).map_err(err)?;
        let o = js_sys::Object::new();
        let set = |k: &str, v: JsValue| js_sys::Reflect::set(&o, &k.into(), &v).map(|_| ());
        let kernels: js_sys::Array = r
            .kernels
            .iter()
            .map(|k| JsValue::from(k.source.clone().unwrap_or_default()))
            .collect();
        set("tracedOps", (r.traced_ops as f64).into())
            .and_then(|_| set("nodes", (r.nodes as f64).into()))
            .and_then(|_| set("kernels", kernels.into()))
            .map_err(|_| js_err("report: could not build the object"))?;
        Ok(o.unchecked_into())
    }
}

/// `setMode("compiled" | "lazy" | "eager")`: how ops run from now on (compiled, the
/// default: reads fuse the pending elementwise chains; lazy: op by op; eager: each
/// op computes at once, so its error is thrown by the op).
#[wasm_bindgen(js_name = setMode)]
pub fn set_mode(mode: ModeArg) -> JsResult<()> {
    let mode = mode.as_string().unwrap_or_default();
    wc::set_mode(Mode::parse(&mode).map_err(err)?);
    Ok(())
}
