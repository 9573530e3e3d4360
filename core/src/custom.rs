//! Primitives defined outside core: the [`CustomPrimitive`] trait, what each
//! backend hands its code ([`CpuOutput`], [`GpuContext`]), and [`custom`], which
//! makes the lazy array.

use crate::cpu::CpuBuffer;
use crate::{Array, DType, Error, Layout, Primitive, Result, View};
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A primitive defined outside core, with its own code per backend and its own
/// transform rules: MLX's `Primitive` subclass.
///
/// Every piece is optional except `name`: a missing evaluation is an `Err` naming
/// the primitive and the device when an array needing it is evaluated; a missing
/// rule is an `Err` when a transform reaches the primitive. A panic in any of them
/// is an `Err` at that op too.
///
/// ```
/// use wmx_core::{cpu::CpuBuffer, Array, CpuOutput, CustomPrimitive, DType, Device, Result, View};
///
/// /// Doubles an f32 array (CPU code only; see `examples/axpby` for GPU code).
/// #[derive(Debug, PartialEq)]
/// struct Double;
/// impl CustomPrimitive for Double {
///     fn name(&self) -> &str { "double" }
///     fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
///         let (x, l) = (inputs[0].buffer.as_slice::<f32>(), inputs[0].layout);
///         let o = out.buffer.as_mut_slice::<f32>();
///         // `custom` was given a contiguous input; a general primitive walks l.strides.
///         for (i, o) in o.iter_mut().enumerate() { *o = 2.0 * x[l.offset + i]; }
///         Ok(())
///     }
///     fn vjp(&self, _: &[Array], _: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
///         Ok(vec![Some(wmx_core::multiply(ct, &wmx_core::scalar(2.0, DType::F32)?)?)])
///     }
/// }
///
/// # fn main() -> Result<()> {
/// let x = Array::from_slice_on(&[1.0f32, 2.5], &[2], &Device::cpu())?;
/// let y = wmx_core::custom(std::sync::Arc::new(Double), &[wmx_core::contiguous(&x)?], &[2], DType::F32)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![2.0, 5.0]);
/// # Ok(()) }
/// ```
pub trait CustomPrimitive: Any + Send + Sync + fmt::Debug {
    /// A short name for errors and debugging.
    fn name(&self) -> &str;

    /// The CPU code: fills `out.buffer` (zeroed, row-major, `out.shape` elements
    /// of `out.dtype`) from `inputs` (buffers with dtype and layout: walk
    /// `layout.strides` from `layout.offset`, or ask for contiguous inputs). The
    /// default is an `Err` naming the primitive.
    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let _ = (inputs, out);
        Err(missing_code(self.name(), "cpu", "eval_cpu"))
    }

    /// The WebGPU code: `gpu.get::<wmx_webgpu::CustomEval>()` gives the inputs'
    /// GPU buffers with dtypes and layouts, the output buffer, and records
    /// dispatches into wmx's current batch (no host round trip, no submit of its
    /// own). The default is an `Err` naming the primitive and the device.
    fn eval_webgpu(&self, gpu: &mut GpuContext<'_>) -> Result<()> {
        Err(missing_code(self.name(), gpu.backend(), "eval_webgpu"))
    }

    /// The native Metal backend's code (`wmx-metal`), through its own context type
    /// in `gpu`. The default is an `Err` naming the primitive and the device.
    fn eval_metal(&self, gpu: &mut GpuContext<'_>) -> Result<()> {
        Err(missing_code(self.name(), gpu.backend(), "eval_metal"))
    }

    /// Whether the CPU code serves every device: on a GPU the backend reads the
    /// inputs to the host, runs [`CustomPrimitive::eval_cpu`] and uploads the output
    /// (one round trip, inside compiled functions too). For code that must run on
    /// the host, such as messages to other processes. The default is `false`.
    fn eval_on_host(&self) -> bool {
        false
    }

    /// Whether `other` computes the same function of the same inputs (so a graph
    /// simplifier may merge the two nodes). The default, `false`, is always safe;
    /// a primitive with parameters compares them:
    /// `(other as &dyn Any).downcast_ref::<Self>().is_some_and(|o| o == self)`.
    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        let _ = other;
        false
    }

    /// Forward-mode derivative: the output's tangent given the inputs (`primals`),
    /// the output, and each input's tangent (`None`: zero). Build it from ops (they
    /// are lazy). The default is an error naming the primitive.
    fn jvp(
        &self,
        primals: &[Array],
        output: &Array,
        tangents: &[Option<Array>],
    ) -> Result<Option<Array>> {
        let _ = (primals, output, tangents);
        Err(missing_rule(self.name(), "jvp"))
    }

    /// Reverse-mode derivative: each input's cotangent (`None`: zero) given the
    /// inputs, the output and the output's cotangent. The default is an error.
    fn vjp(
        &self,
        primals: &[Array],
        output: &Array,
        cotangent: &Array,
    ) -> Result<Vec<Option<Array>>> {
        let _ = (primals, output, cotangent);
        Err(missing_rule(self.name(), "vjp"))
    }

    /// Batching: the output for inputs that carry an extra leading batch axis where
    /// `batched[i]` is true (the others are as in the traced call). Returns the
    /// batched output, with its batch axis first. The default is an error.
    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        let _ = (inputs, batched);
        Err(missing_rule(self.name(), "vmap"))
    }
}

