//! Test support for the whole workspace (not part of the public API): where the test models are, and
//! whether a test that needs one may skip without it.
//!
//! Every test that runs a real model finds it through [`test_model`], so the rule lives here only: under
//! `cargo xtask ci`, which sets [`REQUIRE_TEST_MODELS`], a missing model fails the test; under a plain
//! `cargo test` the test is skipped, saying why on stderr.

use std::ffi::OsString;
use std::path::PathBuf;

/// The environment variable that makes a missing test model a failure instead of a skip (`cargo xtask ci`
/// sets it to `1`). Any value other than empty or `0` counts.
pub const REQUIRE_TEST_MODELS: &str = "PHOSPHOR_REQUIRE_TEST_MODELS";

/// The GGUF file the environment variable `var` names (`PHOSPHOR_TEST_MODEL`, `PHOSPHOR_TEST_GEMMA`).
///
/// When `var` is unset or empty the test is skipped: this prints why on stderr and returns `None`, or panics
/// when [`REQUIRE_TEST_MODELS`] is set. When `var` names no file this always panics (a misconfiguration,
/// never a reason to skip).
#[track_caller]
pub fn test_model(var: &str) -> Option<PathBuf> {
    let required = std::env::var_os(REQUIRE_TEST_MODELS).is_some_and(|v| !v.is_empty() && v != "0");
    match lookup(var, std::env::var_os(var), required, "file", |path| path.is_file()) {
        Ok(path) => path,
        Err(message) => panic!("{message}"),
    }
}

/// The server URL the environment variable `var` names (`PHOSPHOR_TEST_POSTGRES`: a Postgres server the test
/// may create databases on). Skips or fails as [`test_model`] does; whether the server answers is the
/// test's to find out.
#[track_caller]
pub fn test_url(var: &str) -> Option<String> {
    let required = std::env::var_os(REQUIRE_TEST_MODELS).is_some_and(|v| !v.is_empty() && v != "0");
    match lookup(var, std::env::var_os(var), required, "URL", |_| true) {
        Ok(url) => url.map(|url| url.to_string_lossy().into_owned()),
        Err(message) => panic!("{message}"),
    }
}

/// The folder the environment variable `var` names, for a test that drives a real client installed there
/// (`PHOSPHOR_TEST_OPENAI_PYTHON`: OpenAI's Python SDK, for `PYTHONPATH`). Skips or fails as [`test_model`]
/// does.
#[track_caller]
pub fn test_dir(var: &str) -> Option<PathBuf> {
    let required = std::env::var_os(REQUIRE_TEST_MODELS).is_some_and(|v| !v.is_empty() && v != "0");
    match lookup(var, std::env::var_os(var), required, "folder", |path| path.is_dir()) {
        Ok(path) => path,
        Err(message) => panic!("{message}"),
    }
}

/// [`test_model`]'s decision, apart from the process environment: the path, `None` after saying on stderr
/// that the test is skipped, or the reason the test must fail.
fn lookup(
    var: &str,
    value: Option<OsString>,
    required: bool,
    kind: &str,
    exists: impl Fn(&std::path::Path) -> bool,
) -> Result<Option<PathBuf>, String> {
    let fetch = if kind == "URL" {
        "run `scripts/test-postgres.sh start DIR` and set it to the URL it prints".to_owned()
    } else {
        format!("run `cargo xtask fetch-test-model all` and set it to the {kind} printed for it")
    };
    match value.filter(|v| !v.is_empty()).map(PathBuf::from) {
        Some(path) if exists(&path) => Ok(Some(path)),
        Some(path) => Err(format!("{var} is {}, which is not a {kind}; {fetch}", path.display())),
        None if required => Err(format!(
            "{var} is not set, and {REQUIRE_TEST_MODELS} says the test models are required; {fetch}"
        )),
        None => {
            eprintln!("skipped: {var} is not set ({fetch}; {REQUIRE_TEST_MODELS}=1 makes this a failure)");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const VAR: &str = "PHOSPHOR_TEST_MODEL";

    fn check(value: Option<&str>, required: bool, exists: bool) -> Result<Option<PathBuf>, String> {
        lookup(VAR, value.map(OsString::from), required, "file", |_| exists)
    }

    #[test]
    fn an_existing_file_is_returned_either_way() {
        for required in [false, true] {
            assert_eq!(check(Some("/m.gguf"), required, true), Ok(Some(PathBuf::from("/m.gguf"))));
        }
    }

    #[test]
    fn an_unset_variable_skips_unless_required() {
        for value in [None, Some("")] {
            assert_eq!(check(value, false, false), Ok(None));
            assert_eq!(
                check(value, true, false),
                Err("PHOSPHOR_TEST_MODEL is not set, and PHOSPHOR_REQUIRE_TEST_MODELS says the test models are \
                     required; run `cargo xtask fetch-test-model all` and set it to the file printed for it"
                    .to_owned())
            );
        }
    }

    #[test]
    fn a_variable_naming_no_file_always_fails() {
        for required in [false, true] {
            assert_eq!(
                check(Some("/nowhere/m.gguf"), required, false),
                Err("PHOSPHOR_TEST_MODEL is /nowhere/m.gguf, which is not a file; run `cargo xtask \
                     fetch-test-model all` and set it to the file printed for it"
                    .to_owned())
            );
        }
    }
}
