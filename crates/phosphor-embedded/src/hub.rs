//! Finding the model file: a local path, the Hugging Face cache, or a download.
//!
//! [`resolve`] never touches the network when the file is already local: `model_path` wins, then the Hugging
//! Face cache (the layout `huggingface_hub` writes: `<cache>/models--owner--name/snapshots/<commit>/<file>`), and
//! only then a download, which `HF_HUB_OFFLINE` forbids. A download goes to a `.part` file that is renamed into
//! the cache only once complete, and its size is checked against the server's, so a half-written file is never
//! used as a model.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hf_hub::api::Progress;
use hf_hub::api::sync::ApiBuilder;
use hf_hub::{Repo, RepoType};
use phosphor_base::config::InferenceConfig;

use crate::catalog::{RepoSpec, default_model};
use crate::error::{EmbeddedError, Result};

/// Where models are looked for and downloaded from. [`HubSettings::from_env`] reads the variables
/// `huggingface_hub` reads; tests build one by hand so that they never touch the process environment.
#[derive(Clone, PartialEq, Eq)]
pub struct HubSettings {
    /// The hub cache: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
    pub cache_dir: PathBuf,
    /// The server: `$HF_ENDPOINT`, else `https://huggingface.co`.
    pub endpoint: String,
    /// `$HF_HUB_OFFLINE` (`1`, `true`, `yes` or `on`): use the cache only, never the network.
    pub offline: bool,
    /// The access token for gated repos: `$HF_TOKEN`, else the token file `huggingface-cli login` writes.
    pub token: Option<String>,
    /// Whether downloads draw a progress bar on stderr.
    pub progress: bool,
}

impl std::fmt::Debug for HubSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubSettings")
            .field("cache_dir", &self.cache_dir)
            .field("endpoint", &self.endpoint)
            .field("offline", &self.offline)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("progress", &self.progress)
            .finish()
    }
}

/// The default Hugging Face server.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

impl HubSettings {
    /// The settings of this process's environment, including the token file under `$HF_HOME`.
    pub fn from_env() -> HubSettings {
        let mut settings = HubSettings::from_vars(|name| std::env::var(name).ok());
        if settings.token.is_none() {
            let token_file = std::env::var_os("HF_TOKEN_PATH")
                .map(PathBuf::from)
                .unwrap_or_else(|| hf_home(|name| std::env::var(name).ok()).join("token"));
            settings.token = std::fs::read_to_string(token_file)
                .ok()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty());
        }
        settings
    }

    /// The settings the given variables describe (`var` returns a variable's value), without reading any file.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> HubSettings {
        let non_empty = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let cache_dir = non_empty("HF_HUB_CACHE")
            .or_else(|| non_empty("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home(&var).join("hub"));
        let endpoint = non_empty("HF_ENDPOINT")
            .map(|e| e.trim_end_matches('/').to_owned())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let offline = non_empty("HF_HUB_OFFLINE")
            .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
        HubSettings {
            cache_dir,
            endpoint,
            offline,
            token: non_empty("HF_TOKEN"),
            progress: std::io::stderr().is_terminal(),
        }
    }
}

/// `$HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`.
fn hf_home(var: impl Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(home) = var("HF_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    if let Some(cache) = var("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(cache).join("huggingface");
    }
    dirs::home_dir().unwrap_or_default().join(".cache").join("huggingface")
}

/// Where a resolved model file came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// `model_path`.
    LocalFile,
    /// Found in the Hugging Face cache.
    Cached {
        /// The repo id.
        repo: String,
        /// The file in it.
        file: String,
    },
    /// Downloaded now.
    Downloaded {
        /// The repo id.
        repo: String,
        /// The file in it.
        file: String,
    },
}

/// A model file ready to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedModel {
    /// The GGUF file.
    pub path: PathBuf,
    /// The name reported as the model (`gen_ai.request.model`): the short name, `repo:file`, or the file name.
    pub name: String,
    /// Where it came from.
    pub source: ModelSource,
}

/// Finds the model `config` names: `model_path`, else `model_repo` (a short name or repo id), else
/// [`default_model`]. Blocks: it may download hundreds of megabytes; call it off the async runtime.
pub fn resolve(config: &InferenceConfig, hub: &HubSettings) -> Result<ResolvedModel> {
    if let Some(path) = &config.model_path {
        let metadata =
            std::fs::metadata(path).map_err(|source| EmbeddedError::Io { path: path.clone(), source })?;
        if metadata.is_dir() {
            let source =
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "it is a directory, not a GGUF file");
            return Err(EmbeddedError::Io { path: path.clone(), source });
        }
        let name =
            path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        return Ok(ResolvedModel { path: path.clone(), name, source: ModelSource::LocalFile });
    }
    let spec = match &config.model_repo {
        Some(repo) => RepoSpec::parse(repo)?,
        None => RepoSpec::parse(default_model().name)?,
    };
    if let Some(short) = spec.short_name {
        // The configured engine must run it: refuse before downloading hundreds of megabytes.
        crate::select::choose_engine(config.engine, short.architecture, short.name)?;
    }
    resolve_repo(&spec, hub)
}

