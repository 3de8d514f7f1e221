//! Model resolution without a network: offline mode, a refused server, and the Hugging Face cache.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use phosphor_base::config::{Engine, InferenceConfig};
use phosphor_embedded::{EmbeddedError, HubSettings, ModelSource, ResolvedModel, default_model, resolve};
use pretty_assertions::assert_eq;

fn repo_config(repo: &str) -> InferenceConfig {
    InferenceConfig { enabled: true, model_repo: Some(repo.to_owned()), ..InferenceConfig::default() }
}

/// Settings built from the variables given, as `HubSettings::from_env` would build them from the environment.
fn settings(pairs: &[(&str, String)]) -> HubSettings {
    HubSettings::from_vars(|name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone()))
}

/// An endpoint on a loopback port nobody listens on.
fn closed_endpoint() -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    drop(listener);
    Ok(format!("http://127.0.0.1:{port}"))
}

#[test]
fn offline_mode_never_touches_the_network_and_says_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    // A server that would see any attempt.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let hub = settings(&[
        ("HF_HOME", home.path().display().to_string()),
        ("HF_ENDPOINT", endpoint),
        ("HF_HUB_OFFLINE", "1".into()),
    ]);
    assert!(hub.offline);

    let err = resolve(&InferenceConfig { enabled: true, ..InferenceConfig::default() }, &hub).unwrap_err();
    let cache = home.path().join("hub");
    assert_eq!(
        err.to_string(),
        format!(
            "{}/{} is not in the Hugging Face cache at {} and HF_HUB_OFFLINE is set, so it was not downloaded: \
             unset HF_HUB_OFFLINE to download it once, or set `embedded_models.inference.model_path` to a local \
             GGUF file",
            default_model().repo,
            default_model().file,
            cache.display()
        )
    );
    let err = resolve(&repo_config("someone/some-model-GGUF"), &hub).unwrap_err();
    assert!(
        matches!(&err, EmbeddedError::Offline { repo, file, cache_dir }
            if repo == "someone/some-model-GGUF" && file == "*.gguf" && *cache_dir == cache),
        "{err:?}"
    );
    assert!(
        listener.accept().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection was made"
    );
}

#[test]
fn a_refused_server_gives_an_error_naming_what_was_tried() {
    let home = tempfile::tempdir().unwrap();
    let endpoint = closed_endpoint().unwrap();
    let hub = settings(&[("HF_HOME", home.path().display().to_string()), ("HF_ENDPOINT", endpoint.clone())]);
    assert!(!hub.offline);
    let cache = home.path().join("hub");

    let err = resolve(&repo_config("Qwen2.5-0.5B-Instruct"), &hub).unwrap_err();
    let EmbeddedError::Download { repo, file, endpoint: tried, cache_dir, message } = &err else {
        panic!("expected a download error, got {err:?}");
    };
    assert_eq!(
        (repo.as_str(), file.as_str(), tried, cache_dir),
        ("Qwen/Qwen2.5-0.5B-Instruct-GGUF", "qwen2.5-0.5b-instruct-q4_k_m.gguf", &endpoint, &cache)
    );
    assert!(message.to_lowercase().contains("connection refused"), "{message}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "could not download Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf from {endpoint} \
             (not found in the Hugging Face cache at {} either): ",
            cache.display()
        )),
        "{text}"
    );
    assert!(
        text.ends_with(
            "; check the network and the repo and file names, or set `embedded_models.inference.model_path` to a \
             local GGUF file"
        ),
        "{text}"
    );

    // Without a file name the repo listing is what fails.
    let err = resolve(&repo_config("someone/some-model-GGUF"), &hub).unwrap_err();
    assert!(
        matches!(&err, EmbeddedError::Download { file, message, .. }
            if file == "*.gguf" && message.starts_with("listing the repo failed: ")),
        "{err:?}"
    );
    // Nothing half-written is left behind as a model.
    assert!(!has_gguf(home.path()), "a model file was left in the cache");
}

#[test]
fn unsupported_architectures_fail_before_any_download() {
    let home = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let hub = settings(&[
        ("HF_HOME", home.path().display().to_string()),
        ("HF_ENDPOINT", format!("http://{}", listener.local_addr().unwrap())),
    ]);
    // Only llama.cpp runs these: with `engine: mistralrs` they are refused before anything is fetched.
    for name in ["Gemma-2-2B", "Qwen3.5-0.8B", "Gemma-3-270M"] {
        let config = InferenceConfig { engine: Engine::Mistralrs, ..repo_config(name) };
        let err = resolve(&config, &hub).unwrap_err();
        assert!(matches!(err, EmbeddedError::EngineUnavailable { .. }), "{name}: {err:?}");
        assert!(err.to_string().contains("mistral.rs cannot load"), "{err}");
        assert!(err.to_string().ends_with("set it to `auto` or `llamacpp`"), "{err}");
    }
    assert!(
        listener.accept().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection was made"
    );
}

fn has_gguf(dir: &Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| {
        let path = e.path();
        if path.is_dir() { has_gguf(&path) } else { path.extension().is_some_and(|x| x == "gguf") }
    })
}

