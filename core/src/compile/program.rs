//! A traced function as a program: its steps (primitives on inputs, constants and
//! earlier steps), simplified (common subexpressions merged, dead steps dropped),
//! planned (elementwise subgraphs grouped into [`FusedKernel`]s on backends that
//! fuse) and replayed on new inputs.

use super::fused::{FusedKernel, FusedOp, FusedStep};
use crate::array::State;
use crate::transforms::{active_graph, key, trace};
use crate::{Array, DType, Device, Error, Generator, Layout, Primitive, Result, ViewOp};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// Where a step's input comes from.
#[derive(Clone)]
pub(crate) enum Src {
    /// Argument `i` of the call.
    Input(usize),
    /// An array that does not depend on the arguments (captured, or made inside
    /// the function from nothing): kept, and computed once.
    Const(Array),
    /// An earlier step.
    Step(usize),
}

impl Src {
    fn id(&self) -> (u8, usize) {
        match self {
            Src::Input(i) => (0, *i),
            Src::Const(a) => (1, key(a) as usize),
            Src::Step(k) => (2, *k),
        }
    }
}

pub(crate) struct Step {
    prim: Primitive,
    inputs: Vec<Src>,
    layout: Layout,
    dtype: DType,
}

/// The most steps one fused kernel takes: a longer chain is several kernels (a
/// kernel's source and its compile time grow with its steps: the conformance
/// suite's 200 000-op chain took 8 s on lavapipe in kernels of 256 steps, 200 s
/// in kernels of 1024, and did not finish as one kernel).
const MAX_FUSED_STEPS: usize = 256;

/// The most steps a stored value may take to be recomputed where it is read
/// ([`Program::rematerialize`]).
const REMAT_STEPS: usize = 16;

/// What the plan makes of a step at replay.
#[derive(Clone)]
pub(crate) enum Role {
    /// Its own node, as traced.
    Plain,
    /// Computed inside the fused kernel of a later step: no node (or, when that
    /// kernel stores it too, a view of the kernel's output).
    Member,
    /// The output of a fused kernel reading `leaves`; with `stored` members, the
    /// kernel's output holds this step's value then theirs
    /// ([`FusedKernel::outputs`]).
    Root(Arc<FusedKernel>, Vec<Src>, Vec<usize>),
}

/// A traced, simplified and planned function.
pub(crate) struct Program {
    pub(crate) device: Device,
    steps: Vec<Step>,
    roles: Vec<Role>,
    outputs: Vec<Src>,
    /// Offsets of the traced arguments: views of an argument at another offset
    /// shift by the difference.
    offsets: Vec<usize>,
    /// Dtypes of the arguments.
    in_dtypes: Vec<DType>,
    /// Shapes of the traced arguments.
    in_shapes: Vec<Vec<usize>>,
    /// See [`Program::shape_free`].
    free: bool,
    /// Steps in the trace, before simplification.
    pub(crate) traced_steps: usize,
}

impl Program {
    /// Traces `f` on `inputs` (all on `device`) and simplifies the graph.
    pub(crate) fn trace(
        f: &dyn Fn(&[Array]) -> Result<Vec<Array>>,
        inputs: &[Array],
        device: &Device,
    ) -> Result<Program> {
        let (tracers, outputs) = trace(f, inputs)?;
        let (entries, _) = active_graph(&outputs, &tracers);
        let mut map: FxHashMap<*const (), Src> = FxHashMap::default();
        for (i, t) in tracers.iter().enumerate() {
            map.insert(key(t), Src::Input(i));
        }
        let src = |map: &FxHashMap<*const (), Src>, a: &Array| {
            map.get(&key(a))
                .cloned()
                .unwrap_or_else(|| Src::Const(a.clone()))
        };
        let mut steps = Vec::with_capacity(entries.len());
        for e in entries {
            if e.node.is_evaluated() {
                return Err(super::evaluated_while_compiling());
            }
            if e.node.device() != device {
                return Err(Error::invalid(
                    "compile",
                    format!(
                        "the function moved data to {} (arguments on {}): compiled \
                         functions run on one device",
                        e.node.device().name(),
                        device.name()
                    ),
                ));
            }
            let inputs = e.inputs.iter().map(|a| src(&map, a)).collect();
            map.insert(key(&e.node), Src::Step(steps.len()));
            steps.push(Step {
                prim: e.prim,
                inputs,
                layout: e.node.layout().clone(),
                dtype: e.node.dtype(),
            });
        }
        let outputs = outputs.iter().map(|a| src(&map, a)).collect();
        let traced_steps = steps.len();
        let mut p = Program {
            device: device.clone(),
            roles: Vec::new(),
            steps,
            outputs,
            offsets: inputs.iter().map(|x| x.layout().offset).collect(),
            in_dtypes: inputs.iter().map(Array::dtype).collect(),
            in_shapes: inputs.iter().map(|x| x.shape().to_vec()).collect(),
            free: false,
            traced_steps,
        };
        p.simplify();
        if p.fold_products() {
            p.simplify();
        }
        p.free = p.compute_shape_free();
        p.roles = match device.backend().fusion_limit() {
            Some(limit) => p.plan(limit, true),
            None => vec![Role::Plain; p.steps.len()],
        };
        Ok(p)
    }

