//! Every composed module is parsed and validated by naga, then translated to SPIR-V,
//! MSL and HLSL. No GPU needed.

use naga::back::PipelineConstants;
use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet, ValidationFlags, Validator};
use wmx_kernels::{
    ArgReduceOp, BinaryOp, DType, Error, Family, ModuleSpec, Op, ReduceOp, Target, UnaryOp,
    Variant, check_specs, compose, families, module_specs,
};
use wmx_reference::reference::{self, Rule};

fn check(spec: &ModuleSpec) -> Result<(), String> {
    let src = compose(spec).map_err(|e| format!("compose: {e}"))?;
    let coop = matches!(
        spec.variant,
        Variant::Coop | Variant::CoopVec(_) | Variant::AttentionCoop { .. }
    );
    let constants = spec.constants();
    check_source(&src, spec.entry_point(), spec.target, coop, &constants)
}

/// Parses, validates and translates one module to SPIR-V, MSL and HLSL.
fn check_source(
    src: &str,
    entry: &str,
    target: Target,
    coop: bool,
    overrides: &[(&str, f64)],
) -> Result<(), String> {
    let src = src.to_string();
    let module = naga::front::wgsl::parse_str(&src)
        .map_err(|e| format!("parse: {}\n{src}", e.emit_to_string(&src)))?;
    let mut caps = Capabilities::default();
    if target.subgroups {
        caps |= Capabilities::SUBGROUP;
    }
    if target.f16 {
        caps |= Capabilities::SHADER_FLOAT16 | Capabilities::SHADER_FLOAT16_IN_FLOAT32;
    }
    let atomic_f32 = src.contains("atomic<f32>");
    if atomic_f32 {
        caps |= Capabilities::SHADER_FLOAT32_ATOMIC;
    }
    if coop {
        caps |= Capabilities::COOPERATIVE_MATRIX
            | Capabilities::SHADER_FLOAT16
            | Capabilities::SHADER_FLOAT16_IN_FLOAT32
            | Capabilities::SUBGROUP
            | Capabilities::SUBGROUP_BARRIER;
    }
    let mut v = Validator::new(ValidationFlags::all(), caps);
    if target.subgroups {
        v.subgroup_stages(ShaderStages::COMPUTE);
        v.subgroup_operations(SubgroupOperationSet::all());
    }
    let info = v
        .validate(&module)
        .map_err(|e| format!("validate: {}\n{src}", e.emit_to_string(&src)))?;
    let mut constants = PipelineConstants::default();
    for &(k, val) in overrides {
        constants.insert(k.to_string(), val);
    }
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        Some((naga::ShaderStage::Compute, entry)),
        &constants,
    )
    .map_err(|e| format!("overrides: {e:?}"))?;

    to_spirv(&module, &info, entry)?;

    if coop || atomic_f32 {
        // Cooperative matrices of 16 x 16 exist on Vulkan only (Metal has 8 x 8);
        // the float atomics are requested on Vulkan only.
        return Ok(());
    }
    let msl_opts = naga::back::msl::Options {
        lang_version: (2, 4),
        fake_missing_bindings: true,
        ..Default::default()
    };
    let (_, tinfo) = naga::back::msl::write_string(
        &module,
        &info,
        &msl_opts,
        &naga::back::msl::PipelineOptions {
            entry_point: Some((naga::ShaderStage::Compute, entry.to_string())),
            ..Default::default()
        },
    )
    .map_err(|e| format!("msl: {e:?}"))?;
    if tinfo.entry_point_names.iter().any(|r| r.is_err()) {
        return Err(format!("msl entry point: {:?}", tinfo.entry_point_names));
    }

    to_hlsl(&module, &info, entry)
}

fn to_spirv(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
) -> Result<(), String> {
    let opts = naga::back::spv::Options {
        lang_version: (1, 3),
        use_storage_input_output_16: false,
        ..Default::default()
    };
    let pipe = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: entry.to_string(),
    };
    naga::back::spv::write_vec(module, info, &opts, Some(&pipe))
        .map(drop)
        .map_err(|e| format!("spv: {e:?}"))
}

fn to_hlsl(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
) -> Result<(), String> {
    let opts = naga::back::hlsl::Options {
        shader_model: naga::back::hlsl::ShaderModel::V6_0,
        ..Default::default()
    };
    let pipe = naga::back::hlsl::PipelineOptions {
        entry_point: Some((naga::ShaderStage::Compute, entry.to_string())),
    };
    let mut out = String::new();
    naga::back::hlsl::Writer::new(&mut out, &opts, &pipe)
        .write(module, info, None)
        .map(drop)
        .map_err(|e| format!("hlsl: {e:?}"))
}

