//! Tier resolution, fallbacks, name validation, `validate()` and `list()`, on real folders in tempdirs.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use phosphor_prompt::{
    COMPACT_PROFILE, DEFAULT_TEMPLATE, Diagnostic, Error, ProfileEntry, Profiles, RenderedPrompt,
    ResolvedTemplate, SMALL_MODEL_PARAMETERS, SummaryContext, Tier, compact_outline, validate_profile_name,
};
use pretty_assertions::assert_eq;
use tempfile::TempDir;

/// A workspace and a global `profiles` folder inside one tempdir (canonical, so paths compare equal).
struct Roots {
    _dir: TempDir,
    base: PathBuf,
    workspace: PathBuf,
    global: PathBuf,
}

impl Roots {
    fn new() -> io::Result<Roots> {
        let dir = TempDir::new()?;
        let base = fs::canonicalize(dir.path())?;
        let workspace = base.join("ws/.phosphor/profiles");
        let global = base.join("data/phosphor/profiles");
        fs::create_dir_all(&workspace)?;
        fs::create_dir_all(&global)?;
        Ok(Roots { _dir: dir, base, workspace, global })
    }

    fn profiles(&self) -> Profiles {
        Profiles::with_roots(Some(self.workspace.clone()), Some(self.global.clone()))
    }
}

/// Writes `source` as `profile`'s template under `root` and returns its path.
fn write(root: &Path, profile: &str, source: &str) -> io::Result<PathBuf> {
    let dir = root.join(profile);
    fs::create_dir_all(&dir)?;
    let path = dir.join("summarization.md.tpl");
    fs::write(&path, source)?;
    Ok(path)
}

fn ctx() -> SummaryContext {
    SummaryContext { session_title: "Retry".to_owned(), ..SummaryContext::default() }
}

#[test]
fn workspace_beats_global_beats_default() {
    let roots = Roots::new().unwrap();
    let profiles = roots.profiles();
    let ws = write(&roots.workspace, "default", "workspace: {{ session_title }}").unwrap();
    let global = write(&roots.global, "default", "global: {{ session_title }}").unwrap();

    let expected = RenderedPrompt {
        text: "workspace: Retry".to_owned(),
        tier: Tier::Workspace,
        path: Some(ws.clone()),
        warnings: vec![],
        uses_previous_summary: false,
        outline: None,
    };
    assert_eq!(profiles.render("default", &ctx()).unwrap(), expected);
    let expected = ResolvedTemplate {
        tier: Tier::Workspace,
        path: Some(ws.clone()),
        source: "workspace: {{ session_title }}".into(),
        warnings: vec![],
        uses_previous_summary: false,
    };
    assert_eq!(profiles.resolve("default").unwrap(), expected);

    fs::remove_file(&ws).unwrap();
    let expected = RenderedPrompt {
        text: "global: Retry".to_owned(),
        tier: Tier::Global,
        path: Some(global.clone()),
        warnings: vec![],
        uses_previous_summary: false,
        outline: None,
    };
    assert_eq!(profiles.render("default", &ctx()).unwrap(), expected);

    fs::remove_file(&global).unwrap();
    let expected = ResolvedTemplate {
        tier: Tier::Default,
        path: None,
        source: DEFAULT_TEMPLATE.into(),
        warnings: vec![],
        uses_previous_summary: true,
    };
    assert_eq!(profiles.resolve("default").unwrap(), expected);
    let rendered = profiles.render("default", &ctx()).unwrap();
    assert_eq!((rendered.tier, rendered.path, rendered.warnings), (Tier::Default, None, vec![]));
    assert!(rendered.text.contains("## Next steps"), "{}", rendered.text);
}

