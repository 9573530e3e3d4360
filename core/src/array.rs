//! `Array`: a shared node of the lazy graph.

use crate::{
    Buffer, DType, Device, Element, Error, Layout, Primitive, Result, eval::eval, layout::numel,
};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// An n-dimensional array: shape, dtype, device, and either data or the
/// computation that will produce it. Cloning is cheap (the node is shared).
///
/// Every array's layout (strides, offset) is known when it is created: computed
/// arrays are row-major, views rewrite their input's layout. So views never copy.
#[derive(Clone)]
pub struct Array(pub(crate) Arc<Node>);

pub(crate) struct Node {
    pub(crate) layout: Layout,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
    /// Made while a transform traced a function: eval keeps how it was made, so the
    /// transform can still walk through it if the function evaluated it.
    pub(crate) traced: bool,
    /// Made by a compiled function's replay, whose plan already fused it: eval
    /// does not plan a graph of such nodes again.
    pub(crate) planned: bool,
    pub(crate) state: Mutex<State>,
}

pub(crate) enum State {
    /// Not computed yet.
    Pending { prim: Primitive, inputs: Vec<Array> },
    /// Computed: the buffer the layout points into, and for traced nodes the
    /// primitive and inputs that made it.
    Ready {
        buffer: Buffer,
        kept: Option<Box<(Primitive, Vec<Array>)>>,
    },
}

impl State {
    /// How the node was made, while that is known (pending, or computed while traced).
    pub(crate) fn tape(&self) -> Option<(&Primitive, &[Array])> {
        match self {
            State::Pending { prim, inputs } => Some((prim, inputs)),
            State::Ready { kept: Some(k), .. } => Some((&k.0, &k.1)),
            State::Ready { kept: None, .. } => None,
        }
    }
}

impl Drop for Node {
    // Dropping a long pending chain recursively would overflow the stack: unlink
    // inputs into a work list and drop nodes one at a time instead. Custom
    // primitives may hold arrays of their own (a chain can run through them), so
    // they are dropped last, by the outermost drop on this thread, in a loop.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut customs: Vec<Primitive> = take_custom(st).into_iter().collect();
        let mut stack = take_inputs(st);
        while let Some(a) = stack.pop() {
            if let Some(mut node) = Arc::into_inner(a.0) {
                let st = node.state.get_mut().unwrap_or_else(|e| e.into_inner());
                customs.extend(take_custom(st));
                stack.extend(take_inputs(st));
            }
        }
        if !customs.is_empty() {
            drop_customs(customs);
        }
    }
}

thread_local! {
    /// Custom primitives waiting to be dropped by the outermost `Node::drop`.
    static DEFERRED: std::cell::RefCell<Option<Vec<Primitive>>> = const { std::cell::RefCell::new(None) };
}

/// Drops custom primitives without recursing: a drop already running on this
/// thread takes them over; otherwise this one drains what they defer in turn.
fn drop_customs(customs: Vec<Primitive>) {
    let deferred = DEFERRED.try_with(|d| match &mut *d.borrow_mut() {
        Some(q) => {
            q.extend(customs);
            None
        }
        slot @ None => {
            *slot = Some(Vec::new());
            Some(customs)
        }
    });
    let Ok(Some(mut batch)) = deferred else {
        return; // handed over (or the thread is ending: dropped here, as usual)
    };
    loop {
        drop(std::mem::take(&mut batch));
        batch = DEFERRED.with(|d| std::mem::take(d.borrow_mut().as_mut().expect("set above")));
        if batch.is_empty() {
            break;
        }
    }
    DEFERRED.with(|d| *d.borrow_mut() = None);
}

/// A custom primitive taken out of a node being dropped (plain data stays).
fn take_custom(st: &mut State) -> Option<Primitive> {
    let prim = match st {
        State::Pending { prim, .. } => prim,
        State::Ready { kept: Some(k), .. } => &mut k.0,
        State::Ready { kept: None, .. } => return None,
    };
    matches!(prim, Primitive::Custom(_)).then(|| std::mem::replace(prim, Primitive::Copy))
}

fn take_inputs(st: &mut State) -> Vec<Array> {
    match st {
        State::Pending { inputs, .. } => std::mem::take(inputs),
        State::Ready { kept: Some(k), .. } => std::mem::take(&mut k.1),
        State::Ready { kept: None, .. } => Vec::new(),
    }
}

