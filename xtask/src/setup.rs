//! What a fresh machine needs before the build: the system packages (`scripts/install-deps.sh`, run from
//! here so that `cargo xtask demo` and `cargo xtask ci` are each one command), and the Vulkan headers
//! llama.cpp's Vulkan backend compiles against.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::util::{cache_dir, cached_dir, cargo_metadata, run};

/// Which system packages `scripts/install-deps.sh` installs.
#[derive(Clone, Copy)]
pub enum Packages {
    /// What the default build of `phosphor` and the test-model download need: a C/C++ toolchain, CMake and
    /// libclang (llama.cpp), Python's pip (the models come from PyPI).
    Build,
    /// Everything `cargo xtask ci` uses besides: the Vulkan build tools, Node.js for the agent clients,
    /// a Postgres server.
    All,
}

/// Runs `scripts/install-deps.sh`, which installs only what is missing and, with a terminal attached,
/// says what it would install and asks before it does.
pub fn install_deps(packages: Packages) -> Result<()> {
    let set = match packages {
        Packages::Build => "build",
        Packages::All => "all",
    };
    run("bash", &["scripts/install-deps.sh", set], &[])
}

/// The crates.io crate whose package carries a copy of Khronos' Vulkan-Headers (`vendor/Vulkan-Headers`,
/// 1.4.325, with `vulkan.hpp`): Debian 12's headers (1.3.239) predate `VK_EXT_layer_settings`, which
/// llama.cpp's Vulkan backend uses. cargo fetches it by name and checks it against the index's checksum;
/// nothing of it is built.
const VULKAN_HEADERS_CRATE: (&str, &str) = ("vk-mem", "0.5.0");

/// The folder whose `include/` holds those headers, fetched once into the cache. CMake finds them through
/// `CMAKE_PREFIX_PATH`; the loader library stays the system's.
pub fn vulkan_headers() -> Result<PathBuf> {
    let (name, version) = VULKAN_HEADERS_CRATE;
    let dir = cache_dir()?.join(format!("vulkan-headers-{name}-{version}"));
    cached_dir(&dir, |partial| {
        let source = fetch_crate(name, version, &partial.join("fetch"))?;
        let include = source.join("vendor/Vulkan-Headers/include");
        if !include.join("vulkan/vulkan.hpp").exists() {
            bail!("{name} {version} has no vendor/Vulkan-Headers/include/vulkan/vulkan.hpp");
        }
        run("cp", &["-r", &include.to_string_lossy(), &partial.to_string_lossy()], &[])?;
        std::fs::remove_dir_all(partial.join("fetch")).context("could not remove the fetch project")
    })?;
    Ok(dir)
}

/// Downloads one crate from crates.io through a throwaway project (`cargo fetch` builds nothing) and
/// returns the folder cargo unpacked it into.
fn fetch_crate(name: &str, version: &str, project: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(project.join("src"))?;
    std::fs::write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"fetch-{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
             [dependencies]\n{name} = \"={version}\"\n\n[workspace]\n"
        ),
    )?;
    std::fs::write(project.join("src/lib.rs"), "")?;
    let manifest = project.join("Cargo.toml");
    let manifest = manifest.to_string_lossy();
    run("cargo", &["fetch", "--quiet", "--manifest-path", &manifest], &[])?;
    let metadata = cargo_metadata(&["--manifest-path", &manifest])?;
    let path = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name && p["version"] == version)
        .and_then(|p| p["manifest_path"].as_str())
        .with_context(|| format!("cargo fetched no {name} {version}"))?;
    Path::new(path).parent().map(Path::to_path_buf).context("a manifest path has no parent")
}