    /// Merges steps that compute the same thing from the same sources, then drops
    /// the steps no output needs.
    fn simplify(&mut self) {
        let mut seen: FxHashMap<String, usize> = FxHashMap::default();
        let mut remap: Vec<usize> = Vec::with_capacity(self.steps.len());
        let fix = |s: &mut Src, remap: &[usize]| {
            if let Src::Step(k) = s {
                *k = remap[*k];
            }
        };
        for k in 0..self.steps.len() {
            for s in &mut self.steps[k].inputs {
                fix(s, &remap);
            }
            let st = &self.steps[k];
            // A custom primitive may not be a pure function of its inputs.
            let pure = !matches!(st.prim, Primitive::Custom(_));
            let sig = pure.then(|| {
                let ids: Vec<(u8, usize)> = st.inputs.iter().map(Src::id).collect();
                format!("{:?}|{ids:?}|{}|{:?}", st.prim, st.dtype, st.layout)
            });
            let target = match sig {
                Some(sig) => *seen.entry(sig).or_insert(k),
                None => k,
            };
            remap.push(target);
        }
        for o in &mut self.outputs {
            fix(o, &remap);
        }
        // Keep what the outputs reach (inputs come before consumers).
        let mut live = vec![false; self.steps.len()];
        for o in &self.outputs {
            if let Src::Step(k) = o {
                live[*k] = true;
            }
        }
        for k in (0..self.steps.len()).rev() {
            if live[k] {
                for s in &self.steps[k].inputs {
                    if let Src::Step(j) = s {
                        live[*j] = true;
                    }
                }
            }
        }
        let mut new_index = vec![usize::MAX; self.steps.len()];
        let mut kept = Vec::new();
        for (k, st) in std::mem::take(&mut self.steps).into_iter().enumerate() {
            if live[k] {
                new_index[k] = kept.len();
                kept.push(st);
            }
        }
        for st in &mut kept {
            for s in &mut st.inputs {
                if let Src::Step(j) = s {
                    *j = new_index[*j];
                }
            }
        }
        for o in &mut self.outputs {
            if let Src::Step(j) = o {
                *j = new_index[*j];
            }
        }
        self.steps = kept;
    }

    /// Folds multiplications by a constant into the products next to them, as
    /// their `alpha` (and `beta`): a product's only reader scaling it (attention's
    /// scores times `1/sqrt(d)`), or a scaled value read only as products' operands
    /// (the scores' gradient). And a product's only reader adding an array of its
    /// shape (a causal mask's bias, a residual) to a product without an addend
    /// makes that array the addend. Each saves a pass over the product's output.
    /// The product then scales or adds in its f32 accumulator, one rounding where
    /// there were two, so a 16-bit result is folded only for a power-of-two factor
    /// (the same value unless the unscaled one overflows or the scaled one is
    /// subnormal) and never an addend. Returns whether anything changed (dead
    /// steps remain).
    fn fold_products(&mut self) -> bool {
        !self.folded_products().is_empty()
    }

    /// [`Program::fold_products`], returning the steps it changed (ascending).
    fn folded_products(&mut self) -> Vec<usize> {
        let mut changed = Vec::new();
        // One fold at a time, each with fresh readers (a fold moves them).
        for _ in 0..self.steps.len() {
            match self.fold_product() {
                Some(ks) => changed.extend(ks),
                None => break,
            }
        }
        changed.sort_unstable();
        changed.dedup();
        changed
    }

