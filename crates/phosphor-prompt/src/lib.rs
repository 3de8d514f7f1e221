//! The summarization prompt, chosen per profile from three tiers and rendered with minijinja.
//!
//! A profile is a folder holding a `summarization.md.tpl` template. The template for a profile is looked up in:
//!
//! 1. [`Tier::Workspace`], `<workspace>/.phosphor/profiles/<profile>/summarization.md.tpl`;
//! 2. [`Tier::Global`], `<local data dir>/phosphor/profiles/<profile>/summarization.md.tpl`, where the local
//!    data dir is `$XDG_DATA_HOME` or `~/.local/share` on Linux, `~/Library/Application Support` on macOS and
//!    `%LOCALAPPDATA%` on Windows;
//! 3. [`Tier::Default`], the templates compiled into the program: [`DEFAULT_TEMPLATE`] for `default` and
//!    [`COMPACT_TEMPLATE`] for `compact`.
//!
//! The first tier with a usable template wins. A user template that cannot be read, leaves its profile folder
//! (through a symlink), fails to parse or fails to render is skipped with a warning naming the file, the line and
//! the error, and the next tier is used. The `default` and `compact` profiles are compiled in: another profile with
//! no file in the first two tiers gets the compiled-in default, with a warning naming the missing profile. The
//! compiled-in templates always render, so compaction always has a prompt.
//!
//! `compact` is the prompt for small local models, which cannot follow the six sections of `default`:
//! [`Profiles::for_model`] picks it instead of `default` for a model under [`SMALL_MODEL_PARAMETERS`]
//! parameters, unless a user tier has its own `default` template.
//!
//! Templates are rendered with [`SummaryContext`]'s fields as variables. Rendering is strict: a variable that is
//! not one of those fields is an error, not an empty string. Block tags (`{% if %}`, `{% for %}`) on a line of
//! their own leave no blank line behind (minijinja's `trim_blocks` and `lstrip_blocks` are on).
//!
//! ```
//! use phosphor_prompt::{Profiles, SummaryContext, Tier};
//!
//! let profiles = Profiles::with_roots(None, None);
//! let ctx = SummaryContext {
//!     session_id: "s1".to_owned(),
//!     previous_summary: Some("## Goal\nShip it.".to_owned()),
//!     ..SummaryContext::default()
//! };
//! let prompt = profiles.render("default", &ctx)?;
//! assert_eq!(prompt.tier, Tier::Default);
//! assert!(prompt.text.contains("Ship it."));
//! assert!(prompt.warnings.is_empty());
//! # Ok::<(), phosphor_prompt::Error>(())
//! ```
//!
//! # Design notes
//!
//! A second profile is compiled in, `compact` (four short sections), and `Profiles::for_model` owns
//! the rule that picks it: in place of the configured `default`, for a summarizer whose
//! `ChatModel::parameters` is under `SMALL_MODEL_PARAMETERS` (500 million; embedded models count
//! their GGUF tensors' elements, `GgufMetadata::read_with_parameters`, an output table of the
//! embedding's shape once; remote models say `None`), unless a user tier has a `default` template.
//! Small models cannot follow the six sections of `default` (measured, docs/BENCHMARKS.md); what
//! they cannot write, the session-state trail carries. The compiled-in `compact` template comes
//! with an outline (`compact_outline`, returned in `RenderedPrompt::outline`): its four headings, 2
//! to 6 bullet lines of at most 240 characters each. The agent puts it on the summary request
//! (`ChatRequest::outline`), and the local engines sample under it (phosphor-base's `outline`
//! module writes it as a GBNF grammar for llama.cpp and as a regex for mistral.rs: one description,
//! two forms); remote servers never get it. Unconstrained, SmolLM2 and Qwen2.5-Coder 0.5B copied
//! the prompt back or looped; under the outline they can only write content. A user's template has
//! no outline: it says its own format.
//!
//! **Architecture Invariant:** a profile name never reads a file outside the profile folders. A broken
//! user template never breaks compaction: it is reported and the next tier is used.

mod context;
mod error;
mod name;