impl Array {
    /// A new node computed by `prim` from `inputs`.
    pub(crate) fn from_op(
        prim: Primitive,
        inputs: Vec<Array>,
        layout: Layout,
        dtype: DType,
        device: Device,
    ) -> Array {
        Array(Arc::new(Node {
            layout,
            dtype,
            device,
            traced: crate::transforms::tracing(),
            planned: crate::compile::replaying(),
            state: Mutex::new(State::Pending { prim, inputs }),
        }))
    }

    /// A node that already holds its data.
    pub(crate) fn from_buffer(
        buffer: Buffer,
        layout: Layout,
        dtype: DType,
        device: Device,
    ) -> Array {
        Array(Arc::new(Node {
            layout,
            dtype,
            device,
            traced: false,
            planned: false,
            state: Mutex::new(State::Ready { buffer, kept: None }),
        }))
    }

    /// An array of `shape` holding `data` (row-major) on the default device.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Array> {
        Array::from_slice_on(data, shape, &crate::default_device()?)
    }

    /// Like [`Array::from_slice`], on `device`.
    pub fn from_slice_on<T: Element>(
        data: &[T],
        shape: &[usize],
        device: &Device,
    ) -> Result<Array> {
        if crate::layout::checked_numel("from_slice", shape, T::DTYPE)? != data.len() {
            return Err(Error::invalid(
                "from_slice",
                format!("{} values do not fill shape {shape:?}", data.len()),
            ));
        }
        let mut bytes = Vec::with_capacity(data.len() * T::DTYPE.size());
        T::write_bytes(data, &mut bytes);
        Array::from_bytes_on(bytes, shape, T::DTYPE, device)
    }

    /// A 1-D array from a `Vec` on the default device.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Array> {
        Array::from_slice(&data, shape)
    }

    /// An array from raw little-endian bytes of `dtype`.
    pub fn from_bytes_on(
        bytes: Vec<u8>,
        shape: &[usize],
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        if bytes.len() != crate::layout::checked_numel("from_bytes", shape, dtype)? * dtype.size() {
            return Err(Error::invalid(
                "from_bytes",
                format!(
                    "{} bytes do not fill shape {shape:?} of {dtype} ({} bytes)",
                    bytes.len(),
                    numel(shape) * dtype.size()
                ),
            ));
        }
        if dtype == DType::Bool {
            if let Some(i) = bytes.iter().position(|&b| b > 1) {
                return Err(Error::invalid(
                    "from_bytes",
                    format!("bool byte {i} is {}; bools are 0 or 1", bytes[i]),
                ));
            }
        }
        device.check_dtype(dtype)?;
        let buf = device.backend().from_host(bytes, dtype)?;
        Ok(Array::from_buffer(
            buf,
            Layout::contiguous(shape),
            dtype,
            device.clone(),
        ))
    }

    /// A 0-d array holding `value`, on the default device.
    pub fn scalar<T: Element>(value: T) -> Result<Array> {
        Array::from_slice(&[value], &[])
    }

    /// Dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.0.layout.shape
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.0.layout.shape.len()
    }
    /// Number of elements.
    pub fn size(&self) -> usize {
        self.0.layout.numel()
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    /// The device that computes this array.
    pub fn device(&self) -> &Device {
        &self.0.device
    }
    /// Shape, strides (in elements) and offset in the buffer.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    /// Bytes of the elements (not of the buffer it may view).
    pub fn nbytes(&self) -> usize {
        self.size() * self.dtype().size()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True once computed.
    pub fn is_evaluated(&self) -> bool {
        matches!(*self.lock(), State::Ready { .. })
    }

    /// The buffer, if computed.
    pub fn buffer(&self) -> Option<Buffer> {
        match &*self.lock() {
            State::Ready { buffer, .. } => Some(buffer.clone()),
            State::Pending { .. } => None,
        }
    }

    /// The primitive, while known: pending, or computed inside a transform's trace
    /// (for transforms and debugging).
    pub fn primitive(&self) -> Option<Primitive> {
        self.lock().tape().map(|(p, _)| p.clone())
    }

    /// The inputs, while known (as [`Array::primitive`]).
    pub fn inputs(&self) -> Vec<Array> {
        self.lock()
            .tape()
            .map(|(_, i)| i.to_vec())
            .unwrap_or_default()
    }

    /// The primitive and inputs, while known (one lock).
    pub(crate) fn tape(&self) -> Option<(Primitive, Vec<Array>)> {
        self.lock().tape().map(|(p, i)| (p.clone(), i.to_vec()))
    }

    /// True when made while a transform traced a function.
    pub(crate) fn is_traced(&self) -> bool {
        self.0.traced
    }

    /// True when both handles are the same node.
    pub fn same_node(&self, other: &Array) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Computes this array (see [`crate::eval`]).
    pub fn eval(&self) -> Result<()> {
        eval(std::slice::from_ref(self))
    }

    fn check_read<T: Element>(&self, op: &'static str) -> Result<()> {
        if T::DTYPE != self.dtype() {
            return Err(Error::invalid(
                op,
                format!("array has dtype {}, asked for {}", self.dtype(), T::DTYPE),
            ));
        }
        Ok(())
    }

    /// The elements in row-major order, as raw bytes, blocking. Evaluates first.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.with_bytes(|b| b.to_vec())
    }

    /// `f` of the elements as row-major bytes, blocking. A row-contiguous view is
    /// read where its bytes lie (a full copy of a large array fewer: each costs a
    /// fresh allocation's page faults), another is gathered first. On the CPU the
    /// view's elements are gathered from the buffer in place: a read of one element
    /// of a large array must not copy all of it (it failed after an out of memory).
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        self.eval()?;
        let buf = self.buffer().expect("evaluated");
        let esize = self.dtype().size();
        if let Some(cpu) = buf.downcast::<crate::cpu::CpuBuffer>() {
            return host(self, || {
                Ok(view_bytes(cpu.bytes(), self.layout(), esize, f))
            });
        }
        if let Some(small) = self.compacted(&buf)? {
            return small.with_bytes(f);
        }
        let bytes = self.0.device.backend().read(&buf)?;
        host(self, || Ok(view_bytes(&bytes, self.layout(), esize, f)))
    }

    /// [`Array::with_bytes`] without blocking.
    async fn with_bytes_async<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        self.eval()?;
        let buf = self.buffer().expect("evaluated");
        if buf.downcast::<crate::cpu::CpuBuffer>().is_none()
            && let Some(small) = self.compacted(&buf)?
        {
            return Box::pin(small.with_bytes_async(f)).await;
        }
        let bytes = self.0.device.backend().read_async(&buf).await?;
        let esize = self.dtype().size();
        host(self, || Ok(view_bytes(&bytes, self.layout(), esize, f)))
    }

    /// A view holding at most half of a buffer of 1 MiB or more, copied out on its
    /// device (a read then moves only its bytes, as PyTorch's does: one element of a
    /// large array copied all of it to the host, which failed after an out of
    /// memory); `None` otherwise (the whole buffer is read, and kept on the host for
    /// the next read).
    fn compacted(&self, buf: &crate::Buffer) -> Result<Option<Array>> {
        let view = (self.size() * self.dtype().size()) as u64;
        match buf.len_bytes() {
            Some(total) if view > 0 && view * 2 <= total && total >= 1 << 20 => {
                let c = crate::ops::fresh_copy(self)?;
                c.eval()?;
                Ok(Some(c))
            }
            _ => Ok(None),
        }
    }

    /// Like [`Array::to_bytes`], without blocking (works on wasm).
    pub async fn to_bytes_async(&self) -> Result<Vec<u8>> {
        self.with_bytes_async(|b| b.to_vec()).await
    }

    /// The elements in row-major order. `T` must match the dtype. Evaluates first.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_read::<T>("to_vec")?;
        self.with_bytes(decode)
    }

    /// Like [`Array::to_vec`], without blocking (works on wasm).
    pub async fn to_vec_async<T: Element>(&self) -> Result<Vec<T>> {
        self.check_read::<T>("to_vec_async")?;
        self.with_bytes_async(decode).await
    }

    /// The elements in row-major order converted to `T` (any element type, or
    /// f64) with the cast rules of [`astype`](crate::astype): `x.to_vec_as::<f64>()`,
    /// `mask.to_vec_as::<f32>()`. Evaluates first.
    pub fn to_vec_as<T: ReadAs>(&self) -> Result<Vec<T>> {
        T::read_as(self)
    }

    /// The single element of a one-element array converted to `T` (see
    /// [`Array::to_vec_as`]).
    pub fn item_as<T: ReadAs>(&self) -> Result<T> {
        self.check_one("item_as")?;
        Ok(self.to_vec_as::<T>()?.remove(0))
    }

    fn check_one(&self, op: &'static str) -> Result<()> {
        if self.size() != 1 {
            return Err(Error::invalid(
                op,
                format!(
                    "array of shape {:?} has {} elements, not 1",
                    self.shape(),
                    self.size()
                ),
            ));
        }
        Ok(())
    }

    /// Every element converted to f64 (any dtype).
    pub fn to_vec_f64(&self) -> Result<Vec<f64>> {
        let bytes = self.to_bytes()?;
        host(self, || Ok(bytes_to_f64(&bytes, self.dtype())))
    }

    /// The single element of a one-element array.
    pub fn item<T: Element>(&self) -> Result<T> {
        self.check_one("item")?;
        Ok(self.to_vec::<T>()?[0])
    }
}