    /// The first fold [`Program::fold_products`] finds, made: the steps it changed.
    fn fold_product(&mut self) -> Option<Vec<usize>> {
        let n = self.steps.len();
        let mut readers: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
        for (k, st) in self.steps.iter().enumerate() {
            for (at, s) in st.inputs.iter().enumerate() {
                if let Src::Step(j) = s {
                    readers[*j].push((k, at));
                }
            }
        }
        let mut is_output = vec![false; n];
        for o in &self.outputs {
            if let Src::Step(k) = o {
                is_output[*k] = true;
            }
        }
        let product = |steps: &[Step], k: usize| match steps[k].prim {
            Primitive::Matmul { alpha, beta } => Some((alpha, beta)),
            _ => None,
        };
        for k in 0..n {
            let st = &self.steps[k];
            let wide = matches!(st.dtype, DType::F32 | DType::F64);
            if matches!(st.prim, Primitive::Binary(crate::BinaryOp::Add)) && wide {
                // A product without an addend, read only here, plus an array of its
                // shape and dtype.
                let alone = |s: &Src| match s {
                    Src::Step(j) => matches!(self.steps[*j].prim, Primitive::Matmul { .. })
                        .then_some(*j)
                        .filter(|&j| {
                            self.steps[j].inputs.len() == 2
                                && readers[j].len() == 1
                                && !is_output[j]
                                && self.steps[j].dtype == st.dtype
                                && self.steps[j].layout.shape == st.layout.shape
                        }),
                    _ => None,
                };
                let pick = (0..2).find_map(|at| {
                    let other = &st.inputs[1 - at];
                    let fits = self.src_shape(other) == st.layout.shape
                        && self.src_dtype(other) == st.dtype;
                    alone(&st.inputs[at])
                        .filter(|_| fits)
                        .map(|j| (j, other.clone()))
                });
                if let Some((j, other)) = pick {
                    let Some((alpha, _)) = product(&self.steps, j) else {
                        unreachable!("alone is a product")
                    };
                    let mut inputs = self.steps[j].inputs.clone();
                    inputs.push(other);
                    let st = &mut self.steps[k];
                    st.prim = Primitive::Matmul { alpha, beta: 1.0 };
                    st.inputs = inputs;
                    return Some(vec![k]);
                }
                continue;
            }
            if !matches!(st.prim, Primitive::Binary(crate::BinaryOp::Multiply))
                || !st.dtype.is_float()
            {
                continue;
            }
            let (x, v) = match (
                self.fill_value(&st.inputs[0]),
                self.fill_value(&st.inputs[1]),
            ) {
                (_, Some((v, _))) => (st.inputs[0].clone(), v),
                (Some((v, _)), None) => (st.inputs[1].clone(), v),
                _ => continue,
            };
            // The factor as the multiply saw it (rounded to its dtype).
            use crate::dtype::Element;
            let f = match st.dtype {
                DType::F64 => v,
                DType::F32 => v as f32 as f64,
                DType::F16 => <half::f16 as Element>::from_f64(v).to_f64(),
                DType::BF16 => <half::bf16 as Element>::from_f64(v).to_f64(),
                _ => continue,
            };
            let exact = f.is_finite() && f != 0.0 && f.abs().log2().fract() == 0.0;
            if !f.is_finite()
                || self.src_dtype(&x) != st.dtype
                || self.src_shape(&x) != st.layout.shape
                || !(wide || exact)
            {
                continue;
            }
            // The product's only reader scales it.
            if let Src::Step(j) = x
                && let Some((alpha, beta)) = product(&self.steps, j)
                && readers[j].len() == 1
                && !is_output[j]
                && self.steps[j].dtype == st.dtype
            {
                let inputs = self.steps[j].inputs.clone();
                let st = &mut self.steps[k];
                st.prim = Primitive::Matmul {
                    alpha: alpha * f,
                    beta: beta * f,
                };
                st.inputs = inputs;
                return Some(vec![k]);
            }
            // Read only as products' operands (not as their addend), directly or
            // through transpose views (a gradient's `gᵀ a`), which then view the
            // unscaled value instead where it is laid out as the scaled one.
            let operand = |&(c, at): &(usize, usize)| at < 2 && product(&self.steps, c).is_some();
            let operands = |rs: &[(usize, usize)]| !rs.is_empty() && rs.iter().all(operand);
            let same_layout = matches!(x, Src::Step(j) if self.steps[j].layout == st.layout);
            let through = |v: usize| {
                same_layout
                    && !is_output[v]
                    && matches!(self.steps[v].prim, Primitive::View(ViewOp::Transpose(_)))
                    && operands(&readers[v])
            };
            let rs = &readers[k];
            if !is_output[k]
                && !rs.is_empty()
                && rs.iter().all(|r| operand(r) || (r.1 == 0 && through(r.0)))
            {
                let mut scaled = Vec::new();
                for &(c, at) in &rs.clone() {
                    if product(&self.steps, c).is_some() {
                        scaled.push((c, at));
                        self.steps[c].inputs[at] = x.clone();
                    } else {
                        scaled.extend(readers[c].iter().copied());
                        self.steps[c].inputs[0] = x.clone();
                    }
                }
                for &(c, _) in &scaled {
                    let (alpha, beta) = product(&self.steps, c).expect("checked");
                    self.steps[c].prim = Primitive::Matmul {
                        alpha: alpha * f,
                        beta,
                    };
                }
                let mut changed: Vec<usize> = scaled.iter().map(|r| r.0).collect();
                changed.extend(rs.iter().map(|r| r.0));
                return Some(changed);
            }
        }
        None
    }