fn missing_rule(name: &str, rule: &str) -> Error {
    Error::Invalid {
        op: "transform",
        msg: format!(
            "custom primitive {name} has no {rule} rule (implement CustomPrimitive::{rule})"
        ),
    }
}

fn missing_code(name: &str, device: &str, method: &str) -> Error {
    Error::Invalid {
        op: "custom",
        msg: format!(
            "custom primitive {name} has no code for device {device} (implement CustomPrimitive::{method})"
        ),
    }
}

/// The output a custom primitive's CPU code fills.
pub struct CpuOutput<'a> {
    /// Zeroed, `numel(shape) * dtype.size()` bytes; replacing it with a buffer of
    /// another size is an `Err` at the op.
    pub buffer: &'a mut CpuBuffer,
    /// Row-major output shape.
    pub shape: &'a [usize],
    /// Output dtype.
    pub dtype: DType,
}

/// What a GPU backend hands a custom primitive: the backend's own context type
/// (core does not know the GPU crates), taken out with [`GpuContext::get`].
pub struct GpuContext<'a> {
    backend: &'a str,
    inner: &'a mut dyn Any,
}

impl<'a> GpuContext<'a> {
    /// Wraps a backend's context (for backend crates).
    pub fn new(backend: &'a str, inner: &'a mut dyn Any) -> Self {
        GpuContext { backend, inner }
    }
    /// The backend's name, e.g. `"webgpu: llvmpipe (Vulkan)"`.
    pub fn backend(&self) -> &str {
        self.backend
    }
    /// The backend's context as `T` (e.g. `wmx_webgpu::CustomEval`), or an `Err`
    /// naming the backend when it hands another type.
    pub fn get<T: Any>(&mut self) -> Result<&mut T> {
        let backend = self.backend;
        self.inner
            .downcast_mut::<T>()
            .ok_or_else(|| Error::Invalid {
                op: "custom",
                msg: format!(
                    "device {backend} does not hand custom primitives a {}",
                    std::any::type_name::<T>()
                ),
            })
    }
}

