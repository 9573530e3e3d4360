//! `wmx::nn` and `wmx::optim` against PyTorch goldens (`tests/goldens/torch_nn.py`,
//! CPU float32): layers' outputs and gradients, activations, losses with their
//! options, and 20-step optimizer trajectories; and the module API (names, updates,
//! freezing, modes, checkpoints, errors).

use super::goldens::Goldens;
use wmx_core::nn::losses::{self, CrossEntropy, Reduction};
use wmx_core::nn::{self, Layer, Module, ModuleExt, Param, Params, Visitor};
use wmx_core::optim::{self, Optimizer};
use wmx_core::{self as wmx, Array, DType, Device, Result};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

static TORCH: Goldens = Goldens::new(include_str!("../../goldens/torch_nn.txt"));

fn arr(dev: &Device, name: &str) -> Array {
    TORCH.arr(dev, name)
}

fn idx(dev: &Device, name: &str) -> Array {
    TORCH.idx(dev, name)
}

fn check(what: &str, got: &Array, name: &str, rtol: f64, atol: f64) {
    TORCH.check(what, got, name, rtol, atol)
}

fn close(what: &str, got: &Array, name: &str) {
    check(what, got, name, 2e-5, 2e-6)
}

fn sum_times(y: &Array, g: &Array) -> Result<Array> {
    wmx::sum(&wmx::multiply(y, g)?, None, false)
}

/// Linear, LayerNorm, RmsNorm and Embedding: outputs, and the gradients of
/// `sum(y * g)` for inputs (wmx::grad) and parameters (nn::value_and_grad).
pub fn nn_layers_match_torch(dev: &Device) {
    let lin = ok(
        "linear",
        nn::Linear::from_arrays(arr(dev, "linear.w"), Some(arr(dev, "linear.b"))),
    );
    let (x, g) = (arr(dev, "linear.x"), arr(dev, "linear.g"));
    close("linear", &ok("linear", lin.forward(&x)), "linear.y");
    let vg = nn::value_and_grad(&lin, |a: &[Array]| sum_times(&lin.forward(&a[0])?, &a[1]));
    let (_, grads) = ok("linear grads", vg(&[x.clone(), g.clone()]));
    close("linear dW", &grads["weight"], "linear.dw");
    close("linear db", &grads["bias"], "linear.db");
    let dx = ok(
        "linear dx",
        wmx::grad1(|x: &Array| sum_times(&lin.forward(x)?, &g))(&x),
    );
    close("linear dx", &dx, "linear.dx");

    let ln = ok("ln", nn::LayerNorm::new(7, 1e-5, true, true));
    ok(
        "ln",
        ln.update(&Params::from([
            ("weight".to_string(), arr(dev, "ln.w")),
            ("bias".to_string(), arr(dev, "ln.b")),
        ])),
    );
    let (x, g) = (arr(dev, "ln.x"), arr(dev, "ln.g"));
    close("layer_norm", &ok("ln", ln.forward(&x)), "ln.y");
    let vg = nn::value_and_grad(&ln, |a: &[Array]| sum_times(&ln.forward(&a[0])?, &a[1]));
    let (_, grads) = ok("ln grads", vg(&[x.clone(), g.clone()]));
    check("layer_norm dW", &grads["weight"], "ln.dw", 1e-4, 1e-5);
    check("layer_norm db", &grads["bias"], "ln.db", 1e-4, 1e-5);
    let dx = ok(
        "ln dx",
        wmx::grad1(|x: &Array| sum_times(&ln.forward(x)?, &g))(&x),
    );
    check("layer_norm dx", &dx, "ln.dx", 1e-4, 1e-5);

    let rms = ok("rms", nn::RmsNorm::new(7, 1e-6));
    ok("rms", rms.weight.set(arr(dev, "ln.w")));
    close("rms_norm", &ok("rms", rms.forward(&x)), "rms.y");
    let vg = nn::value_and_grad(&rms, |a: &[Array]| sum_times(&rms.forward(&a[0])?, &a[1]));
    let (_, grads) = ok("rms grads", vg(&[x.clone(), g.clone()]));
    check("rms_norm dW", &grads["weight"], "rms.dw", 1e-4, 1e-5);
    let dx = ok(
        "rms dx",
        wmx::grad1(|x: &Array| sum_times(&rms.forward(x)?, &g))(&x),
    );
    check("rms_norm dx", &dx, "rms.dx", 1e-4, 1e-5);

    let emb = ok("embedding", nn::Embedding::from_array(arr(dev, "emb.w")));
    let (i, g) = (idx(dev, "emb.idx"), arr(dev, "emb.g"));
    close("embedding", &ok("emb", emb.forward(&i)), "emb.y");
    let vg = nn::value_and_grad(&emb, |a: &[Array]| sum_times(&emb.forward(&a[0])?, &a[1]));
    let (_, grads) = ok("emb grads", vg(&[i, g]));
    close(
        "embedding dW (repeated rows add)",
        &grads["weight"],
        "emb.dw",
    );
    let f = ok("emb", wmx::full(&[2], 1.5, DType::F32));
    super::expect_err("float indices", emb.forward(&f), &["integers"]);
}

/// Every activation's values and derivative on -4..4 (33 points, 0 included).
pub fn nn_activations_match_torch(dev: &Device) {
    use nn::Activation as A;
    let (x, g) = (arr(dev, "act.x"), arr(dev, "act.g"));
    let acts = [
        ("relu", A::Relu),
        ("relu6", A::Relu6),
        ("leaky_relu", A::LeakyRelu(0.1)),
        ("elu", A::Elu(1.0)),
        ("selu", A::Selu),
        ("silu", A::Silu),
        ("gelu", A::Gelu(nn::Gelu::Exact)),
        ("gelu_tanh", A::Gelu(nn::Gelu::Tanh)),
        ("mish", A::Mish),
        ("softplus", A::Softplus),
        ("log_sigmoid", A::LogSigmoid),
        ("hardswish", A::Hardswish),
        ("sigmoid", A::Sigmoid),
        ("tanh", A::Tanh),
    ];
    for (name, a) in acts {
        let y = ok(name, a.forward(&x));
        check(name, &y, &format!("act.{name}.y"), 1e-5, 1e-6);
        let dx = ok(
            name,
            wmx::grad1(|x: &Array| sum_times(&a.forward(x)?, &g))(&x),
        );
        check(
            &format!("{name}'"),
            &dx,
            &format!("act.{name}.dx"),
            1e-4,
            1e-5,
        );
    }
    let (x, g) = (arr(dev, "glu.x"), arr(dev, "glu.g"));
    close("glu", &ok("glu", nn::glu(&x, -1)), "glu.y");
    let dx = ok(
        "glu",
        wmx::grad1(|x: &Array| sum_times(&nn::glu(x, -1)?, &g))(&x),
    );
    close("glu'", &dx, "glu.dx");
}