    /// Groups elementwise steps into fused kernels reading at most `limit` buffers:
    /// walking from the outputs back, a step joins the group of its consumers when
    /// all of them are in one group of its shape and it is not an output itself
    /// (then nothing outside the group needs its value). With `several`, a step
    /// that is an output, or that a later op outside the group also reads (as a
    /// backward pass reads its forward's values), joins too when the group's kernel
    /// can store it beside its root (its dtype, no reduction) and those
    /// other readers come after the root: an optimizer's new moments and parameter
    /// are one kernel, not three, and GELU's forward one, not five.
    fn plan(&self, limit: usize, several: bool) -> Vec<Role> {
        let n = self.steps.len();
        let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (k, st) in self.steps.iter().enumerate() {
            for s in &st.inputs {
                if let Src::Step(j) = s {
                    consumers[*j].push(k);
                }
            }
        }
        let mut is_output = vec![false; n];
        for o in &self.outputs {
            if let Src::Step(k) = o {
                is_output[*k] = true;
            }
        }
        // Fused kernels compute in 32 bits: f64 and i64 steps run op by op.
        let wide = |k: usize| {
            let st = &self.steps[k];
            st.dtype.size() == 8 || st.inputs.iter().any(|s| self.src_dtype(s).size() == 8)
        };
        // A step reading an array of another device (a `to_device`, or an op that
        // moves an input implicitly) keeps its own node: that move is its job.
        let foreign = |k: usize| {
            self.steps[k]
                .inputs
                .iter()
                .any(|s| matches!(s, Src::Const(a) if a.device() != &self.device))
        };
        let fusable = |k: usize| {
            matches!(
                self.steps[k].prim,
                Primitive::Unary(_)
                    | Primitive::Binary(_)
                    | Primitive::Select
                    | Primitive::Copy
                    | Primitive::Axpby { .. }
            ) && !wide(k)
                && !foreign(k)
        };
        let mut group: Vec<Option<usize>> = vec![None; n];
        let mut leaves: FxHashMap<usize, Vec<Src>> = FxHashMap::default();
        let mut members: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
        // Each group's elementwise shape (a reduction's: its input's).
        let mut eshape: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
        // Each group's members stored beside its root.
        let mut stored: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
        for k in (0..n).rev() {
            let st = &self.steps[k];
            if let Primitive::Reduce { .. } = st.prim {
                // A reduction roots a group: its elementwise producer may join it.
                if let Src::Step(j) = &st.inputs[0]
                    && !wide(k)
                {
                    group[k] = Some(k);
                    leaves.insert(k, st.inputs.clone());
                    members.insert(k, vec![k]);
                    eshape.insert(k, self.steps[*j].layout.shape.clone());
                }
                continue;
            }
            if !fusable(k) {
                continue;
            }
            let joined = (|| {
                if consumers[k].is_empty() {
                    return None;
                }
                // The group of its consumers, or with `several` the earliest-rooted
                // group of one of this shape that can store it.
                let g = consumers[k]
                    .iter()
                    .filter_map(|c| group[*c])
                    .filter(|g| eshape[g] == st.layout.shape && members[g].len() < MAX_FUSED_STEPS)
                    .min()?;
                let root = &self.steps[g];
                // Stored when anything outside the group needs its value.
                let stores = is_output[k] || consumers[k].iter().any(|c| group[*c] != Some(g));
                if stores {
                    // Stored beside the root; its other consumers come after the
                    // root (so read the kernel's output, no cycle). Narrow values
                    // fill whole words of the output (an even count of f16s).
                    let storable = several
                        && !matches!(root.prim, Primitive::Reduce { .. })
                        && st.dtype == root.dtype
                        && st.layout.numel().is_multiple_of(4 / st.dtype.size())
                        && consumers[k].iter().all(|&c| group[c] == Some(g) || c > g);
                    if !storable {
                        return None;
                    }
                }
                let mut l: Vec<Src> = leaves[&g]
                    .iter()
                    .filter(|s| !matches!(s, Src::Step(j) if *j == k))
                    .cloned()
                    .collect();
                push_unique(&mut l, &st.inputs);
                (self.buffers(&l) <= limit).then_some((g, l, stores))
            })();
            match joined {
                Some((g, l, stores)) => {
                    group[k] = Some(g);
                    leaves.insert(g, l);
                    members.get_mut(&g).expect("root made first").push(k);
                    if stores {
                        stored.entry(g).or_default().push(k);
                    }
                }
                None => {
                    group[k] = Some(k);
                    let mut l = Vec::new();
                    push_unique(&mut l, &st.inputs);
                    leaves.insert(k, l);
                    members.insert(k, vec![k]);
                    eshape.insert(k, st.layout.shape.clone());
                }
            }
        }
        if several {
            self.rematerialize(
                limit,
                &consumers,
                &is_output,
                &group,
                &eshape,
                &mut members,
                &mut stored,
            );
        }
        let mut roles = vec![Role::Plain; n];
        for (root, mut ms) in members {
            if ms.len() < 2 {
                continue; // one op: the library's own kernel
            }
            ms.sort_unstable();
            let mut extra = stored.remove(&root).unwrap_or_default();
            extra.sort_unstable();
            let kernel = self.kernel(&ms, &extra);
            if kernel.0.inputs.is_empty() {
                continue; // constants only: nothing to give the kernel its shape
            }
            for &m in &ms {
                roles[m] = Role::Member;
            }
            roles[root] = Role::Root(Arc::new(kernel.0), kernel.1, extra);
        }
        roles
    }