#[test]
fn profiles_are_looked_up_by_name() {
    let roots = Roots::new().unwrap();
    write(&roots.workspace, "default", "default profile").unwrap();
    let terse = write(&roots.global, "terse", "terse profile").unwrap();
    let expected = RenderedPrompt {
        text: "terse profile".to_owned(),
        tier: Tier::Global,
        path: Some(terse),
        warnings: vec![],
        uses_previous_summary: false,
        outline: None,
    };
    assert_eq!(roots.profiles().render("terse", &ctx()).unwrap(), expected);
}

#[test]
fn broken_workspace_template_warns_with_file_and_line_and_global_is_used() {
    let roots = Roots::new().unwrap();
    let ws =
        write(&roots.workspace, "default", "Summarize.\n\n{% if files %}\n{{ files | join(', ') \n").unwrap();
    let global = write(&roots.global, "default", "global: {{ session_title }}").unwrap();

    let expected = RenderedPrompt {
        text: "global: Retry".to_owned(),
        tier: Tier::Global,
        path: Some(global.clone()),
        warnings: vec![format!(
            "ignoring workspace template {}:4: syntax error: unexpected end of input, expected end of variable \
             block; using the global template instead",
            ws.display()
        )],
        uses_previous_summary: false,
        outline: None,
    };
    assert_eq!(roots.profiles().render("default", &ctx()).unwrap(), expected);
    let resolved = roots.profiles().resolve("default").unwrap();
    assert_eq!(
        (resolved.tier, resolved.path, resolved.warnings),
        (Tier::Global, Some(global), expected.warnings)
    );
}

#[test]
fn undefined_variable_warns_and_the_next_tier_renders() {
    let roots = Roots::new().unwrap();
    let ws =
        write(&roots.workspace, "default", "Summary of {{ session_title }}\nfor {{ user_name }}\n").unwrap();
    let global = write(&roots.global, "default", "global: {{ session_title }}").unwrap();
    let warning = format!(
        "ignoring workspace template {}:2: undefined value (at `user_name`); using the global template instead",
        ws.display()
    );

    // The template parses, so resolving picks it; only rendering finds the undefined variable.
    assert_eq!(roots.profiles().resolve("default").unwrap().tier, Tier::Workspace);
    let expected = RenderedPrompt {
        text: "global: Retry".to_owned(),
        tier: Tier::Global,
        path: Some(global.clone()),
        warnings: vec![warning],
        uses_previous_summary: false,
        outline: None,
    };
    assert_eq!(roots.profiles().render("default", &ctx()).unwrap(), expected);

    // With the global tier broken as well, the compiled-in default renders.
    fs::write(&global, "{{ session.title }}").unwrap();
    let rendered = roots.profiles().render("default", &ctx()).unwrap();
    assert_eq!(
        (rendered.tier, rendered.path, rendered.warnings),
        (
            Tier::Default,
            None,
            vec![
                format!(
                    "ignoring workspace template {}:2: undefined value (at `user_name`); using the compiled-in default template instead",
                    ws.display()
                ),
                format!(
                    "ignoring global template {}:1: undefined value (at `session.title`); using the compiled-in default template instead",
                    global.display()
                ),
            ]
        )
    );
}

#[test]
fn missing_profile_falls_back_to_the_default_with_a_warning_naming_it() {
    let roots = Roots::new().unwrap();
    let rendered = roots.profiles().render("terse", &ctx()).unwrap();
    let expected = format!(
        "profile \"terse\" not found: no summarization.md.tpl in workspace ({}) or global ({}); using the \
         compiled-in default template",
        roots.workspace.join("terse").display(),
        roots.global.join("terse").display()
    );
    assert_eq!((rendered.tier, rendered.warnings), (Tier::Default, vec![expected]));

    let rendered = Profiles::with_roots(None, None).render("terse", &ctx()).unwrap();
    let expected = "profile \"terse\" not found: no profile folder is configured; using the compiled-in default template";
    assert_eq!((rendered.tier, rendered.warnings), (Tier::Default, vec![expected.to_owned()]));
}