/// Each loss and option: the value and its gradient (of the value's sum) with
/// respect to the predictions.
pub fn nn_losses_match_torch(dev: &Device) {
    let logits = arr(dev, "loss.logits");
    let (tgt, ign) = (idx(dev, "loss.tgt"), idx(dev, "loss.tgt_ign"));
    let (cw, probs) = (arr(dev, "loss.cw"), arr(dev, "loss.probs"));
    type F<'a> = Box<dyn Fn(&Array) -> Result<Array> + 'a>;
    let ce = |t: &Array, o: CrossEntropy<'_>, r: Reduction, p: &Array| {
        losses::cross_entropy(p, t, &o, r)
    };
    let cases: Vec<(&str, &Array, F<'_>)> = vec![
        (
            "ce",
            &logits,
            Box::new(|p| ce(&tgt, CrossEntropy::default(), Reduction::Mean, p)),
        ),
        (
            "ce_none",
            &logits,
            Box::new(|p| ce(&tgt, CrossEntropy::default(), Reduction::None, p)),
        ),
        (
            "ce_sum",
            &logits,
            Box::new(|p| ce(&tgt, CrossEntropy::default(), Reduction::Sum, p)),
        ),
        (
            "ce_w",
            &logits,
            Box::new(|p| {
                let o = CrossEntropy {
                    weights: Some(&cw),
                    ..Default::default()
                };
                ce(&tgt, o, Reduction::Mean, p)
            }),
        ),
        (
            "ce_ign",
            &logits,
            Box::new(|p| {
                let o = CrossEntropy {
                    ignore_index: Some(-100),
                    ..Default::default()
                };
                ce(&ign, o, Reduction::Mean, p)
            }),
        ),
        (
            "ce_ls",
            &logits,
            Box::new(|p| {
                let o = CrossEntropy {
                    label_smoothing: 0.1,
                    ..Default::default()
                };
                ce(&tgt, o, Reduction::Mean, p)
            }),
        ),
        (
            "ce_w_ls",
            &logits,
            Box::new(|p| {
                let o = CrossEntropy {
                    weights: Some(&cw),
                    label_smoothing: 0.2,
                    ..Default::default()
                };
                ce(&tgt, o, Reduction::Mean, p)
            }),
        ),
        (
            "ce_probs",
            &logits,
            Box::new(|p| ce(&probs, CrossEntropy::default(), Reduction::Mean, p)),
        ),
        (
            "ce_probs_ls",
            &logits,
            Box::new(|p| {
                let o = CrossEntropy {
                    label_smoothing: 0.1,
                    ..Default::default()
                };
                ce(&probs, o, Reduction::Mean, p)
            }),
        ),
    ];
    let logits3 = arr(dev, "loss.logits3");
    let tgt3 = idx(dev, "loss.tgt3");
    let logp = arr(dev, "loss.logp");
    let (a, t) = (arr(dev, "loss.a"), arr(dev, "loss.t"));
    let (pb, tb) = (arr(dev, "loss.pb"), arr(dev, "loss.tb"));
    let more: Vec<(&str, &Array, F<'_>)> = vec![
        (
            "ce3",
            &logits3,
            Box::new(|p| ce(&tgt3, CrossEntropy::default(), Reduction::Mean, p)),
        ),
        (
            "nll",
            &logp,
            Box::new(|p| losses::nll(p, &tgt, Reduction::Mean)),
        ),
        ("mse", &a, Box::new(|p| losses::mse(p, &t, Reduction::Mean))),
        ("l1", &a, Box::new(|p| losses::l1(p, &t, Reduction::Mean))),
        (
            "huber",
            &a,
            Box::new(|p| losses::huber(p, &t, 0.7, Reduction::Mean)),
        ),
        (
            "smooth_l1",
            &a,
            Box::new(|p| losses::smooth_l1(p, &t, 0.7, Reduction::Mean)),
        ),
        (
            "cos",
            &a,
            Box::new(|p| losses::cosine_similarity(p, &t, 1, 1e-8)),
        ),
        (
            "bce",
            &pb,
            Box::new(|p| losses::binary_cross_entropy(p, &tb, Reduction::Mean)),
        ),
        (
            "bce_logits",
            &a,
            Box::new(|p| losses::binary_cross_entropy_with_logits(p, &tb, Reduction::Mean)),
        ),
        (
            "kl",
            &logp,
            Box::new(|p| losses::kl_div(p, &probs, Reduction::Sum)),
        ),
    ];
    for (name, pred, f) in cases.iter().chain(&more) {
        let what = format!("loss {name}");
        let v = ok(&what, f(pred));
        check(&what, &v, &format!("loss.{name}.v"), 1e-5, 1e-6);
        let d = ok(
            &what,
            wmx::grad1(|p: &Array| wmx::sum(&f(p)?, None, false))(pred),
        );
        check(
            &format!("{what}'"),
            &d,
            &format!("loss.{name}.d"),
            1e-4,
            1e-6,
        );
    }
    let e = |r: Result<Array>, n: &str| super::expect_err("bad loss input", r, &[n]);
    e(losses::mse(&a, &logits, Reduction::Mean), "shape");
    e(
        losses::cross_entropy(&logits, &tgt3, &CrossEntropy::default(), Reduction::Mean),
        "targets",
    );
    let w3 = ok("w", wmx::ones(&[3], DType::F32));
    let o = CrossEntropy {
        weights: Some(&w3),
        ..Default::default()
    };
    e(
        losses::cross_entropy(&logits, &tgt, &o, Reduction::Mean),
        "weights",
    );
    e(losses::huber(&a, &t, 0.0, Reduction::Mean), "delta");
}

/// A two-parameter model for the optimizer trajectories.
struct Affine {
    w: Param,
    b: Param,
}

impl Module for Affine {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("w", &self.w);
        v.param("b", &self.b);
    }
}

/// A step: the batch in, the loss out.
type Step = Box<dyn FnMut(&[Array]) -> Result<Array>>;