    /// Stored values that only later fused kernels read are recomputed in those
    /// kernels instead, where the steps that make them (their cone in the storing
    /// kernel) are few and read nothing the reading kernel would not read in their
    /// place: GELU's forward then stores its output alone, and its backward reads
    /// the forward's input rather than four of its intermediates (a write and a
    /// read of each saved, and the memory to keep them). Only cones whose inputs
    /// stay stored for good (inputs, constants, a group's root or a plain step)
    /// are copied, so a value no kernel stores any more is never read.
    #[allow(clippy::too_many_arguments)]
    fn rematerialize(
        &self,
        limit: usize,
        consumers: &[Vec<usize>],
        is_output: &[bool],
        group: &[Option<usize>],
        eshape: &FxHashMap<usize, Vec<usize>>,
        members: &mut FxHashMap<usize, Vec<usize>>,
        stored: &mut FxHashMap<usize, Vec<usize>>,
    ) {
        // Materialized for good: an input, a constant, a plain step or a root.
        let fixed = |src: &Src| match src {
            Src::Step(j) => group[*j].is_none_or(|g| g == *j),
            _ => true,
        };
        let mut roots: Vec<usize> = stored.keys().copied().collect();
        roots.sort_unstable();
        for g in roots {
            let mut keep = Vec::new();
            for e in stored[&g].clone() {
                let readers: Option<Vec<usize>> = consumers[e]
                    .iter()
                    .filter(|&&c| group[c] != Some(g))
                    .map(|&c| group[c])
                    .collect();
                let plans = (|| {
                    let mut hs = readers?;
                    hs.sort_unstable();
                    hs.dedup();
                    if is_output[e] || hs.iter().any(|h| eshape.get(h) != eshape.get(&g)) {
                        return None;
                    }
                    let cone = self.cone(e, &members[&g]);
                    if cone.len() > REMAT_STEPS || !self.leaves_of(&cone).iter().all(fixed) {
                        return None;
                    }
                    let mut plans = Vec::new();
                    for h in hs {
                        let mut ms = members[&h].clone();
                        ms.extend(cone.iter().copied());
                        ms.sort_unstable();
                        ms.dedup();
                        let before = self.leaves_of(&members[&h]);
                        let after = self.leaves_of(&ms);
                        let more = self.buffers(&after) > self.buffers(&before);
                        if more || ms.len() > MAX_FUSED_STEPS || self.buffers(&after) > limit {
                            return None;
                        }
                        plans.push((h, ms));
                    }
                    Some(plans)
                })();
                match plans {
                    Some(plans) => {
                        for (h, ms) in plans {
                            members.insert(h, ms);
                        }
                    }
                    None => keep.push(e),
                }
            }
            stored.insert(g, keep);
        }
    }

    /// Step `e` and the steps among `members` it is computed from, ascending.
    fn cone(&self, e: usize, members: &[usize]) -> Vec<usize> {
        let mut cone = vec![e];
        let mut i = 0;
        while i < cone.len() {
            for s in &self.steps[cone[i]].inputs {
                if let Src::Step(j) = s
                    && members.contains(j)
                    && !cone.contains(j)
                {
                    cone.push(*j);
                }
            }
            i += 1;
        }
        cone.sort_unstable();
        cone
    }

    /// What a kernel of `members` reads (their inputs computed outside them).
    fn leaves_of(&self, members: &[usize]) -> Vec<Src> {
        let mut l = Vec::new();
        for &m in members {
            let srcs: Vec<Src> = self.steps[m]
                .inputs
                .iter()
                .filter(|s| !matches!(s, Src::Step(j) if members.contains(j)))
                .cloned()
                .collect();
            push_unique(&mut l, &srcs);
        }
        l
    }