#[test]
fn discover_uses_the_workspace_and_the_local_data_dir() {
    let profiles = Profiles::discover(Path::new("/srv/project"));
    assert_eq!(profiles.workspace_root(), Some(Path::new("/srv/project/.phosphor/profiles")));
    // Worked out by hand from the XDG rule, not with the call the code under test makes.
    #[cfg(target_os = "linux")]
    {
        let data_home = std::env::var_os("XDG_DATA_HOME")
            .map(std::path::PathBuf::from)
            .filter(|dir| dir.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".local/share")));
        let global = data_home.map(|dir| dir.join("phosphor/profiles"));
        assert_eq!(profiles.global_root(), global.as_deref());
    }
}

/// Checks `validate_profile_name(name)`: `Ok` or the reason in the error.
fn check_name(name: &str, expected: Result<(), &str>) {
    let got = validate_profile_name(name).map_err(|err| match err {
        Error::InvalidProfileName { name: got_name, reason } => {
            assert_eq!(got_name, name);
            reason
        }
        other => panic!("unexpected error {other:?}"),
    });
    assert_eq!(got, expected.map_err(str::to_owned), "name {name:?}");
}

#[test]
fn profile_name_validation() {
    check_name("ok-name_1", Ok(()));
    check_name("v1.2", Ok(()));
    check_name(&"a".repeat(64), Ok(()));
    check_name("", Err("it is empty"));
    check_name(".", Err("it names the current or parent folder"));
    check_name("..", Err("it names the current or parent folder"));
    check_name("../x", Err("it contains the path separator '/'"));
    check_name("/etc", Err("it is an absolute path"));
    check_name("\\etc", Err("it is an absolute path"));
    check_name("C:x", Err("it is an absolute path"));
    check_name("a/b", Err("it contains the path separator '/'"));
    check_name("a\\b", Err("it contains the path separator '\\\\'"));
    check_name("a b", Err("it contains the character ' '"));
    check_name("café", Err("it contains the character 'é'"));
    check_name(&"a".repeat(65), Err("it is 65 characters long"));
}

#[test]
fn invalid_profile_name_is_an_error_that_says_what_is_allowed() {
    let roots = Roots::new().unwrap();
    let err = roots.profiles().render("../x", &ctx()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid profile name \"../x\": it contains the path separator '/'; a profile name is 1 to 64 ASCII \
         letters, digits, '-', '_' or '.', and is not '.' or '..'"
    );
    assert!(matches!(roots.profiles().resolve("..").unwrap_err(), Error::InvalidProfileName { .. }));
}

#[cfg(unix)]
#[test]
fn symlink_escaping_the_profile_folder_is_refused() {
    use std::os::unix::fs::symlink;

    let roots = Roots::new().unwrap();
    let secret = roots.base.join("secret.txt");
    fs::write(&secret, "api key: hunter2").unwrap();
    // A template file that is a symlink out of the folder.
    fs::create_dir_all(roots.workspace.join("default")).unwrap();
    let ws = roots.workspace.join("default/summarization.md.tpl");
    symlink(&secret, &ws).unwrap();
    // A profile folder that is a symlink out of the folder.
    let outside = roots.base.join("outside");
    write(&outside, "p", "outside: {{ session_title }}").unwrap();
    symlink(outside.join("p"), roots.global.join("default")).unwrap();

    let rendered = roots.profiles().render("default", &ctx()).unwrap();
    assert_eq!(
        (rendered.tier, rendered.warnings),
        (
            Tier::Default,
            vec![
                format!(
                    "ignoring workspace template {}: refused: it resolves to {}, outside the profile folder {}; \
                     templates must lie inside it; using the compiled-in default template instead",
                    ws.display(),
                    secret.display(),
                    roots.workspace.display()
                ),
                format!(
                    "ignoring global template {}: refused: it resolves to {}, outside the profile folder {}; \
                     templates must lie inside it; using the compiled-in default template instead",
                    roots.global.join("default/summarization.md.tpl").display(),
                    outside.join("p/summarization.md.tpl").display(),
                    roots.global.display()
                ),
            ]
        )
    );
    assert!(!rendered.text.contains("hunter2"));

    // A symlink that stays inside the folder (a profile alias) is fine, and so is a symlinked root.
    let terse = write(&roots.global, "terse", "terse: {{ session_title }}").unwrap();
    symlink(roots.global.join("terse"), roots.global.join("short")).unwrap();
    let linked_root = roots.base.join("linked-profiles");
    symlink(&roots.global, &linked_root).unwrap();
    let profiles = Profiles::with_roots(None, Some(linked_root));
    let expected = RenderedPrompt {
        text: "terse: Retry".to_owned(),
        tier: Tier::Global,
        path: Some(terse),
        warnings: vec![],
        uses_previous_summary: false,
        outline: None,
    };
    assert_eq!(profiles.render("short", &ctx()).unwrap(), expected);
}

