//! `cargo xtask check-names`: every package this workspace publishes has a name that is free on
//! crates.io or already ours. A dependency between our crates resolves by name once published, so
//! a name someone else holds would make `cargo add` (and our own published crates) pull in their
//! code instead of ours.

use std::process::Command;

use anyhow::{Context, Result, bail};

/// What crates.io says of one package name.
#[derive(Debug, PartialEq, Eq)]
enum Registry {
    /// No crate of that name.
    Free,
    /// A crate of that name whose repository is ours.
    Ours,
    /// A crate of that name from another project: its description.
    Taken(String),
}

/// Checks each publishable package of the workspace against crates.io with `cargo info`, run outside the
/// workspace (inside it, `cargo info` describes the local package).
pub fn check_names(metadata: &serde_json::Value) -> Result<()> {
    let ours = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|p| p["repository"].as_str())
        .context("no workspace package names a repository")?
        .to_owned();
    let outside = std::env::temp_dir();
    let mut taken = Vec::new();
    let mut checked = 0;
    for name in publishable(metadata) {
        let output = Command::new("cargo")
            .args(["info", "--registry", "crates-io", &name])
            .current_dir(&outside)
            .output()
            .context("could not run cargo info")?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        match read_info(output.status.success(), &stdout, &stderr, &ours)
            .with_context(|| format!("cargo info {name}"))?
        {
            Registry::Free | Registry::Ours => checked += 1,
            Registry::Taken(what) => taken.push(format!("{name} ({what})")),
        }
    }
    if !taken.is_empty() {
        bail!(
            "these package names belong to other projects on crates.io, so our crates could not be published \
             under them and a dependency on them would resolve to the other project's code: {}. Rename the \
             package (the `[lib] name` may stay)",
            taken.join(", ")
        );
    }
    eprintln!("package names: {checked} publishable packages, each free on crates.io or ours ({ours})");
    Ok(())
}

/// The workspace's packages that `cargo publish` would publish (`publish` unset or naming a registry).
pub fn publishable(metadata: &serde_json::Value) -> Vec<String> {
    let packages = metadata["packages"].as_array().map(Vec::as_slice).unwrap_or_default();
    packages
        .iter()
        .filter(|p| p["publish"].as_array().is_none_or(|registries| !registries.is_empty()))
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

/// Reads `cargo info`'s answer: a `repository:` line (ours or not), or "could not find".
fn read_info(success: bool, stdout: &str, stderr: &str, ours: &str) -> Result<Registry> {
    if !success {
        if stderr.contains("could not find") {
            return Ok(Registry::Free);
        }
        bail!("crates.io must be reachable to check the name: {}", stderr.trim());
    }
    let field = |key: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(key).map(|v| v.trim().trim_end_matches('/').to_owned()))
    };
    if field("repository:").as_deref() == Some(ours.trim_end_matches('/')) {
        return Ok(Registry::Ours);
    }
    // The line after the name is the crate's description.
    let description = stdout.lines().nth(1).unwrap_or("no description").trim().to_owned();
    let repository = field("repository:").unwrap_or_else(|| "no repository".to_owned());
    Ok(Registry::Taken(format!("{description}; {repository}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: &str = "https://github.com/phosphor-rs/phosphor";

    #[test]
    fn a_name_is_free_ours_or_taken() -> Result<()> {
        let missing =
            "    Updating crates.io index\nerror: could not find `phosphor-base` in registry `crates-io`";
        assert_eq!(read_info(false, "", missing, OURS)?, Registry::Free);
        let ours = format!("phosphor-base\nMessage model\nversion: 0.1.0\nrepository: {OURS}/\n");
        assert_eq!(read_info(true, &ours, "", OURS)?, Registry::Ours);
        let theirs = "phosphor-core\nAudio engine, mixer, and transport for the Phosphor DAW\nversion: 0.3.97\n\
                      license: MIT\nrepository: https://example.org/daw\n";
        assert_eq!(
            read_info(true, theirs, "", OURS)?,
            Registry::Taken(
                "Audio engine, mixer, and transport for the Phosphor DAW; https://example.org/daw".into()
            )
        );
        let offline = "error: failed to query replaced source registry `crates-io`";
        assert!(read_info(false, "", offline, OURS).is_err());
        Ok(())
    }

    #[test]
    fn unpublished_packages_are_not_checked() {
        let metadata = serde_json::json!({"packages": [
            {"name": "phosphor-base", "publish": null},
            {"name": "xtask", "publish": []},
            {"name": "phosphor-cli", "publish": ["crates-io"]},
        ]});
        assert_eq!(publishable(&metadata), ["phosphor-base", "phosphor-cli"]);
    }
}
