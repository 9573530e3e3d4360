//! Column standardisation, `(x - mean) / std` per column, of a table of samples,
//! saved to `.npy` and safetensors and loaded back. Checked against the same
//! statistics in f64 on the host; fails on a mismatch or a file that does not
//! round-trip bit for bit.
//!
//! ```text
//! cargo run --release --example standardize
//! ```

use wmx::prelude::*;

const ROWS: usize = 4000;
const COLS: usize = 6;

fn main() -> Result<()> {
    // Columns with their own centre and spread.
    let key = random::key(11)?;
    let z = random::normal(&key, &[ROWS, COLS], 0.0, 1.0, DType::F32)?;
    let scale = wmx::array(&[0.5f32, 2.0, 10.0, 0.1, 1.0, 300.0])?;
    let shift = wmx::array(&[-3.0f32, 0.0, 100.0, 7.5, -0.25, 1e4])?;
    let x = &z * &scale + &shift;
    println!("standardising {ROWS} x {COLS} on {}", x.device());

    let mean = x.mean(Some(&[0]), true)?;
    let std = x.std(Some(&[0]), true, 0)?;
    let s = (&x - &mean) / &std;

    // f64 on the host.
    let xv = x.to_vec_as::<f64>()?;
    let got = s.to_vec_as::<f64>()?;
    let mut err = 0f64;
    for c in 0..COLS {
        let col: Vec<f64> = (0..ROWS).map(|r| xv[r * COLS + c]).collect();
        let m = col.iter().sum::<f64>() / ROWS as f64;
        let sd = (col.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / ROWS as f64).sqrt();
        for r in 0..ROWS {
            err = err.max((got[r * COLS + c] - (col[r] - m) / sd).abs());
        }
        println!("column {c}: mean {m:>12.4}, std {sd:>10.4}");
    }
    println!("max |error| of the standardised table vs f64: {err:.2e}");
    if err > 1e-4 {
        return Err(Error::invalid(
            "standardize",
            format!("differs from f64 by {err}"),
        ));
    }

    // Save and load back.
    let dir = std::env::temp_dir().join(format!("wmx-standardize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Error::invalid("standardize", e.to_string()))?;
    wmx::io::save_npy(dir.join("s.npy"), &s)?;
    wmx::io::save_safetensors(
        dir.join("stats.safetensors"),
        &[("mean", &mean), ("std", &std)],
    )?;
    let back = wmx::io::load_npy(dir.join("s.npy"))?;
    let stats = wmx::io::load_safetensors(dir.join("stats.safetensors"))?;
    let same = back.to_bytes()? == s.to_bytes()?
        && stats[0].1.to_bytes()? == mean.to_bytes()?
        && stats[1].1.to_bytes()? == std.to_bytes()?;
    std::fs::remove_dir_all(&dir).map_err(|e| Error::invalid("standardize", e.to_string()))?;
    println!(
        "saved and loaded s.npy and stats.safetensors: {}",
        if same { "identical" } else { "DIFFERENT" }
    );
    if !same {
        return Err(Error::invalid("standardize", "files did not round-trip"));
    }
    Ok(())
}
