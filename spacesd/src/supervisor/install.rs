//! Locating and installing agent CLIs: an operator-set binary, or the pinned npm install in the
//! host's tools dir (`<tools dir>/<harness id>/node_modules/...`), installed on first use.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Instant;

use spaces_harnesses::Harness;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::config::Config;

/// Where a harness's CLI comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Operator override (`SPACES_HARNESS_BIN_<ID>` or `harness_bin` in config.json).
    Operator(PathBuf),
    /// The pinned install in the tools dir.
    Pinned(PathBuf),
}

impl Source {
    /// The binary path.
    pub fn path(&self) -> &PathBuf {
        match self {
            Source::Operator(p) | Source::Pinned(p) => p,
        }
    }
}

/// The binary this host would launch for `harness`, and whether it exists now.
pub fn locate(cfg: &Config, harness: &dyn Harness) -> (Source, bool) {
    if let Some(p) = cfg.harness_bin.get(harness.id()) {
        return (Source::Operator(p.clone()), p.is_file());
    }
    let p = cfg.harness_tools_dir(harness.id()).join(harness.install_spec().binary);
    let exists = p.is_file();
    (Source::Pinned(p), exists)
}

/// Install the pinned CLI of `harness` with npm, reporting progress lines to `progress`.
/// Returns the binary path, or a sentence saying why the install failed.
pub async fn install(
    cfg: &Config,
    harness: &dyn Harness,
    mut progress: impl FnMut(String),
) -> Result<PathBuf, String> {
    let spec = harness.install_spec();
    let prefix = cfg.harness_tools_dir(harness.id());
    std::fs::create_dir_all(&prefix).map_err(|e| format!("cannot create {}: {e}", prefix.display()))?;
    progress(format!("installing {} into {}", spec.packages.join(" "), prefix.display()));
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new("npm");
    cmd.arg("install")
        .arg("--prefix")
        .arg(&prefix)
        .args(["--no-audit", "--no-fund", "--no-save", "--loglevel", "http"])
        .args(&spec.packages)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run npm (is Node.js installed?): {e}"))?;
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    if let Some(stderr) = child.stderr.take() {
        let mut lines = BufReader::new(stderr).lines();
        let mut fetched = 0u32;
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("npm http") {
                fetched += 1;
                if fetched % 5 == 1 {
                    progress(format!("downloading ({fetched} requests so far)"));
                }
            } else if !line.trim().is_empty() {
                progress(line.clone());
            }
            tail.push_back(line);
            if tail.len() > 20 {
                tail.pop_front();
            }
        }
    }
    let status = child.wait().await.map_err(|e| format!("npm did not finish: {e}"))?;
    let (_, exists) = locate(cfg, harness);
    let binary = prefix.join(spec.binary);
    if status.success() && exists {
        progress(format!(
            "installed {} in {:.1} s",
            spec.packages.join(" "),
            started.elapsed().as_secs_f64()
        ));
        Ok(binary)
    } else {
        Err(format!(
            "npm install of {} failed ({status}); binary {} {}: {}",
            spec.packages.join(" "),
            binary.display(),
            if exists { "exists" } else { "is missing" },
            Vec::from(tail).join(" | ")
        ))
    }
}