/// A compiled step of `opt` on the least-squares loss, as a closure; it checks it
/// traced once.
fn step_of<O>(m: std::sync::Arc<Affine>, opt: O) -> Result<Step>
where
    O: Optimizer + Clone + Send + Sync + 'static,
{
    let mut step = optim::compile_step(m, opt, |m: &Affine, a: &[Array]| {
        let p = wmx::add(&wmx::matmul(&a[0], &m.w.value())?, &m.b.value())?;
        losses::mse(&p, &a[1], Reduction::Mean)
    })?;
    Ok(Box::new(move |a: &[Array]| {
        let l = step.call(a)?;
        assert_eq!(step.traces(), 1, "the compiled step traced again");
        Ok(l)
    }))
}

static MLX_ADAFACTOR: Goldens = Goldens::new(include_str!("../../goldens/mlx_adafactor.txt"));

/// Adafactor against MLX's (`tests/goldens/mlx_adafactor.py`): relative steps; a
/// learning rate with a first moment and weight decay; warm-up without parameter
/// scaling and a tighter clip. W is factored, B is not. Parameters after steps 1,
/// 5 and 20, eagerly and from one compiled step; the state's slot shapes.
pub fn adafactor_match_mlx(dev: &Device) {
    let (x, y) = (arr(dev, "opt.X"), arr(dev, "opt.Y"));
    let make = |name: &str| -> optim::Adafactor {
        match name {
            "adafactor" => optim::Adafactor::new(),
            "adafactor_lr" => {
                let mut o = optim::Adafactor::with_lr(0.05);
                (o.beta_1, o.weight_decay) = (Some(0.9), 0.01);
                o
            }
            _ => {
                let mut o = optim::Adafactor::new();
                (o.warmup_init, o.scale_parameter, o.clip_threshold) = (true, false, 0.5);
                o
            }
        }
    };
    let golden = |what: &str, a: &Array, name: &str| {
        MLX_ADAFACTOR.check(what, a, name, 1e-4, 1e-5);
    };
    for name in ["adafactor", "adafactor_lr", "adafactor_warmup"] {
        let m = Affine {
            w: Param::new(arr(dev, "opt.W0")),
            b: Param::new(arr(dev, "opt.B0")),
        };
        let mut opt = make(name);
        let loss = |a: &[Array]| -> Result<Array> {
            let p = wmx::add(&wmx::matmul(&a[0], &m.w.value())?, &m.b.value())?;
            losses::mse(&p, &a[1], Reduction::Mean)
        };
        let vg = nn::value_and_grad(&m, loss);
        for step in 0..20 {
            let (_, g) = ok(name, vg(&[x.clone(), y.clone()]));
            ok(name, opt.update(&m, &g));
            if [0, 4, 19].contains(&step) {
                let what = format!("{name} after step {}", step + 1);
                golden(&what, &m.w.value(), &format!("opt.{name}.{step}.W"));
                golden(&what, &m.b.value(), &format!("opt.{name}.{step}.B"));
            }
        }
        let st = opt.state();
        assert_eq!(st["w.exp_avg_sq_row"].shape(), &[3], "{name}: row moments");
        assert_eq!(
            st["w.exp_avg_sq_col"].shape(),
            &[2],
            "{name}: column moments"
        );
        assert_eq!(
            st["b.exp_avg_sq"].shape(),
            &[2],
            "{name}: a vector's moments"
        );
        // The same trajectory from one compiled step.
        let cm = std::sync::Arc::new(Affine {
            w: Param::new(arr(dev, "opt.W0")),
            b: Param::new(arr(dev, "opt.B0")),
        });
        let mut step = ok(name, step_of(cm.clone(), make(name)));
        for k in 0..20 {
            ok(name, step(&[x.clone(), y.clone()]).and_then(|l| l.eval()));
            if [0, 4, 19].contains(&k) {
                let what = format!("compiled {name} after step {}", k + 1);
                golden(&what, &cm.w.value(), &format!("opt.{name}.{k}.W"));
                golden(&what, &cm.b.value(), &format!("opt.{name}.{k}.B"));
            }
        }
    }
}

