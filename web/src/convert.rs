//! Conversions between JavaScript values and wmx types: shapes, axes, dtypes,
//! typed arrays.

use js_sys::{
    BigInt64Array, BigUint64Array, Float32Array, Float64Array, Int8Array, Int16Array, Int32Array,
    Uint8Array, Uint8ClampedArray, Uint16Array, Uint32Array,
};
use wasm_bindgen::{JsCast, JsError, JsValue};
use wmx_core::{DType, Element, bf16, f16};

/// A JS error with `msg` (the same text as wmx's own errors where it is one).
pub(crate) fn js_err(msg: impl std::fmt::Display) -> JsError {
    JsError::new(&msg.to_string())
}

/// wmx errors become JS `Error`s with the same message.
pub(crate) fn err(e: wmx_core::Error) -> JsError {
    js_err(e)
}

pub(crate) fn is_nullish(v: &JsValue) -> bool {
    v.is_undefined() || v.is_null()
}

/// Numbers of a JS array, typed array or single number.
fn numbers(what: &str, v: &JsValue) -> Result<Vec<f64>, JsError> {
    if let Some(n) = v.as_f64() {
        return Ok(vec![n]);
    }
    if !(js_sys::Array::is_array(v) || v.is_instance_of::<js_sys::Object>()) {
        return Err(js_err(format!(
            "{what}: expected a number or an array of numbers, got {v:?}"
        )));
    }
    let arr = js_sys::Array::from(v);
    (0..arr.length())
        .map(|i| {
            arr.get(i).as_f64().ok_or_else(|| {
                js_err(format!(
                    "{what}: element {i} is not a number ({:?})",
                    arr.get(i)
                ))
            })
        })
        .collect()
}

/// A shape: an array of non-negative integers (a single number is a 1-D shape).
pub(crate) fn shape(what: &str, v: &JsValue) -> Result<Vec<usize>, JsError> {
    numbers(what, v)?
        .into_iter()
        .map(|d| {
            if d >= 0.0 && d.fract() == 0.0 && d <= u32::MAX as f64 {
                Ok(d as usize)
            } else {
                Err(js_err(format!(
                    "{what}: dimension {d} is not a non-negative integer"
                )))
            }
        })
        .collect()
}

/// Signed integers (axes, reshape targets with -1).
pub(crate) fn ints(what: &str, v: &JsValue) -> Result<Vec<isize>, JsError> {
    numbers(what, v)?
        .into_iter()
        .map(|d| {
            if d.fract() == 0.0 && d.abs() <= i32::MAX as f64 {
                Ok(d as isize)
            } else {
                Err(js_err(format!("{what}: {d} is not an integer")))
            }
        })
        .collect()
}

/// Optional axes: `undefined`/`null` means all.
pub(crate) fn axes(v: &JsValue) -> Result<Option<Vec<isize>>, JsError> {
    if is_nullish(v) {
        Ok(None)
    } else {
        ints("axes", v).map(Some)
    }
}

/// A dtype from its wmx or numpy name (`"f32"`, `"float32"`, …); `undefined` gives
/// `default`.
pub(crate) fn dtype(v: &JsValue, default: DType) -> Result<DType, JsError> {
    if is_nullish(v) {
        return Ok(default);
    }
    let s = v
        .as_string()
        .ok_or_else(|| js_err(format!("dtype: expected a string, got {v:?}")))?;
    DType::from_name(&s).ok_or_else(|| {
        js_err(format!(
            "unknown dtype {s:?}; expected one of bool, uint8, uint32, int32, int64, uint64, float16, bfloat16, float32, float64 (or u8, u32, i32, i64, u64, f16, bf16, f32, f64)"
        ))
    })
}

/// An optional number argument.
pub(crate) fn opt_f64(what: &str, v: &JsValue) -> Result<Option<f64>, JsError> {
    if is_nullish(v) {
        return Ok(None);
    }
    v.as_f64()
        .map(Some)
        .ok_or_else(|| js_err(format!("{what}: expected a number, got {v:?}")))
}

/// Raw bytes of any typed array (or DataView).
fn view_bytes(v: &JsValue) -> Vec<u8> {
    let get = |k: &str| {
        js_sys::Reflect::get(v, &JsValue::from_str(k))
            .ok()
            .and_then(|x| x.as_f64())
            .unwrap_or(0.0) as u32
    };
    let buf = js_sys::Reflect::get(v, &JsValue::from_str("buffer")).unwrap_or(JsValue::UNDEFINED);
    Uint8Array::new_with_byte_offset_and_length(&buf, get("byteOffset"), get("byteLength")).to_vec()
}