#[test]
fn validate_reports_the_line_of_a_syntax_error() {
    let roots = Roots::new().unwrap();
    let ws = write(
        &roots.workspace,
        "default",
        "Summarize.\n\n{% for f in files %}\n- {{ f | join(', ' }}\n{% endfor %}\nEnd.\n",
    )
    .unwrap();
    let expected = vec![Diagnostic {
        tier: Some(Tier::Workspace),
        path: Some(ws.clone()),
        line: Some(4),
        message: "syntax error: unexpected `}`, expected `,`".to_owned(),
    }];
    let got = roots.profiles().validate("default");
    assert_eq!(got, expected);
    assert_eq!(
        got[0].to_string(),
        format!("workspace template {}:4: syntax error: unexpected `}}`, expected `,`", ws.display())
    );
}

#[test]
fn validate_checks_every_tier_and_both_sides_of_conditions() {
    let roots = Roots::new().unwrap();
    // Fine when instructions are present, fails when they are absent (`none | length`).
    let ws = write(&roots.workspace, "focus", "Goal.\n{{ custom_instructions | length }}\n").unwrap();
    // Fails in every case.
    let global = write(&roots.global, "focus", "{{ session_title }}\n{{ nope }}").unwrap();
    let got = roots.profiles().validate("focus");
    let expected = vec![
        Diagnostic {
            tier: Some(Tier::Workspace),
            path: Some(ws),
            line: Some(2),
            message: "invalid operation: cannot calculate length of value of type none (at `length`)"
                .to_owned(),
        },
        Diagnostic {
            tier: Some(Tier::Global),
            path: Some(global),
            line: Some(2),
            message: "undefined value (at `nope`)".to_owned(),
        },
    ];
    assert_eq!(got, expected);
}

#[test]
fn validate_is_empty_for_good_templates_and_flags_missing_or_bad_names() {
    let roots = Roots::new().unwrap();
    write(&roots.workspace, "default", "{% if previous_summary %}{{ previous_summary }}{% endif %}").unwrap();
    assert_eq!(roots.profiles().validate("default"), vec![]);
    assert_eq!(Profiles::with_roots(None, None).validate("default"), vec![]);

    let missing = roots.profiles().validate("terse");
    assert_eq!(missing.len(), 1);
    assert_eq!((missing[0].tier, missing[0].line), (None, None));
    assert!(missing[0].message.starts_with("profile \"terse\" not found"), "{}", missing[0].message);

    let bad = roots.profiles().validate("a/b");
    assert_eq!(
        bad,
        vec![Diagnostic {
            tier: None,
            path: None,
            line: None,
            message: validate_profile_name("a/b").unwrap_err().to_string(),
        }]
    );
}