fn run_all(target: Target) {
    let specs = module_specs(target);
    let failures = check_specs(&specs, check);
    assert!(
        failures.is_empty(),
        "{} of {} modules failed; first:\n{}",
        failures.len(),
        specs.len(),
        failures
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    eprintln!(
        "{} modules validated and translated (subgroups: {})",
        specs.len(),
        target.subgroups
    );
}

#[test]
fn cooperative_matrix_modules_validate_and_translate_to_spirv() {
    let t = Target {
        subgroups: true,
        coop: 32,
        ..Target::default()
    };
    let coop: Vec<ModuleSpec> = module_specs(t)
        .into_iter()
        .filter(|s| {
            matches!(
                s.variant,
                Variant::Coop | Variant::CoopVec(_) | Variant::AttentionCoop { .. }
            )
        })
        .collect();
    assert_eq!(
        coop.len(),
        40,
        "the staged kernel and 8 variants of the vec4 one (layouts, widths; f16 in, f16/f32 out, with and without c); attention of head dimensions 16, 64, 80 and 128"
    );
    for spec in &coop {
        check(spec).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
    }
}

/// Float atomics (Vulkan's `VK_EXT_shader_atomic_float`): f32 scatter_add adds
/// with `atomicAdd` on `atomic<f32>`; 32-bit integers add on words everywhere.
#[test]
fn float_atomic_modules_validate_and_translate_to_spirv() {
    let t = Target {
        subgroups: true,
        atomic_f32: true,
        ..Target::default()
    };
    let adds: Vec<ModuleSpec> = module_specs(t)
        .into_iter()
        .filter(|s| s.family.name == "Scatter" && s.op.name() == "scatter_add")
        .collect();
    assert!(adds.len() >= 12, "{} scatter_add modules", adds.len());
    for spec in &adds {
        check(spec).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
        let src = compose(spec).unwrap();
        let hw = matches!(spec.output, DType::F32 | DType::I32 | DType::U32);
        assert_eq!(src.contains("atomicAdd"), hw, "{spec:?}");
        assert_eq!(
            src.contains("atomic<f32>"),
            spec.output == DType::F32,
            "{spec:?}"
        );
        let cas = compose(&ModuleSpec {
            target: Target::default(),
            ..spec.clone()
        })
        .unwrap();
        assert!(!cas.contains("atomic<f32>"), "{spec:?} without the feature");
    }
}

#[test]
fn all_modules_validate_and_translate_without_subgroups() {
    run_all(Target {
        subgroups: false,
        subgroup_directive: false,
        workgroup_size: 256,
        f16: false,
        coop: 0,
        atomic_f32: false,
        radix_wg: 0,
    });
}

#[test]
fn all_modules_validate_and_translate_with_subgroups() {
    run_all(Target {
        subgroups: true,
        subgroup_directive: false,
        workgroup_size: 256,
        f16: false,
        coop: 0,
        atomic_f32: false,
        radix_wg: 256,
    });
}

/// The 8-bit radix sort's kernels at the workgroup sizes adapters give it (eight
/// subgroups of 4 to 32: lavapipe's 8 makes 64).
#[test]
fn radix8_modules_validate_at_every_workgroup_size() {
    for radix_wg in [32, 64, 128, 256] {
        let t = Target {
            subgroups: true,
            radix_wg,
            ..Target::default()
        };
        let specs: Vec<ModuleSpec> = module_specs(t)
            .into_iter()
            .filter(|s| s.op.name().starts_with("radix8"))
            .collect();
        assert_eq!(specs.len(), 2 * DType::WORDS.len(), "radix_wg {radix_wg}");
        for spec in &specs {
            assert_eq!(spec.target.workgroup_size, radix_wg, "{spec:?}");
            check(spec).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
        }
    }
}

/// The hardware f16 conversions (pack/unpack2x16float): every module touching f16.
#[test]
fn native_f16_modules_validate_and_translate() {
    let t = Target {
        subgroups: true,
        subgroup_directive: false,
        workgroup_size: 256,
        f16: true,
        coop: 0,
        atomic_f32: false,
        radix_wg: 0,
    };
    let specs: Vec<ModuleSpec> = module_specs(t)
        .into_iter()
        .filter(|s| s.inputs.contains(&DType::F16) || s.output == DType::F16)
        .collect();
    assert!(specs.len() > 50);
    for spec in &specs {
        check(spec).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
        let src = compose(spec).unwrap();
        assert_eq!(
            src.contains("unpack2x16float"),
            !spec.raw_bits(),
            "{spec:?}"
        );
        assert!(
            !src.contains("fn f16_bits"),
            "{spec:?}: software path in a native module"
        );
    }
}

#[test]
fn small_workgroup_size_modules_validate() {
    let t = Target {
        subgroups: false,
        subgroup_directive: false,
        workgroup_size: 64,
        f16: false,
        coop: 0,
        atomic_f32: false,
        radix_wg: 0,
    };
    for spec in module_specs(t)
        .iter()
        .filter(|s| s.inputs.first() == Some(&DType::F32))
    {
        check(spec).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
    }
}

/// The op tables and the module list agree: every (op, dtype) the tables define has
/// modules for all variants, and everything else is refused with a clear error.
#[test]
fn op_tables_are_complete() {
    let t = Target::default();
    let specs = module_specs(t);
    let has = |family: &Family, op: Op, d: DType| {
        specs
            .iter()
            .any(|s| s.family == family && s.op == op && s.inputs[0] == d)
    };
    for &op in BinaryOp::ALL {
        let mut any = false;
        for d in DType::WORDS {
            let supported = op.supports(d);
            any |= supported;
            assert_eq!(
                has(&families::BINARY, op.into(), d),
                supported,
                "binary {op} {d}"
            );
            if !supported {
                let spec = ModuleSpec {
                    family: &families::BINARY,
                    op: op.into(),
                    inputs: vec![d, d],
                    output: d,
                    variant: Variant::General,
                    alias: 0,
                    target: t,
                };
                assert!(
                    matches!(compose(&spec), Err(Error::OpNotDefined { .. })),
                    "{op} {d}"
                );
            }
        }
        assert!(any, "binary {op} defined for no dtype");
        // Against the reference's own statement of each op's dtype rule.
        let rule = reference::binary_rule(op.name());
        for d in [DType::F32, DType::F16, DType::BF16] {
            assert_eq!(op.supports(d), rule != Rule::Bitwise, "{op} on {d}");
        }
        for d in [DType::I32, DType::U32, DType::U8] {
            assert_eq!(op.supports(d), rule != Rule::Float, "{op} on {d}");
        }
    }
    for &op in UnaryOp::ALL {
        for d in DType::WORDS {
            assert_eq!(
                has(&families::UNARY, op.into(), d),
                op.supports(d),
                "unary {op} {d}"
            );
        }
        assert!(op.supports(DType::F32) && op.supports(DType::BF16), "{op}");
    }
    for &op in ReduceOp::ALL {
        for d in DType::WORDS {
            assert!(has(&families::REDUCE, op.into(), d), "reduce {op} {d}");
        }
    }
    for &op in ArgReduceOp::ALL {
        for d in DType::WORDS {
            assert!(
                has(&families::ARG_REDUCE, op.into(), d),
                "arg_reduce {op} {d}"
            );
        }
    }
    // Every cast pair.
    for a in DType::WORDS {
        for b in DType::WORDS {
            assert!(
                specs
                    .iter()
                    .any(|s| s.family == &families::COPY && s.inputs[0] == a && s.output == b)
            );
        }
    }
    // A family given another family's op is refused.
    let unknown = ModuleSpec {
        family: &families::BINARY,
        op: UnaryOp::Exp.into(),
        inputs: vec![DType::F32, DType::F32],
        output: DType::F32,
        variant: Variant::General,
        alias: 0,
        target: t,
    };
    assert!(matches!(compose(&unknown), Err(Error::Validation(_))));
}

/// Browsers need `enable subgroups;`, naga rejects it: the prelude emits it per target.
#[test]
fn subgroup_directive_follows_the_target() {
    let mut t = Target {
        subgroups: true,
        subgroup_directive: true,
        workgroup_size: 256,
        f16: false,
        coop: 0,
        atomic_f32: false,
        radix_wg: 0,
    };
    let spec = module_specs(t)
        .into_iter()
        .find(|s| s.family == &families::REDUCE)
        .unwrap();
    let src = compose(&spec).unwrap();
    assert!(src.starts_with("enable subgroups;"));
    assert!(src.contains("subgroupShuffleXor"));
    t.subgroup_directive = false;
    let src = compose(&ModuleSpec {
        target: t,
        ..spec.clone()
    })
    .unwrap();
    assert!(!src.contains("enable subgroups"));
    t.subgroups = false;
    let src = compose(&ModuleSpec { target: t, ..spec }).unwrap();
    assert!(
        !src.contains("subgroup"),
        "fallback must not use subgroup builtins"
    );
}

/// Modules generated around users' kernel bodies (every dtype WGSL indexes, ranks
/// 0 to 4, templates, a body with barriers and no guard) validate and translate.
#[test]
fn generated_user_kernels_translate() {
    use wmx_kernels::{KernelArg, KernelSource, TemplateArg};
    let target = Target {
        subgroups: false,
        subgroup_directive: false,
        workgroup_size: 256,
        f16: true,
        coop: 0,
        atomic_f32: false,
        radix_wg: 0,
    };
    let mut n = 0;
    for d in [DType::F32, DType::F16, DType::I32, DType::U32] {
        for ndim in 0..5 {
            let ins = [
                KernelArg {
                    name: "x",
                    dtype: d,
                    ndim,
                },
                KernelArg {
                    name: "idx",
                    dtype: DType::U32,
                    ndim: 1,
                },
            ];
            let outs = [KernelArg {
                name: "y",
                dtype: d,
                ndim,
            }];
            let template = [
                ("T", TemplateArg::DType(d)),
                ("N", TemplateArg::Int(-3)),
                ("M", TemplateArg::Uint(7)),
                ("S", TemplateArg::Float(1e-7)),
                ("B", TemplateArg::Bool(true)),
            ];
            let body = "let i = global_id.x;
                if (B && S > 0.0 && i < y_size() && x_ndim + y_ndim < M + 12u) {
                    y[i] = x[x_loc(idx[idx_loc(i % idx_size())] % x_size())] + T(N);
                }";
            for guard in [true, false] {
                let k = KernelSource {
                    name: "k",
                    header: "fn twice(v: u32) -> u32 { return 2u * v; }",
                    body,
                    inputs: &ins,
                    outputs: &outs,
                    template: &template,
                    workgroup: [64, 2, 1],
                    guard,
                    atomic_outputs: false,
                };
                let src = k.wgsl().unwrap();
                check_source(&src, "wmx_main", target, false, &[])
                    .unwrap_or_else(|e| panic!("{e}"));
                wmx_kernels::validate_wgsl("k", &src, "wmx_main").unwrap();
                n += 1;
            }
        }
    }
    // Barriers in uniform control flow: valid without the guard. (Behind the guard
    // they would not be: naga does not flag it, browsers do; hence `guard`.)
    let ins = [KernelArg {
        name: "x",
        dtype: DType::F32,
        ndim: 1,
    }];
    let outs = [KernelArg {
        name: "y",
        dtype: DType::F32,
        ndim: 1,
    }];
    let body = "acc[local_index] = x[global_id.x]; workgroupBarrier(); y[global_id.x] = acc[0];";
    let mk = |guard| KernelSource {
        name: "barrier",
        header: "var<workgroup> acc: array<f32, 64>;",
        body,
        inputs: &ins,
        outputs: &outs,
        template: &[],
        workgroup: [64, 1, 1],
        guard,
        atomic_outputs: false,
    };
    check_source(&mk(false).wgsl().unwrap(), "wmx_main", target, false, &[]).unwrap();
    // Names and dtypes the generator refuses.
    let bad = [KernelArg {
        name: "x",
        dtype: DType::BF16,
        ndim: 1,
    }];
    let e = KernelSource {
        inputs: &bad,
        ..mk(false)
    }
    .wgsl()
    .unwrap_err();
    assert!(e.to_string().contains("bf16"), "{e}");
    // Atomic outputs: an i32 histogram validates and translates; f32 is refused.
    let ins = [KernelArg {
        name: "x",
        dtype: DType::U32,
        ndim: 1,
    }];
    let outs = [KernelArg {
        name: "hist",
        dtype: DType::I32,
        ndim: 1,
    }];
    let hist = KernelSource {
        name: "hist",
        header: "",
        body: "atomicAdd(&hist[x[global_id.x] % hist_size()], 1i);",
        inputs: &ins,
        outputs: &outs,
        template: &[],
        workgroup: [64, 1, 1],
        guard: true,
        atomic_outputs: true,
    };
    check_source(&hist.wgsl().unwrap(), "wmx_main", target, false, &[]).unwrap();
    let outs = [KernelArg {
        name: "hist",
        dtype: DType::F32,
        ndim: 1,
    }];
    let e = KernelSource {
        outputs: &outs,
        ..hist
    }
    .wgsl()
    .unwrap_err();
    assert!(e.to_string().contains("atomics are i32 or u32"), "{e}");
    eprintln!("{n} generated user modules validated and translated");
}

/// A fused kernel of every unary and binary op defined for `d` (each step reads the
/// inputs, so no chain overflows anything), a select, casts through every dtype, an
/// axpby for floats and a constant; one output of `d`.
fn fused_all_ops(d: DType) -> wmx_kernels::FusedSpec {
    use wmx_kernels::{FusedOp as O, FusedStep as S};
    let mut steps: Vec<S> = Vec::new();
    let step = |op, args: Vec<usize>, dtype| S { op, args, dtype };
    let bool_of = |steps: &mut Vec<S>| {
        steps.push(step(O::Binary(BinaryOp::Less), vec![0, 1], DType::Bool));
        2 + steps.len() - 1
    };
    let c = bool_of(&mut steps);
    // The bool-output lists are written out here, independently of the vocabulary.
    for &op in UnaryOp::ALL.iter().filter(|o| o.supports(d)) {
        let out = if matches!(op.name(), "logical_not" | "isnan" | "isinf") {
            DType::Bool
        } else {
            d
        };
        steps.push(step(O::Unary(op), vec![0], out));
    }
    for &op in BinaryOp::ALL.iter().filter(|o| o.supports(d)) {
        let cmp = matches!(
            op.name(),
            "equal"
                | "not_equal"
                | "less"
                | "less_equal"
                | "greater"
                | "greater_equal"
                | "logical_and"
                | "logical_or"
        );
        steps.push(step(
            O::Binary(op),
            vec![0, 1],
            if cmp { DType::Bool } else { d },
        ));
    }
    for t in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::U8,
        DType::Bool,
    ] {
        steps.push(step(O::Cast, vec![0], t));
    }
    if d.is_float() {
        steps.push(step(
            O::Axpby {
                alpha: 2.0,
                beta: 0.5,
            },
            vec![0, 1],
            d,
        ));
    }
    steps.push(step(O::Const(1.5), vec![], d));
    let k = 2 + steps.len() - 1;
    steps.push(step(O::Select, vec![c, 0, k], d));
    wmx_kernels::FusedSpec {
        inputs: vec![d, d],
        steps,
        outputs: Vec::new(),
    }
}