/// Little-endian bytes of `values` converted to `dtype` with the cast rules of `astype`.
pub(crate) fn values_to_bytes(values: &[f64], dtype: DType) -> Vec<u8> {
    fn conv<T: Element>(values: &[f64]) -> Vec<u8> {
        let v: Vec<T> = values.iter().map(|&x| T::from_f64(x)).collect();
        let mut out = Vec::with_capacity(v.len() * T::DTYPE.size());
        T::write_bytes(&v, &mut out);
        out
    }
    match dtype {
        DType::Bool => conv::<bool>(values),
        DType::U8 => conv::<u8>(values),
        DType::U32 => conv::<u32>(values),
        DType::I32 => conv::<i32>(values),
        DType::I64 => conv::<i64>(values),
        DType::U64 => conv::<u64>(values),
        DType::F16 => conv::<f16>(values),
        DType::BF16 => conv::<bf16>(values),
        DType::F32 => conv::<f32>(values),
        DType::F64 => conv::<f64>(values),
        // Plain numbers are real parts.
        DType::C64 => conv::<wmx_core::Complex32>(values),
    }
}

/// Host data read from a JS value: bytes of a dtype, or plain numbers.
pub(crate) enum HostData {
    /// Bytes already in a wmx dtype's layout, with their count of elements.
    Bytes(Vec<u8>, DType, usize),
    /// Numbers to convert to whatever dtype is asked (JS arrays, Float64Array, …).
    Numbers(Vec<f64>, DType),
}

/// Reads a typed array, a JS array of numbers or booleans, or a single number.
/// Natural dtypes: Float32Array → f32, Int32Array → i32, Uint32Array → u32,
/// Uint8Array → u8, Uint16Array → f16 bits (bf16 bits when asked), BigInt64Array →
/// i64, BigUint64Array → u64; Float64Array, Int8Array, Int16Array, numbers and JS arrays → f32 (bool
/// for arrays of booleans) unless a dtype is given.
pub(crate) fn host_data(v: &JsValue, want: Option<DType>) -> Result<HostData, JsError> {
    let raw = |d: DType| {
        let b = view_bytes(v);
        let n = b.len() / d.size();
        HostData::Bytes(b, d, n)
    };
    if v.is_instance_of::<Float32Array>() {
        return Ok(raw(DType::F32));
    }
    if v.is_instance_of::<Int32Array>() {
        return Ok(raw(DType::I32));
    }
    if v.is_instance_of::<Uint32Array>() {
        return Ok(raw(DType::U32));
    }
    if v.is_instance_of::<Uint8Array>() || v.is_instance_of::<Uint8ClampedArray>() {
        return Ok(match want {
            // Bytes as booleans: nonzero is true.
            Some(DType::Bool) => {
                let b: Vec<u8> = view_bytes(v).into_iter().map(|x| (x != 0) as u8).collect();
                let n = b.len();
                HostData::Bytes(b, DType::Bool, n)
            }
            _ => raw(DType::U8),
        });
    }
    if v.is_instance_of::<Uint16Array>() {
        // JS has no 16-bit floats: a Uint16Array carries their bits.
        return Ok(raw(if want == Some(DType::BF16) {
            DType::BF16
        } else {
            DType::F16
        }));
    }
    if v.is_instance_of::<BigInt64Array>() {
        return Ok(raw(DType::I64));
    }
    if v.is_instance_of::<BigUint64Array>() {
        return Ok(raw(DType::U64));
    }
    if let Some(a) = v.dyn_ref::<Float64Array>() {
        if want == Some(DType::F64) {
            return Ok(raw(DType::F64));
        }
        return Ok(HostData::Numbers(a.to_vec(), DType::F32));
    }
    if let Some(a) = v.dyn_ref::<Int8Array>() {
        let n = a.to_vec().into_iter().map(f64::from).collect();
        return Ok(HostData::Numbers(n, DType::I32));
    }
    if let Some(a) = v.dyn_ref::<Int16Array>() {
        let n = a.to_vec().into_iter().map(f64::from).collect();
        return Ok(HostData::Numbers(n, DType::I32));
    }
    if let Some(b) = v.as_bool() {
        return Ok(HostData::Numbers(vec![b as u8 as f64], DType::Bool));
    }
    if let Some(n) = v.as_f64() {
        return Ok(HostData::Numbers(vec![n], DType::F32));
    }
    if js_sys::Array::is_array(v) {
        let arr = js_sys::Array::from(v);
        let all_bool = arr.length() > 0 && arr.iter().all(|x| x.as_bool().is_some());
        let vals = arr
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_f64()
                    .or_else(|| x.as_bool().map(|b| b as u8 as f64))
                    .ok_or_else(|| {
                        js_err(format!(
                            "array: element {i} is not a number ({x:?}); nested arrays are not read, pass a flat array and a shape"
                        ))
                    })
            })
            .collect::<Result<Vec<f64>, JsError>>()?;
        return Ok(HostData::Numbers(
            vals,
            if all_bool { DType::Bool } else { DType::F32 },
        ));
    }
    Err(js_err(format!(
        "array: expected a typed array (Float32Array, Int32Array, Uint32Array, Uint8Array, Uint16Array for f16), an array of numbers or a number, got {v:?}"
    )))
}

