//! Fused kernels ([`wmx_core::FusedKernel`], made by `wmx::compile`) as the kernel
//! library's [`k::FusedSpec`]: the steps are the same types on both sides.

use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};
use wmx_core::FusedKernel;
use wmx_kernels as k;

/// The specs of the fused kernels dispatched lately, by the kernel's address: a
/// compiled step dispatches the same kernels every call, and a spec built anew
/// each time cost a clone of every step (and the pipeline key another).
#[derive(Default)]
pub(crate) struct Specs(Mutex<FxHashMap<usize, Arc<k::FusedSpec>>>);

/// Kernels remembered at most (then forgotten all at once).
const SPECS: usize = 1024;

impl Specs {
    /// The kernel library's form of `kernel`. An address may have been freed and
    /// reused by another kernel since: an entry counts only if its steps are
    /// `kernel`'s.
    pub(crate) fn of(&self, kernel: &FusedKernel) -> Arc<k::FusedSpec> {
        let at = kernel as *const FusedKernel as usize;
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = map.get(&at) {
            if s.inputs == kernel.inputs && s.steps == kernel.steps && s.outputs == kernel.outputs {
                return s.clone();
            }
        }
        if map.len() >= SPECS {
            map.clear();
        }
        let spec = Arc::new(k::FusedSpec {
            inputs: kernel.inputs.clone(),
            steps: kernel.steps.clone(),
            outputs: kernel.outputs.clone(),
        });
        map.insert(at, spec.clone());
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wmx_core::{DType, FusedOp, FusedStep};

    /// A kernel changed at the same address (as a freed one's address reused by
    /// another) gets its own spec, not the remembered one.
    #[test]
    fn a_reused_address_gets_its_own_spec() {
        let specs = Specs::default();
        let mut kernel = FusedKernel {
            inputs: vec![DType::F32],
            steps: vec![
                FusedStep {
                    op: FusedOp::Const(2.0),
                    args: vec![],
                    dtype: DType::F32,
                },
                FusedStep {
                    op: FusedOp::Binary(wmx_core::BinaryOp::Multiply),
                    args: vec![0, 1],
                    dtype: DType::F32,
                },
            ],
            reduce: None,
            outputs: Vec::new(),
        };
        let first = specs.of(&kernel);
        assert!(Arc::ptr_eq(&first, &specs.of(&kernel)), "not remembered");
        kernel.steps[0].op = FusedOp::Const(3.0);
        let second = specs.of(&kernel);
        assert_eq!(second.steps, kernel.steps);
        assert_eq!(first.steps[0].op, FusedOp::Const(2.0));
        kernel.inputs[0] = DType::F16;
        assert_eq!(specs.of(&kernel).inputs, kernel.inputs);
    }
}