#[test]
fn list_shows_every_template_by_tier() {
    let roots = Roots::new().unwrap();
    let ws_terse = write(&roots.workspace, "terse", "x").unwrap();
    let ws_default = write(&roots.workspace, "default", "x").unwrap();
    let global_terse = write(&roots.global, "terse", "x").unwrap();
    let global_review = write(&roots.global, "review.v2", "x").unwrap();
    fs::create_dir_all(roots.global.join("empty")).unwrap(); // no template: not a profile
    fs::create_dir_all(roots.global.join("bad name")).unwrap();
    fs::write(roots.global.join("bad name/summarization.md.tpl"), "x").unwrap();

    let entry = |name: &str, tier, path: Option<PathBuf>| ProfileEntry { name: name.to_owned(), tier, path };
    assert_eq!(
        roots.profiles().list(),
        vec![
            entry("default", Tier::Workspace, Some(ws_default)),
            entry("terse", Tier::Workspace, Some(ws_terse)),
            entry("review.v2", Tier::Global, Some(global_review)),
            entry("terse", Tier::Global, Some(global_terse)),
            entry("compact", Tier::Default, None),
            entry("default", Tier::Default, None),
        ]
    );
    assert_eq!(
        Profiles::with_roots(None, None).list(),
        vec![entry("compact", Tier::Default, None), entry("default", Tier::Default, None)]
    );
}

#[test]
fn small_models_get_the_compact_profile_unless_the_default_is_the_users() {
    let roots = Roots::new().unwrap();
    let profiles = roots.profiles();
    let small = Some(SMALL_MODEL_PARAMETERS - 1);
    assert_eq!(profiles.for_model("default", Some(134_515_008)), COMPACT_PROFILE);
    assert_eq!(profiles.for_model("default", small), COMPACT_PROFILE);
    assert_eq!(profiles.for_model("default", Some(SMALL_MODEL_PARAMETERS)), "default");
    assert_eq!(profiles.for_model("default", None), "default", "a remote model's size is unknown");
    assert_eq!(profiles.for_model("terse", small), "terse", "a chosen profile is kept");

    // The compiled-in compact template renders, with and without an earlier summary, and says less.
    let prompt = profiles.render(COMPACT_PROFILE, &ctx()).unwrap();
    assert_eq!((prompt.tier, prompt.warnings.len()), (Tier::Default, 0));
    assert!(prompt.text.contains("## Goal") && prompt.text.contains("## Next"), "{}", prompt.text);
    assert!(!prompt.text.contains("## Decisions"), "{}", prompt.text);
    assert!(prompt.uses_previous_summary);
    assert!(profiles.validate(COMPACT_PROFILE).is_empty());
    let previous = SummaryContext { previous_summary: Some("Fixed src/a.rs.".to_owned()), ..ctx() };
    assert!(profiles.render(COMPACT_PROFILE, &previous).unwrap().text.contains("Fixed src/a.rs."));
    // Its answer is constrained to its sections, which the prompt names in the same order; the default
    // template's answer is not.
    assert_eq!(prompt.outline, Some(compact_outline()));
    let headings: Vec<usize> = compact_outline()
        .sections
        .iter()
        .map(|s| {
            prompt.text.find(&format!("\"## {}\"", s.heading)).unwrap_or_else(|| panic!("{}", s.heading))
        })
        .collect();
    assert!(headings.is_sorted(), "{headings:?}");
    assert_eq!(profiles.render("default", &ctx()).unwrap().outline, None);

    // A `default` template of the user's, in either tier, is their prompt for every model.
    write(&roots.global, "default", "Mine.").unwrap();
    assert_eq!(profiles.for_model("default", small), "default");
    // ... and a user `compact` template replaces the compiled-in one.
    write(&roots.workspace, "compact", "Short.").unwrap();
    assert_eq!(profiles.render(COMPACT_PROFILE, &ctx()).unwrap().text, "Short.");
    assert_eq!(
        profiles.render(COMPACT_PROFILE, &ctx()).unwrap().outline,
        None,
        "the user's prompt says its format"
    );
}

#[test]
fn tier_display_names() {
    let names: Vec<String> =
        [Tier::Workspace, Tier::Global, Tier::Default].iter().map(ToString::to_string).collect();
    assert_eq!(names, ["workspace", "global", "default"]);
}
