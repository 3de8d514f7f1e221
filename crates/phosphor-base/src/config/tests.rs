use super::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::fs;

const FILE: &str = "/cfg/phosphor.json";

#[test]
fn defaults_are_the_specs() {
    let expected = json!({
        "options": {
            "disable_auto_summarize": false,
            "summarize_threshold": 0.8,
            "summarize_prepare_at": 0.0,
            "summarize_model": "main",
            "summarize_tool_output_chars": 200,
            "summarize_tool_output_aggressive_chars": 50,
            "summarize_assistant_text_chars": 600,
            "summarize_keep_recent_tokens": 0,
            "summarize_max_per_turn": 8,
            "summarize_state_max_tokens": 8000,
            "summarize_repeat_penalty": 1.0,
            "mask_threshold": 0.4,
            "mask_keep_recent_tokens": 8000,
            "profile": "default"
        },
        "embedded_models": { "inference": { "enabled": false, "gpu": false, "engine": "auto" } },
        "providers": {},
        "models": {}
    });
    assert_eq!(serde_json::to_value(Config::default()).unwrap(), expected);
    assert_eq!(parse_str("{}", Path::new(FILE)).unwrap(), (Config::default(), vec![]));
    assert_eq!(
        load(&ConfigSources::default()).unwrap(),
        LoadedConfig { config: Config::default(), warnings: vec![], origins: BTreeMap::new() }
    );
}

/// Parses `input` as `/cfg/phosphor.json` and expects an error with exactly the text `expected`.
fn check_error(input: &str, expected: &str) {
    let error = parse_str(input, Path::new(FILE)).unwrap_err();
    assert_eq!(error.to_string(), expected, "input: {input}");
}

const OPENAI: &str = r#""providers": { "openai": { "base_url": "https://api.openai.com/v1" } }"#;

