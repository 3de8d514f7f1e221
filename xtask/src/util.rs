//! What every command of the automation uses: running a program, the workspace's folders, the
//! cache of fetched things.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

pub(crate) fn workspace_root() -> Result<PathBuf> {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().map(Path::to_path_buf).context("xtask has no parent directory")
}

/// Runs a command, echoing it, and fails when it fails.
pub(crate) fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Result<()> {
    eprintln!("\n$ {program} {}", args.join(" "));
    let started = Instant::now();
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .with_context(|| format!("could not start {program}"))?;
    eprintln!("  ({:.0?})", started.elapsed());
    if !status.success() {
        bail!("`{program} {}` failed with {status}", args.join(" "));
    }
    Ok(())
}

/// `cargo metadata --format-version 1` with `args`, parsed.
pub(crate) fn cargo_metadata(args: &[&str]) -> Result<serde_json::Value> {
    let output = Command::new("cargo")
        .args(["metadata", "--format-version", "1"])
        .args(args)
        .output()
        .context("could not run cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    serde_json::from_slice(&output.stdout).context("cargo metadata's output")
}

/// Where downloaded test models live: `$PHOSPHOR_CACHE_DIR`, else `~/.cache/phosphor`.
pub(crate) fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PHOSPHOR_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("HOME is not set; set PHOSPHOR_CACHE_DIR")?;
    Ok(PathBuf::from(home).join(".cache").join("phosphor"))
}

/// Makes the cache folder `dir` once: `fill` writes into a sibling `<name>.partial` folder, which becomes
/// `dir` only after `fill` succeeded (a `.complete` file marks it), so a half-made folder is never used.
pub(crate) fn cached_dir(dir: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    if dir.join(".complete").exists() {
        return Ok(());
    }
    let name = dir.file_name().context("a cache folder has no name")?.to_string_lossy();
    let partial = dir.with_file_name(format!("{name}.partial"));
    if partial.exists() {
        std::fs::remove_dir_all(&partial)
            .with_context(|| format!("could not remove {}", partial.display()))?;
    }
    std::fs::create_dir_all(&partial).with_context(|| format!("could not create {}", partial.display()))?;
    fill(&partial)?;
    std::fs::write(partial.join(".complete"), "")?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("could not remove {}", dir.display()))?;
    }
    std::fs::rename(&partial, dir)
        .with_context(|| format!("could not move {} to {}", partial.display(), dir.display()))
}

/// Cargo's target directory: `$CARGO_TARGET_DIR`, else `target` in the workspace.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_folder_is_made_once_and_never_half() {
        let root = std::env::temp_dir().join(format!("xtask-cached-dir-{}", std::process::id()));
        let dir = root.join("thing-1.0");
        let failed = cached_dir(&dir, |partial| {
            std::fs::write(partial.join("half"), "x")?;
            bail!("the download broke")
        });
        assert_eq!(failed.unwrap_err().to_string(), "the download broke");
        assert!(!dir.exists(), "a failed fill leaves no folder to use");

        let mut calls = 0;
        for _ in 0..2 {
            cached_dir(&dir, |partial| {
                calls += 1;
                std::fs::write(partial.join("file"), "whole").map_err(Into::into)
            })
            .unwrap();
        }
        assert_eq!(calls, 1);
        assert_eq!(std::fs::read_to_string(dir.join("file")).unwrap(), "whole");
        assert!(!dir.join("half").exists() && !root.join("thing-1.0.partial").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