/// Finds a repo's file in the cache, or downloads it.
pub fn resolve_repo(spec: &RepoSpec, hub: &HubSettings) -> Result<ResolvedModel> {
    let name = |file: &str| match spec.short_name {
        Some(short) => short.name.to_owned(),
        None => format!("{}:{file}", spec.repo),
    };
    let cached = match &spec.file {
        Some(file) => cached_file(&hub.cache_dir, &spec.repo, file).map(|p| (p, file.clone())),
        None => cached_gguf(&hub.cache_dir, &spec.repo),
    };
    if let Some((path, file)) = cached {
        tracing::debug!(path = %path.display(), "model found in the hugging face cache");
        return Ok(ResolvedModel {
            path,
            name: name(&file),
            source: ModelSource::Cached { repo: spec.repo.clone(), file },
        });
    }
    let wanted = spec.file.clone().unwrap_or_else(|| "*.gguf".to_owned());
    if hub.offline {
        return Err(EmbeddedError::Offline {
            repo: spec.repo.clone(),
            file: wanted,
            cache_dir: hub.cache_dir.clone(),
        });
    }
    let download_error = |file: &str, message: String| EmbeddedError::Download {
        repo: spec.repo.clone(),
        file: file.to_owned(),
        endpoint: hub.endpoint.clone(),
        cache_dir: hub.cache_dir.clone(),
        message,
    };
    let api = ApiBuilder::from_cache(hf_hub::Cache::new(hub.cache_dir.clone()))
        .with_endpoint(hub.endpoint.clone())
        .with_token(hub.token.clone())
        .with_progress(false)
        .with_retries(3)
        .build()
        .map_err(|e| download_error(&wanted, e.to_string()))?;
    let repo = api.repo(Repo::new(spec.repo.clone(), RepoType::Model));
    let file = match &spec.file {
        Some(file) => file.clone(),
        None => {
            let info =
                repo.info().map_err(|e| download_error(&wanted, format!("listing the repo failed: {e}")))?;
            let files: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
            pick_gguf(files.iter().map(String::as_str)).map(str::to_owned).ok_or_else(|| {
                EmbeddedError::NoGgufInRepo { repo: spec.repo.clone(), files: files.join(", ") }
            })?
        }
    };
    tracing::info!(repo = %spec.repo, %file, endpoint = %hub.endpoint, "downloading the embedded model");
    let expected = Arc::new(AtomicU64::new(0));
    let progress = DownloadProgress::new(hub.progress, expected.clone());
    let path =
        repo.download_with_progress(&file, progress).map_err(|e| download_error(&file, e.to_string()))?;
    let expected = expected.load(Ordering::Relaxed);
    let actual = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if actual != expected {
        // hf-hub renames the part file into place when the server closes the stream, complete or not.
        remove_cached(&path);
        return Err(download_error(&file, format!("the download ended after {actual} of {expected} bytes")));
    }
    Ok(ResolvedModel {
        path,
        name: name(&file),
        source: ModelSource::Downloaded { repo: spec.repo.clone(), file },
    })
}

/// The cache folder of a model repo.
fn repo_dir(cache_dir: &Path, repo: &str) -> PathBuf {
    cache_dir.join(format!("models--{}", repo.replace('/', "--")))
}

/// The snapshots to search, the one `refs/main` names first.
fn snapshots(cache_dir: &Path, repo: &str) -> Vec<PathBuf> {
    let dir = repo_dir(cache_dir, repo);
    let main = std::fs::read_to_string(dir.join("refs").join("main")).ok().map(|c| c.trim().to_owned());
    let mut found = Vec::new();
    if let Some(main) = &main {
        found.push(dir.join("snapshots").join(main));
    }
    if let Ok(entries) = std::fs::read_dir(dir.join("snapshots")) {
        let mut others: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| main.as_deref() != Some(&*e.file_name().to_string_lossy()))
            .map(|e| e.path())
            .collect();
        others.sort();
        found.extend(others);
    }
    found
}

/// A file of the repo in the cache; a link whose blob is missing does not count.
fn cached_file(cache_dir: &Path, repo: &str, file: &str) -> Option<PathBuf> {
    snapshots(cache_dir, repo).into_iter().map(|s| s.join(file)).find(|p| p.is_file())
}

