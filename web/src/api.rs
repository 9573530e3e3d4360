//! The JavaScript API (see the crate docs and `web/README.md`).

use crate::convert::{self as cv, HostData, err, js_err};
use crate::types::*;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wmx_core::{self as wc, Array, DType, Device, DeviceKind, Slice};
use wmx_webgpu::{RequestOptions, WebGpuBackend};

pub(crate) type JsResult<T> = Result<T, JsError>;

thread_local! {
    /// The WebGPU device once opened (wasm is single-threaded).
    static GPU: RefCell<Option<Device>> = const { RefCell::new(None) };
    /// Why the WebGPU device could not be opened, if it could not.
    static GPU_ERROR: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Live arrays by id, so an array passed as a plain JS value can be found
    /// without consuming the JS object.
    static LIVE: RefCell<HashMap<u32, Array>> = RefCell::new(HashMap::new());
    /// Ids of the arrays made inside each open tidy scope, innermost last.
    static SCOPES: RefCell<Vec<Vec<u32>>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<u32> = const { Cell::new(1) };
    /// `GPUAdapter.info` as the browser reports it (wgpu keeps only `description`,
    /// which browsers leave empty).
    static ADAPTER_INFO: RefCell<Option<JsValue>> = const { RefCell::new(None) };
}

// ---------------------------------------------------------------- devices

fn set(obj: &js_sys::Object, k: &str, v: impl Into<JsValue>) {
    let _ = js_sys::Reflect::set(obj, &JsValue::from_str(k), &v.into());
}

fn has_navigator_gpu() -> bool {
    let global = js_sys::global();
    let nav = js_sys::Reflect::get(&global, &JsValue::from_str("navigator")).unwrap_or_default();
    if nav.is_undefined() || nav.is_null() {
        return false;
    }
    let gpu = js_sys::Reflect::get(&nav, &JsValue::from_str("gpu")).unwrap_or_default();
    !(gpu.is_undefined() || gpu.is_null())
}

/// Opens the browser's WebGPU device once (later calls return it).
async fn open_gpu() -> Result<Device, String> {
    if let Some(d) = GPU.with(|g| g.borrow().clone()) {
        return Ok(d);
    }
    if !has_navigator_gpu() {
        return Err("navigator.gpu is missing: this browser has no WebGPU (Chromium on Linux needs --enable-unsafe-webgpu)".into());
    }
    let opts = RequestOptions {
        backends: wgpu::Backends::BROWSER_WEBGPU,
        power: wgpu::PowerPreference::HighPerformance,
        ..RequestOptions::default()
    };
    let be = WebGpuBackend::new_async(&opts)
        .await
        .map_err(|e| e.to_string())?;
    let d = Device::new(std::sync::Arc::new(be));
    GPU.with(|g| *g.borrow_mut() = Some(d.clone()));
    let ai = browser_adapter_info().await.unwrap_or(JsValue::NULL);
    ADAPTER_INFO.with(|a| *a.borrow_mut() = Some(ai));
    Ok(d)
}

/// `(await navigator.gpu.requestAdapter()).info` (same options as wgpu's request),
/// for the vendor and architecture wgpu does not pass on.
async fn browser_adapter_info() -> Result<JsValue, JsValue> {
    let get = |o: &JsValue, k: &str| js_sys::Reflect::get(o, &JsValue::from_str(k));
    let gpu = get(&get(&js_sys::global(), "navigator")?, "gpu")?;
    let request: js_sys::Function = get(&gpu, "requestAdapter")?.dyn_into()?;
    let opts = js_sys::Object::new();
    set(&opts, "powerPreference", "high-performance");
    let promise: js_sys::Promise = request.call1(&gpu, &opts)?.dyn_into()?;
    let adapter = wasm_bindgen_futures::JsFuture::from(promise).await?;
    if adapter.is_null() || adapter.is_undefined() {
        return Ok(JsValue::NULL);
    }
    let info = get(&adapter, "info")?;
    let o = js_sys::Object::new();
    for k in [
        "vendor",
        "architecture",
        "device",
        "description",
        "isFallbackAdapter",
    ] {
        set(&o, k, get(&info, k)?);
    }
    Ok(o.into())
}

/// A readable adapter name: the description, else "vendor architecture".
fn adapter_name(wgpu_name: &str) -> String {
    if !wgpu_name.is_empty() {
        return wgpu_name.to_string();
    }
    let ai = ADAPTER_INFO
        .with(|a| a.borrow().clone())
        .unwrap_or(JsValue::NULL);
    let get = |k: &str| {
        js_sys::Reflect::get(&ai, &JsValue::from_str(k))
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_default()
    };
    let name = [get("description"), get("vendor"), get("architecture")]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if name.is_empty() {
        "unnamed browser WebGPU adapter".into()
    } else {
        name
    }
}

/// A device name passed from JS (a string).
fn name_of(v: &JsValue) -> JsResult<String> {
    v.as_string().ok_or_else(|| {
        js_err(format!(
            "expected a device name (\"webgpu\", \"gpu\" or \"cpu\"), got {v:?}"
        ))
    })
}

fn device_by_name(name: &str) -> JsResult<Device> {
    match name {
        "cpu" => Ok(Device::cpu()),
        "gpu" | "webgpu" => GPU.with(|g| g.borrow().clone()).ok_or_else(|| {
            js_err(format!(
                "no WebGPU device: {}",
                GPU_ERROR
                    .with(|e| e.borrow().clone())
                    .unwrap_or_else(|| "call `await wmx.init()` first".into())
            ))
        }),
        other => Err(js_err(format!(
            "unknown device {other:?}; expected \"webgpu\" (or \"gpu\") or \"cpu\""
        ))),
    }
}

fn device_label(d: &Device) -> &'static str {
    match d.kind() {
        DeviceKind::Gpu => "webgpu",
        DeviceKind::Cpu => "cpu",
    }
}

fn info(d: &Device) -> js_sys::Object {
    let o = js_sys::Object::new();
    set(&o, "device", device_label(d));
    set(&o, "name", d.name());
    if let Some(be) = wmx_webgpu::backend(d) {
        let c = be.kernels().caps();
        set(&o, "adapter", adapter_name(&c.adapter_name));
        set(
            &o,
            "adapterInfo",
            ADAPTER_INFO
                .with(|a| a.borrow().clone())
                .unwrap_or(JsValue::NULL),
        );
        set(&o, "backend", format!("{:?}", c.backend));
        set(&o, "deviceType", format!("{:?}", c.device_type));
        set(&o, "f16", c.f16);
        set(&o, "subgroups", c.subgroups);
        set(&o, "maxBufferSize", c.max_buffer as f64);
        set(
            &o,
            "maxStorageBufferBindingSize",
            c.max_storage_binding as f64,
        );
        set(&o, "maxWorkgroupsPerDimension", c.max_workgroups_per_dim);
    } else {
        set(&o, "adapter", "wmx CPU backend (wasm)");
        set(&o, "backend", "cpu");
        set(&o, "deviceType", "Cpu");
        set(&o, "f16", true);
        set(&o, "subgroups", false);
    }
    let reason = GPU_ERROR.with(|e| e.borrow().clone());
    set(
        &o,
        "fallback",
        d.kind() == DeviceKind::Cpu && reason.is_some(),
    );
    set(
        &o,
        "reason",
        reason.map(JsValue::from).unwrap_or(JsValue::NULL),
    );
    o
}

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|p| {
            web_sys::console::error_1(&JsValue::from_str(&format!("wmx panicked: {p}")));
        }));
    });
}

