//! `phosphor profiles list | check`: the summarization prompt templates of each tier.

use std::fmt::Write as _;

use anyhow::{Result, bail};
use phosphor_prompt::Profiles;

/// `profiles list`: every template found, in the order tiers are tried.
pub fn list(profiles: &Profiles) -> String {
    let entries = profiles.list();
    let width = entries.iter().map(|e| e.name.len()).max().unwrap_or(0).max("PROFILE".len());
    let mut out = format!("{:<width$}  {:<9}  TEMPLATE\n", "PROFILE", "TIER");
    for entry in entries {
        let path = entry.path.map_or_else(|| "(compiled in)".to_owned(), |p| p.display().to_string());
        let _ = writeln!(out, "{:<width$}  {:<9}  {path}", entry.name, entry.tier.to_string());
    }
    out
}

/// `profiles check`: validates `only`, or every profile found plus `configured`. `Err` when any has a problem,
/// after the report was written to `out`.
pub fn check(profiles: &Profiles, only: Option<&str>, configured: &str, out: &mut String) -> Result<()> {
    let mut names: Vec<String> = match only {
        Some(name) => vec![name.to_owned()],
        None => profiles.list().into_iter().map(|entry| entry.name).chain([configured.to_owned()]).collect(),
    };
    let mut seen = std::collections::HashSet::new();
    names.retain(|name| seen.insert(name.clone()));
    let mut problems = 0;
    for name in &names {
        let diagnostics = profiles.validate(name);
        if diagnostics.is_empty() {
            match profiles.resolve(name) {
                Ok(template) if !template.uses_previous_summary => {
                    let _ = writeln!(
                        out,
                        "{name}: ok; warning: the template does not use previous_summary, so Phosphor gives \
                         the model the previous summary as the first message of the history to summarize"
                    );
                }
                _ => {
                    let _ = writeln!(out, "{name}: ok");
                }
            }
        } else {
            problems += diagnostics.len();
            for diagnostic in diagnostics {
                let _ = writeln!(out, "{name}: {diagnostic}");
            }
        }
    }
    if problems > 0 {
        bail!("{problems} problem{} in the profile templates", if problems == 1 { "" } else { "s" });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::fs;

    #[test]
    fn lists_and_checks_every_tier() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("profiles");
        fs::create_dir_all(root.join("terse")).unwrap();
        fs::write(root.join("terse/summarization.md.tpl"), "Summarize tersely.\n").unwrap();
        fs::create_dir_all(root.join("broken")).unwrap();
        fs::write(root.join("broken/summarization.md.tpl"), "{% if %}\n").unwrap();
        let profiles = Profiles::with_roots(Some(root.clone()), None);
        let path = |name: &str| root.join(name).join("summarization.md.tpl").display().to_string();
        assert_eq!(
            list(&profiles),
            format!(
                "PROFILE  TIER       TEMPLATE\nbroken   workspace  {}\nterse    workspace  {}\ncompact  default    (compiled in)\ndefault  default    (compiled in)\n",
                path("broken"),
                path("terse")
            )
        );

        let mut out = String::new();
        check(&profiles, Some("terse"), "default", &mut out).unwrap();
        assert_eq!(
            out,
            "terse: ok; warning: the template does not use previous_summary, so Phosphor gives the model the \
             previous summary as the first message of the history to summarize\n"
        );
        let mut out = String::new();
        check(&profiles, Some("default"), "default", &mut out).unwrap();
        assert_eq!(out, "default: ok\n", "the default template uses previous_summary");

        let mut out = String::new();
        let error = check(&profiles, None, "default", &mut out).unwrap_err();
        assert_eq!(error.to_string(), "1 problem in the profile templates");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert!(
            lines[0].starts_with(&format!(
                "broken: workspace template {}",
                fs::canonicalize(path("broken")).unwrap().display()
            )),
            "{out}"
        );
        assert!(
            lines[1].starts_with("terse: ok; warning: the template does not use previous_summary"),
            "{out}"
        );
        assert_eq!(lines[2..], ["compact: ok", "default: ok"]);
    }
}