    /// The fused kernel of a group (`members` ascending, the root last: a
    /// reduction becomes the kernel's epilogue; `stored` members stored after the
    /// root) and the sources of its inputs; constants of `full` become steps.
    fn kernel(&self, members: &[usize], stored: &[usize]) -> (FusedKernel, Vec<Src>) {
        let (members, reduce) = match members.split_last() {
            Some((&root, rest)) => match &self.steps[root].prim {
                // Its input is the last elementwise member (every other member
                // feeds it), so the kernel's last step.
                Primitive::Reduce { op, axes } => (rest, Some((*op, axes.clone()))),
                _ => (members, None),
            },
            None => (members, None),
        };
        let mut leaves: Vec<Src> = Vec::new();
        let mut consts: Vec<(Src, f64, DType)> = Vec::new();
        for &m in members {
            for s in &self.steps[m].inputs {
                let ours = matches!(s, Src::Step(j) if members.contains(j));
                let known = leaves.iter().chain(consts.iter().map(|c| &c.0));
                if ours || known.clone().any(|l| l.id() == s.id()) {
                    continue;
                }
                match self.fill_value(s) {
                    Some((v, d)) => consts.push((s.clone(), v, d)),
                    None => leaves.push(s.clone()),
                }
            }
        }
        let n_in = leaves.len();
        let mut value: FxHashMap<(u8, usize), usize> = FxHashMap::default();
        for (i, l) in leaves.iter().enumerate() {
            value.insert(l.id(), i);
        }
        let mut steps = Vec::new();
        for (s, v, d) in &consts {
            value.insert(s.id(), n_in + steps.len());
            steps.push(FusedStep {
                op: FusedOp::Const(*v),
                args: vec![],
                dtype: *d,
            });
        }
        for &m in members {
            let st = &self.steps[m];
            let op = match &st.prim {
                Primitive::Unary(op) => FusedOp::Unary(*op),
                Primitive::Binary(op) => FusedOp::Binary(*op),
                Primitive::Select => FusedOp::Select,
                Primitive::Copy => FusedOp::Cast,
                Primitive::Axpby { alpha, beta } => FusedOp::Axpby {
                    alpha: *alpha,
                    beta: *beta,
                },
                _ => unreachable!("only elementwise steps are grouped"),
            };
            let args = st.inputs.iter().map(|s| value[&s.id()]).collect();
            value.insert(Src::Step(m).id(), n_in + steps.len());
            steps.push(FusedStep {
                op,
                args,
                dtype: st.dtype,
            });
        }
        let inputs = leaves.iter().map(|l| self.src_dtype(l)).collect();
        let outputs = match (stored, members.last()) {
            ([], _) | (_, None) => Vec::new(),
            (_, Some(&root)) => std::iter::once(root)
                .chain(stored.iter().copied())
                .map(|m| value[&Src::Step(m).id()])
                .collect(),
        };
        (
            FusedKernel {
                inputs,
                steps,
                reduce,
                outputs,
            },
            leaves,
        )
    }

    fn src_shape<'a>(&'a self, s: &'a Src) -> &'a [usize] {
        match s {
            Src::Input(i) => &self.in_shapes[*i],
            Src::Const(a) => a.shape(),
            Src::Step(k) => &self.steps[*k].layout.shape,
        }
    }

    fn src_dtype(&self, s: &Src) -> DType {
        match s {
            Src::Input(i) => self.in_dtypes[*i],
            Src::Const(a) => a.dtype(),
            Src::Step(k) => self.steps[*k].dtype,
        }
    }

    /// Distinct buffers the sources read (views share their base's buffer; `full`
    /// constants read none).
    fn buffers(&self, srcs: &[Src]) -> usize {
        let mut set: FxHashSet<(u8, usize)> = FxHashSet::default();
        for s in srcs {
            if self.fill_value(s).is_some() {
                continue;
            }
            let mut s = s.clone();
            while let Src::Step(k) = s {
                match &self.steps[k].prim {
                    Primitive::View(_) => s = self.steps[k].inputs[0].clone(),
                    _ => break,
                }
            }
            set.insert(s.id());
        }
        set.len()
    }

    /// Whether a replay may take arguments of another shape ([`Program::replay`]
    /// with a shape): every argument and step has one shape, every step is
    /// elementwise, and every constant is a scalar broadcast to that shape.
    pub(crate) fn shape_free(&self) -> bool {
        self.free
    }

    fn compute_shape_free(&self) -> bool {
        let Some(s) = self.in_shapes.first() else {
            return false;
        };
        self.in_shapes.iter().all(|x| x == s)
            && self.outputs.iter().all(|o| !matches!(o, Src::Const(_)))
            && self.steps.iter().all(|st| {
                st.layout.shape == *s
                    && matches!(
                        st.prim,
                        Primitive::Unary(_)
                            | Primitive::Binary(_)
                            | Primitive::Select
                            | Primitive::Copy
                            | Primitive::Axpby { .. }
                    )
                    && st.inputs.iter().all(|i| match i {
                        Src::Const(a) => a.shape() == &s[..] && scalar_base(a).is_some(),
                        _ => true,
                    })
            })
    }