/// SGD (plain, momentum with dampening, Nesterov with weight decay), Adam (with
/// L2 and other betas), AdamW, Adagrad (decay, weight decay), RMSprop (plain;
/// centered with momentum and weight decay) and Lion: parameters after steps 1, 5
/// and 20 of a least-squares problem.
pub fn optim_match_torch(dev: &Device) {
    let (x, y) = (arr(dev, "opt.X"), arr(dev, "opt.Y"));
    let make: Vec<(&str, Box<dyn Optimizer>)> = vec![
        ("sgd", Box::new(optim::Sgd::new(0.05))),
        (
            "sgd_momentum",
            Box::new(optim::Sgd::new(0.05).momentum(0.9, 0.1, false)),
        ),
        (
            "sgd_nesterov",
            Box::new(
                optim::Sgd::new(0.05)
                    .momentum(0.9, 0.0, true)
                    .weight_decay(0.01),
            ),
        ),
        ("adam", Box::new(optim::Adam::new(0.05))),
        (
            "adam_l2",
            Box::new(optim::Adam::new(0.05).betas(0.8, 0.99).weight_decay(0.1)),
        ),
        ("adamw", Box::new(optim::Adam::adamw(0.05, 0.1))),
        ("adagrad", {
            let mut o = optim::Adagrad::new(0.1);
            (o.lr_decay, o.weight_decay) = (0.01, 0.01);
            Box::new(o)
        }),
        ("rmsprop", Box::new(optim::RmsProp::new(0.01))),
        ("rmsprop_cm", {
            let mut o = optim::RmsProp::new(0.01);
            (o.momentum, o.centered, o.weight_decay) = (0.9, true, 0.01);
            Box::new(o)
        }),
        ("lion", {
            let mut o = optim::Lion::new(0.01);
            o.weight_decay = 0.1;
            Box::new(o)
        }),
    ];
    for (name, mut opt) in make {
        let m = Affine {
            w: Param::new(arr(dev, "opt.W0")),
            b: Param::new(arr(dev, "opt.B0")),
        };
        let loss = |a: &[Array]| -> Result<Array> {
            let p = wmx::add(&wmx::matmul(&a[0], &m.w.value())?, &m.b.value())?;
            losses::mse(&p, &a[1], Reduction::Mean)
        };
        let vg = nn::value_and_grad(&m, loss);
        for step in 0..20 {
            let (_, g) = ok(name, vg(&[x.clone(), y.clone()]));
            ok(name, opt.update(&m, &g));
            if [0, 4, 19].contains(&step) {
                let what = format!("{name} after step {}", step + 1);
                check(
                    &what,
                    &m.w.value(),
                    &format!("opt.{name}.{step}.W"),
                    1e-4,
                    1e-5,
                );
                check(
                    &what,
                    &m.b.value(),
                    &format!("opt.{name}.{step}.B"),
                    1e-4,
                    1e-5,
                );
            }
        }
        // The state round-trips: a fresh optimizer continued from it takes the
        // same next step.
        let state = opt.state();
        assert_eq!(
            ok(name, state["step"].item::<u32>()),
            20,
            "{name}: step count"
        );
    }
    // The same trajectories from one compiled step (traced once).
    type Make = Box<dyn Fn(std::sync::Arc<Affine>) -> Result<Step>>;
    let compiled: Vec<(&str, Make)> = vec![
        (
            "sgd_momentum",
            Box::new(|m| step_of(m, optim::Sgd::new(0.05).momentum(0.9, 0.1, false))),
        ),
        ("adam", Box::new(|m| step_of(m, optim::Adam::new(0.05)))),
        (
            "adamw",
            Box::new(|m| step_of(m, optim::Adam::adamw(0.05, 0.1))),
        ),
    ];
    for (name, make) in compiled {
        let m = std::sync::Arc::new(Affine {
            w: Param::new(arr(dev, "opt.W0")),
            b: Param::new(arr(dev, "opt.B0")),
        });
        let mut step = ok(name, make(m.clone()));
        for k in 0..20 {
            ok(name, step(&[x.clone(), y.clone()]).and_then(|l| l.eval()));
            if [0, 4, 19].contains(&k) {
                let what = format!("compiled {name} after step {}", k + 1);
                check(
                    &what,
                    &m.w.value(),
                    &format!("opt.{name}.{k}.W"),
                    1e-4,
                    1e-5,
                );
                check(
                    &what,
                    &m.b.value(),
                    &format!("opt.{name}.{k}.B"),
                    1e-4,
                    1e-5,
                );
            }
        }
    }
    let mut bad = optim::Sgd::new(0.1).momentum(0.0, 0.0, true);
    let m = Affine {
        w: Param::new(arr(dev, "opt.W0")),
        b: Param::new(arr(dev, "opt.B0")),
    };
    let g = m.parameters();
    super::expect_err(
        "nesterov without momentum",
        bad.update(&m, &g),
        &["Nesterov"],
    );
    let mut extra = g.clone();
    extra.insert("c".into(), arr(dev, "opt.B0"));
    super::expect_err(
        "unknown gradient",
        optim::Adam::new(0.1).update(&m, &extra),
        &["\"c\""],
    );
}

