//! `--coop-peak`: what naga's cooperative matrices reach on this adapter, apart from
//! any matmul's loads and tiling. Three user modules run the same multiply-adds on
//! 16 × 16 × 16 f16 fragments with f32 accumulators, eight accumulators per
//! subgroup, and differ only in where the A and B fragments come from on each step:
//! registers (loaded once: the multiply-add rate itself), workgroup memory, or a
//! small global buffer (cache hits). Issue 12 asks why the cooperative matmul stays
//! near 10 TFLOP/s; this separates the multiply-add from the loads feeding it.

use crate::{Res, err};
use std::time::Instant;
use wmx_kernels as k;

const SOURCE: &str = r#"
enable f16;
enable wgpu_cooperative_matrix;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f16>;

var<workgroup> w: array<f16, 2048>;

// 8 accumulators per subgroup, A and B from SRC (0 registers, 1 workgroup memory,
// 2 global; prepended as a constant, so control flow stays uniform) on each of
// p[0] steps.
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_id) sg: u32) {
    let steps = p[0];
    if (SRC == 1u) {
        for (var i = lid; i < 2048u; i += 128u) { w[i] = x[i]; }
    }
    workgroupBarrier();
    var a = coopLoadT<coop_mat16x16<f16, A>>(&x[0], 16u);
    var b = coopLoadT<coop_mat16x16<f16, B>>(&x[256], 16u);
    var c0 = coop_mat16x16<f32, C>();
    var c1 = coop_mat16x16<f32, C>();
    var c2 = coop_mat16x16<f32, C>();
    var c3 = coop_mat16x16<f32, C>();
    var c4 = coop_mat16x16<f32, C>();
    var c5 = coop_mat16x16<f32, C>();
    var c6 = coop_mat16x16<f32, C>();
    var c7 = coop_mat16x16<f32, C>();
    for (var i = 0u; i < steps; i++) {
        let j = (i & 3u) * 512u;
        if (SRC == 1u) {
            a = coopLoadT<coop_mat16x16<f16, A>>(&w[j], 16u);
            b = coopLoadT<coop_mat16x16<f16, B>>(&w[j + 256u], 16u);
        } else if (SRC == 2u) {
            a = coopLoadT<coop_mat16x16<f16, A>>(&x[j], 16u);
            b = coopLoadT<coop_mat16x16<f16, B>>(&x[j + 256u], 16u);
        }
        c0 = coopMultiplyAdd(a, b, c0);
        c1 = coopMultiplyAdd(a, b, c1);
        c2 = coopMultiplyAdd(a, b, c2);
        c3 = coopMultiplyAdd(a, b, c3);
        c4 = coopMultiplyAdd(a, b, c4);
        c5 = coopMultiplyAdd(a, b, c5);
        c6 = coopMultiplyAdd(a, b, c6);
        c7 = coopMultiplyAdd(a, b, c7);
    }
    let base = (wid.x * 4u + sg) * 2048u;
    coopStoreT(c0, &o[base], 16u);
    coopStoreT(c1, &o[base + 256u], 16u);
    coopStoreT(c2, &o[base + 512u], 16u);
    coopStoreT(c3, &o[base + 768u], 16u);
    coopStoreT(c4, &o[base + 1024u], 16u);
    coopStoreT(c5, &o[base + 1280u], 16u);
    coopStoreT(c6, &o[base + 1536u], 16u);
    coopStoreT(c7, &o[base + 1792u], 16u);
}
"#;

/// Runs the three probes on `kr` (if its adapter has cooperative matrices) and
/// prints TFLOP/s, the median of `reps` timed submits each.
pub(crate) fn coop_peak(kr: &k::Kernels, reps: usize) -> Res<()> {
    if kr.target().coop != 32 {
        println!(
            "coop-peak: the adapter has no 16x16x16 cooperative matrices at subgroup size 32 (coop = {})",
            kr.target().coop
        );
        return Ok(());
    }
    let groups: u32 = 132 * 16;
    let steps: u32 = 2048;
    let out = kr
        .create_buffer(groups as u64 * 4 * 2048 * 4, Some("coop out"))
        .map_err(err)?;
    // Small values: the products stay finite in f32 over every step.
    let bytes: Vec<u8> = (0..2048u32)
        .flat_map(|i| f16_bits(((i % 7) as f32 - 3.0) / 1024.0).to_le_bytes())
        .collect();
    let x = kr.upload(&bytes).map_err(err)?;
    let flops = groups as f64 * 4.0 * 8.0 * steps as f64 * 2.0 * 4096.0;
    for (src, entry) in ["regs", "wgmem", "global"].iter().enumerate() {
        let source = SOURCE.replacen(
            "enable wgpu_cooperative_matrix;",
            &format!("enable wgpu_cooperative_matrix;\nconst SRC: u32 = {src}u;"),
            1,
        );
        let pipe = kr
            .user_pipeline(&k::UserModule {
                label: entry,
                source: &source,
                entry: "main",
                outputs: 1,
                inputs: 1,
            })
            .map_err(err)?;
        let mut times = Vec::new();
        for rep in 0..reps + 1 {
            let mut b = k::Batch::new();
            for _ in 0..4 {
                b.dispatch_user(&pipe, &[&out, &x], &[steps], [groups, 1, 1])
                    .map_err(err)?;
            }
            let t = Instant::now();
            kr.submit(b).map_err(err)?;
            kr.poll_wait();
            if rep > 0 {
                times.push(t.elapsed().as_secs_f64() / 4.0);
            }
        }
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        println!(
            "coop-peak {entry}: {:.1} TFLOP/s ({:.0} us per dispatch of {groups} workgroups x {steps} steps)",
            flops / t / 1e12,
            t * 1e6
        );
    }
    Ok(())
}

/// f16 bits of a normal f32 whose mantissa fits in 10 bits (or zero).
fn f16_bits(v: f32) -> u16 {
    if v == 0.0 {
        return 0;
    }
    let b = v.to_bits();
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    (((b >> 16) & 0x8000) | ((exp as u32) << 10) | ((b >> 13) & 0x3ff)) as u16
}