    /// The function's outputs for `inputs`: new lazy nodes, fused kernels where
    /// planned. Same signature as the trace, or with `shape` (a
    /// [`Program::shape_free`] program) arguments of that one shape.
    pub(crate) fn replay(&self, inputs: &[Array], shape: Option<&[usize]>) -> Result<Vec<Array>> {
        let mut vals: Vec<Option<(Array, isize)>> = Vec::with_capacity(self.steps.len());
        // Constants of a shapeless replay: their scalar broadcast to the new shape.
        let mut consts: FxHashMap<*const (), Array> = FxHashMap::default();
        if let Some(s) = shape {
            for st in &self.steps {
                for i in &st.inputs {
                    if let Src::Const(a) = i {
                        if let std::collections::hash_map::Entry::Vacant(v) = consts.entry(key(a)) {
                            let base = scalar_base(a).expect("checked by shape_free");
                            v.insert(crate::ops::broadcast_to(
                                &crate::ops::reshape(&base, &[])?,
                                s,
                            )?);
                        }
                    }
                }
            }
        }
        let get = |vals: &[Option<(Array, isize)>], s: &Src| -> (Array, isize) {
            match s {
                Src::Input(i) => {
                    let x = &inputs[*i];
                    let d = x.layout().offset as isize - self.offsets[*i] as isize;
                    (x.clone(), if shape.is_some() { 0 } else { d })
                }
                Src::Const(a) => (consts.get(&key(a)).unwrap_or(a).clone(), 0),
                Src::Step(k) => vals[*k].clone().expect("a member has no outside consumer"),
            }
        };
        let layout_of = |st: &Step| match shape {
            Some(s) => Layout::contiguous(s),
            None => st.layout.clone(),
        };
        for (st, role) in self.steps.iter().zip(&self.roles) {
            let made = match role {
                Role::Member => None,
                Role::Root(kernel, leaves, stored) => {
                    let ins: Vec<Array> = leaves.iter().map(|l| get(&vals, l).0).collect();
                    let shape = layout_of(st).shape;
                    let mut out_shape = shape.clone();
                    if !stored.is_empty() {
                        out_shape.insert(0, 1 + stored.len());
                    }
                    let node = Array::from_op(
                        Primitive::Fused(kernel.clone()),
                        ins,
                        Layout::contiguous(&out_shape),
                        st.dtype,
                        self.device.clone(),
                    );
                    if stored.is_empty() {
                        Some((node, 0))
                    } else {
                        // Value j of the kernel's output: a view.
                        let part = |j: usize| -> Result<Array> {
                            let j = j as isize;
                            let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
                            node.slice(&[crate::Slice::range(j, j + 1)])?.reshape(&dims)
                        };
                        // Their offset in it, by which later views of them shift.
                        let numel: usize = shape.iter().product();
                        for (j, &m) in stored.iter().enumerate() {
                            vals[m] = Some((part(j + 1)?, ((j + 1) * numel) as isize));
                        }
                        Some((part(0)?, 0))
                    }
                }
                Role::Plain => {
                    // A view shifts by its input's shift (the first input's).
                    let mut shift = 0;
                    let ins: Vec<Array> = (st.inputs.iter().enumerate())
                        .map(|(j, s)| {
                            let (a, d) = get(&vals, s);
                            if j == 0 {
                                shift = d;
                            }
                            a
                        })
                        .collect();
                    // Offsets count elements of each node's dtype (a complex64 element
                    // is two f32s).
                    let delta = match st.prim {
                        Primitive::View(ViewOp::AsReal) => shift * 2,
                        Primitive::View(ViewOp::AsComplex) => shift / 2,
                        Primitive::View(_) => shift,
                        _ => 0,
                    };
                    let mut layout = layout_of(st);
                    layout.offset = (layout.offset as isize + delta) as usize;
                    let node =
                        Array::from_op(st.prim.clone(), ins, layout, st.dtype, self.device.clone());
                    Some((node, delta))
                }
            };
            vals.push(made);
        }
        Ok(self.outputs.iter().map(|o| get(&vals, o).0).collect())
    }

    /// Nodes a replay makes (fused kernels count once).
    pub(crate) fn nodes(&self) -> usize {
        self.roles
            .iter()
            .filter(|r| !matches!(r, Role::Member))
            .count()
    }

    /// The fused kernels with their inputs' dtypes and layouts for `inputs`.
    pub(crate) fn fused(&self, inputs: &[Array]) -> Vec<(Arc<FusedKernel>, Vec<Array>)> {
        let Ok(outs) = self.replay(inputs, None) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let mut seen = FxHashSet::default();
        let mut stack = outs;
        while let Some(a) = stack.pop() {
            if !seen.insert(key(&a)) {
                continue;
            }
            if let Some((p, ins)) = a.tape() {
                if let Primitive::Fused(k) = p {
                    found.push((k.clone(), ins.clone()));
                }
                stack.extend(ins);
            }
        }
        found.reverse();
        found
    }
}