/// The test model (`cargo xtask fetch-test-model`), when `PHOSPHOR_TEST_MODEL` names it (see
/// `phosphor_base::testing::test_model`).
fn test_model() -> Option<PathBuf> {
    phosphor_base::testing::test_model("PHOSPHOR_TEST_MODEL")
}

/// Lays out `huggingface_hub`'s cache under `home` with `model` as `repo`'s `file`, linked from a blob.
fn fake_hf_home(home: &Path, repo: &str, file: &str, model: &Path) -> std::io::Result<PathBuf> {
    let repo_dir = home.join("hub").join(format!("models--{}", repo.replace('/', "--")));
    let commit = "0123456789abcdef0123456789abcdef01234567";
    std::fs::create_dir_all(repo_dir.join("blobs"))?;
    std::fs::create_dir_all(repo_dir.join("refs"))?;
    std::fs::create_dir_all(repo_dir.join("snapshots").join(commit))?;
    let blob = repo_dir.join("blobs").join("5f0e8c2b9a");
    std::os::unix::fs::symlink(std::fs::canonicalize(model)?, &blob)?;
    let pointer = repo_dir.join("snapshots").join(commit).join(file);
    std::os::unix::fs::symlink(&blob, &pointer)?;
    std::fs::write(repo_dir.join("refs").join("main"), commit)?;
    Ok(pointer)
}

#[test]
fn a_model_in_the_huggingface_cache_resolves_without_network() {
    let Some(model) = test_model() else { return };
    let home = tempfile::tempdir().unwrap();
    let repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF";
    let file = "SmolLM2-135M-Instruct.Q4_1.gguf";
    let pointer = fake_hf_home(home.path(), repo, file, &model).unwrap();
    // Not offline: the closed endpoint would fail any attempt to use the network.
    let hub = settings(&[
        ("HF_HOME", home.path().display().to_string()),
        ("HF_ENDPOINT", closed_endpoint().unwrap()),
    ]);

    let expected = ResolvedModel {
        path: pointer,
        name: format!("{repo}:{file}"),
        source: ModelSource::Cached { repo: repo.to_owned(), file: file.to_owned() },
    };
    assert_eq!(resolve(&repo_config(&format!("{repo}:{file}")), &hub).unwrap(), expected);
    assert_eq!(resolve(&repo_config(repo), &hub).unwrap(), expected);
    // model_path wins over model_repo.
    let config = InferenceConfig { model_path: Some(model.clone()), ..repo_config("Gemma-2-2B") };
    assert_eq!(resolve(&config, &hub).unwrap().source, ModelSource::LocalFile);
}

/// A GGUF file with the given metadata strings and integers, and no tensors.
fn tiny_gguf(strings: &[(&str, &str)], integers: &[(&str, u32)]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&((strings.len() + integers.len()) as u64).to_le_bytes());
    let put_str = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    for (key, value) in strings {
        put_str(&mut out, key);
        out.extend_from_slice(&8u32.to_le_bytes());
        put_str(&mut out, value);
    }
    for (key, value) in integers {
        put_str(&mut out, key);
        out.extend_from_slice(&4u32.to_le_bytes());
        out.extend_from_slice(&value.to_le_bytes());
    }
    out
}

#[tokio::test]
async fn local_files_are_checked_before_the_engine_starts() {
    let dir = tempfile::tempdir().unwrap();
    let hub = HubSettings { offline: true, ..settings(&[("HF_HOME", dir.path().display().to_string())]) };
    let load = |file: &str, bytes: Vec<u8>| {
        let path = dir.path().join(file);
        std::fs::write(&path, bytes).unwrap();
        let config = InferenceConfig { enabled: true, model_path: Some(path), ..InferenceConfig::default() };
        let hub = hub.clone();
        async move { phosphor_embedded::load_with(&config, hub).await.unwrap_err() }
    };

    let odd = tiny_gguf(&[("general.architecture", "wavenet")], &[("wavenet.context_length", 8192)]);
    let err = load("odd.gguf", odd).await;
    assert!(
        matches!(&err, EmbeddedError::UnsupportedArchitecture { architecture, .. } if architecture == "wavenet"),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with(&format!(
            "{} is a `wavenet` model, which no engine in this build can run from GGUF",
            dir.path().join("odd.gguf").display()
        )),
        "{err}"
    );

    let err = load("no-window.gguf", tiny_gguf(&[("general.architecture", "llama")], &[])).await;
    assert_eq!(
        err.to_string(),
        format!(
            "{} has no `llama.context_length` metadata: it gives the context window",
            dir.path().join("no-window.gguf").display()
        )
    );

    let err = load("junk.gguf", b"not a model".to_vec()).await;
    assert!(matches!(err, EmbeddedError::Gguf { .. }), "{err:?}");

    let config = InferenceConfig {
        enabled: true,
        model_path: Some(dir.path().to_owned()),
        ..InferenceConfig::default()
    };
    let err = phosphor_embedded::load_with(&config, hub.clone()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("cannot read the model file {}: it is a directory, not a GGUF file", dir.path().display())
    );

    let disabled = InferenceConfig { enabled: false, ..config };
    let err = phosphor_embedded::load_with(&disabled, hub).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the embedded model is disabled: set `embedded_models.inference.enabled` to true to use it"
    );
}