use std::borrow::Cow;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use minijinja::{AutoEscape, Environment, ErrorKind, Template, UndefinedBehavior};
use phosphor_base::outline::{Outline, Section};

pub use context::SummaryContext;
pub use error::{Error, Result};
pub use name::{MAX_PROFILE_NAME_LEN, validate_profile_name};

/// The file a profile folder holds the summarization template in.
pub const TEMPLATE_FILE_NAME: &str = "summarization.md.tpl";

/// The profile used when none is configured.
pub const DEFAULT_PROFILE: &str = "default";

/// The compiled-in profile for small models: four short sections, no list of files to copy.
pub const COMPACT_PROFILE: &str = "compact";

/// Models with fewer parameters than this write their summaries with [`COMPACT_PROFILE`] where
/// [`DEFAULT_PROFILE`] is configured ([`Profiles::for_model`]). Measured with SmolLM2 135M and Gemma 3
/// 270M (docs/BENCHMARKS.md); Qwen2.5 0.5B (494 million) is under it, Qwen3 0.6B is not.
pub const SMALL_MODEL_PARAMETERS: u64 = 500_000_000;

/// The compiled-in summarization template of the `default` profile (`profiles/default/summarization.md.tpl`
/// in this crate, so that the crate packages on its own).
pub const DEFAULT_TEMPLATE: &str = include_str!("../profiles/default/summarization.md.tpl");

/// The compiled-in summarization template of the `compact` profile (`profiles/compact/summarization.md.tpl`).
pub const COMPACT_TEMPLATE: &str = include_str!("../profiles/compact/summarization.md.tpl");

/// The compiled-in template of `profile`, if it has one.
fn builtin(profile: &str) -> Option<&'static str> {
    match profile {
        DEFAULT_PROFILE => Some(DEFAULT_TEMPLATE),
        COMPACT_PROFILE => Some(COMPACT_TEMPLATE),
        _ => None,
    }
}

/// Where a template came from, in the order tiers are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// The workspace's `.phosphor/profiles` folder.
    Workspace,
    /// The user's `phosphor/profiles` folder in the platform's local data directory.
    Global,
    /// The template compiled into the program.
    Default,
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Workspace => "workspace",
            Tier::Global => "global",
            Tier::Default => "default",
        })
    }
}

/// The template chosen for a profile by [`Profiles::resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTemplate {
    /// The tier the template came from.
    pub tier: Tier,
    /// The file it was read from (canonical); `None` for the compiled-in default.
    pub path: Option<PathBuf>,
    /// The template's source.
    pub source: Cow<'static, str>,
    /// Why earlier tiers were skipped, one line each; empty when nothing was wrong.
    pub warnings: Vec<String>,
    /// Whether the template uses `previous_summary`. When it does not, the agent gives the model the
    /// previous summary as the first message to summarize, so iterative summaries never lose it.
    pub uses_previous_summary: bool,
}

/// A summarization prompt rendered by [`Profiles::render`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPrompt {
    /// The prompt: the instruction for the model that writes the summary.
    pub text: String,
    /// The tier of the template that rendered it.
    pub tier: Tier,
    /// The file of that template (canonical); `None` for the compiled-in default.
    pub path: Option<PathBuf>,
    /// Why earlier tiers were skipped, one line each; empty when nothing was wrong.
    pub warnings: Vec<String>,
    /// Whether the template uses `previous_summary` (see [`ResolvedTemplate::uses_previous_summary`]).
    pub uses_previous_summary: bool,
    /// The outline the answer is constrained to, for the compiled-in [`COMPACT_PROFILE`] ([`compact_outline`]);
    /// `None` for every other template (a user's template says its own format).
    pub outline: Option<Outline>,
}

/// The sections of the compiled-in [`COMPACT_PROFILE`] template, as the outline a local model's summary is
/// constrained to: the model writes only the lines under each heading, at most a few each, so it can neither
/// copy the instructions back as the summary nor loop past the last section. Only the compact profile has
/// one: with the `default` template's six sections and their descriptions, Qwen2.5-Coder 0.5B constrained
/// to the same headings copied the descriptions into every section (docs/BENCHMARKS.md).
pub fn compact_outline() -> Outline {
    Outline::new(vec![
        Section::new("Goal", 3),
        Section::new("Done", 6),
        Section::new("Errors", 3),
        Section::new("Next", 2),
    ])
}