/// Chooses the default device and returns what it chose:
/// `{device: "webgpu"|"cpu", name, adapter, backend, deviceType, f16, fallback, reason, …}`.
///
/// `options.device`: `"auto"` (default: WebGPU through `navigator.gpu`, else the
/// CPU backend inside wasm, with `fallback: true` and the `reason`), `"webgpu"`
/// (throws when there is none) or `"cpu"`. May be called again to switch.
#[wasm_bindgen(js_name = init)]
pub async fn init(options: Option<InitArg>) -> JsResult<DeviceInfoJs> {
    install_panic_hook();
    let options = opt(options);
    let want = if options.is_undefined() || options.is_null() {
        "auto".to_string()
    } else if let Some(s) = options.as_string() {
        s
    } else {
        js_sys::Reflect::get(&options, &JsValue::from_str("device"))
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_else(|| "auto".into())
    };
    let dev = match want.as_str() {
        "cpu" => Device::cpu(),
        "auto" | "webgpu" | "gpu" => match open_gpu().await {
            Ok(d) => {
                GPU_ERROR.with(|e| *e.borrow_mut() = None);
                d
            }
            Err(msg) => {
                GPU_ERROR.with(|e| *e.borrow_mut() = Some(msg.clone()));
                if want != "auto" {
                    return Err(js_err(format!("no WebGPU device: {msg}")));
                }
                web_sys::console::warn_1(&JsValue::from_str(&format!(
                    "wmx: WebGPU unavailable ({msg}); using the CPU backend"
                )));
                Device::cpu()
            }
        },
        other => {
            return Err(js_err(format!(
                "init: unknown device {other:?}; expected \"auto\", \"webgpu\" or \"cpu\""
            )));
        }
    };
    wc::set_default_device(dev.clone());
    Ok(info(&dev).unchecked_into())
}

/// Makes `"webgpu"` or `"cpu"` the device new arrays go to (WebGPU must have been
/// opened by `init`). Returns its info.
#[wasm_bindgen(js_name = setDevice)]
pub fn set_device(name: DeviceNameArg) -> JsResult<DeviceInfoJs> {
    let d = device_by_name(&name_of(&name)?)?;
    wc::set_default_device(d.clone());
    Ok(info(&d).unchecked_into())
}

/// Info about the current default device, or the named one.
#[wasm_bindgen(js_name = deviceInfo)]
pub fn device_info(name: Option<DeviceNameArg>) -> JsResult<DeviceInfoJs> {
    let d = match name {
        Some(n) => device_by_name(&name_of(&n)?)?,
        None => wc::default_device().map_err(err)?,
    };
    Ok(info(&d).unchecked_into())
}

/// Submits pending work on every device and resolves when the GPU has finished it
/// (for timing; reads wait by themselves).
#[wasm_bindgen]
pub async fn synchronize() -> JsResult<()> {
    Device::cpu().backend().flush().map_err(err)?;
    let gpu = GPU.with(|g| g.borrow().clone());
    if let Some(d) = gpu {
        d.backend().flush().map_err(err)?;
        if let Some(be) = wmx_webgpu::backend(&d) {
            let (tx, rx) = futures::channel::oneshot::channel::<()>();
            be.kernels().queue().on_submitted_work_done(move || {
                let _ = tx.send(());
            });
            let _ = rx.await;
        }
        // Errors recorded by the device (validation, lost device) surface here.
        d.synchronize().map_err(err)?;
    }
    Ok(())
}

// ---------------------------------------------------------------- arrays

/// An n-dimensional wmx array (lazy: ops build a graph, reads compute it).
/// `free()`/`dispose()` (or `using`, or the end of a `tidy` scope) release it now;
/// otherwise the garbage collector does.
#[wasm_bindgen]
pub struct NdArray {
    /// Key of the core array in LIVE, its only owner, so that a tidy scope can
    /// release arrays whose JS handles it never sees.
    id: u32,
}

/// The error of using a released array.
const RELEASED: &str = "this array was released (dispose(), free() or the end of its tidy scope)";

impl NdArray {
    /// Wraps a core array (and records it in the innermost tidy scope).
    pub fn wrap(a: Array) -> NdArray {
        let id = NEXT_ID.with(|n| {
            let id = n.get();
            n.set(id.wrapping_add(1).max(1));
            id
        });
        LIVE.with(|l| l.borrow_mut().insert(id, a));
        SCOPES.with(|s| {
            if let Some(top) = s.borrow_mut().last_mut() {
                top.push(id);
            }
        });
        NdArray { id }
    }
    /// The core array; an error once it was released (dispose, free or tidy).
    pub fn arr(&self) -> JsResult<Array> {
        LIVE.with(|l| l.borrow().get(&self.id).cloned())
            .ok_or_else(|| js_err(RELEASED))
    }
}

impl Drop for NdArray {
    fn drop(&mut self) {
        let id = self.id;
        // try_with: thread-locals may already be gone at teardown.
        let _ = LIVE.try_with(|l| l.borrow_mut().remove(&id));
    }
}

pub(crate) fn wrap(r: wc::Result<Array>) -> JsResult<NdArray> {
    r.map(NdArray::wrap).map_err(err)
}

/// An array from a JS value that is an `NdArray` (found by its id, not consumed).
fn as_ndarray(v: &JsValue) -> JsResult<Option<Array>> {
    if !v.is_object() {
        return Ok(None);
    }
    let id = match js_sys::Reflect::get(v, &JsValue::from_str("__wmxId")) {
        Ok(x) => x,
        Err(_) => {
            return Err(js_err(RELEASED));
        }
    };
    let Some(id) = id.as_f64() else {
        return Ok(None);
    };
    LIVE.with(|l| l.borrow().get(&(id as u32)).cloned())
        .map(Some)
        .ok_or_else(|| js_err(RELEASED))
}