#[test]
fn fused_modules_validate_and_translate() {
    use wmx_kernels::{InputRead, compose_fused};
    for target in [
        Target::default(),
        Target {
            f16: true,
            subgroups: true,
            ..Target::default()
        },
    ] {
        for d in [
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::U32,
            DType::U8,
        ] {
            let spec = fused_all_ops(d);
            let reads = [InputRead::Dense, InputRead::Strided];
            let src = compose_fused(&spec, &reads, &[0, 1], None, target)
                .unwrap_or_else(|e| panic!("fused {d}: {e}"));
            check_source(&src, "fused", target, false, &[("WG", 256.0)])
                .unwrap_or_else(|e| panic!("fused {d}: {e}"));
            // Several outputs: the last step and two others of its dtype.
            {
                let n = 2 + spec.steps.len();
                let same: Vec<usize> = (2..n).filter(|&v| spec.steps[v - 2].dtype == d).collect();
                let multi = wmx_kernels::FusedSpec {
                    outputs: vec![n - 1, same[0], same[1]],
                    ..spec.clone()
                };
                let src = compose_fused(&multi, &reads, &[0, 1], None, target)
                    .unwrap_or_else(|e| panic!("fused outputs {d}: {e}"));
                check_source(&src, "fused", target, false, &[("WG", 256.0)])
                    .unwrap_or_else(|e| panic!("fused outputs {d}: {e}"));
            }
            // As a reduction's prologue (both inputs views of one buffer).
            for (op, variant) in [
                (ReduceOp::Sum, Variant::Rows),
                (ReduceOp::Max, Variant::Cols),
                (ReduceOp::Any, Variant::Rows),
            ] {
                let acc = match d {
                    _ if op == ReduceOp::Any => DType::U32,
                    DType::F32 | DType::F16 | DType::BF16 => DType::F32,
                    DType::I32 => DType::I32,
                    _ => DType::U32,
                };
                let m = ModuleSpec {
                    family: &families::REDUCE,
                    op: op.into(),
                    inputs: vec![d],
                    output: acc,
                    variant,
                    alias: 0,
                    target,
                };
                let src = compose_fused(
                    &spec,
                    &[InputRead::Scalar, InputRead::Dense],
                    &[0, 0],
                    Some((&m, 12)),
                    target,
                )
                .unwrap_or_else(|e| panic!("fused {op} {d}: {e}"));
                check_source(&src, m.entry_point(), target, false, &m.constants())
                    .unwrap_or_else(|e| panic!("fused {op} {d}: {e}"));
            }
        }
    }
    // Bad programs are errors, not modules.
    use wmx_kernels::{FusedOp, FusedSpec, FusedStep};
    let bad = |steps: Vec<FusedStep>| {
        compose_fused(
            &FusedSpec {
                inputs: vec![DType::F32],
                steps,
                outputs: Vec::new(),
            },
            &[InputRead::Dense],
            &[0],
            None,
            Target::default(),
        )
    };
    let s = |op, args: Vec<usize>, dtype| FusedStep { op, args, dtype };
    assert!(bad(vec![]).is_err(), "no steps");
    let outputs = |outputs: Vec<usize>, dtype| {
        let steps = vec![
            s(FusedOp::Unary(UnaryOp::Exp), vec![0], DType::F32),
            s(FusedOp::Cast, vec![1], dtype),
        ];
        let spec = FusedSpec {
            inputs: vec![DType::F32],
            steps,
            outputs,
        };
        compose_fused(&spec, &[InputRead::Dense], &[0], None, Target::default())
    };
    assert!(outputs(vec![1, 2], DType::F32).is_ok(), "two f32 outputs");
    assert!(
        outputs(vec![1, 2], DType::I32).is_err(),
        "outputs of two dtypes"
    );
    assert!(
        outputs(vec![0, 1], DType::F32).is_err(),
        "an input as output"
    );
    assert!(outputs(vec![1, 7], DType::F32).is_err(), "no such value");
    assert!(
        bad(vec![s(FusedOp::Unary(UnaryOp::Exp), vec![3], DType::F32)]).is_err(),
        "reads the future"
    );
    assert!(
        bad(vec![s(FusedOp::Unary(UnaryOp::Exp), vec![0], DType::I32)]).is_err(),
        "wrong output dtype"
    );
    assert!(
        bad(vec![s(FusedOp::Binary(BinaryOp::Add), vec![0], DType::F32)]).is_err(),
        "arity"
    );
    assert!(
        bad(vec![s(
            FusedOp::Binary(BinaryOp::BitwiseAnd),
            vec![0, 0],
            DType::F32
        )])
        .is_err(),
        "float bitwise"
    );
}