/// Names, updates and their errors, freezing, train/eval, schedules, clipping,
/// and a checkpoint that round-trips (and one that does not fit).
pub fn nn_module_api(dev: &Device) {
    let on = |f: &dyn Fn() -> Result<Array>| ok("array", wmx::with_device(dev, f));
    let key = on(&|| wmx::random::key(7));
    let keys = ok("split", wmx::random::split(&key, 3));
    let k = |i: isize| {
        ok(
            "key",
            keys.slice(&[wmx::Slice::range(i, i + 1)])
                .and_then(|a| a.reshape(&[2])),
        )
    };
    let model = nn::Sequential::new()
        .push(ok("l0", nn::Linear::new(&k(0), 4, 8, true)))
        .push(nn::Activation::Gelu(nn::Gelu::Tanh))
        .push(ok("drop", nn::Dropout::new(&k(1), 0.5)))
        .push(ok("l3", nn::Linear::new(&k(2), 8, 2, false)));
    let names: Vec<String> = model.parameters().keys().cloned().collect();
    assert_eq!(names, ["0.bias", "0.weight", "3.weight"], "names");
    assert_eq!(model.parameters()["0.weight"].shape(), [8, 4]);
    // update: an unknown name or a wrong shape changes nothing.
    let before: Vec<f32> = ok("w", model.parameters()["3.weight"].to_vec());
    let bad = Params::from([(
        "3.weight".to_string(),
        on(&|| wmx::zeros(&[2, 9], DType::F32)),
    )]);
    super::expect_err("wrong shape", model.update(&bad), &["3.weight", "[2, 9]"]);
    let bad = Params::from([(
        "9.weight".to_string(),
        on(&|| wmx::zeros(&[2, 8], DType::F32)),
    )]);
    super::expect_err("unknown name", model.update(&bad), &["9.weight"]);
    assert_eq!(
        ok("w", model.parameters()["3.weight"].to_vec::<f32>()),
        before
    );
    // freeze / unfreeze by prefix.
    model.freeze("0");
    let t: Vec<String> = model.trainable_parameters().keys().cloned().collect();
    assert_eq!(t, ["3.weight"], "frozen layer 0");
    model.unfreeze("");
    assert_eq!(model.trainable_parameters().len(), 3);
    // Dropout: scaled survivors in training, the identity in evaluation.
    let x = on(&|| wmx::ones(&[64, 4], DType::F32));
    let d = ok("dropout", nn::Dropout::new(&k(1), 0.25));
    let y: Vec<f32> = ok("dropout", d.forward(&x).and_then(|y| y.to_vec()));
    assert!(y.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    let kept = y.iter().filter(|&&v| v != 0.0).count() as f64 / y.len() as f64;
    assert!((0.6..0.9).contains(&kept), "kept {kept}");
    d.set_training(false);
    assert_eq!(
        ok("eval", d.forward(&x).and_then(|y| y.to_vec::<f32>())),
        vec![1.0; 256]
    );
    model.train(false);
    let a = ok("eval", model.forward(&x).and_then(|y| y.to_vec::<f32>()));
    let b = ok("eval", model.forward(&x).and_then(|y| y.to_vec::<f32>()));
    assert_eq!(a, b, "evaluation mode is deterministic");
    // Schedules and clipping.
    let s = ok(
        "join",
        optim::join_schedules(
            vec![
                optim::linear_schedule(0.0, 1.0, 10),
                optim::cosine_decay(1.0, 100, 0.1),
            ],
            vec![10],
        ),
    );
    assert!(
        (s(5) - 0.5).abs() < 1e-12 && (s(10) - 1.0).abs() < 1e-12 && (s(110) - 0.1).abs() < 1e-12
    );
    assert!((optim::step_decay(1.0, 0.5, 3)(7) - 0.25).abs() < 1e-12);
    let g = Params::from([
        (
            "a".to_string(),
            on(&|| Array::from_slice(&[3.0f32, 0.0], &[2])),
        ),
        ("b".to_string(), on(&|| Array::from_slice(&[4.0f32], &[1]))),
    ]);
    let (c, norm) = ok("clip", optim::clip_grad_norm(&g, 1.0));
    assert!((ok("norm", norm.item::<f32>()) - 5.0).abs() < 1e-6);
    let ca: Vec<f32> = ok("clip", c["a"].to_vec());
    assert!((ca[0] - 0.6).abs() < 1e-5, "{ca:?}");
    // A checkpoint round-trips, and one of another model is refused whole.
    let dir = std::env::temp_dir().join(format!(
        "wmx-nn-{}-{}",
        std::process::id(),
        dev.name().len()
    ));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("model.safetensors");
    ok("save", model.save_weights(&path));
    let other = nn::Sequential::new()
        .push(ok("l0", nn::Linear::new(&k(1), 4, 8, true)))
        .push(nn::Activation::Relu)
        .push(ok("l2", nn::Linear::new(&k(2), 8, 2, false)));
    let e = other.load_weights(&path).unwrap_err().to_string();
    assert!(e.contains("2.weight") && e.contains("3.weight"), "{e}");
    let twin = nn::Sequential::new()
        .push(ok("l0", nn::Linear::new(&k(1), 4, 8, true)))
        .push(nn::Activation::Relu)
        .push(ok("d", nn::Dropout::new(&k(1), 0.1)))
        .push(ok("l3", nn::Linear::new(&k(2), 8, 2, false)));
    ok("load", twin.load_weights(&path));
    for (n, a) in model.parameters() {
        let b = &twin.parameters()[&n];
        assert_eq!(ok(&n, a.to_vec::<f32>()), ok(&n, b.to_vec::<f32>()), "{n}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scaled dot-product attention against PyTorch's: no mask, causal with fewer
/// queries than keys (aligned to the end), grouped-query heads, a sliding window,
/// an additive mask, a boolean mask with a query that sees no key (zeros, and no
/// gradient); values and the gradients of q, k and v; f16 inputs; errors.
pub fn attention_matches_torch(dev: &Device) {
    use wmx::AttentionMask as M;
    let cases: [(&str, u8); 6] = [
        ("plain", 0),
        ("causal", 1),
        ("gqa", 1),
        ("window", 2),
        ("additive", 3),
        ("boolean", 4),
    ];
    for (name, kind) in cases {
        let a = |t: &str| arr(dev, &format!("sdpa.{name}.{t}"));
        let (q, k, v, g) = (a("q"), a("k"), a("v"), a("g"));
        let bool_mask = (kind == 4).then(|| ok("mask", a("mask").astype(DType::Bool)));
        let add = (kind == 3).then(|| a("add"));
        let f = |x: &[Array]| -> Result<Array> {
            let mask = match kind {
                0 => M::None,
                1 => M::Causal,
                2 => M::SlidingWindow(2),
                3 => M::Additive(add.as_ref().unwrap()),
                _ => M::Bool(bool_mask.as_ref().unwrap()),
            };
            wmx::scaled_dot_product_attention(&x[0], &x[1], &x[2], None, mask)
        };
        let what = format!("attention {name}");
        let args = [q.clone(), k.clone(), v.clone()];
        let o = ok(&what, f(&args));
        check(&what, &o, &format!("sdpa.{name}.o"), 1e-5, 1e-5);
        let loss = |x: &[Array]| -> Result<Vec<Array>> { Ok(vec![sum_times(&f(x)?, &g)?]) };
        let grads = ok(&what, wmx::grad(loss, &[0, 1, 2])(&args));
        for (gr, n) in grads.iter().zip(["dq", "dk", "dv"]) {
            check(
                &format!("{what} {n}"),
                gr,
                &format!("sdpa.{name}.{n}"),
                1e-4,
                1e-5,
            );
        }
        if name == "gqa" && super::supported(dev, DType::F16) {
            let h = |x: &Array| ok("f16", x.astype(DType::F16));
            let o16 = ok("f16", f(&[h(&q), h(&k), h(&v)]));
            assert_eq!(o16.dtype(), DType::F16);
            check("attention gqa f16", &o16, "sdpa.gqa.o", 1e-2, 4e-3);
        }
    }
    let a = |t: &str| arr(dev, &format!("sdpa.gqa.{t}"));
    let (q, k, v) = (a("q"), a("k"), a("v"));
    let e = |r: Result<Array>, n: &str| super::expect_err("bad attention", r, &[n]);
    let q3 = ok("q3", q.slice(&[wmx::Slice::ALL, wmx::Slice::range(0, 3)]));
    e(
        wmx::scaled_dot_product_attention(&q3, &k, &v, None, M::None),
        "multiple",
    );
    e(
        wmx::scaled_dot_product_attention(&q, &k, &q, None, M::None),
        "[B, Hkv, Lk, Dv]",
    );
    e(
        wmx::scaled_dot_product_attention(&q, &k, &v, None, M::SlidingWindow(0)),
        "window",
    );
    let fm = ok("mask", wmx::zeros(&[4, 7], DType::F32));
    e(
        wmx::scaled_dot_product_attention(&q, &k, &v, None, M::Bool(&fm)),
        "bool",
    );
    let wrong = ok("mask", wmx::zeros(&[3, 7], DType::F32));
    e(
        wmx::scaled_dot_product_attention(&q, &k, &v, None, M::Additive(&wrong)),
        "broadcast",
    );
}

/// `nn::MultiHeadAttention` (MLX's separate projections) against PyTorch's
/// `nn.MultiheadAttention` with the same weights, causal: output and input
/// gradient.
pub fn multi_head_attention_matches_torch(dev: &Device) {
    let lin = |w: &str, b: &str| {
        ok(
            "proj",
            nn::Linear::from_arrays(arr(dev, w), Some(arr(dev, b))),
        )
    };
    let key = ok("key", wmx::with_device(dev, || wmx::random::key(0)));
    let mut mha = ok("mha", nn::MultiHeadAttention::new(&key, 8, 2, 2, true));
    mha.query_proj = lin("mha.wq", "mha.bq");
    mha.key_proj = lin("mha.wk", "mha.bk");
    mha.value_proj = lin("mha.wv", "mha.bv");
    mha.out_proj = lin("mha.wo", "mha.bo");
    let names: Vec<String> = mha.parameters().keys().cloned().collect();
    assert!(
        names.contains(&"query_proj.weight".to_string()),
        "{names:?}"
    );
    let (x, g) = (arr(dev, "mha.x"), arr(dev, "mha.g"));
    let f = |x: &Array| mha.attend(x, x, x, wmx::AttentionMask::Causal);
    check(
        "multi-head attention",
        &ok("mha", f(&x)),
        "mha.o",
        1e-5,
        1e-5,
    );
    let dx = ok("mha dx", wmx::grad1(|x: &Array| sum_times(&f(x)?, &g))(&x));
    check("multi-head attention dx", &dx, "mha.dx", 1e-4, 1e-5);
    // Self-attention's q/k/v are one product (under a transform, their weights and
    // biases concatenated in the graph): its parameter gradients against three
    // separate products' (keys and values read from another array of x's values).
    let x2 = ok(
        "x copy",
        wmx::with_device(dev, || {
            Array::from_slice(&x.to_vec::<f32>()?, x.shape())
        }),
    );
    let grads = |joined: bool| {
        let vg = nn::value_and_grad(&mha, |a: &[Array]| {
            let kv = if joined { &a[0] } else { &a[1] };
            sum_times(&mha.attend(&a[0], kv, kv, wmx::AttentionMask::Causal)?, &a[2])
        });
        ok("mha grads", vg(&[x.clone(), x2.clone(), g.clone()])).1
    };
    let (joined, apart) = (grads(true), grads(false));
    for (name, want) in &apart {
        let (got, want) = (
            ok(name, joined[name].to_vec_f64()),
            ok(name, want.to_vec_f64()),
        );
        let scale = want.iter().fold(1e-3f64, |m, v| m.max(v.abs()));
        let err = got.iter().zip(&want).fold(0f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            got.len() == want.len() && err <= 1e-5 * scale,
            "mha {name}: joined q/k/v gradient differs from separate products' by {err:e} (scale {scale:e})"
        );
    }
    // The parameters are still each layer's own.
    check("multi-head attention after training calls", &ok("mha", f(&x)), "mha.o", 1e-5, 1e-5);
    super::expect_err(
        "heads",
        nn::MultiHeadAttention::new(&key, 8, 3, 3, true).map(|_| ()),
        &["heads"],
    );
}

/// GroupNorm and BatchNorm (channels-last) against PyTorch's modules on the
/// permuted input: outputs, input gradients, BatchNorm's running statistics after
/// one training step and its evaluation output.
pub fn group_and_batch_norm_match_torch(dev: &Device) {
    let (x, g) = (arr(dev, "norm.x"), arr(dev, "norm.g"));
    let gn = ok("gn", nn::GroupNorm::new(3, 6, 1e-5, true));
    ok(
        "gn",
        gn.update(&Params::from([
            ("weight".to_string(), arr(dev, "gn.w")),
            ("bias".to_string(), arr(dev, "gn.b")),
        ])),
    );
    check("group_norm", &ok("gn", gn.forward(&x)), "gn.y", 1e-5, 1e-5);
    let dx = ok(
        "gn dx",
        wmx::grad1(|x: &Array| sum_times(&gn.forward(x)?, &g))(&x),
    );
    check("group_norm dx", &dx, "gn.dx", 1e-4, 1e-5);
    super::expect_err(
        "groups",
        nn::GroupNorm::new(4, 6, 1e-5, true).map(|_| ()),
        &["divide"],
    );

    let bn = ok("bn", nn::BatchNorm::new(6, 1e-5, 0.2, true));
    ok(
        "bn",
        bn.update(&Params::from([
            ("weight".to_string(), arr(dev, "bn.w")),
            ("bias".to_string(), arr(dev, "bn.b")),
        ])),
    );
    assert_eq!(
        bn.trainable_parameters().len(),
        2,
        "running statistics are not trained"
    );
    // A gradient through a training call updates the running statistics, as
    // PyTorch's forward does (once); the plain forward gives the same output.
    let dx = ok(
        "bn dx",
        wmx::grad1(|x: &Array| sum_times(&bn.forward(x)?, &g))(&x),
    );
    check("batch_norm dx", &dx, "bn.dx", 1e-4, 1e-5);
    check(
        "running mean",
        &bn.running_mean.value(),
        "bn.rm",
        1e-5,
        1e-6,
    );
    check("running var", &bn.running_var.value(), "bn.rv", 1e-5, 1e-6);
    let (rm, rv) = (bn.running_mean.value(), bn.running_var.value());
    check("batch_norm", &ok("bn", bn.forward(&x)), "bn.y", 1e-5, 1e-5);
    ok("bn", bn.running_mean.set(rm));
    ok("bn", bn.running_var.set(rv));
    bn.train(false);
    check(
        "batch_norm eval",
        &ok("bn", bn.forward(&x)),
        "bn.y_eval",
        1e-5,
        1e-5,
    );
}

/// `nn::KvCache`: the views it returns against host concatenation (exact), growth
/// past its step, errors that leave it as it was; and decoding token by token
/// through `MultiHeadAttention::attend_cached` (grouped-query heads) against one
/// causal pass over the whole sequence.
pub fn kv_cache_decode(dev: &Device) {
    let seq = |start: usize, len: usize| -> Vec<f32> {
        (0..2 * 2 * len * 3)
            .map(|i| {
                let (bh, rest) = (i / (len * 3), i % (len * 3));
                (bh * 100 + (start + rest / 3) * 10 + rest % 3) as f32
            })
            .collect()
    };
    let part = |start: usize, len: usize| {
        ok(
            "kv part",
            Array::from_slice_on(&seq(start, len), &[2, 2, len, 3], dev),
        )
    };
    let mut cache = nn::KvCache::with_step(3);
    let mut views = None;
    for (start, len) in [(0, 2), (2, 1), (3, 3), (6, 1)] {
        let p = part(start, len);
        views = Some(ok("kv update", cache.update(&p, &p)));
    }
    let (k, v) = views.unwrap();
    assert_eq!(k.shape(), &[2, 2, 7, 3], "cached keys' shape");
    assert_eq!(
        (cache.offset(), cache.capacity()),
        (7, 9),
        "offset and capacity with step 3"
    );
    let want: Vec<f32> = seq(0, 7);
    assert_eq!(ok("keys", k.to_vec::<f32>()), want, "cached keys");
    assert_eq!(ok("values", v.to_vec::<f32>()), want, "cached values");
    let bad = ok(
        "bad",
        wmx::with_device(dev, || wmx::zeros(&[2, 3, 1, 3], DType::F32)),
    );
    super::expect_err(
        "heads that differ",
        cache.update(&bad, &bad),
        &["KvCache", "[2, 3, 1, 3]"],
    );
    let f16 = ok("f16", part(7, 1).astype(DType::BF16));
    super::expect_err(
        "a dtype that differs",
        cache.update(&f16, &f16),
        &["KvCache"],
    );
    assert_eq!(
        cache.offset(),
        7,
        "a failed update leaves the cache as it was"
    );

    // Decoding: a prompt of 3, then 4 tokens one at a time.
    let key = ok("key", wmx::with_device(dev, || wmx::random::key(11)));
    let mha = ok(
        "mha",
        wmx::with_device(dev, || nn::MultiHeadAttention::new(&key, 8, 4, 2, true)),
    );
    let x = ok(
        "x",
        wmx::with_device(dev, || {
            wmx::random::normal(&key, &[2, 7, 8], 0.0, 1.0, DType::F32)
        }),
    );
    let full = ok("full", mha.attend(&x, &x, &x, wmx::AttentionMask::Causal));
    let mut cache = nn::KvCache::with_step(4);
    let mut outs = vec![];
    for (a, b) in [(0, 3), (3, 4), (4, 5), (5, 6), (6, 7)] {
        let xs = ok(
            "x part",
            x.slice(&[wmx::Slice::ALL, wmx::Slice::range(a, b)]),
        );
        outs.push(ok(
            "decode",
            mha.attend_cached(&xs, &mut cache, wmx::AttentionMask::Causal),
        ));
    }
    let got = ok(
        "join",
        wmx::concatenate(&outs.iter().collect::<Vec<_>>(), 1),
    );
    let (g, w) = (
        ok("got", got.to_vec::<f32>()),
        ok("full", full.to_vec::<f32>()),
    );
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
            "decoded element {i}: {a}, one pass {b}"
        );
    }
}

/// `nn::init`: each initialiser's mean and spread on 40 000 draws against its
/// formula (PyTorch's fans), and `orthogonal` against an independent modified
/// Gram-Schmidt in f64 on the same normal draw (the QR with R's diagonal positive
/// is unique), with orthonormal rows or columns; errors for shapes without fans.
pub fn init_values(dev: &Device) {
    use wmx_core::nn::init;
    let key = ok("key", wmx::with_device(dev, || wmx::random::key(35)));
    let moments = |a: Array| -> (f64, f64, f64, f64) {
        let v = ok("read", a.to_vec_as::<f64>());
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (mean, std, lo, hi)
    };
    // [out, in, k] = [200, 40, 5]: fan_in 200, fan_out 1000.
    let shape = [200usize, 40, 5];
    let (fi, fo) = (200.0f64, 1000.0f64);
    let cases: Vec<(&str, Array, f64, Option<f64>)> = vec![
        (
            "normal",
            ok("normal", init::normal(&key, &shape, 0.5, 2.0)),
            2.0,
            None,
        ),
        (
            "glorot_normal",
            ok("gn", init::glorot_normal(&key, &shape, 1.5)),
            1.5 * (2.0 / (fi + fo)).sqrt(),
            None,
        ),
        (
            "he_normal",
            ok("hn", init::he_normal(&key, &shape, 2f64.sqrt(), true)),
            2f64.sqrt() / fo.sqrt(),
            None,
        ),
        (
            "glorot_uniform",
            ok("gu", init::glorot_uniform(&key, &shape, 1.0)),
            (6.0 / (fi + fo)).sqrt() / 3f64.sqrt(),
            Some((6.0 / (fi + fo)).sqrt()),
        ),
        (
            "he_uniform",
            ok("hu", init::he_uniform(&key, &shape, 1.0, false)),
            (3.0 / fi).sqrt() / 3f64.sqrt(),
            Some((3.0 / fi).sqrt()),
        ),
    ];
    for (name, a, std, bound) in cases {
        assert_eq!(a.shape(), &shape, "{name}: shape");
        let (m, s, lo, hi) = moments(a);
        let want_mean = if name == "normal" { 0.5 } else { 0.0 };
        assert!(
            (m - want_mean).abs() < 4.0 * std / 200.0,
            "{name}: mean {m}"
        );
        assert!((s / std - 1.0).abs() < 0.02, "{name}: std {s}, want {std}");
        if let Some(b) = bound {
            assert!(
                lo >= -b && hi < b && hi > 0.99 * b,
                "{name}: range {lo}..{hi}, bound {b}"
            );
        }
    }
    let c = ok("constant", init::constant(&[2, 3], 0.25));
    assert_eq!(ok("read", c.to_vec::<f32>()), vec![0.25f32; 6]);
    for (rows, cols, gain) in [
        (5usize, 3usize, 1.0f64),
        (3, 5, 2.0),
        (4, 4, 0.5),
        (1, 1, 1.0),
    ] {
        let what = format!("orthogonal {rows}x{cols}");
        let q = ok(&what, init::orthogonal(&key, &[rows, cols], gain));
        assert_eq!(
            (q.shape(), q.dtype()),
            (&[rows, cols][..], DType::F32),
            "{what}"
        );
        let got = ok("read", q.to_vec_as::<f64>());
        // Modified Gram-Schmidt on the columns of the same n x n normal draw.
        let n = rows.max(cols);
        let g = ok(
            "draw",
            wmx::random::normal(&key, &[n, n], 0.0, 1.0, DType::F32)
                .and_then(|a| a.to_vec_as::<f64>()),
        );
        let mut cols_q: Vec<Vec<f64>> = (0..n)
            .map(|j| (0..n).map(|i| g[i * n + j]).collect())
            .collect();
        for j in 0..n {
            for k in 0..j {
                let (done, rest) = cols_q.split_at_mut(j);
                let (qk, qj) = (&done[k], &mut rest[0]);
                let d: f64 = qj.iter().zip(qk).map(|(a, b)| a * b).sum();
                qj.iter_mut().zip(qk).for_each(|(a, b)| *a -= d * b);
            }
            let norm = cols_q[j].iter().map(|x| x * x).sum::<f64>().sqrt();
            cols_q[j].iter_mut().for_each(|x| *x /= norm);
        }
        for i in 0..rows {
            for j in 0..cols {
                let want = gain * cols_q[j][i];
                let v = got[i * cols + j];
                assert!(
                    (v - want).abs() < 1e-5 * (1.0 + gain),
                    "{what} [{i},{j}]: {v} vs {want}"
                );
            }
        }
        // Orthonormal columns (rows >= cols) or rows.
        let (a, b) = if rows >= cols {
            (cols, rows)
        } else {
            (rows, cols)
        };
        for x in 0..a {
            for y in 0..a {
                let dot: f64 = (0..b)
                    .map(|t| {
                        let at = |u: usize| {
                            if rows >= cols {
                                got[t * cols + u]
                            } else {
                                got[u * cols + t]
                            }
                        };
                        at(x) * at(y)
                    })
                    .sum::<f64>()
                    / (gain * gain);
                let want = if x == y { 1.0 } else { 0.0 };
                assert!((dot - want).abs() < 1e-5, "{what}: <{x}, {y}> = {dot}");
            }
        }
    }
    super::expect_err(
        "orthogonal of 3-D",
        init::orthogonal(&key, &[2, 2, 2], 1.0),
        &["[rows, cols]"],
    );
    super::expect_err(
        "glorot of 1-D",
        init::glorot_normal(&key, &[4], 1.0),
        &["2 or more"],
    );
}

/// `nn::autocast`: a Linear layer run with its f32 parameters read as f16 gives
/// the f16 product of the rounded values (f64 loop), its gradients reach the f32
/// parameters as f32 (the f16 cotangents' sums, f64 loop), eagerly and in a
/// compiled AdamW step; the parameters hold their own f32 arrays afterwards, also
/// after an `Err` inside; an integer dtype is an `Err`.
pub fn nn_autocast(dev: &Device) {
    let on = |f: &dyn Fn() -> Result<Array>| ok("array", wmx::with_device(dev, f));
    let (rows, i, o) = (5, 12, 6);
    let layer = ok(
        "linear",
        wmx::with_device(dev, || nn::Linear::new(&wmx::random::key(11)?, i, o, true)),
    );
    let x = on(&|| wmx::random::normal(&wmx::random::key(12)?, &[rows, i], 0.0, 1.0, DType::F32));
    let x16 = ok("x16", wmx::astype(&x, DType::F16));
    let r16 = |v: f64| crate::val::round_to(DType::F16, v);
    let host = |a: &Array| ok("read", a.to_vec_f64());
    let (w, b, xv) = (
        host(&layer.weight.value()),
        host(&layer.bias.as_ref().expect("bias").value()),
        host(&x16),
    );
    // Forward: the f16 casts' product, accumulated in f32, rounded once to f16.
    let y = ok(
        "forward",
        nn::autocast(&layer, DType::F16, || layer.forward(&x16)),
    );
    assert_eq!(y.dtype(), DType::F16, "autocast output dtype");
    let got = host(&y);
    for r in 0..rows {
        for c in 0..o {
            let want = (0..i)
                .map(|k| xv[r * i + k] * r16(w[c * i + k]))
                .sum::<f64>()
                + r16(b[c]);
            let g = got[r * o + c];
            assert!(
                (g - want).abs() <= 2e-3 * (1.0 + want.abs()),
                "autocast forward [{r}, {c}]: {g} vs {want}"
            );
        }
    }
    for (name, p) in layer.named_parameters() {
        assert_eq!(p.value().dtype(), DType::F32, "{name} after autocast");
    }
    // Gradients of sum(y): dW[c, k] = sum_r x[r, k], db[c] = rows, as f32.
    let vg = nn::value_and_grad(&layer, |a: &[Array]| {
        nn::autocast(&layer, DType::F16, || {
            wmx::sum(
                &wmx::astype(&layer.forward(&a[0])?, DType::F32)?,
                None,
                false,
            )
        })
    });
    let (_, grads) = ok("value_and_grad", vg(std::slice::from_ref(&x16)));
    assert_eq!(grads["weight"].dtype(), DType::F32, "gradient dtype");
    let gw = host(&grads["weight"]);
    for c in 0..o {
        for k in 0..i {
            let want = r16((0..rows).map(|r| xv[r * i + k]).sum::<f64>());
            let g = gw[c * i + k];
            assert!(
                (g - want).abs() <= 2e-3 * (1.0 + want.abs()),
                "dW [{c}, {k}]: {g} vs {want}"
            );
        }
    }
    assert_eq!(host(&grads["bias"]), vec![rows as f64; o], "db");
    // A compiled step under autocast updates the f32 parameters without retracing.
    let model = std::sync::Arc::new(ok(
        "linear",
        wmx::with_device(dev, || nn::Linear::new(&wmx::random::key(11)?, i, o, true)),
    ));
    let mut step = ok(
        "compile_step",
        optim::compile_step(
            model.clone(),
            optim::Adam::adamw(1e-2, 0.0),
            |m: &nn::Linear, a: &[Array]| {
                nn::autocast(m, DType::F16, || {
                    wmx::sum(&wmx::astype(&m.forward(&a[0])?, DType::F32)?, None, false)
                })
            },
        ),
    );
    let w0 = host(&model.weight.value());
    for _ in 0..3 {
        ok("step", step.call(std::slice::from_ref(&x16)));
    }
    assert_eq!(step.traces(), 1, "compiled autocast step traces");
    let w1 = model.weight.value();
    assert_eq!(w1.dtype(), DType::F32, "updated dtype");
    // Adam's first steps move every weight by about lr against its gradient's sign.
    for ((a, b), k) in w0.iter().zip(host(&w1)).zip((0..o * i).map(|j| j % i)) {
        let sign = (0..rows).map(|r| xv[r * i + k]).sum::<f64>().signum();
        assert!(
            ((a - b) * sign - 0.03).abs() < 0.003,
            "Adam step on a weight: {a} -> {b}"
        );
    }
    // An error inside leaves the f32 parameters; an integer dtype is an Err.
    let bad = nn::autocast(&layer, DType::F16, || -> Result<Array> {
        wmx::matmul(&x16, &wmx::zeros(&[3, 3], DType::F16)?)
    });
    assert!(bad.is_err(), "a bad product inside autocast");
    assert_eq!(
        layer.weight.value().dtype(),
        DType::F32,
        "weight after an Err"
    );
    super::expect_err(
        "autocast to i32",
        nn::autocast(&layer, DType::I32, || Ok(())),
        &["autocast", "i32"],
    );
}