/// Types a read can convert an array's elements to ([`Array::to_vec_as`]): every
/// dtype's element type, and f64.
pub trait ReadAs: Sized {
    /// `a`'s elements converted to `Self`.
    fn read_as(a: &Array) -> Result<Vec<Self>>;
}

impl<T: Element> ReadAs for T {
    fn read_as(a: &Array) -> Result<Vec<T>> {
        if T::DTYPE == DType::F64 {
            // Exact on the host, for every dtype and device (no f64 kernel needed).
            return Ok(a.to_vec_f64()?.into_iter().map(T::from_f64).collect());
        }
        crate::astype(a, T::DTYPE)?.to_vec::<T>()
    }
}

/// A host-side copy or conversion of `a`'s data: an allocation that fails is an
/// `Err` with the byte count, not an abort.
fn host<T>(a: &Array, f: impl FnOnce() -> Result<T>) -> Result<T> {
    crate::cpu::alloc::catching_oom(a.device(), f)
}

/// Decodes little-endian bytes of `T`.
pub(crate) fn decode<T: Element>(bytes: &[u8]) -> Vec<T> {
    let mut v = crate::cpu::alloc::with_capacity(bytes.len() / T::DTYPE.size());
    v.extend(bytes.chunks_exact(T::DTYPE.size()).map(T::read));
    v
}