/// The 64-bit modules (`wide/`) validate and translate: those computing in f64
/// with naga's FLOAT64 capability to SPIR-V and HLSL (the backends whose adapters
/// offer `SHADER_F64`: Vulkan, DX12; Metal has no f64), the i64 ones with no
/// capability to SPIR-V, MSL and HLSL (they run on every adapter, browsers too).
#[test]
fn wide_modules_validate_and_translate() {
    let modules = wmx_kernels::wide_modules(256);
    let n64 = modules.iter().filter(|m| m.3).count();
    assert!(n64 > 60, "{n64} f64 modules");
    assert!(
        modules.len() - n64 > 40,
        "{} i64 modules",
        modules.len() - n64
    );
    let mut failures = Vec::new();
    for (label, src, entry, f64) in &modules {
        let run = || -> Result<(), String> {
            if !f64 {
                return check_source(src, entry, Target::default(), false, &[]);
            }
            let module = naga::front::wgsl::parse_str(src)
                .map_err(|e| format!("parse: {}", e.emit_to_string(src)))?;
            let info = Validator::new(ValidationFlags::all(), Capabilities::FLOAT64)
                .validate(&module)
                .map_err(|e| format!("validate: {}", e.emit_to_string(src)))?;
            to_spirv(&module, &info, entry)?;
            to_hlsl(&module, &info, entry)
        };
        if let Err(e) = run() {
            failures.push(format!("{label}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{}",
        failures[..failures.len().min(3)].join("\n\n")
    );
}