/// Host data → array on `device` with `dtype` (or the data's natural dtype).
fn from_host(
    data: &JsValue,
    shape: Option<Vec<usize>>,
    dtype: Option<DType>,
    device: &Device,
) -> JsResult<Array> {
    let scalar_input = data.as_f64().is_some() || data.as_bool().is_some();
    let (bytes, natural, n) = match cv::host_data(data, dtype)? {
        HostData::Bytes(b, d, n) => (b, d, n),
        HostData::Numbers(v, natural) => {
            let d = dtype.unwrap_or(natural);
            let n = v.len();
            (cv::values_to_bytes(&v, d), d, n)
        }
    };
    let shape = match shape {
        Some(s) => s,
        None if scalar_input => vec![],
        None => vec![n],
    };
    let a = Array::from_bytes_on(bytes, &shape, natural, device).map_err(err)?;
    match dtype {
        Some(d) if d != natural => a.astype(d).map_err(err),
        _ => Ok(a),
    }
}

/// An operand: an `NdArray`, or a number / typed array / JS array (a number keeps
/// `like`'s dtype where it fits, as MLX's weak scalars).
fn operand(v: &JsValue, like: &Array) -> JsResult<Array> {
    if let Some(a) = as_ndarray(v)? {
        return Ok(a);
    }
    if let Some(n) = v.as_f64() {
        return wc::scalar_like(like, n).map_err(err);
    }
    if let Some(b) = v.as_bool() {
        return wc::with_device(like.device(), || wc::scalar(b as u8 as f64, DType::Bool))
            .map_err(err);
    }
    from_host(v, None, None, like.device())
}

/// The first array-like argument as an array (numbers become f32 0-d arrays).
pub(crate) fn lead(v: &JsValue) -> JsResult<Array> {
    if let Some(a) = as_ndarray(v)? {
        return Ok(a);
    }
    from_host(v, None, None, &wc::default_device().map_err(err)?)
}

/// Two operands of a binary op: at least one should be an `NdArray`.
fn pair(a: &JsValue, b: &JsValue) -> JsResult<(Array, Array)> {
    match (as_ndarray(a)?, as_ndarray(b)?) {
        (Some(x), Some(y)) => Ok((x, y)),
        (Some(x), None) => {
            let y = operand(b, &x)?;
            Ok((x, y))
        }
        (None, Some(y)) => {
            let x = operand(a, &y)?;
            Ok((x, y))
        }
        (None, None) => Ok((lead(a)?, lead(b)?)),
    }
}

fn slices(spec: &JsValue) -> JsResult<Vec<Slice>> {
    if !js_sys::Array::is_array(spec) {
        return Err(js_err(
            "slice: expected an array with one entry per leading axis: null (whole axis), an index range [start, stop, step] (entries may be null)",
        ));
    }
    let arr = js_sys::Array::from(spec);
    let opt = |v: JsValue, what: &str| -> JsResult<Option<isize>> {
        Ok(cv::opt_f64(what, &v)?.map(|x| x as isize))
    };
    arr.iter()
        .enumerate()
        .map(|(i, s)| {
            if s.is_undefined() || s.is_null() {
                return Ok(Slice::ALL);
            }
            if !js_sys::Array::is_array(&s) {
                return Err(js_err(format!(
                    "slice: entry {i} must be null or [start, stop, step], got {s:?}"
                )));
            }
            let t = js_sys::Array::from(&s);
            let step = opt(t.get(2), "slice step")?.unwrap_or(1);
            Ok(Slice::new(
                opt(t.get(0), "slice start")?,
                opt(t.get(1), "slice stop")?,
                step,
            ))
        })
        .collect()
}