/// The one-element array `a` broadcasts (through broadcast and reshape views).
fn scalar_base(a: &Array) -> Option<Array> {
    let mut a = a.clone();
    loop {
        if a.size() == 1 {
            return Some(a);
        }
        match a.tape()? {
            (Primitive::View(ViewOp::Broadcast | ViewOp::Reshape), ins) => a = ins[0].clone(),
            _ => return None,
        }
    }
}

fn push_unique(list: &mut Vec<Src>, srcs: &[Src]) {
    for s in srcs {
        if !list.iter().any(|l| l.id() == s.id()) {
            list.push(s.clone());
        }
    }
}

impl Program {
    /// The value and dtype of a constant made by `full` (seen through views).
    fn fill_value(&self, s: &Src) -> Option<(f64, DType)> {
        let mut s = s.clone();
        let dtype = match &s {
            Src::Input(_) => return None,
            Src::Const(a) => a.dtype(),
            Src::Step(k) => self.steps[*k].dtype,
        };
        loop {
            let (p, next) = match &s {
                Src::Input(_) => return None,
                Src::Const(a) => {
                    let (p, ins) = a.tape()?;
                    (p, ins.first().map(|a| Src::Const(a.clone())))
                }
                Src::Step(k) => {
                    let st = &self.steps[*k];
                    (st.prim.clone(), st.inputs.first().cloned())
                }
            };
            match p {
                Primitive::Generate(Generator::Fill(v)) => return Some((v, dtype)),
                Primitive::View(ViewOp::Broadcast | ViewOp::Reshape) => s = next?,
                _ => return None,
            }
        }
    }
}

/// Compiled mode: rewrites the pending graph `order` (inputs before consumers, as
/// eval walks it, each node with a clone of its inputs) so the root of each
/// planned elementwise group computes the group's fused kernel. Nodes held
/// outside the graph (by the caller, or by pending nodes eval does not compute)
/// keep their values. Returns whether a node changed.
pub(crate) fn fuse_pending(order: &[crate::eval::Step]) -> bool {
    let Some(device) = order.first().map(|(n, _)| n.device().clone()) else {
        return false;
    };
    if order.iter().any(|(n, _)| n.device() != &device) {
        return false;
    }
    let Some(limit) = device.backend().fusion_limit() else {
        return false;
    };
    let index: FxHashMap<*const (), usize> = order
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (key(n), i))
        .collect();
    let mut uses = vec![0usize; order.len()];
    for (_, ins) in order {
        for i in ins {
            if let Some(&j) = index.get(&key(i)) {
                uses[j] += 1;
            }
        }
    }
    let mut steps = Vec::with_capacity(order.len());
    let mut outputs = Vec::new();
    for (k, (node, ins)) in order.iter().enumerate() {
        // Handles: this entry, and per use the consumer's inputs and eval's copy.
        if std::sync::Arc::strong_count(&node.0) > 1 + 2 * uses[k] {
            outputs.push(Src::Step(k));
        }
        let Some((prim, _)) = node.tape() else {
            return false; // computed meanwhile (another thread)
        };
        let inputs = ins
            .iter()
            .map(|a| match index.get(&key(a)) {
                Some(&j) => Src::Step(j),
                None => Src::Const(a.clone()),
            })
            .collect();
        steps.push(Step {
            prim,
            inputs,
            layout: node.layout().clone(),
            dtype: node.dtype(),
        });
    }
    let mut p = Program {
        device,
        traced_steps: steps.len(),
        steps,
        roles: Vec::new(),
        outputs,
        offsets: Vec::new(),
        in_dtypes: Vec::new(),
        in_shapes: Vec::new(),
        free: false,
    };
    // Node `k` (still pending) computes `prim` of `srcs` instead; whether it did.
    let repoint = |k: usize, prim: Primitive, srcs: &[Src]| -> bool {
        let inputs: Vec<Array> = srcs
            .iter()
            .map(|s| match s {
                Src::Step(j) => order[*j].0.clone(),
                Src::Const(a) => a.clone(),
                Src::Input(_) => unreachable!("a pending graph has no arguments"),
            })
            .collect();
        let mut node = order[k].0.lock();
        let pending = matches!(&*node, State::Pending { .. });
        if pending {
            *node = State::Pending { prim, inputs };
        }
        pending
    };
    let mut changed = false;
    // Scales and sums folded into products: the changed nodes take their new
    // primitive and inputs (a folded multiply is then read by nothing, and eval
    // drops it).
    for k in p.folded_products() {
        changed |= repoint(k, p.steps[k].prim.clone(), &p.steps[k].inputs);
    }
    // One output per node here: a node's value cannot become a view of another's.
    for (k, role) in p.plan(limit, false).into_iter().enumerate() {
        let Role::Root(kernel, leaves, _) = role else {
            continue;
        };
        if repoint(k, Primitive::Fused(kernel), &leaves) {
            super::FUSED_IN_EVAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            changed = true;
        }
    }
    changed
}