/// A typed array holding `bytes` of `dtype`: Float32Array, Int32Array,
/// Uint32Array, Uint8Array (u8 and bool), Uint16Array (f16 and bf16 bits),
/// BigInt64Array (i64), BigUint64Array (u64).
pub(crate) fn typed_array(bytes: &[u8], dtype: DType) -> JsValue {
    fn words<T: bytemuck_free::Pod>(bytes: &[u8]) -> Vec<T> {
        bytes
            .chunks_exact(std::mem::size_of::<T>())
            .map(T::from_le)
            .collect()
    }
    match dtype {
        // complex64: the real and imaginary parts in turn.
        DType::F32 | DType::C64 => Float32Array::from(&words::<f32>(bytes)[..]).into(),
        DType::F64 => Float64Array::from(&words::<f64>(bytes)[..]).into(),
        DType::I32 => Int32Array::from(&words::<i32>(bytes)[..]).into(),
        DType::U32 => Uint32Array::from(&words::<u32>(bytes)[..]).into(),
        DType::U8 | DType::Bool => Uint8Array::from(bytes).into(),
        DType::F16 | DType::BF16 => Uint16Array::from(&words::<u16>(bytes)[..]).into(),
        DType::I64 => BigInt64Array::from(&words::<i64>(bytes)[..]).into(),
        DType::U64 => BigUint64Array::from(&words::<u64>(bytes)[..]).into(),
    }
}

/// Little-endian decoding without a bytemuck dependency.
mod bytemuck_free {
    pub trait Pod: Sized {
        fn from_le(b: &[u8]) -> Self;
    }
    macro_rules! pod {
        ($($t:ty),*) => {$(
            impl Pod for $t {
                fn from_le(b: &[u8]) -> Self { <$t>::from_le_bytes(b.try_into().unwrap()) }
            }
        )*};
    }
    pod!(f32, f64, i32, u32, u16, i64, u64);
}

/// The value of element `i` of `bytes` of `dtype` as a JS value (number, boolean,
/// or BigInt for i64 and u64).
pub(crate) fn element_value(bytes: &[u8], dtype: DType) -> JsValue {
    match dtype {
        DType::Bool => JsValue::from_bool(bytes[0] != 0),
        DType::I64 => js_sys::BigInt::from(i64::read(bytes)).into(),
        DType::U64 => js_sys::BigInt::from(u64::read(bytes)).into(),
        DType::U8 => JsValue::from_f64(u8::read(bytes) as f64),
        DType::U32 => JsValue::from_f64(u32::read(bytes) as f64),
        DType::I32 => JsValue::from_f64(i32::read(bytes) as f64),
        DType::F16 => JsValue::from_f64(f16::read(bytes).to_f64()),
        DType::BF16 => JsValue::from_f64(bf16::read(bytes).to_f64()),
        DType::F32 => JsValue::from_f64(f32::read(bytes) as f64),
        DType::F64 => JsValue::from_f64(f64::read(bytes)),
        DType::C64 => {
            let pair = js_sys::Array::new();
            pair.push(&JsValue::from_f64(f32::read(&bytes[..4]) as f64));
            pair.push(&JsValue::from_f64(f32::read(&bytes[4..]) as f64));
            pair.into()
        }
    }
}

/// A JS array of numbers.
pub(crate) fn js_numbers(v: impl IntoIterator<Item = f64>) -> js_sys::Array {
    v.into_iter().map(JsValue::from_f64).collect()
}