#[wasm_bindgen]
impl NdArray {
    /// Dimensions, as a JS array of numbers.
    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> JsResult<Dims> {
        Ok(cv::js_numbers(self.arr()?.shape().iter().map(|&d| d as f64)).unchecked_into())
    }
    /// dtype name: `"f32"`, `"i32"`, `"u32"`, `"u8"`, `"bool"`, `"f16"`, `"bf16"`, `"i64"`, `"u64"`, `"f64"`.
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> JsResult<String> {
        Ok(self.arr()?.dtype().name().to_string())
    }
    /// Number of elements.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> JsResult<usize> {
        Ok(self.arr()?.size())
    }
    /// Number of dimensions.
    #[wasm_bindgen(getter)]
    pub fn ndim(&self) -> JsResult<usize> {
        Ok(self.arr()?.ndim())
    }
    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> JsResult<String> {
        Ok(device_label(self.arr()?.device()).into())
    }
    /// Internal: finds this array when it is passed as a plain JS value.
    #[wasm_bindgen(getter = __wmxId)]
    pub fn wmx_id(&self) -> u32 {
        self.id
    }

    /// Resolves to the elements (row-major) as a typed array: Float32Array (f32),
    /// Int32Array (i32), Uint32Array (u32), Uint8Array (u8, bool), Uint16Array (the
    /// bits of f16/bf16), BigInt64Array (i64), BigUint64Array (u64), Float64Array (f64, CPU
    /// backend only).
    /// Computes the array first.
    pub fn data(&self) -> JsResult<TypedDataPromise> {
        let a = self.arr()?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            let bytes = a.to_bytes_async().await.map_err(err)?;
            Ok(cv::typed_array(&bytes, a.dtype()))
        })
        .unchecked_into())
    }

    /// Resolves to the single element (number, boolean, or BigInt for i64/u64).
    pub fn item(&self) -> JsResult<ElementPromise> {
        let a = self.arr()?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            if a.size() != 1 {
                return Err(js_err(format!(
                    "item: array of shape {:?} has {} elements, not 1",
                    a.shape(),
                    a.size()
                ))
                .into());
            }
            let bytes = a.to_bytes_async().await.map_err(err)?;
            Ok(cv::element_value(&bytes, a.dtype()))
        })
        .unchecked_into())
    }

    /// Computes the array now (submits GPU work; does not wait for it).
    pub fn eval(&self) -> JsResult<()> {
        self.arr()?.eval().map_err(err)
    }

    /// Resolves to a copy of this array on `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(js_name = toDevice)]
    pub fn to_device(&self, name: DeviceNameArg) -> JsResult<NdArrayPromise> {
        let target = device_by_name(&name_of(&name)?)?;
        let a = self.arr()?;
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            if a.device() == &target {
                return Ok(NdArray::wrap(a).into());
            }
            let bytes = a.to_bytes_async().await.map_err(err)?;
            let b = Array::from_bytes_on(bytes, a.shape(), a.dtype(), &target).map_err(err)?;
            Ok(NdArray::wrap(b).into())
        })
        .unchecked_into())
    }

    /// Releases the array now (same as `free()`); using it afterwards throws.
    pub fn dispose(self) {}

    /// `NdArray(shape=[…], dtype=…, device=…, evaluated=…)` (does not compute).
    #[wasm_bindgen(js_name = toString)]
    pub fn to_string_js(&self) -> String {
        match self.arr() {
            Ok(a) => format!("Nd{a:?}"),
            Err(_) => "NdArray(released)".into(),
        }
    }

    /// Converts to `dtype` (rules in docs/SEMANTICS.md).
    pub fn astype(&self, dtype: DTypeArg) -> JsResult<NdArray> {
        let d = cv::dtype(&dtype, DType::F32)?;
        wrap(self.arr()?.astype(d))
    }
    /// New shape (one entry may be -1). A view when strides allow.
    pub fn reshape(&self, shape: ShapeArg) -> JsResult<NdArray> {
        wrap(self.arr()?.reshape(&cv::ints("reshape", &shape)?))
    }
    /// Permutes axes (reverses them when `axes` is omitted). A view.
    pub fn transpose(&self, axes: Option<AxesArg>) -> JsResult<NdArray> {
        let axes = opt(axes);
        let ax = cv::axes(&axes)?;
        wrap(self.arr()?.transpose(ax.as_deref()))
    }
    /// Reversed axes. A view.
    #[wasm_bindgen(getter = T)]
    pub fn t(&self) -> JsResult<NdArray> {
        wrap(self.arr()?.t())
    }
    /// Broadcasts to `shape`. A view.
    #[wasm_bindgen(js_name = broadcastTo)]
    pub fn broadcast_to(&self, shape: ShapeArg) -> JsResult<NdArray> {
        wrap(self.arr()?.broadcast_to(&cv::shape("broadcastTo", &shape)?))
    }
    /// Inserts a size-1 axis. A view.
    #[wasm_bindgen(js_name = expandDims)]
    pub fn expand_dims(&self, axis: i32) -> JsResult<NdArray> {
        wrap(wc::expand_dims(&self.arr()?, axis as isize))
    }
    /// Removes size-1 axes (all when `axes` is omitted). A view.
    pub fn squeeze(&self, axes: Option<AxesArg>) -> JsResult<NdArray> {
        let axes = opt(axes);
        let ax = cv::axes(&axes)?;
        wrap(wc::squeeze(&self.arr()?, ax.as_deref()))
    }
    /// Python-style slicing, one entry per leading axis: `null` (whole axis) or
    /// `[start, stop, step]` with nullable entries, e.g. `a.slice([null, [null, null, -1]])`.
    /// A view, negative steps included.
    pub fn slice(&self, spec: SliceArg) -> JsResult<NdArray> {
        wrap(self.arr()?.slice(&slices(&spec)?))
    }
    /// A row-major copy (no-op when already row-major).
    pub fn contiguous(&self) -> JsResult<NdArray> {
        wrap(wc::contiguous(&self.arr()?))
    }
    /// 1-D view or copy.
    pub fn flatten(&self) -> JsResult<NdArray> {
        wrap(self.arr()?.reshape(&[-1]))
    }
    /// Variance over `axes` with `ddof` delta degrees of freedom.
    pub fn var(
        &self,
        axes: Option<AxesArg>,
        keepdims: Option<bool>,
        ddof: Option<u32>,
    ) -> JsResult<NdArray> {
        let axes = opt(axes);
        let ax = cv::axes(&axes)?;
        wrap(wc::var(
            &self.arr()?,
            ax.as_deref(),
            keepdims.unwrap_or(false),
            ddof.unwrap_or(0) as usize,
        ))
    }
    /// Index (u32) of the largest element along `axis` (all elements, flattened,
    /// when omitted).
    pub fn argmax(&self, axis: Option<i32>, keepdims: Option<bool>) -> JsResult<NdArray> {
        arg(&self.arr()?, axis, keepdims, wc::argmax)
    }
    /// Index (u32) of the smallest element along `axis`.
    pub fn argmin(&self, axis: Option<i32>, keepdims: Option<bool>) -> JsResult<NdArray> {
        arg(&self.arr()?, axis, keepdims, wc::argmin)
    }
}

type ArgFn = fn(&Array, isize, bool) -> wc::Result<Array>;

fn arg(a: &Array, axis: Option<i32>, keepdims: Option<bool>, f: ArgFn) -> JsResult<NdArray> {
    match axis {
        Some(ax) => wrap(f(a, ax as isize, keepdims.unwrap_or(false))),
        None => wrap(a.reshape(&[-1]).and_then(|flat| f(&flat, 0, false))),
    }
}