/// A problem found by [`Profiles::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The tier of the template at fault; `None` when the problem is with the profile itself (a bad name, or
    /// no template in any user tier).
    pub tier: Option<Tier>,
    /// The template file at fault, when there is one.
    pub path: Option<PathBuf>,
    /// The line of the template the problem is on, when known (1-based).
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.tier, &self.path) {
            (None, _) => return f.write_str(&self.message),
            (Some(Tier::Default), None) => f.write_str("compiled-in default template")?,
            (Some(tier), None) => write!(f, "{tier} template")?,
            (Some(tier), Some(path)) => write!(f, "{tier} template {}", path.display())?,
        }
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A profile template found by [`Profiles::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileEntry {
    /// The profile's name (its folder's name).
    pub name: String,
    /// The tier it was found in.
    pub tier: Tier,
    /// Its template file; `None` for the compiled-in default.
    pub path: Option<PathBuf>,
}

/// The profile folders of the user tiers: where [`Profiles::resolve`] looks for templates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profiles {
    workspace_root: Option<PathBuf>,
    global_root: Option<PathBuf>,
}

/// A user tier's template file, read.
struct Candidate {
    path: PathBuf,
    source: String,
}

/// What looking for a profile's template in one user tier found.
enum Probe {
    /// No file there.
    Absent,
    /// A file that may be used.
    Found(Candidate),
    /// A file that must not or cannot be used.
    Rejected(Diagnostic),
}

/// What [`Profiles::select`] chose.
struct Selected<T> {
    tier: Tier,
    path: Option<PathBuf>,
    source: Cow<'static, str>,
    value: T,
    warnings: Vec<String>,
}

impl Profiles {
    /// The profile folders for `workspace_dir`: `<workspace_dir>/.phosphor/profiles`, and
    /// `phosphor/profiles` in the platform's local data directory (no global tier if the platform has none).
    /// Neither folder has to exist.
    pub fn discover(workspace_dir: &Path) -> Profiles {
        Profiles {
            workspace_root: Some(workspace_dir.join(".phosphor").join("profiles")),
            global_root: dirs::data_local_dir().map(|dir| dir.join("phosphor").join("profiles")),
        }
    }

    /// Profile folders given explicitly: each is a `profiles` folder holding one folder per profile.
    /// `None` leaves that tier out.
    pub fn with_roots(workspace: Option<PathBuf>, global: Option<PathBuf>) -> Profiles {
        Profiles { workspace_root: workspace, global_root: global }
    }

    /// The workspace tier's `profiles` folder, if there is one.
    pub fn workspace_root(&self) -> Option<&Path> {
        self.workspace_root.as_deref()
    }

    /// The global tier's `profiles` folder, if there is one.
    pub fn global_root(&self) -> Option<&Path> {
        self.global_root.as_deref()
    }

    /// Chooses the template for `profile`: the first user tier whose file parses, else the compiled-in default.
    /// Skipped files are reported in [`ResolvedTemplate::warnings`] (and logged with `tracing::warn!`).
    ///
    /// # Errors
    /// [`Error::InvalidProfileName`] for a name [`validate_profile_name`] refuses; [`Error::DefaultTemplate`]
    /// if the compiled-in template does not parse (a bug).
    pub fn resolve(&self, profile: &str) -> Result<ResolvedTemplate> {
        let selected = self.select(profile, |template| Ok(uses_previous_summary(template)))?;
        Ok(ResolvedTemplate {
            tier: selected.tier,
            path: selected.path,
            source: selected.source,
            warnings: selected.warnings,
            uses_previous_summary: selected.value,
        })
    }

    /// The profile a model with `parameters` parameters writes summaries with when `configured` is:
    /// [`COMPACT_PROFILE`] instead of [`DEFAULT_PROFILE`] for a model known to be under
    /// [`SMALL_MODEL_PARAMETERS`], unless a user tier has a `default` template (the user's prompt wins);
    /// `configured` otherwise.
    pub fn for_model<'a>(&self, configured: &'a str, parameters: Option<u64>) -> &'a str {
        let small = parameters.is_some_and(|p| p < SMALL_MODEL_PARAMETERS);
        let customized = || {
            self.user_tiers().any(|(tier, root)| !matches!(probe(tier, root, DEFAULT_PROFILE), Probe::Absent))
        };
        if configured == DEFAULT_PROFILE && small && !customized() { COMPACT_PROFILE } else { configured }
    }

    /// Renders the summarization prompt of `profile` with `ctx`: the first user tier whose file parses and
    /// renders, else the compiled-in default. Skipped files are reported in [`RenderedPrompt::warnings`] (and
    /// logged with `tracing::warn!`).
    ///
    /// # Errors
    /// [`Error::InvalidProfileName`] for a name [`validate_profile_name`] refuses; [`Error::DefaultTemplate`]
    /// if the compiled-in template fails (a bug).
    pub fn render(&self, profile: &str, ctx: &SummaryContext) -> Result<RenderedPrompt> {
        let selected =
            self.select(profile, |template| Ok((template.render(ctx)?, uses_previous_summary(template))))?;
        let (text, uses_previous_summary) = selected.value;
        let outline = (profile == COMPACT_PROFILE && selected.tier == Tier::Default).then(compact_outline);
        Ok(RenderedPrompt {
            text,
            outline,
            tier: selected.tier,
            path: selected.path,
            warnings: selected.warnings,
            uses_previous_summary,
        })
    }

    /// Checks every tier's template for `profile`, the compiled-in default included: the file must be readable,
    /// stay inside its profile folder, parse, and render with both [`SummaryContext::sample`] (every optional
    /// fact present) and [`SummaryContext::default`] (every optional fact absent). Returns every problem
    /// found, in tier order; empty when all is well. A profile other than `default` with no template in any
    /// user tier is reported too, since it would silently get the compiled-in default.
    pub fn validate(&self, profile: &str) -> Vec<Diagnostic> {
        if let Err(err) = validate_profile_name(profile) {
            return vec![Diagnostic { tier: None, path: None, line: None, message: err.to_string() }];
        }
        let mut problems = Vec::new();
        let mut found = false;
        for (tier, root) in self.user_tiers() {
            match probe(tier, root, profile) {
                Probe::Absent => {}
                Probe::Rejected(diagnostic) => {
                    found = true;
                    problems.push(diagnostic);
                }
                Probe::Found(candidate) => {
                    found = true;
                    problems.extend(check_template(tier, Some(&candidate.path), &candidate.source));
                }
            }
        }
        if !found && builtin(profile).is_none() {
            problems.push(Diagnostic { tier: None, path: None, line: None, message: self.missing(profile) });
        }
        problems.extend(check_template(Tier::Default, None, builtin(profile).unwrap_or(DEFAULT_TEMPLATE)));
        problems
    }

    /// Every profile template there is: those in the workspace tier, then the global tier (each sorted by
    /// name), then the compiled-in `compact` and `default`. A name found in several tiers is listed once per tier; the
    /// earliest tier is the one [`Profiles::resolve`] tries first. Folders whose name is not a valid
    /// profile name, or that hold no template file, are left out; files are not read (see
    /// [`Profiles::validate`]).
    pub fn list(&self) -> Vec<ProfileEntry> {
        let mut entries = Vec::new();
        for (tier, root) in self.user_tiers() {
            let Ok(dir) = fs::read_dir(root) else { continue };
            let mut found: Vec<ProfileEntry> = dir
                .filter_map(|entry| {
                    let name = entry.ok()?.file_name().into_string().ok()?;
                    validate_profile_name(&name).ok()?;
                    let path = root.join(&name).join(TEMPLATE_FILE_NAME);
                    path.is_file().then_some(ProfileEntry { name, tier, path: Some(path) })
                })
                .collect();
            found.sort_by(|a, b| a.name.cmp(&b.name));
            entries.extend(found);
        }
        for name in [COMPACT_PROFILE, DEFAULT_PROFILE] {
            entries.push(ProfileEntry { name: name.to_owned(), tier: Tier::Default, path: None });
        }
        entries
    }

    /// The user tiers that have a folder, in the order they are tried.
    fn user_tiers(&self) -> impl Iterator<Item = (Tier, &Path)> {
        [(Tier::Workspace, &self.workspace_root), (Tier::Global, &self.global_root)]
            .into_iter()
            .filter_map(|(tier, root)| root.as_deref().map(|root| (tier, root)))
    }

    /// Tries the tiers in order and keeps the first template that parses and that `accept` takes; the
    /// profile's compiled-in template (else the default's) is the last resort. The warnings say why each earlier file was skipped.
    fn select<T>(
        &self,
        profile: &str,
        mut accept: impl FnMut(&Template<'_, '_>) -> Result<T, minijinja::Error>,
    ) -> Result<Selected<T>> {
        validate_profile_name(profile)?;
        let env = environment();
        let mut problems = Vec::new();
        let mut found = false;
        for (tier, root) in self.user_tiers() {
            let candidate = match probe(tier, root, profile) {
                Probe::Absent => continue,
                Probe::Rejected(diagnostic) => {
                    found = true;
                    problems.push(diagnostic);
                    continue;
                }
                Probe::Found(candidate) => candidate,
            };
            found = true;
            let name = candidate.path.display().to_string();
            let accepted =
                env.template_from_named_str(&name, &candidate.source).and_then(|template| accept(&template));
            match accepted {
                Ok(value) => {
                    let warnings = warn(profile, &problems, &format!("the {tier} template"));
                    return Ok(Selected {
                        tier,
                        path: Some(candidate.path),
                        source: Cow::Owned(candidate.source),
                        value,
                        warnings,
                    });
                }
                Err(err) => {
                    problems.push(template_diagnostic(tier, Some(&candidate.path), &candidate.source, &err))
                }
            }
        }

        let (name, source) = match builtin(profile) {
            Some(source) => (profile, source),
            None => (DEFAULT_PROFILE, DEFAULT_TEMPLATE),
        };
        let value = env
            .template_from_named_str(name, source)
            .and_then(|template| accept(&template))
            .map_err(|err| Error::DefaultTemplate { line: err.line(), message: describe(&err, source) })?;
        let mut warnings = warn(profile, &problems, &format!("the compiled-in {name} template"));
        if !found && builtin(profile).is_none() {
            let message = self.missing(profile);
            tracing::warn!(profile, "{message}");
            warnings.push(message);
        }
        Ok(Selected { tier: Tier::Default, path: None, source: Cow::Borrowed(source), value, warnings })
    }

    /// The warning for a profile that has no template in any user tier.
    fn missing(&self, profile: &str) -> String {
        let folders: Vec<String> = self
            .user_tiers()
            .map(|(tier, root)| format!("{tier} ({})", root.join(profile).display()))
            .collect();
        let looked = if folders.is_empty() {
            "no profile folder is configured".to_owned()
        } else {
            format!("no {TEMPLATE_FILE_NAME} in {}", folders.join(" or "))
        };
        format!("profile {profile:?} not found: {looked}; using the compiled-in default template")
    }
}

/// The environment every template is parsed and rendered in.
/// Whether `template` reads `previous_summary` anywhere.
fn uses_previous_summary(template: &Template<'_, '_>) -> bool {
    template.undeclared_variables(false).contains("previous_summary")
}

/// The compiled-in template of `phosphor eval`'s judge (`profiles/default/judge.md.tpl`): it is given
/// `kind`, `question`, `expected` and `answer`, and asks for a grade from 0 to 5.
pub const JUDGE_TEMPLATE: &str = include_str!("../profiles/default/judge.md.tpl");

/// Renders `source` (a template named `name` in errors: a file path, say) with `ctx`, in the same
/// environment as the summary templates (strict undefined variables, no escaping). The error says
/// where the template failed and why.
pub fn render_template(
    name: &str,
    source: &str,
    ctx: impl serde::Serialize,
) -> std::result::Result<String, String> {
    environment().template_from_named_str(name, source).and_then(|template| template.render(ctx)).map_err(
        |err| {
            format!(
                "{name}{}: {}",
                err.line().map(|l| format!(" line {l}")).unwrap_or_default(),
                describe(&err, source)
            )
        },
    )
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env
}

/// Looks for `profile`'s template in the user tier `tier` rooted at `root`, and reads it if it may be used.
fn probe(tier: Tier, root: &Path, profile: &str) -> Probe {
    let path = root.join(profile).join(TEMPLATE_FILE_NAME);
    let rejected = |path: &Path, message: String| {
        Probe::Rejected(Diagnostic { tier: Some(tier), path: Some(path.to_owned()), line: None, message })
    };
    match fs::symlink_metadata(&path) {
        Ok(_) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Probe::Absent,
        Err(err) => return rejected(&path, format!("cannot read: {err}")),
    }
    let real = match fs::canonicalize(&path) {
        Ok(real) => real,
        Err(err) => return rejected(&path, format!("cannot resolve the path: {err}")),
    };
    let real_root = match fs::canonicalize(root) {
        Ok(real_root) => real_root,
        Err(err) => return rejected(&path, format!("cannot resolve the profile folder: {err}")),
    };
    if !real.starts_with(&real_root) {
        return rejected(
            &path,
            format!(
                "refused: it resolves to {}, outside the profile folder {}; templates must lie inside it",
                real.display(),
                real_root.display()
            ),
        );
    }
    match fs::read_to_string(&real) {
        Ok(source) => Probe::Found(Candidate { path: real, source }),
        Err(err) => rejected(&real, format!("cannot read: {err}")),
    }
}

/// Parses `source` and trial-renders it with both sample contexts; returns the distinct problems.
fn check_template(tier: Tier, path: Option<&Path>, source: &str) -> Vec<Diagnostic> {
    let env = environment();
    let name = path.map_or_else(|| "the compiled-in template".to_owned(), |path| path.display().to_string());
    let template = match env.template_from_named_str(&name, source) {
        Ok(template) => template,
        Err(err) => return vec![template_diagnostic(tier, path, source, &err)],
    };
    let mut problems: Vec<Diagnostic> = Vec::new();
    for ctx in [SummaryContext::sample(), SummaryContext::default()] {
        if let Err(err) = template.render(&ctx) {
            let diagnostic = template_diagnostic(tier, path, source, &err);
            if !problems.contains(&diagnostic) {
                problems.push(diagnostic);
            }
        }
    }
    problems
}

/// A diagnostic for a template that failed to parse or render.
fn template_diagnostic(tier: Tier, path: Option<&Path>, source: &str, err: &minijinja::Error) -> Diagnostic {
    let message = describe(err, source);
    Diagnostic { tier: Some(tier), path: path.map(Path::to_owned), line: err.line(), message }
}

/// minijinja's error kind and detail, without the `(in name:line)` suffix its `Display` adds (the
/// diagnostic carries the path and line itself), then, for errors other than syntax errors (whose detail
/// already names the token), the template text the error points at, so that an undefined variable is
/// named; then any underlying cause.
fn describe(err: &minijinja::Error, source: &str) -> String {
    let mut message = match err.detail() {
        Some(detail) => format!("{}: {detail}", err.kind()),
        None => err.kind().to_string(),
    };
    let span = err.range().filter(|_| err.kind() != ErrorKind::SyntaxError);
    let span = span.and_then(|range| source.get(range)).map(str::trim);
    if let Some(span) = span.filter(|span| !span.is_empty() && span.len() <= 80 && !span.contains('\n')) {
        message.push_str(&format!(" (at `{span}`)"));
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(&format!("; caused by: {cause}"));
        source = cause.source();
    }
    message
}

/// Turns the problems of skipped tiers into warnings that say what was used instead, and logs them.
fn warn(profile: &str, problems: &[Diagnostic], used: &str) -> Vec<String> {
    problems
        .iter()
        .map(|problem| {
            let warning = format!("ignoring {problem}; using {used} instead");
            tracing::warn!(profile, "{warning}");
            warning
        })
        .collect()
}