/// The preferred GGUF file of the repo in the cache.
fn cached_gguf(cache_dir: &Path, repo: &str) -> Option<(PathBuf, String)> {
    for snapshot in snapshots(cache_dir, repo) {
        let mut files = Vec::new();
        list_files(&snapshot, &snapshot, &mut files);
        if let Some(file) = pick_gguf(files.iter().map(String::as_str)) {
            return Some((snapshot.join(file), file.to_owned()));
        }
    }
    None
}

/// The files under `dir`, as `/`-separated paths relative to `root`.
fn list_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(|e| e.ok()) {
        let path = entry.path();
        if path.is_dir() {
            list_files(root, &path, out);
        } else if path.is_file()
            && let Ok(relative) = path.strip_prefix(root)
        {
            out.push(
                relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"),
            );
        }
    }
}

/// Quantizations in order of preference: 4-bit K-quants balance size and quality best.
const QUANT_PREFERENCE: [&str; 10] =
    ["q4_k_m", "q4_k_s", "q4_0", "q4_1", "q5_k_m", "q5_k_s", "q5_0", "q6_k", "q8_0", "iq4_xs"];

/// The GGUF file to use among a repo's files: a single-file model (no shards, no vision projector), by
/// [`QUANT_PREFERENCE`], then by name.
pub(crate) fn pick_gguf<'a>(files: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut candidates: Vec<&str> = files
        .filter(|f| {
            let lower = f.to_ascii_lowercase();
            lower.ends_with(".gguf") && !lower.contains("mmproj") && !is_shard(&lower)
        })
        .collect();
    candidates.sort_by_key(|f| {
        let lower = f.to_ascii_lowercase();
        let rank = QUANT_PREFERENCE.iter().position(|q| lower.contains(q)).unwrap_or(QUANT_PREFERENCE.len());
        (rank, f.to_string())
    });
    candidates.first().copied()
}

/// Whether a file name is one shard of a split model (`-00001-of-00003.gguf`).
fn is_shard(lower: &str) -> bool {
    lower.strip_suffix(".gguf").and_then(|s| s.rsplit_once("-of-")).is_some_and(|(head, total)| {
        total.len() == 5 && total.bytes().all(|b| b.is_ascii_digit()) && head.len() >= 6 && {
            let index = &head[head.len() - 6..];
            index.starts_with('-') && index[1..].bytes().all(|b| b.is_ascii_digit())
        }
    })
}

/// Removes a bad download from the cache: the snapshot link and the blob it points to.
fn remove_cached(pointer: &Path) {
    if let Ok(blob) = std::fs::canonicalize(pointer) {
        let _ = std::fs::remove_file(blob);
    }
    let _ = std::fs::remove_file(pointer);
}

/// Counts the bytes of a download (for the size check) and draws a progress line on stderr.
struct DownloadProgress {
    draw: bool,
    expected: Arc<AtomicU64>,
    done: u64,
    shown_percent: Option<u64>,
    file: String,
}

impl DownloadProgress {
    fn new(draw: bool, expected: Arc<AtomicU64>) -> DownloadProgress {
        DownloadProgress { draw, expected, done: 0, shown_percent: None, file: String::new() }
    }

    fn show(&mut self, end: bool) {
        if !self.draw {
            return;
        }
        let total = self.expected.load(Ordering::Relaxed).max(1);
        let percent = self.done * 100 / total;
        if !end && self.shown_percent == Some(percent) {
            return;
        }
        self.shown_percent = Some(percent);
        let mb = |bytes: u64| bytes as f64 / 1_000_000.0;
        let filled = (percent / 4) as usize;
        let mut stderr = std::io::stderr().lock();
        let _ = write!(
            stderr,
            "\rdownloading {} [{}{}] {percent:>3}% {:.1}/{:.1} MB",
            self.file,
            "#".repeat(filled),
            " ".repeat(25 - filled.min(25)),
            mb(self.done),
            mb(total)
        );
        if end {
            let _ = writeln!(stderr);
        }
        let _ = stderr.flush();
    }
}

impl Progress for DownloadProgress {
    fn init(&mut self, size: usize, filename: &str) {
        self.expected.store(size as u64, Ordering::Relaxed);
        self.file = filename.to_owned();
        self.done = 0;
        self.show(false);
    }

    fn update(&mut self, size: usize) {
        self.done += size as u64;
        self.show(false);
    }