// The elementwise ops, functions and methods, from the op tables of `wmx-spec`
// (a JavaScript name is the function's unless the table gives one).
macro_rules! unary_api {
    ($($(#[$m:meta])* $op:ident => $f:ident $(/ $js:literal)?, $kind:ident;)*) => {
        $( unary_api!(@op [$(#[$m])*] $f, $($js)?); )*
    };
    (@op [$($doc:tt)*] $f:ident, ) => { unary_api!(@op [$($doc)*] $f, $f); };
    (@op [$($doc:tt)*] $f:ident, $js:tt) => {
        $($doc)*
        #[wasm_bindgen(js_name = $js)]
        pub fn $f(x: &ArrayInput) -> JsResult<NdArray> { wrap(wc::$f(&lead(x)?)) }
        #[wasm_bindgen]
        impl NdArray {
            $($doc)*
            #[wasm_bindgen(js_name = $js)]
            pub fn $f(&self) -> JsResult<NdArray> { wrap(wc::$f(&self.arr()?)) }
        }
    };
}
wmx_spec::for_each_unary_op!(unary_api);

macro_rules! binary_api {
    ($($(#[$m:meta])* $op:ident => $f:ident $(/ $js:literal)?, $kind:ident;)*) => {
        $( binary_api!(@op [$(#[$m])*] $f, $($js)?); )*
    };
    (@op [$($doc:tt)*] $f:ident, ) => { binary_api!(@op [$($doc)*] $f, $f); };
    (@op [$($doc:tt)*] $f:ident, $js:tt) => {
        $($doc)*
        ///
        /// With numpy broadcasting; either operand may be a number.
        #[wasm_bindgen(js_name = $js)]
        pub fn $f(a: &ArrayInput, b: &ArrayInput) -> JsResult<NdArray> {
            let (a, b) = pair(a, b)?;
            wrap(wc::$f(&a, &b))
        }
        #[wasm_bindgen]
        impl NdArray {
            $($doc)*
            ///
            /// With numpy broadcasting; `other` may be a number.
            #[wasm_bindgen(js_name = $js)]
            pub fn $f(&self, other: &ArrayInput) -> JsResult<NdArray> {
                let me = self.arr()?;
                wrap(wc::$f(&me, &operand(other, &me)?))
            }
        }
    };
}
wmx_spec::for_each_binary_op!(binary_api);

macro_rules! reduce_api {
    ($($f:ident => $js:literal),* $(,)?) => {
        $(
            #[doc = concat!("`", $js, "` over `axes` (a number or an array; all when omitted).")]
            #[wasm_bindgen(js_name = $js)]
            pub fn $f(x: &ArrayInput, axes: Option<AxesArg>, keepdims: Option<bool>) -> JsResult<NdArray> {
                let axes = opt(axes);
                let ax = cv::axes(&axes)?;
                wrap(wc::$f(&lead(x)?, ax.as_deref(), keepdims.unwrap_or(false)))
            }
        )*
        #[wasm_bindgen]
        impl NdArray {
            $(
                #[doc = concat!("`", $js, "` over `axes` (a number or an array; all when omitted).")]
                #[wasm_bindgen(js_name = $js)]
                pub fn $f(&self, axes: Option<AxesArg>, keepdims: Option<bool>) -> JsResult<NdArray> {
                    let axes = opt(axes);
                    let ax = cv::axes(&axes)?;
                    wrap(wc::$f(&self.arr()?, ax.as_deref(), keepdims.unwrap_or(false)))
                }
            )*
        }
    };
}
reduce_api!(sum => "sum", prod => "prod", max => "max", min => "min", all => "all",
    any => "any", mean => "mean", logsumexp => "logsumexp");

// ---------------------------------------------------------------- creation & free functions

/// An array from a typed array (Float32Array, Int32Array, Uint32Array, Uint8Array;
/// Uint16Array holds f16 bits, or bf16 bits with dtype "bf16"), a flat JS array of
/// numbers or booleans, or a number; `shape` defaults to the data's length
/// (0-d for a number); `dtype` converts.
#[wasm_bindgen]
pub fn array(
    data: &HostDataArg,
    shape: Option<ShapeArg>,
    dtype: Option<DTypeArg>,
) -> JsResult<NdArray> {
    let (shape, dtype) = (opt(shape), opt(dtype));
    let sh = if shape.is_undefined() || shape.is_null() {
        None
    } else {
        Some(cv::shape("array shape", &shape)?)
    };
    let dt = if dtype.is_undefined() || dtype.is_null() {
        None
    } else {
        Some(cv::dtype(&dtype, DType::F32)?)
    };
    let d = wc::default_device().map_err(err)?;
    from_host(data, sh, dt, &d).map(NdArray::wrap)
}

/// Every element `value` (dtype default f32).
#[wasm_bindgen]
pub fn full(shape: ShapeArg, value: f64, dtype: Option<DTypeArg>) -> JsResult<NdArray> {
    let dtype = opt(dtype);
    wrap(wc::full(
        &cv::shape("full", &shape)?,
        value,
        cv::dtype(&dtype, DType::F32)?,
    ))
}

/// Zeros (dtype default f32).
#[wasm_bindgen]
pub fn zeros(shape: ShapeArg, dtype: Option<DTypeArg>) -> JsResult<NdArray> {
    full(shape, 0.0, dtype)
}

/// Ones (dtype default f32).
#[wasm_bindgen]
pub fn ones(shape: ShapeArg, dtype: Option<DTypeArg>) -> JsResult<NdArray> {
    full(shape, 1.0, dtype)
}

/// `arange(stop)` or `arange(start, stop, step = 1, dtype = "f32")`.
#[wasm_bindgen]
pub fn arange(
    start: f64,
    stop: Option<f64>,
    step: Option<f64>,
    dtype: Option<DTypeArg>,
) -> JsResult<NdArray> {
    let (stop, step, dtype) = (opt(stop), opt(step), opt(dtype));
    let (start, stop) = match cv::opt_f64("arange stop", &stop)? {
        Some(s) => (start, s),
        None => (0.0, start),
    };
    let step = cv::opt_f64("arange step", &step)?.unwrap_or(1.0);
    wrap(wc::arange(
        start,
        stop,
        step,
        cv::dtype(&dtype, DType::F32)?,
    ))
}

/// `num` evenly spaced values from `start` to `stop` inclusive.
#[wasm_bindgen]
pub fn linspace(start: f64, stop: f64, num: u32, dtype: Option<DTypeArg>) -> JsResult<NdArray> {
    let dtype = opt(dtype);
    wrap(wc::linspace(
        start,
        stop,
        num as usize,
        cv::dtype(&dtype, DType::F32)?,
    ))
}

/// The `n × n` identity.
#[wasm_bindgen]
pub fn eye(n: u32, dtype: Option<DTypeArg>) -> JsResult<NdArray> {
    let dtype = opt(dtype);
    wrap(wc::eye(n as usize, cv::dtype(&dtype, DType::F32)?))
}

/// `alpha * x + beta * y` in one pass (MLX's axpby), with broadcasting.
#[wasm_bindgen]
pub fn axpby(x: &ArrayInput, y: &ArrayInput, alpha: f64, beta: f64) -> JsResult<NdArray> {
    let (x, y) = pair(x, y)?;
    wrap(wc::axpby(&x, &y, alpha, beta))
}

/// Matrix product with numpy's rules (1-D operands, broadcast batch dims); float
/// dtypes, 16-bit ones accumulated in f32.
#[wasm_bindgen]
pub fn matmul(a: &ArrayInput, b: &ArrayInput) -> JsResult<NdArray> {
    wrap(wc::matmul(&lead(a)?, &lead(b)?))
}

/// `alpha * (a @ b) + beta * c` in one pass (alpha and beta default to 1).
#[wasm_bindgen]
pub fn addmm(
    c: &ArrayInput,
    a: &ArrayInput,
    b: &ArrayInput,
    alpha: Option<f64>,
    beta: Option<f64>,
) -> JsResult<NdArray> {
    let (a, b) = (lead(a)?, lead(b)?);
    let c = operand(c, &a)?;
    wrap(wc::addmm(
        &c,
        &a,
        &b,
        alpha.unwrap_or(1.0),
        beta.unwrap_or(1.0),
    ))
}

/// The last axis when `axes` is omitted.
fn norm_axes(axes: &JsValue) -> JsResult<Vec<isize>> {
    Ok(cv::axes(axes)?.unwrap_or_else(|| vec![-1]))
}

/// Softmax over `axes` (a number or an array; the last axis when omitted).
#[wasm_bindgen]
pub fn softmax(x: &ArrayInput, axes: Option<AxesArg>) -> JsResult<NdArray> {
    let axes = opt(axes);
    wrap(wc::softmax(&lead(x)?, &norm_axes(&axes)?))
}

/// Log-softmax over `axes` (the last axis when omitted).
#[wasm_bindgen(js_name = logSoftmax)]
pub fn log_softmax(x: &ArrayInput, axes: Option<AxesArg>) -> JsResult<NdArray> {
    let axes = opt(axes);
    wrap(wc::log_softmax(&lead(x)?, &norm_axes(&axes)?))
}

/// An optional per-column parameter (`null`/`undefined`: absent).
fn param(v: &JsValue) -> JsResult<Option<Array>> {
    if cv::is_nullish(v) {
        Ok(None)
    } else {
        lead(v).map(Some)
    }
}

/// Layer normalisation over the last axis; `weight` and `bias` may be omitted
/// (`null`); `eps` defaults to 1e-5.
#[wasm_bindgen(js_name = layerNorm)]
pub fn layer_norm(
    x: &ArrayInput,
    weight: Option<ArrayInput>,
    bias: Option<ArrayInput>,
    eps: Option<f64>,
) -> JsResult<NdArray> {
    let (weight, bias) = (opt(weight), opt(bias));
    let (w, b) = (param(&weight)?, param(&bias)?);
    wrap(wc::layer_norm(
        &lead(x)?,
        w.as_ref(),
        b.as_ref(),
        eps.unwrap_or(1e-5),
    ))
}

/// RMS normalisation over the last axis; `weight` may be omitted; `eps` defaults to 1e-5.
#[wasm_bindgen(js_name = rmsNorm)]
pub fn rms_norm(x: &ArrayInput, weight: Option<ArrayInput>, eps: Option<f64>) -> JsResult<NdArray> {
    let weight = opt(weight);
    let w = param(&weight)?;
    wrap(wc::rms_norm(&lead(x)?, w.as_ref(), eps.unwrap_or(1e-5)))
}

/// Rotary position embedding (MLX's `fast.rope`) of `x` (`[..., L, D]`): the first
/// `dims` elements of each row rotate in pairs (`traditional`: adjacent pairs, else
/// the two halves) by `scale * position * base^(-2k / dims)`, or `/ freqs[k]` when
/// `freqs` is given (then `base` must be `null`). `offset`: the first position, a
/// number or an integer array with one per index of `x`'s first axis. Defaults:
/// `traditional` false, `base` 10000 (without `freqs`), `scale` 1, `offset` 0.
#[wasm_bindgen]
pub fn rope(
    x: &ArrayInput,
    dims: usize,
    traditional: Option<bool>,
    base: Option<f64>,
    scale: Option<f64>,
    offset: Option<ArrayInput>,
    freqs: Option<ArrayInput>,
) -> JsResult<NdArray> {
    let x = lead(x)?;
    let freqs = param(&opt(freqs))?;
    let base = base.or(freqs.is_none().then_some(10000.0));
    let offset = opt(offset);
    let offset = match offset.as_f64() {
        Some(n) if n.fract() == 0.0 => {
            wc::with_device(x.device(), || wc::scalar(n, DType::I32)).map_err(err)?
        }
        Some(n) => return Err(js_err(format!("rope: offset must be an integer, got {n}"))),
        None if cv::is_nullish(&offset) => {
            wc::with_device(x.device(), || wc::scalar(0.0, DType::I32)).map_err(err)?
        }
        None => lead(&offset)?,
    };
    wrap(wc::rope(
        &x,
        dims,
        traditional.unwrap_or(false),
        base,
        scale.unwrap_or(1.0),
        &offset,
        freqs.as_ref(),
    ))
}

/// Field `k` of an options object (`undefined` when the object is absent).
pub(crate) fn field(o: &JsValue, k: &str) -> JsValue {
    if cv::is_nullish(o) {
        return JsValue::UNDEFINED;
    }
    js_sys::Reflect::get(o, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED)
}

/// A per-axis option: absent is `[]` (the default), a number applies to every axis.
fn per_axis(what: &str, o: &JsValue, k: &str) -> JsResult<Vec<usize>> {
    let v = field(o, k);
    if cv::is_nullish(&v) {
        return Ok(vec![]);
    }
    cv::shape(&format!("{what}: {k}"), &v)
}

fn flag(o: &JsValue, k: &str, default: bool) -> bool {
    field(o, k).as_bool().unwrap_or(default)
}

fn groups(o: &JsValue) -> JsResult<usize> {
    match field(o, "groups").as_f64() {
        None => Ok(1),
        Some(g) if g >= 1.0 && g.fract() == 0.0 => Ok(g as usize),
        Some(g) => Err(js_err(format!(
            "groups must be a positive integer, got {g}"
        ))),
    }
}

/// Convolution (MLX's `conv_general`), channels last: `x` `[N, ...spatial, C_in]`,
/// `w` `[C_out, ...kernel, C_in / groups]`, result `[N, ...out, C_out]`. Options:
/// `stride`, `padding` (both sides, or `[before, after]` per axis), `dilation`,
/// `inputDilation`, `groups`, `flip` (defaults 1, 0, 1, 1, 1, false).
#[wasm_bindgen]
pub fn conv(x: &ArrayInput, w: &ArrayInput, options: Option<ConvOptionsArg>) -> JsResult<NdArray> {
    let o: JsValue = options.map(Into::into).unwrap_or(JsValue::UNDEFINED);
    let pad = field(&o, "padding");
    let pairs = js_sys::Array::is_array(&pad)
        && js_sys::Array::from(&pad).length() > 0
        && js_sys::Array::is_array(&js_sys::Array::from(&pad).get(0));
    let padding = if pairs {
        js_sys::Array::from(&pad)
            .iter()
            .map(|p| match cv::shape("conv: padding", &p)?.as_slice() {
                [a, b] => Ok((*a, *b)),
                other => Err(js_err(format!(
                    "conv: padding pair {other:?} is not [before, after]"
                ))),
            })
            .collect::<JsResult<_>>()?
    } else {
        per_axis("conv", &o, "padding")?
            .into_iter()
            .map(|p| (p, p))
            .collect()
    };
    let opts = wc::ConvOptions {
        stride: per_axis("conv", &o, "stride")?,
        padding,
        kernel_dilation: per_axis("conv", &o, "dilation")?,
        input_dilation: per_axis("conv", &o, "inputDilation")?,
        groups: groups(&o)?,
        flip: flag(&o, "flip", false),
    };
    wrap(wc::conv_general(&lead(x)?, &lead(w)?, &opts))
}

/// Transposed convolution, channels last, with `w` in MLX's layout `[C_out,
/// ...kernel, C_in / groups]`. Options: `stride`, `padding`, `dilation`,
/// `outputPadding`, `groups`.
#[wasm_bindgen(js_name = "convTranspose")]
pub fn conv_transpose(
    x: &ArrayInput,
    w: &ArrayInput,
    options: Option<ConvTransposeOptionsArg>,
) -> JsResult<NdArray> {
    let o: JsValue = options.map(Into::into).unwrap_or(JsValue::UNDEFINED);
    let what = "convTranspose";
    wrap(wc::conv_transpose_general(
        &lead(x)?,
        &lead(w)?,
        &per_axis(what, &o, "stride")?,
        &per_axis(what, &o, "padding")?,
        &per_axis(what, &o, "dilation")?,
        &per_axis(what, &o, "outputPadding")?,
        groups(&o)?,
    ))
}

fn pool_options(what: &str, o: Option<PoolOptionsArg>) -> JsResult<wc::PoolOptions> {
    let o: JsValue = o.map(Into::into).unwrap_or(JsValue::UNDEFINED);
    Ok(wc::PoolOptions {
        stride: per_axis(what, &o, "stride")?,
        padding: per_axis(what, &o, "padding")?,
        dilation: per_axis(what, &o, "dilation")?,
        ceil_mode: flag(&o, "ceilMode", false),
        count_include_pad: flag(&o, "countIncludePad", true),
    })
}

/// Max pooling of `x` `[N, ...spatial, C]` over windows of `kernel` (one length per
/// spatial axis). Options: `stride` (default the kernel), `padding`, `dilation`,
/// `ceilMode`.
#[wasm_bindgen(js_name = "maxPool")]
pub fn max_pool(
    x: &ArrayInput,
    kernel: ShapeArg,
    options: Option<PoolOptionsArg>,
) -> JsResult<NdArray> {
    let k = cv::shape("maxPool: kernel", &kernel)?;
    wrap(wc::max_pool(
        &lead(x)?,
        &k,
        &pool_options("maxPool", options)?,
    ))
}

/// Average pooling, as `maxPool`, with `countIncludePad` (default true).
#[wasm_bindgen(js_name = "avgPool")]
pub fn avg_pool(
    x: &ArrayInput,
    kernel: ShapeArg,
    options: Option<PoolOptionsArg>,
) -> JsResult<NdArray> {
    let k = cv::shape("avgPool: kernel", &kernel)?;
    wrap(wc::avg_pool(
        &lead(x)?,
        &k,
        &pool_options("avgPool", options)?,
    ))
}

/// Scaled dot-product attention `softmax(q kᵀ · scale + mask) v` of `q`
/// `[B, Hq, Lq, D]` over `k`, `v` `[B, Hkv, Lk, D]` (`Hq` a multiple of `Hkv`:
/// grouped-query attention). Options: `scale` (default 1/sqrt(D)), `mask`:
/// `"none"`, `"causal"`, `{ window }`, a boolean array or an additive float array.
/// No mask, causal and sliding-window masks run the fused flash-attention kernel
/// (head dimensions that are multiples of 4 up to 256); a query that sees no key
/// gets zeros.
#[wasm_bindgen(js_name = "scaledDotProductAttention")]
pub fn scaled_dot_product_attention(
    q: &ArrayInput,
    k: &ArrayInput,
    v: &ArrayInput,
    options: Option<AttentionOptionsArg>,
) -> JsResult<NdArray> {
    let what = "scaledDotProductAttention";
    let o: JsValue = options.map(Into::into).unwrap_or(JsValue::UNDEFINED);
    let scale = match field(&o, "scale") {
        s if cv::is_nullish(&s) => None,
        s => Some(
            s.as_f64()
                .ok_or_else(|| js_err(format!("{what}: scale must be a number")))?,
        ),
    };
    let m = field(&o, "mask");
    let (q, k, v) = (lead(q)?, lead(k)?, lead(v)?);
    let array;
    let mask = if cv::is_nullish(&m) || m.as_string().as_deref() == Some("none") {
        wc::AttentionMask::None
    } else if m.as_string().as_deref() == Some("causal") {
        wc::AttentionMask::Causal
    } else if let Some(a) = as_ndarray(&m)? {
        array = a;
        if array.dtype() == DType::Bool {
            wc::AttentionMask::Bool(&array)
        } else {
            wc::AttentionMask::Additive(&array)
        }
    } else {
        match field(&m, "window").as_f64() {
            Some(w) if w >= 1.0 && w.fract() == 0.0 => wc::AttentionMask::SlidingWindow(w as usize),
            _ => {
                return Err(js_err(format!(
                    "{what}: mask must be \"none\", \"causal\", {{ window: n }} (a positive integer) or an NdArray"
                )));
            }
        }
    };
    wrap(wc::scaled_dot_product_attention(&q, &k, &v, scale, mask))
}

/// Adaptive average pooling of `x` `[N, ...spatial, C]` to `output` elements per
/// spatial axis (PyTorch's `adaptive_avg_pool`).
#[wasm_bindgen(js_name = "adaptiveAvgPool")]
pub fn adaptive_avg_pool(x: &ArrayInput, output: ShapeArg) -> JsResult<NdArray> {
    let out = cv::shape("adaptiveAvgPool: output", &output)?;
    wrap(wc::adaptive_avg_pool(&lead(x)?, &out))
}

#[wasm_bindgen]
impl NdArray {
    /// Matrix product with `other` (see the free function `matmul`).
    pub fn matmul(&self, other: &ArrayInput) -> JsResult<NdArray> {
        wrap(wc::matmul(&self.arr()?, &lead(other)?))
    }
}

/// `cond ? x : y` elementwise with broadcasting.
#[wasm_bindgen(js_name = "where")]
pub fn where_(cond: &ArrayInput, x: &ArrayInput, y: &ArrayInput) -> JsResult<NdArray> {
    let (x, y) = pair(x, y)?;
    let c = operand(cond, &x)?;
    wrap(wc::where_(&c, &x, &y))
}

/// Converts to `dtype`.
#[wasm_bindgen]
pub fn astype(x: &ArrayInput, dtype: DTypeArg) -> JsResult<NdArray> {
    let d = cv::dtype(&dtype, DType::F32)?;
    wrap(wc::astype(&lead(x)?, d))
}

/// See `NdArray.reshape`.
#[wasm_bindgen]
pub fn reshape(x: &ArrayInput, shape: ShapeArg) -> JsResult<NdArray> {
    wrap(wc::reshape(&lead(x)?, &cv::ints("reshape", &shape)?))
}

/// See `NdArray.transpose`.
#[wasm_bindgen]
pub fn transpose(x: &ArrayInput, axes: Option<AxesArg>) -> JsResult<NdArray> {
    let axes = opt(axes);
    let ax = cv::axes(&axes)?;
    wrap(wc::transpose(&lead(x)?, ax.as_deref()))
}

/// See `NdArray.broadcastTo`.
#[wasm_bindgen(js_name = broadcastTo)]
pub fn broadcast_to(x: &ArrayInput, shape: ShapeArg) -> JsResult<NdArray> {
    wrap(wc::broadcast_to(
        &lead(x)?,
        &cv::shape("broadcastTo", &shape)?,
    ))
}

/// See `NdArray.slice`.
#[wasm_bindgen]
pub fn slice(x: &ArrayInput, spec: SliceArg) -> JsResult<NdArray> {
    wrap(wc::slice(&lead(x)?, &slices(&spec)?))
}

/// See `NdArray.argmax`.
#[wasm_bindgen]
pub fn argmax(x: &ArrayInput, axis: Option<i32>, keepdims: Option<bool>) -> JsResult<NdArray> {
    arg(&lead(x)?, axis, keepdims, wc::argmax)
}

/// See `NdArray.argmin`.
#[wasm_bindgen]
pub fn argmin(x: &ArrayInput, axis: Option<i32>, keepdims: Option<bool>) -> JsResult<NdArray> {
    arg(&lead(x)?, axis, keepdims, wc::argmin)
}

/// Internal (used by `tidy` in wmx.js): opens a scope recording every array made
/// until the matching `endScope`.
#[wasm_bindgen(js_name = beginScope)]
pub fn begin_scope() {
    SCOPES.with(|s| s.borrow_mut().push(Vec::new()));
}

/// Internal (used by `tidy` in wmx.js): closes the innermost scope, releasing every
/// array made in it except those in `keep` (they move to the enclosing scope, if
/// any). Their JS handles then throw when used; the memory goes back at once.
#[wasm_bindgen(js_name = endScope)]
pub fn end_scope(keep: Vec<u32>) -> JsResult<()> {
    let made = SCOPES
        .with(|s| s.borrow_mut().pop())
        .ok_or_else(|| js_err("endScope without beginScope"))?;
    let (kept, released): (Vec<u32>, Vec<u32>) = made.into_iter().partition(|id| keep.contains(id));
    // Dropped outside the borrow: a drop may run code that touches LIVE.
    let dropped: Vec<Array> = LIVE.with(|l| {
        released
            .iter()
            .filter_map(|id| l.borrow_mut().remove(id))
            .collect()
    });
    drop(dropped);
    SCOPES.with(|s| {
        if let Some(top) = s.borrow_mut().last_mut() {
            top.extend(kept);
        }
    });
    Ok(())
}

/// Number of live (not freed) arrays held by JS handles, for leak checks.
#[wasm_bindgen(js_name = liveArrays)]
pub fn live_arrays() -> usize {
    LIVE.with(|l| l.borrow().len())
}

// ---------------------------------------------------------------- transforms

/// Calls the JS function `f` on `args` (as `NdArray`s) and reads its result: one
/// `NdArray`, or a JS array of them (the first is the loss, the rest ride along).
fn call_js(f: &js_sys::Function, args: &[Array]) -> wc::Result<Vec<Array>> {
    let js_args = js_sys::Array::new();
    for a in args {
        js_args.push(&JsValue::from(NdArray::wrap(a.clone())));
    }
    let threw = |e: JsValue| {
        let msg = js_sys::Reflect::get(&e, &JsValue::from_str("message"))
            .ok()
            .and_then(|m| m.as_string())
            .or_else(|| e.as_string())
            .unwrap_or_else(|| format!("{e:?}"));
        wc::Error::Invalid {
            op: "grad",
            msg: format!("the function threw: {msg}"),
        }
    };
    let out = f.apply(&JsValue::NULL, &js_args).map_err(threw)?;
    let not_array = || wc::Error::Invalid {
        op: "grad",
        msg: "the function must return an NdArray or an array of NdArrays".into(),
    };
    let one = |v: &JsValue| -> wc::Result<Array> {
        as_ndarray(v)
            .map_err(|_| not_array())?
            .ok_or_else(not_array)
    };
    if js_sys::Array::is_array(&out) {
        js_sys::Array::from(&out).iter().map(|v| one(&v)).collect()
    } else {
        Ok(vec![one(&out)?])
    }
}

fn argnums_of(v: &JsValue) -> JsResult<Vec<usize>> {
    if v.is_undefined() || v.is_null() {
        return Ok(vec![0]);
    }
    if let Some(n) = v.as_f64() {
        return Ok(vec![n as usize]);
    }
    if js_sys::Array::is_array(v) {
        return js_sys::Array::from(v)
            .iter()
            .map(|x| {
                x.as_f64()
                    .filter(|n| *n >= 0.0 && n.fract() == 0.0)
                    .map(|n| n as usize)
                    .ok_or_else(|| js_err("argnums must be non-negative integers"))
            })
            .collect();
    }
    Err(js_err("argnums must be a number or an array of numbers"))
}

fn args_of(v: &JsValue) -> JsResult<Vec<Array>> {
    if !js_sys::Array::is_array(v) {
        return Err(js_err("pass the arguments as an array of NdArrays"));
    }
    js_sys::Array::from(v)
        .iter()
        .map(|x| as_ndarray(&x)?.ok_or_else(|| js_err("every argument must be an NdArray")))
        .collect()
}

fn nd_list(xs: Vec<Array>) -> js_sys::Array {
    xs.into_iter()
        .map(|a| JsValue::from(NdArray::wrap(a)))
        .collect()
}

/// `grad(f, argnums = 0)`: a function that takes an array of arguments and returns
/// the gradients (an array of `NdArray`s, one per argnum) of `f`'s result (a
/// one-element float array, or the first of an array of results) with respect to
/// those arguments. `wmx.js` makes it variadic: `wmx.grad(f)(x, y)`.
#[wasm_bindgen(js_name = grad)]
pub fn grad(f: ArrayFunction, argnums: Option<Argnums>) -> JsResult<GradFn> {
    let f: js_sys::Function = f.unchecked_into();
    let argnums = argnums_of(&opt(argnums))?;
    let g = move |args: JsValue| -> Result<JsValue, JsError> {
        let args = args_of(&args)?;
        let d = wc::grad(|a: &[Array]| call_js(&f, a), &argnums)(&args).map_err(err)?;
        Ok(nd_list(d).into())
    };
    Ok(
        Closure::<dyn Fn(JsValue) -> Result<JsValue, JsError>>::new(g)
            .into_js_value()
            .unchecked_into(),
    )
}

/// `valueAndGrad(f, argnums = 0)`: like [`grad`], returning `[value, grads]`
/// (`value`: `f`'s result as it returned it).
#[wasm_bindgen(js_name = valueAndGrad)]
pub fn value_and_grad(f: ArrayFunction, argnums: Option<Argnums>) -> JsResult<ValueAndGradFn> {
    let f: js_sys::Function = f.unchecked_into();
    let argnums = argnums_of(&opt(argnums))?;
    let g = move |args: JsValue| -> Result<JsValue, JsError> {
        let args = args_of(&args)?;
        let (mut v, d) =
            wc::value_and_grad(|a: &[Array]| call_js(&f, a), &argnums)(&args).map_err(err)?;
        let value: JsValue = if v.len() == 1 {
            NdArray::wrap(v.remove(0)).into()
        } else {
            nd_list(v).into()
        };
        Ok(js_sys::Array::of2(&value, &nd_list(d)).into())
    };
    Ok(
        Closure::<dyn Fn(JsValue) -> Result<JsValue, JsError>>::new(g)
            .into_js_value()
            .unchecked_into(),
    )
}