/// A lazy array of `shape`/`dtype` computed by `prim` from `inputs` on the first
/// input's device (or the innermost [`crate::with_device`] scope's). The device
/// must hold every dtype involved.
pub fn custom(
    prim: Arc<dyn CustomPrimitive>,
    inputs: &[Array],
    shape: &[usize],
    dtype: DType,
) -> Result<Array> {
    let device = match (crate::device::scoped_device(), inputs.first()) {
        (Some(d), _) => d,
        (None, Some(x)) => {
            let strict = !crate::device::implicit_moves_allowed();
            if let Some(y) = inputs.iter().find(|y| strict && y.device() != x.device()) {
                return Err(crate::Error::invalid(
                    "custom",
                    format!(
                        "{}: inputs on two devices ({} and {}): move one with to_device",
                        prim.name(),
                        x.device().name(),
                        y.device().name()
                    ),
                ));
            }
            x.device().clone()
        }
        (None, None) => crate::default_device()?,
    };
    device.check_dtype(dtype)?;
    for x in inputs {
        device.check_dtype(x.dtype())?;
    }
    crate::layout::checked_numel("custom", shape, dtype)?;
    crate::compile::made(Array::from_op(
        Primitive::Custom(prim),
        inputs.to_vec(),
        Layout::contiguous(shape),
        dtype,
        device,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    #[derive(Debug)]
    struct Panics;
    impl CustomPrimitive for Panics {
        fn name(&self) -> &str {
            "panics"
        }
        fn eval_cpu(&self, _: &[View<'_, CpuBuffer>], _: &mut CpuOutput<'_>) -> Result<()> {
            panic!("index out of bounds in user code")
        }
    }

    #[derive(Debug)]
    struct ShortOutput;
    impl CustomPrimitive for ShortOutput {
        fn name(&self) -> &str {
            "short_output"
        }
        fn eval_cpu(&self, _: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
            *out.buffer = CpuBuffer::zeroed(4);
            Ok(())
        }
    }

    /// An output buffer of the wrong size is an `Err` at that op, never a read
    /// past its end later; a primitive without code for a device names both.
    #[test]
    fn wrong_output_size_and_missing_code_are_errors() {
        let dev = Device::cpu();
        let x = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
        let y = custom(
            Arc::new(ShortOutput),
            std::slice::from_ref(&x),
            &[3],
            DType::F32,
        )
        .unwrap();
        let e = y.to_vec::<f32>().unwrap_err().to_string();
        assert!(e.contains("short_output left a buffer of 4 bytes"), "{e}");
        assert!(e.contains("[3] f32 takes 12"), "{e}");
        #[derive(Debug)]
        struct GpuOnly;
        impl CustomPrimitive for GpuOnly {
            fn name(&self) -> &str {
                "gpu_only"
            }
        }
        let z = custom(
            Arc::new(GpuOnly),
            std::slice::from_ref(&x),
            &[3],
            DType::F32,
        )
        .unwrap();
        let e = z.eval().unwrap_err().to_string();
        assert!(e.contains("gpu_only has no code for device cpu"), "{e}");
        assert!(e.contains("eval_cpu"), "{e}");
        assert_eq!(
            crate::add(&x, &x).unwrap().to_vec::<f32>().unwrap(),
            vec![2.0, 4.0, 6.0]
        );
    }

    /// Holds an array of its own (as a primitive with parameters or a closure may).
    #[derive(Debug)]
    struct Holds(#[allow(dead_code)] Array);
    impl CustomPrimitive for Holds {
        fn name(&self) -> &str {
            "holds"
        }
    }

    /// Dropping a chain that runs through custom primitives' own arrays does not
    /// recurse once per link (it overflowed the stack at 10^5 links).
    #[test]
    fn dropping_a_chain_through_custom_primitives() {
        let t = std::thread::Builder::new().stack_size(256 << 10).spawn(|| {
            let dev = Device::cpu();
            let mut a = Array::from_slice_on(&[1.0f32], &[1], &dev).unwrap();
            for _ in 0..100_000 {
                a = crate::with_device(&dev, || {
                    custom(Arc::new(Holds(a.clone())), &[], &[1], DType::F32)
                })
                .unwrap();
            }
            drop(a);
            // The thread's drop machinery is back to normal afterwards.
            let b = Array::from_slice_on(&[2.0f32], &[1], &dev).unwrap();
            let c = crate::with_device(&dev, || custom(Arc::new(Holds(b)), &[], &[1], DType::F32))
                .unwrap();
            drop(c);
        });
        t.unwrap().join().unwrap();
    }

    /// A panic inside a custom primitive is an `Err` at that op; other arrays and
    /// the device are unaffected.
    #[test]
    fn panic_in_custom_code_is_an_error_at_that_op() {
        let dev = Device::cpu();
        let x = Array::from_slice_on(&[1.0f32, 2.0], &[2], &dev).unwrap();
        let y = custom(Arc::new(Panics), std::slice::from_ref(&x), &[2], DType::F32).unwrap();
        let e = y.eval().unwrap_err().to_string();
        assert!(e.contains("custom primitive panics panicked"), "{e}");
        assert!(e.contains("index out of bounds in user code"), "{e}");
        assert!(!y.is_evaluated());
        assert_eq!(
            crate::add(&x, &x).unwrap().to_vec::<f32>().unwrap(),
            vec![2.0, 4.0]
        );
    }
}
