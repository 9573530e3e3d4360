//! `.github/workflows/ci.yml` cannot run here, so this keeps it honest: it parses,
//! has the three platform jobs, the Linux job runs exactly `.ci/run`, and every
//! command it names exists: scripts in the repository (executable), cargo
//! subcommands, workspace packages, wgpu backends.

use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Package names of the workspace: the root's and each member's.
fn packages() -> Vec<String> {
    let read = |p: PathBuf| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    let name = |toml: &str| -> Option<String> {
        let pkg = toml.split("[package]").nth(1)?;
        let line = pkg.lines().find(|l| l.trim_start().starts_with("name"))?;
        Some(line.split('"').nth(1)?.to_string())
    };
    let top = read(root().join("Cargo.toml"));
    let members = top
        .split("members = [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .expect("workspace members");
    let mut names: Vec<String> = members
        .split(',')
        .filter_map(|m| m.split('"').nth(1))
        .filter_map(|m| name(&read(root().join(m).join("Cargo.toml"))))
        .collect();
    names.extend(name(&top));
    names
}

fn jobs(doc: &Yaml) -> Vec<(String, &Yaml)> {
    doc["jobs"]
        .as_hash()
        .expect("a jobs map")
        .iter()
        .map(|(k, v)| (k.as_str().expect("job name").to_string(), v))
        .collect()
}

fn runs(job: &Yaml) -> Vec<String> {
    job["steps"]
        .as_vec()
        .expect("steps")
        .iter()
        .filter_map(|s| s["run"].as_str().map(str::to_string))
        .collect()
}

/// Checks one `run:` line; returns what is wrong with it.
fn check_command(line: &str, packages: &[String]) -> Vec<String> {
    let mut bad = vec![];
    for cmd in line.split("&&") {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let Some(&first) = words.first() else {
            continue;
        };
        match first {
            "cargo" => {
                let sub = words.get(1).copied().unwrap_or("");
                if !["fmt", "clippy", "test", "check", "build", "doc", "run"].contains(&sub) {
                    bad.push(format!("`{cmd}`: unexpected cargo subcommand {sub:?}"));
                }
                for w in words.windows(2) {
                    if (w[0] == "-p" || w[0] == "--package") && !packages.iter().any(|p| p == w[1])
                    {
                        bad.push(format!("`{cmd}`: no package {:?} in the workspace", w[1]));
                    }
                }
            }
            "rustup" | "apt-get" => {}
            path => {
                let p = root().join(path);
                if !p.is_file() {
                    bad.push(format!("`{cmd}`: {path} is not a file of the repository"));
                }
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let exec = std::fs::metadata(&p).map(|m| m.permissions().mode() & 0o111 != 0);
                    if exec.is_ok_and(|x| !x) {
                        bad.push(format!("`{cmd}`: {path} is not executable"));
                    }
                }
            }
        }
    }
    bad
}

#[test]
fn ci_workflow_names_only_what_exists() {
    let path = root().join(".github/workflows/ci.yml");
    let text = std::fs::read_to_string(&path).expect("the workflow file");
    let docs = YamlLoader::load_from_str(&text).expect("the workflow parses as YAML");
    let doc = &docs[0];
    let jobs = jobs(doc);
    let packages = packages();
    assert!(packages.iter().any(|p| p == "wmx-metal"), "{packages:?}");
    let mut oses = vec![];
    let mut bad = vec![];
    for (name, job) in &jobs {
        let os = job["runs-on"].as_str().expect("runs-on");
        oses.push(os.split('-').next().unwrap().to_string());
        let lines = runs(job);
        assert!(!lines.is_empty(), "job {name} runs nothing");
        for line in &lines {
            bad.extend(check_command(line, &packages));
        }
        if os.starts_with("ubuntu") {
            // The Linux job is CI itself: the same script, nothing else after checkout.
            assert_eq!(
                lines.last().map(String::as_str),
                Some(".ci/run"),
                "job {name}"
            );
        }
        if let Some(b) = job["env"]["WGPU_BACKEND"].as_str() {
            assert!(
                ["vulkan", "dx12", "metal", "gl"].contains(&b),
                "job {name}: WGPU_BACKEND {b:?}"
            );
        }
    }
    oses.sort();
    assert_eq!(oses, ["macos", "ubuntu", "windows"], "one job per platform");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The checker itself catches a missing script, a non-executable file, an unknown
/// package and an unknown cargo subcommand.
#[test]
fn the_checker_rejects_what_does_not_exist() {
    let packages = packages();
    assert!(check_command(".ci/run", &packages).is_empty());
    assert_eq!(check_command("scripts/nope.sh", &packages).len(), 1);
    assert_eq!(check_command("cargo test -p wmx-nope", &packages).len(), 1);
    assert_eq!(check_command("cargo frobnicate", &packages).len(), 1);
    #[cfg(unix)]
    assert_eq!(check_command("README.md", &packages).len(), 1);
}