    fn finish(&mut self) {
        self.show(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn settings_follow_the_huggingface_variables() {
        let s = HubSettings::from_vars(vars(&[
            ("HF_HOME", "/hf"),
            ("HF_ENDPOINT", "http://127.0.0.1:9/"),
            ("HF_HUB_OFFLINE", "1"),
            ("HF_TOKEN", "secret"),
        ]));
        assert_eq!(
            (s.cache_dir, s.endpoint, s.offline, s.token.as_deref()),
            (PathBuf::from("/hf/hub"), "http://127.0.0.1:9".to_owned(), true, Some("secret"))
        );
        let s = HubSettings::from_vars(vars(&[
            ("HF_HOME", "/hf"),
            ("HF_HUB_CACHE", "/c"),
            ("HF_HUB_OFFLINE", "0"),
        ]));
        assert_eq!(
            (s.cache_dir, s.endpoint, s.offline),
            (PathBuf::from("/c"), DEFAULT_ENDPOINT.to_owned(), false)
        );
        let s = HubSettings::from_vars(vars(&[("XDG_CACHE_HOME", "/x"), ("HF_HUB_OFFLINE", "TRUE")]));
        assert_eq!((s.cache_dir, s.offline), (PathBuf::from("/x/huggingface/hub"), true));
        let s = HubSettings::from_vars(vars(&[]));
        assert!(s.cache_dir.ends_with(".cache/huggingface/hub"), "{}", s.cache_dir.display());
        assert!(!format!("{:?}", HubSettings { token: Some("secret".into()), ..s }).contains("secret"));
    }

    #[test]
    fn picks_a_single_file_four_bit_quant() {
        let files = [
            "README.md",
            "model-f16.gguf",
            "model-Q8_0.gguf",
            "mmproj-Q4_K_M.gguf",
            "big-Q4_K_M-00001-of-00002.gguf",
            "model-Q4_K_M.gguf",
        ];
        assert_eq!(pick_gguf(files.into_iter()), Some("model-Q4_K_M.gguf"));
        assert_eq!(pick_gguf(["b.gguf", "a.gguf"].into_iter()), Some("a.gguf"));
        assert_eq!(pick_gguf(["x-00001-of-00002.gguf", "README.md"].into_iter()), None);
        assert!(is_shard("m-q4_k_m-00002-of-00010.gguf"));
        assert!(!is_shard("m-of-00010.gguf"));
    }

    /// Writes the cache layout `huggingface_hub` makes: a blob, and a snapshot link to it.
    fn fake_cache(cache: &Path, repo: &str, commit: &str, file: &str, content: &[u8]) -> PathBuf {
        let dir = repo_dir(cache, repo);
        std::fs::create_dir_all(dir.join("blobs")).unwrap();
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        let blob = dir.join("blobs").join(format!("blob-{commit}"));
        std::fs::write(&blob, content).unwrap();
        let link = dir.join("snapshots").join(commit).join(file);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&blob, &link).unwrap();
        std::fs::write(dir.join("refs").join("main"), commit).unwrap();
        link
    }

    fn offline(cache: &Path) -> HubSettings {
        HubSettings {
            cache_dir: cache.to_owned(),
            endpoint: DEFAULT_ENDPOINT.to_owned(),
            offline: true,
            token: None,
            progress: false,
        }
    }

    #[test]
    fn cached_files_resolve_without_network() {
        let tmp = tempfile::tempdir().unwrap();
        let link = fake_cache(tmp.path(), "o/r", "abc123", "m-Q4_K_M.gguf", b"GGUF");
        let spec = RepoSpec::parse("o/r:m-Q4_K_M.gguf").unwrap();
        let expected = ResolvedModel {
            path: link.clone(),
            name: "o/r:m-Q4_K_M.gguf".into(),
            source: ModelSource::Cached { repo: "o/r".into(), file: "m-Q4_K_M.gguf".into() },
        };
        assert_eq!(resolve_repo(&spec, &offline(tmp.path())).unwrap(), expected);
        // Without a file name, the cached GGUF is found.
        assert_eq!(resolve_repo(&RepoSpec::parse("o/r").unwrap(), &offline(tmp.path())).unwrap(), expected);
    }

    #[test]
    fn a_dangling_link_is_not_a_cached_model() {
        let tmp = tempfile::tempdir().unwrap();
        let link = fake_cache(tmp.path(), "o/r", "abc", "m.gguf", b"GGUF");
        std::fs::remove_file(std::fs::canonicalize(&link).unwrap()).unwrap();
        let err = resolve_repo(&RepoSpec::parse("o/r:m.gguf").unwrap(), &offline(tmp.path())).unwrap_err();
        assert!(matches!(err, EmbeddedError::Offline { .. }), "{err}");
    }

    #[test]
    fn a_missing_model_path_is_an_error_naming_it() {
        let config = InferenceConfig {
            enabled: true,
            model_path: Some("/nonexistent/m.gguf".into()),
            model_repo: Some("o/r".into()),
            gpu: false,
            ..Default::default()
        };
        let err = resolve(&config, &offline(Path::new("/nonexistent"))).unwrap_err();
        assert!(err.to_string().starts_with("cannot read the model file /nonexistent/m.gguf: "), "{err}");
    }
}