/// Converts bytes of `dtype` to f64 values.
pub(crate) fn bytes_to_f64(bytes: &[u8], dtype: DType) -> Vec<f64> {
    use half::{bf16, f16};
    fn conv<T: Element>(b: &[u8]) -> Vec<f64> {
        let mut v = crate::cpu::alloc::with_capacity(b.len() / T::DTYPE.size());
        v.extend(b.chunks_exact(T::DTYPE.size()).map(|c| T::read(c).to_f64()));
        v
    }
    match dtype {
        DType::Bool => conv::<bool>(bytes),
        DType::U8 => conv::<u8>(bytes),
        DType::U32 => conv::<u32>(bytes),
        DType::I32 => conv::<i32>(bytes),
        DType::I64 => conv::<i64>(bytes),
        DType::U64 => conv::<u64>(bytes),
        DType::F16 => conv::<f16>(bytes),
        DType::BF16 => conv::<bf16>(bytes),
        DType::F32 => conv::<f32>(bytes),
        DType::F64 => conv::<f64>(bytes),
        // The real and imaginary parts of each element, in turn.
        DType::C64 => conv::<f32>(bytes),
    }
}

/// `f` of the bytes of the view `layout` of `bytes`, in row-major order: in place
/// when the view is row-contiguous, else gathered.
fn view_bytes<R>(bytes: &[u8], layout: &Layout, esize: usize, f: impl FnOnce(&[u8]) -> R) -> R {
    let n = layout.numel();
    if n > 0 && layout.is_row_contiguous() {
        let start = layout.offset * esize;
        return f(&bytes[start..start + n * esize]);
    }
    f(&gather_bytes(bytes, layout, esize))
}

/// Copies the elements a layout selects out of a buffer's bytes, row-major.
fn gather_bytes(bytes: &[u8], layout: &Layout, esize: usize) -> Vec<u8> {
    let n = layout.numel();
    if n == 0 {
        return Vec::new();
    }
    let mut out = crate::cpu::alloc::with_capacity(n.saturating_mul(esize));
    crate::cpu::strided::for_each_index(&layout.shape, &layout.strides, layout.offset, |i| {
        let s = i * esize;
        out.extend_from_slice(&bytes[s..s + esize]);
    });
    out
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Array(shape={:?}, dtype={}, device={}, evaluated={})",
            self.shape(),
            self.dtype(),
            self.device(),
            self.is_evaluated()
        )
    }
}