#[test]
fn validation_errors_name_file_path_value_and_what_is_allowed() {
    let threshold = |value: &str| format!(r#"{{ "options": {{ "summarize_threshold": {value} }} }}"#);
    for value in ["1.5", "0", "-0.25", "1.0000001"] {
        check_error(
            &threshold(value),
            &format!(
                "/cfg/phosphor.json: options.summarize_threshold: {value} is out of range; \
                 allowed: a number > 0 and <= 1"
            ),
        );
    }
    check_error(
        r#"{ "options": { "summarize_tool_output_chars": 0 } }"#,
        "/cfg/phosphor.json: options.summarize_tool_output_chars: 0 is out of range; allowed: a whole number > 0",
    );
    check_error(
        r#"{ "options": { "summarize_assistant_text_chars": 0 } }"#,
        "/cfg/phosphor.json: options.summarize_assistant_text_chars: 0 is out of range; \
         allowed: a whole number > 0",
    );
    check_error(
        r#"{ "options": { "summarize_max_per_turn": 0 } }"#,
        "/cfg/phosphor.json: options.summarize_max_per_turn: 0 is out of range; allowed: a whole number >= 1",
    );
    check_error(
        r#"{ "options": { "summarize_repeat_penalty": 0.9 } }"#,
        "/cfg/phosphor.json: options.summarize_repeat_penalty: 0.9 is out of range; \
         allowed: a number >= 1 (1 is off) and <= 2",
    );
    for value in ["-1", "1.5"] {
        check_error(
            &format!(r#"{{ "options": {{ "mask_threshold": {value} }} }}"#),
            &format!(
                "/cfg/phosphor.json: options.mask_threshold: {value} is out of range; \
                 allowed: 0 (off), or a number > 0 and <= 1"
            ),
        );
    }
    for value in ["-0.1", "0.8", "0.9", "1.5"] {
        check_error(
            &format!(r#"{{ "options": {{ "summarize_prepare_at": {value} }} }}"#),
            &format!(
                "/cfg/phosphor.json: options.summarize_prepare_at: {value} is out of range; \
                 allowed: 0 (off), or a number > 0 and < options.summarize_threshold (0.8)"
            ),
        );
    }
    check_error(
        r#"{ "options": { "summarize_prepare_at": 0.6, "summarize_threshold": 0.5 } }"#,
        "/cfg/phosphor.json: options.summarize_prepare_at: 0.6 is out of range; \
         allowed: 0 (off), or a number > 0 and < options.summarize_threshold (0.5)",
    );
    check_error(
        r#"{ "options": { "summarize_state_max_tokens": 100 } }"#,
        "/cfg/phosphor.json: options.summarize_state_max_tokens: 100 is out of range; \
         allowed: a whole number >= 256",
    );
    check_error(
        r#"{ "options": { "summarize_tool_output_aggressive_chars": 0 } }"#,
        "/cfg/phosphor.json: options.summarize_tool_output_aggressive_chars: 0 is out of range; \
         allowed: a whole number > 0 and <= options.summarize_tool_output_chars (200)",
    );
    check_error(
        r#"{ "options": { "summarize_tool_output_aggressive_chars": 300 } }"#,
        "/cfg/phosphor.json: options.summarize_tool_output_aggressive_chars: 300 is out of range; \
         allowed: a whole number > 0 and <= options.summarize_tool_output_chars (200)",
    );
    check_error(
        r#"{ "options": { "summarize_tool_output_chars": 40 } }"#,
        "/cfg/phosphor.json: options.summarize_tool_output_chars: 40 is out of range; \
         allowed: a whole number >= options.summarize_tool_output_aggressive_chars (50)",
    );
    check_error(
        r#"{ "options": { "summarize_tool_output_chars": -5 } }"#,
        "/cfg/phosphor.json: options.summarize_tool_output_chars: invalid value: integer `-5`, expected usize",
    );
    check_error(
        r#"{ "options": { "summarize_threshold": "high" } }"#,
        "/cfg/phosphor.json: options.summarize_threshold: invalid type: string \"high\", expected f64",
    );
    check_error(
        r#"{ "options": [] }"#,
        "/cfg/phosphor.json: options: invalid type: sequence, expected a JSON object",
    );
    check_error(
        r#"{ "providers": { "openai": ["https://api.openai.com/v1"] } }"#,
        "/cfg/phosphor.json: providers.openai: invalid type: sequence, expected a JSON object",
    );
    check_error(
        r#"{ "models": { "large": ["openai", "gpt-4.1", 1000, 100] } }"#,
        "/cfg/phosphor.json: models.large: invalid type: sequence, expected a JSON object",
    );
    for value in [r#""medium""#, r#""Main""#, "3", "null"] {
        check_error(
            &format!(r#"{{ "options": {{ "summarize_model": {value} }} }}"#),
            &format!(
                "/cfg/phosphor.json: options.summarize_model: {value} is not a known model; \
                 allowed: main, large, small, embedded"
            ),
        );
    }
    for value in [r#""vulkan""#, r#""llama.cpp""#, "true"] {
        check_error(
            &format!(r#"{{ "embedded_models": {{ "inference": {{ "engine": {value} }} }} }}"#),
            &format!(
                "/cfg/phosphor.json: embedded_models.inference.engine: {value} is not a known engine; \
                 allowed: auto, mistralrs, llamacpp"
            ),
        );
    }
    check_error(
        r#"{ "providers": { "x": { "base_url": "http://127.0.0.1:1/v1", "api": "grpc" } } }"#,
        "/cfg/phosphor.json: providers.x.api: \"grpc\" is not a known API; allowed: chat, anthropic, responses",
    );
    check_error(
        r#"{ "options": { "summarize_model": "embedded" } }"#,
        "/cfg/phosphor.json: options.summarize_model: \"embedded\" needs embedded_models.inference.enabled, \
         which is false; allowed: main, large, small, or embedded once embedded_models.inference.enabled is true",
    );
    check_error(
        r#"{ "embedded_models": { "inference": { "enabled": true } } }"#,
        "/cfg/phosphor.json: embedded_models.inference.enabled: true needs a model, and none is set; \
         allowed: false, or true with embedded_models.inference.model_repo or \
         embedded_models.inference.model_path set",
    );
    for value in ["\"\"", "null"] {
        check_error(
            &format!(
                r#"{{ "embedded_models": {{ "inference": {{ "enabled": true, "model_repo": {value} }} }} }}"#
            ),
            &format!(
                "/cfg/phosphor.json: embedded_models.inference.model_repo: {value} leaves the enabled local \
                 model without a model; allowed: a Hugging Face repo id or short name, or \
                 embedded_models.inference.model_path set"
            ),
        );
    }
    // One rule with the prompt crate: a name it would refuse (here "my notes") is refused here.
    for (value, reason) in [
        (r#""""#, "it is empty"),
        (r#""..""#, "it names the current or parent folder"),
        (r#"".""#, "it names the current or parent folder"),
        (r#""team/a""#, "it contains the path separator '/'"),
        (r#""a\\b""#, "it contains the path separator '\\\\'"),
        (r#""a\u0000b""#, "it contains the character '\\0'"),
        (r#""my notes""#, "it contains the character ' '"),
        (r#""C:evil""#, "it is an absolute path"),
    ] {
        check_error(
            &format!(r#"{{ "options": {{ "profile": {value} }} }}"#),
            &format!(
                "/cfg/phosphor.json: options.profile: {value} is not a valid profile name ({reason}); allowed: 1 to \
                 64 ASCII letters, digits, '-', '_' or '.', and is not '.' or '..'"
            ),
        );
    }
    let long = "a".repeat(MAX_PROFILE_NAME_LEN + 1);
    assert_eq!(check_profile_name(&long), Err("it is 65 characters long".to_owned()));
    assert_eq!(check_profile_name(&long[1..]), Ok(()));
    assert_eq!(check_profile_name("team-notes_v2.1"), Ok(()));
    check_error(
        r#"{ "providers": { "openai": { "base_url": "api.openai.com" } } }"#,
        "/cfg/phosphor.json: providers.openai.base_url: \"api.openai.com\" is not an http(s) URL; \
         allowed: a URL such as https://api.openai.com/v1",
    );
    check_error(
        r#"{ "providers": { "openai": { "base_url": "https://api.openai.com/v1", "api_key_env": "" } } }"#,
        "/cfg/phosphor.json: providers.openai.api_key_env: \"\" is empty; allowed: the name of an environment \
         variable such as OPENAI_API_KEY, or no key for keyless servers",
    );
    check_error(
        r#"{ "models": { "large": { "provider": "azure", "model": "gpt-4.1", "context_window": 1000 } } }"#,
        "/cfg/phosphor.json: models.large.provider: \"azure\" names no entry in providers; \
         allowed: a key of providers (none are configured)",
    );
    check_error(
        &format!(
            r#"{{ {OPENAI}, "models": {{ "small": {{ "provider": "azure", "model": "m", "context_window": 9 }} }} }}"#
        ),
        "/cfg/phosphor.json: models.small.provider: \"azure\" names no entry in providers; \
         allowed: a key of providers: \"openai\"",
    );
    check_error(
        &format!(
            r#"{{ {OPENAI}, "models": {{ "large": {{ "provider": "openai", "model": "gpt-4.1" }} }} }}"#
        ),
        "/cfg/phosphor.json: models.large: missing field `context_window`",
    );
    check_error(
        &format!(
            r#"{{ {OPENAI}, "models": {{ "large": {{ "provider": "openai", "model": "", "context_window": 9 }} }} }}"#
        ),
        "/cfg/phosphor.json: models.large.model: \"\" is empty; \
         allowed: the model id the provider knows, such as gpt-4.1",
    );
    check_error(
        &format!(
            r#"{{ {OPENAI}, "models": {{ "large": {{ "provider": "openai", "model": "m", "context_window": 0 }} }} }}"#
        ),
        "/cfg/phosphor.json: models.large.context_window: 0 is out of range; allowed: a whole number of tokens > 0",
    );
    check_error(
        r#"{ "models": { "windows": { "*": { "context_window": 9 } } } }"#,
        "/cfg/phosphor.json: models.windows.*: {\"context_window\":9} matches every model or none; name the models it is for; \
         allowed: a model id, or a pattern where * stands for any run of characters, such as claude-*",
    );
    check_error(
        r#"{ "models": { "windows": { "claude-*": { "context_window": 0 } } } }"#,
        "/cfg/phosphor.json: models.windows.claude-*.context_window: 0 is out of range; \
         allowed: a whole number of tokens > 0",
    );
    check_error(
        r#"[{ "options": {} }]"#,
        "/cfg/phosphor.json: the top level is an array; allowed: a JSON object",
    );
}

#[test]
fn malformed_json_names_line_and_column() {
    check_error(
        "{\n  \"options\": {\n    \"summarize_threshold\": 0.5,\n  }\n}",
        "/cfg/phosphor.json:4:3: malformed JSON: trailing comma",
    );
    check_error(
        "{\n  \"options\": { \"profile\": \"x\" \"summarize_threshold\": 0.5 }\n}",
        "/cfg/phosphor.json:2:31: malformed JSON: expected `,` or `}`",
    );
    check_error("", "/cfg/phosphor.json:1:0: malformed JSON: EOF while parsing a value");
}

/// Parses `input` and expects it to load, with unknown-key warnings at exactly `expected` JSON paths.
fn check_warnings(input: &str, expected: &[&str]) {
    let (_, warnings) = parse_str(input, Path::new(FILE)).unwrap();
    let expected: Vec<ConfigWarning> = expected
        .iter()
        .map(|path| ConfigWarning::UnknownKey { file: PathBuf::from(FILE), json_path: (*path).to_owned() })
        .collect();
    assert_eq!(warnings, expected, "input: {input}");
}

#[test]
fn unknown_keys_are_warnings_with_their_path() {
    check_warnings(r#"{ "$schema": "https://example.com/phosphor.schema.json" }"#, &[]);
    check_warnings(r#"{ "$schema": 3, "options": { "summarize_threshold": 0.5 } }"#, &[]);
    check_warnings(
        &format!(
            r#"{{
                "option": {{ "a": 1 }},
                "options": {{ "summarize_treshold": 0.5, "$schema": "x" }},
                {OPENAI},
                "models": {{ "large": {{ "provider": "openai", "model": "m", "context_window": 9, "temperature": 0 }} }}
            }}"#
        ),
        &["models.large.temperature", "option", "options.$schema", "options.summarize_treshold"],
    );
    let warning = ConfigWarning::UnknownKey { file: PathBuf::from(FILE), json_path: "option".to_owned() };
    assert_eq!(warning.to_string(), "/cfg/phosphor.json: option: unknown key, ignored");
}

/// A temporary global config dir and workspace, with files written in them.
struct Layout {
    dir: tempfile::TempDir,
}

impl Layout {
    fn new() -> Layout {
        Layout { dir: tempfile::tempdir().unwrap() }
    }
    fn global_dir(&self) -> PathBuf {
        self.dir.path().join("config")
    }
    fn workspace_dir(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }
    /// The file of a tier: `global`, `workspace` (`.phosphor/phosphor.json`), `workspace-root`
    /// (`./phosphor.json`) or `explicit`.
    fn path(&self, tier: &str) -> PathBuf {
        match tier {
            "global" => self.global_dir().join("phosphor").join(FILE_NAME),
            "workspace" => self.workspace_dir().join(".phosphor").join(FILE_NAME),
            "workspace-root" => self.workspace_dir().join(FILE_NAME),
            "explicit" => self.dir.path().join("explicit.json"),
            other => panic!("no tier {other}"),
        }
    }
    fn write(&self, tier: &str, text: &str) {
        let path = self.path(tier);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    fn sources(&self, explicit: bool) -> ConfigSources {
        let explicit = explicit.then(|| self.path("explicit"));
        ConfigSources::discover_with_global_dir(
            Some(&self.global_dir()),
            &self.workspace_dir(),
            explicit.as_deref(),
        )
    }
}

/// Writes `files` (tier, JSON) and loads them; expects `expected` and, for each JSON path set, its tier.
fn check_merge(files: &[(&str, &str)], expected: Config, expected_origins: &[(&str, &str)]) {
    let layout = Layout::new();
    for (tier, text) in files {
        layout.write(tier, text);
    }
    let has_explicit = files.iter().any(|(tier, _)| *tier == "explicit");
    let loaded = load(&layout.sources(has_explicit)).unwrap();
    let origins =
        expected_origins.iter().map(|(path, tier)| ((*path).to_owned(), layout.path(tier))).collect();
    assert_eq!(loaded, LoadedConfig { config: expected, warnings: vec![], origins });
}

#[test]
fn tiers_merge_key_by_key_global_then_workspace_then_explicit() {
    check_merge(
        &[
            ("global", r#"{ "options": { "summarize_threshold": 0.5, "summarize_model": "small" } }"#),
            ("workspace", r#"{ "options": { "summarize_threshold": 0.6 } }"#),
        ],
        Config {
            options: Options {
                summarize_threshold: 0.6,
                summarize_model: SummarizeModel::Small,
                ..Options::default()
            },
            ..Config::default()
        },
        &[("options.summarize_model", "global"), ("options.summarize_threshold", "workspace")],
    );
    check_merge(
        &[
            (
                "global",
                r#"{ "options": { "summarize_threshold": 0.5, "summarize_tool_output_chars": 300 } }"#,
            ),
            ("workspace", r#"{ "options": { "summarize_threshold": 0.6, "profile": "terse" } }"#),
            ("explicit", r#"{ "$schema": "x", "options": { "summarize_threshold": 0.7 } }"#),
        ],
        Config {
            options: Options {
                summarize_threshold: 0.7,
                summarize_tool_output_chars: 300,
                profile: "terse".to_owned(),
                ..Options::default()
            },
            ..Config::default()
        },
        &[
            ("options.profile", "workspace"),
            ("options.summarize_threshold", "explicit"),
            ("options.summarize_tool_output_chars", "global"),
        ],
    );
}

#[test]
fn objects_merge_and_everything_else_replaces() {
    let model = |name: &str| ModelConfig {
        provider: "openai".to_owned(),
        model: name.to_owned(),
        context_window: 1000,
        max_output_tokens: 4096,
    };
    check_merge(
        &[
            (
                "global",
                r#"{
                    "providers": { "openai": { "base_url": "https://a/v1", "headers": { "x-a": "1" } } },
                    "models": {
                        "large": { "provider": "openai", "model": "big", "context_window": 1000 },
                        "small": { "provider": "openai", "model": "little", "context_window": 1000 }
                    }
                }"#,
            ),
            (
                "workspace",
                r#"{
                    "providers": { "openai": { "headers": { "x-b": "2" } }, "local": { "base_url": "http://l" } },
                    "models": { "large": null, "small": { "model": "tiny" } }
                }"#,
            ),
        ],
        Config {
            providers: BTreeMap::from([
                (
                    "local".to_owned(),
                    ProviderConfig { base_url: "http://l".to_owned(), ..Default::default() },
                ),
                (
                    "openai".to_owned(),
                    ProviderConfig {
                        base_url: "https://a/v1".to_owned(),
                        api_key_env: None,
                        headers: BTreeMap::from([
                            ("x-a".to_owned(), "1".to_owned()),
                            ("x-b".to_owned(), "2".to_owned()),
                        ]),
                        ..ProviderConfig::default()
                    },
                ),
            ]),
            models: Models { large: None, small: Some(model("tiny")), ..Models::default() },
            ..Config::default()
        },
        &[
            ("models.large", "workspace"),
            ("models.small.context_window", "global"),
            ("models.small.model", "workspace"),
            ("models.small.provider", "global"),
            ("providers.local.base_url", "workspace"),
            ("providers.openai.base_url", "global"),
            ("providers.openai.headers.x-a", "global"),
            ("providers.openai.headers.x-b", "workspace"),
        ],
    );
    // An object replaces a scalar, and forgets its origin.
    check_merge(
        &[
            ("global", r#"{ "models": { "large": null } }"#),
            (
                "workspace",
                r#"{ "providers": { "openai": { "base_url": "https://a/v1" } },
                     "models": { "large": { "provider": "openai", "model": "big", "context_window": 1000 } } }"#,
            ),
        ],
        Config {
            providers: BTreeMap::from([(
                "openai".to_owned(),
                ProviderConfig { base_url: "https://a/v1".to_owned(), ..Default::default() },
            )]),
            models: Models { large: Some(model("big")), small: None, ..Models::default() },
            ..Config::default()
        },
        &[
            ("models.large.context_window", "workspace"),
            ("models.large.model", "workspace"),
            ("models.large.provider", "workspace"),
            ("providers.openai.base_url", "workspace"),
        ],
    );
}

/// Writes `files` (tier, JSON) and expects loading them to fail with `expected`, where `{global}`,
/// `{workspace}` and `{explicit}` stand for the files' paths.
fn check_merge_error(files: &[(&str, &str)], expected: &str) {
    let layout = Layout::new();
    for (tier, text) in files {
        layout.write(tier, text);
    }
    let has_explicit = files.iter().any(|(tier, _)| *tier == "explicit");
    let error = load(&layout.sources(has_explicit)).unwrap_err();
    let expected = ["global", "workspace", "explicit"].iter().fold(expected.to_owned(), |text, tier| {
        text.replace(&format!("{{{tier}}}"), &layout.path(tier).display().to_string())
    });
    assert_eq!(error.to_string(), expected);
}

#[test]
fn errors_on_the_merged_config_name_the_file_that_set_the_value() {
    check_merge_error(
        &[
            (
                "global",
                r#"{ "options": { "summarize_tool_output_chars": 300, "summarize_tool_output_aggressive_chars": 100 } }"#,
            ),
            ("workspace", r#"{ "options": { "summarize_tool_output_chars": 80 } }"#),
        ],
        "{workspace}: options.summarize_tool_output_chars: 80 is out of range; \
         allowed: a whole number >= options.summarize_tool_output_aggressive_chars (100)",
    );
    check_merge_error(
        &[
            ("global", r#"{ "options": { "summarize_tool_output_chars": 80 } }"#),
            ("workspace", r#"{ "options": { "summarize_tool_output_aggressive_chars": 100 } }"#),
        ],
        "{workspace}: options.summarize_tool_output_aggressive_chars: 100 is out of range; \
         allowed: a whole number > 0 and <= options.summarize_tool_output_chars (80)",
    );
    check_merge_error(
        &[
            (
                "global",
                r#"{ "options": { "summarize_model": "embedded" },
                     "embedded_models": { "inference": { "enabled": true, "model_repo": "SmolLM2-135M-Instruct" } } }"#,
            ),
            ("explicit", r#"{ "embedded_models": { "inference": { "enabled": false } } }"#),
        ],
        "{explicit}: embedded_models.inference.enabled: false turns off the local model that \
         options.summarize_model \"embedded\" needs; allowed: true, or false once options.summarize_model is \
         main, large or small",
    );
    check_merge_error(
        &[
            (
                "global",
                r#"{ "providers": { "openai": { "base_url": "https://a/v1" } },
                     "models": { "large": { "provider": "openai", "model": "big", "context_window": 1000 } } }"#,
            ),
            ("workspace", r#"{ "models": { "large": { "provider": "azure" } } }"#),
        ],
        "{workspace}: models.large.provider: \"azure\" names no entry in providers; \
         allowed: a key of providers: \"openai\"",
    );
    check_merge_error(
        &[
            ("global", r#"{ "options": { "summarize_threshold": 0.5 } }"#),
            ("workspace", r#"{ "options": { "summarize_threshold": "high" } }"#),
        ],
        "{workspace}: options.summarize_threshold: invalid type: string \"high\", expected f64",
    );
    check_merge_error(
        &[
            ("global", r#"{ "providers": { "openai": { "base_url": "https://a/v1" } } }"#),
            ("workspace", r#"{ "models": { "small": { "provider": "openai", "model": "m" } } }"#),
        ],
        "{workspace}: models.small: missing field `context_window`",
    );
    check_merge_error(
        &[("global", "{}"), ("workspace", "{ \"options\": 1 ")],
        "{workspace}:1:15: malformed JSON: EOF while parsing an object",
    );
}

#[test]
fn a_type_error_overridden_by_a_later_tier_is_not_an_error() {
    check_merge(
        &[
            ("global", r#"{ "options": { "summarize_threshold": "high" } }"#),
            ("workspace", r#"{ "options": { "summarize_threshold": 0.5 } }"#),
        ],
        Config { options: Options { summarize_threshold: 0.5, ..Options::default() }, ..Config::default() },
        &[("options.summarize_threshold", "workspace")],
    );
}

#[test]
fn warnings_name_the_file_with_the_unknown_key() {
    let layout = Layout::new();
    layout.write("global", r#"{ "options": { "summarize_treshold": 0.5 } }"#);
    layout.write("workspace", r#"{ "option": { "profile": "x" } }"#);
    let loaded = load(&layout.sources(false)).unwrap();
    assert_eq!(
        loaded.warnings,
        vec![
            ConfigWarning::UnknownKey { file: layout.path("workspace"), json_path: "option".to_owned() },
            ConfigWarning::UnknownKey {
                file: layout.path("global"),
                json_path: "options.summarize_treshold".to_owned(),
            },
        ]
    );
}

/// Writes the tiers named in `files` and expects discovery to find `expected` (tier names, or None).
fn check_discovery(files: &[&str], explicit: bool, expected: [Option<&str>; 3]) {
    let layout = Layout::new();
    for tier in files {
        layout.write(tier, "{}");
    }
    let [global, workspace, explicit_tier] = expected.map(|tier| tier.map(|tier| layout.path(tier)));
    assert_eq!(layout.sources(explicit), ConfigSources { global, workspace, explicit: explicit_tier });
}

#[test]
fn discovery_prefers_dot_phosphor_over_the_workspace_root() {
    check_discovery(&[], false, [None, None, None]);
    check_discovery(&["global"], false, [Some("global"), None, None]);
    check_discovery(&["workspace-root"], false, [None, Some("workspace-root"), None]);
    check_discovery(&["workspace-root", "workspace"], false, [None, Some("workspace"), None]);
    check_discovery(
        &["global", "workspace", "workspace-root"],
        true,
        [Some("global"), Some("workspace"), Some("explicit")],
    );
    check_discovery(&["global"], true, [Some("global"), None, Some("explicit")]);
}

#[test]
fn the_workspace_root_file_is_used_when_there_is_no_dot_phosphor_file() {
    check_merge(
        &[
            ("global", r#"{ "options": { "profile": "g" } }"#),
            ("workspace-root", r#"{ "options": { "profile": "w" } }"#),
        ],
        Config { options: Options { profile: "w".to_owned(), ..Options::default() }, ..Config::default() },
        &[("options.profile", "workspace-root")],
    );
}

#[test]
fn missing_discovered_files_are_skipped_and_a_missing_explicit_file_is_an_error() {
    let layout = Layout::new();
    let sources = ConfigSources {
        global: Some(layout.path("global")),
        workspace: Some(layout.path("workspace")),
        explicit: None,
    };
    assert_eq!(load(&sources).unwrap().config, Config::default());
    let sources = ConfigSources { explicit: Some(layout.path("explicit")), ..sources };
    assert_eq!(
        load(&sources).unwrap_err().to_string(),
        format!("{}: the configuration file does not exist", layout.path("explicit").display())
    );
    let sources = ConfigSources { explicit: Some(layout.dir.path().to_path_buf()), ..sources };
    let error = load(&sources).unwrap_err();
    assert!(matches!(&error, ConfigError::Read { file, .. } if file == layout.dir.path()), "{error:?}");
}

#[test]
fn the_example_loads_without_warnings_and_sets_every_key() {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/phosphor.json"));
    let sources = ConfigSources { explicit: Some(path.to_path_buf()), ..ConfigSources::default() };
    let loaded = load(&sources).unwrap();
    assert_eq!(loaded.warnings, vec![]);
    let mut example: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    example.as_object_mut().unwrap().remove(SCHEMA_KEY);
    assert_eq!(serde_json::to_value(&loaded.config).unwrap(), example);
    assert_eq!(loaded.config.models.large.as_ref().map(|m| m.context_window), Some(1_047_576));
}

#[test]
fn the_checked_in_schema_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schema/phosphor.schema.json");
    let generated = format!("{}\n", serde_json::to_string_pretty(&json_schema()).unwrap());
    if std::env::var_os("PHOSPHOR_UPDATE_SCHEMA").is_some_and(|value| value == "1") {
        fs::write(path, &generated).unwrap();
    }
    let checked_in = fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{path} is stale or missing; regenerate it with\n  \
         PHOSPHOR_UPDATE_SCHEMA=1 cargo test -p phosphor-base config::tests::the_checked_in_schema_is_current"
    );
}

#[test]
fn the_schema_accepts_dollar_schema_and_states_the_ranges() {
    let schema = json_schema();
    assert_eq!(schema["properties"]["$schema"]["type"], json!("string"));
    let threshold = &schema["$defs"]["Options"]["properties"]["summarize_threshold"];
    assert_eq!((threshold["exclusiveMinimum"].clone(), threshold["maximum"].clone()), (json!(0), json!(1)));
}