impl fmt::Display for Array {
    /// numpy-style printing; evaluates the array (errors print as `<error: …>`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = match self.to_vec_f64() {
            Ok(v) => v,
            Err(e) => return write!(f, "<error: {e}>"),
        };
        let dtype = self.dtype();
        // complex64: `values` holds both parts; the printer walks element indices.
        let (values, parts) = if dtype.is_complex() {
            let idx = (0..values.len() / 2).map(|i| i as f64).collect();
            (idx, Some(values))
        } else {
            (values, None)
        };
        let real = |v: f64| -> String {
            if v.is_nan() {
                "nan".into()
            } else if v.is_infinite() {
                (if v > 0.0 { "inf" } else { "-inf" }).into()
            } else {
                format!("{:?}", v as f32)
            }
        };
        let fmt_one = |v: f64| -> String {
            if let Some(p) = &parts {
                let (re, im) = (p[2 * v as usize], p[2 * v as usize + 1]);
                let sign = if im.is_sign_negative() && !im.is_nan() {
                    "-"
                } else {
                    "+"
                };
                return format!("{}{sign}{}j", real(re), real(im.abs()));
            }
            match dtype {
                DType::Bool => (if v != 0.0 { "true" } else { "false" }).to_string(),
                d if d.is_float() => {
                    if v.is_nan() {
                        "nan".into()
                    } else if v.is_infinite() {
                        (if v > 0.0 { "inf" } else { "-inf" }).into()
                    } else {
                        match dtype {
                            DType::F16 => format!("{:?}", half::f16::from_f64(v).to_f32()),
                            DType::BF16 => format!("{:?}", half::bf16::from_f64(v).to_f32()),
                            _ => format!("{:?}", v as f32),
                        }
                    }
                }
                _ => format!("{v}"),
            }
        };
        // Iterative (one frame per open bracket on a heap stack): an array of
        // 200 000 dimensions must not overflow the thread's stack.
        fn nested(
            f: &mut fmt::Formatter<'_>,
            shape: &[usize],
            vals: &[f64],
            indent: usize,
            one: &dyn Fn(f64) -> String,
        ) -> fmt::Result {
            if shape.is_empty() {
                return f.write_str(&one(vals[0]));
            }
            // Elements in one block below each depth.
            let mut inner = vec![1usize; shape.len()];
            for d in (0..shape.len() - 1).rev() {
                inner[d] = inner[d + 1] * shape[d + 1];
            }
            let shown = |n: usize| -> Vec<usize> {
                if n > 6 {
                    (0..3).chain(n - 3..n).collect()
                } else {
                    (0..n).collect()
                }
            };
            // (depth, first element of the block, indices shown, next one)
            let mut stack = vec![(0usize, 0usize, shown(shape[0]), 0usize)];
            f.write_str("[")?;
            while let Some((depth, base, show, k)) = stack.last_mut() {
                let (depth, base) = (*depth, *base);
                if *k == show.len() {
                    f.write_str("]")?;
                    stack.pop();
                    continue;
                }
                let (i, pos) = (show[*k], *k);
                *k += 1;
                let sep = |f: &mut fmt::Formatter<'_>| {
                    if depth + 1 < shape.len() {
                        write!(f, "\n{}", " ".repeat(indent + depth + 1))
                    } else {
                        f.write_str(" ")
                    }
                };
                if pos > 0 {
                    f.write_str(",")?;
                    sep(f)?;
                }
                if shape[depth] > 6 && pos == 3 {
                    f.write_str("...,")?;
                    sep(f)?;
                }
                let at = base + i * inner[depth];
                if depth + 1 == shape.len() {
                    f.write_str(&one(vals[at]))?;
                } else {
                    f.write_str("[")?;
                    stack.push((depth + 1, at, shown(shape[depth + 1]), 0));
                }
            }
            Ok(())
        }
        f.write_str("array(")?;
        nested(f, self.shape(), &values, 6, &fmt_one)?;
        write!(f, ", dtype={dtype})")
    }
}
