//! The built-in tools of `chat` and `run`: `read_file`, `list_dir` and `search_text`.
//!
//! They only read, and only inside the workspace directory. Every path a model gives is resolved
//! against the workspace and canonicalized (symlinks followed, `..` resolved); a path that ends up
//! outside the workspace is refused with an error result the model can read. Nothing is ever written.
//! Outputs are bounded, so one call cannot flood the context window.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use std::sync::Arc;

use async_trait::async_trait;
use phosphor_agent::{Tool, ToolOutput};
use phosphor_base::ToolSpec;
use regex::Regex;
use serde::Deserialize;
use serde_json::{Value, json};

/// Lines `read_file` returns when the model gives no `limit`.
pub const DEFAULT_READ_LINES: usize = 2000;
/// Characters kept of one line in `read_file` and `search_text` output.
pub const MAX_LINE_CHARS: usize = 2000;
/// The most bytes of text one tool result holds (the model can page with `offset`).
pub const MAX_OUTPUT_BYTES: usize = 100_000;
/// Files larger than this are not read whole by `read_file`.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Entries `list_dir` shows.
pub const MAX_DIR_ENTRIES: usize = 1000;
/// Matching lines `search_text` reports.
pub const MAX_MATCHES: usize = 200;
/// Files larger than this are skipped by `search_text`.
pub const MAX_SEARCH_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Files `search_text` looks at before it stops.
pub const MAX_SEARCH_FILES: usize = 20_000;
/// Characters kept of one matching line in `search_text` output.
const MAX_MATCH_LINE_CHARS: usize = 300;
/// Directories `search_text` does not descend into (besides hidden ones): build output and dependencies.
const SKIPPED_DIRS: [&str; 2] = ["target", "node_modules"];
/// How much of a file is checked for NUL bytes to tell binary from text.
const BINARY_SNIFF_BYTES: usize = 8192;

/// The directory the tools may read, canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// The workspace at `dir`, which must exist and be a directory.
    pub fn new(dir: &Path) -> anyhow::Result<Workspace> {
        let root =
            fs::canonicalize(dir).map_err(|err| anyhow::anyhow!("workspace {}: {err}", dir.display()))?;
        if !root.is_dir() {
            anyhow::bail!("workspace {}: not a directory", dir.display());
        }
        Ok(Workspace { root })
    }

    /// The canonical workspace directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path a model gave (relative to the workspace, or absolute) to a canonical path
    /// inside the workspace, or says why it cannot be used.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        if path.is_empty() {
            return Err(
                "the path is empty; give a path relative to the workspace, e.g. \"src/lib.rs\"".to_owned()
            );
        }
        if path.contains('\0') {
            return Err(format!("the path {path:?} contains a NUL character"));
        }
        let given = Path::new(path);
        let joined = if given.is_absolute() { given.to_path_buf() } else { self.root.join(given) };
        match fs::canonicalize(&joined) {
            Ok(canonical) if canonical.starts_with(&self.root) => Ok(canonical),
            Ok(canonical) => Err(format!(
                "{path} leaves the workspace (it resolves to {}); only paths inside {} may be read",
                canonical.display(),
                self.root.display()
            )),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                if lexically_inside(&joined, &self.root) {
                    Err(format!("{path}: no such file or directory in the workspace"))
                } else {
                    Err(format!(
                        "{path} leaves the workspace; only paths inside {} may be read",
                        self.root.display()
                    ))
                }
            }
            Err(err) => Err(format!("{path}: {err}")),
        }
    }

    /// `path` relative to the workspace, for display (`.` for the workspace itself).
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Lines of a text file, numbered: `offset` is the first line shown (1-based, default 1),
    /// `limit` how many (default [`DEFAULT_READ_LINES`]).
    pub fn read_file(
        &self,
        path: &str,
        offset: Option<usize>,
        limit: Option<usize>,
    ) -> Result<String, String> {
        let resolved = self.resolve(path)?;
        let metadata = fs::metadata(&resolved).map_err(|err| format!("{path}: {err}"))?;
        if metadata.is_dir() {
            return Err(format!("{path} is a directory; use list_dir to see what it holds"));
        }
        if metadata.len() > MAX_FILE_BYTES {
            return Err(format!(
                "{path} is {} bytes, over the {MAX_FILE_BYTES}-byte limit of read_file; use search_text to find the \
                 part you need",
                metadata.len()
            ));
        }
        let bytes = fs::read(&resolved).map_err(|err| format!("{path}: {err}"))?;
        if is_binary(&bytes) {
            return Err(format!("{path} is a binary file; read_file shows text files only"));
        }
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();
        let offset = offset.unwrap_or(1);
        let limit = limit.unwrap_or(DEFAULT_READ_LINES);
        if offset == 0 || limit == 0 {
            return Err(
                "offset and limit start at 1 (offset is the first line to show, limit how many)".to_owned()
            );
        }
        if total == 0 {
            return Ok(format!("({path} is empty)"));
        }
        if offset > total {
            return Err(format!("offset {offset} is past the end of {path}, which has {total} lines"));
        }
        let mut out = String::new();
        let mut last = offset - 1;
        for (index, line) in lines.iter().enumerate().skip(offset - 1).take(limit) {
            let numbered = format!("{:>6}\t{}\n", index + 1, cut_line(line, MAX_LINE_CHARS));
            if out.len() + numbered.len() > MAX_OUTPUT_BYTES && index + 1 > offset {
                break;
            }
            out.push_str(&numbered);
            last = index + 1;
        }
        if last < total {
            let _ = write!(out, "[lines {offset}-{last} of {total}; read on with offset {}]", last + 1);
        }
        Ok(out.trim_end_matches('\n').to_owned())
    }

    /// The entries of a directory, sorted, directories marked `/` and symlinks `@`.
    pub fn list_dir(&self, path: &str) -> Result<String, String> {
        let resolved = self.resolve(path)?;
        if !resolved.is_dir() {
            return Err(format!("{path} is a file; use read_file to read it"));
        }
        let entries = fs::read_dir(&resolved).map_err(|err| format!("{path}: {err}"))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|err| format!("{path}: {err}"))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().map_err(|err| format!("{path}/{name}: {err}"))?;
            let suffix = if kind.is_symlink() {
                "@"
            } else if kind.is_dir() {
                "/"
            } else {
                ""
            };
            names.push(format!("{name}{suffix}"));
        }
        names.sort();
        if names.is_empty() {
            return Ok(format!("({} is empty)", self.display(&resolved)));
        }
        let total = names.len();
        let mut out = names.into_iter().take(MAX_DIR_ENTRIES).collect::<Vec<_>>().join("\n");
        if total > MAX_DIR_ENTRIES {
            let _ = write!(out, "\n[{MAX_DIR_ENTRIES} of {total} entries shown]");
        }
        Ok(out)
    }

    /// Lines matching `pattern` (a substring, or a regular expression when `regex`) in the file or
    /// under the directory `path` (default: the whole workspace), as `path:line: text`.
    pub fn search_text(&self, pattern: &str, path: Option<&str>, regex: bool) -> Result<String, String> {
        if pattern.is_empty() {
            return Err("the pattern is empty; give the text (or regular expression) to look for".to_owned());
        }
        let matcher = if regex {
            Matcher::Regex(
                regex::RegexBuilder::new(pattern)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|err| format!("invalid regular expression: {err}"))?,
            )
        } else {
            Matcher::Substring(pattern.to_owned())
        };
        let start = self.resolve(path.unwrap_or("."))?;
        let mut search =
            Search { workspace: self, matcher, out: String::new(), matches: 0, files: 0, stopped: None };
        let mut stack = vec![start.clone()];
        while let Some(current) = stack.pop() {
            if search.stopped.is_some() {
                break;
            }
            let Ok(metadata) = fs::symlink_metadata(&current) else { continue };
            if metadata.is_dir() {
                let Ok(entries) = fs::read_dir(&current) else { continue };
                let mut children: Vec<(String, PathBuf)> = entries
                    .filter_map(Result::ok)
                    .map(|entry| (entry.file_name().to_string_lossy().into_owned(), entry.path()))
                    .filter(|(name, _)| !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()))
                    .collect();
                // Reverse order on the stack pops them in name order.
                children.sort_by(|a, b| b.0.cmp(&a.0));
                stack.extend(children.into_iter().map(|(_, child)| child));
            } else if metadata.is_file() {
                search.file(&current);
            } else if metadata.file_type().is_symlink() {
                // Symlinked files are read when they point inside the workspace; symlinked
                // directories are not followed (no loops, no escapes).
                if let Ok(target) = fs::canonicalize(&current)
                    && target.starts_with(&self.root)
                    && target.is_file()
                {
                    search.file(&current);
                }
            }
        }
        let shown = self.display(&start);
        let mut out = search.out;
        if search.matches == 0 {
            return Ok(format!(
                "no matches for {pattern:?} in {shown} ({} files searched; hidden directories, target and \
                 node_modules skipped)",
                search.files
            ));
        }
        match search.stopped {
            Some(Stop::Matches) => {
                let _ = write!(out, "[stopped after {MAX_MATCHES} matches; narrow the pattern or the path]");
            }
            Some(Stop::Bytes) => {
                let _ = write!(
                    out,
                    "[stopped at {MAX_OUTPUT_BYTES} bytes of output; narrow the pattern or the path]"
                );
            }
            Some(Stop::Files) => {
                let _ = write!(out, "[stopped after {MAX_SEARCH_FILES} files; narrow the path]");
            }
            None => {}
        }
        Ok(out.trim_end_matches('\n').to_owned())
    }
}

/// Which built-in tool a [`WorkspaceTool`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// `read_file {path, offset?, limit?}`.
    ReadFile,
    /// `list_dir {path?}`.
    ListDir,
    /// `search_text {pattern, path?, regex?}`.
    SearchText,
}

/// One built-in tool over a workspace, as the agent calls it.
#[derive(Debug, Clone)]
pub struct WorkspaceTool {
    kind: ToolKind,
    workspace: Workspace,
}

/// The three built-in tools over `workspace`.
pub fn builtin_tools(workspace: &Workspace) -> Vec<Arc<dyn Tool>> {
    [ToolKind::ReadFile, ToolKind::ListDir, ToolKind::SearchText]
        .into_iter()
        .map(|kind| Arc::new(WorkspaceTool { kind, workspace: workspace.clone() }) as Arc<dyn Tool>)
        .collect()
}

#[derive(Debug, Deserialize)]
struct ReadFileArgs {
    path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Debug, Deserialize)]
struct ListDirArgs {
    #[serde(default)]
    path: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SearchTextArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    regex: bool,
}

impl WorkspaceTool {
    fn name(&self) -> &'static str {
        match self.kind {
            ToolKind::ReadFile => "read_file",
            ToolKind::ListDir => "list_dir",
            ToolKind::SearchText => "search_text",
        }
    }

    /// Runs the tool (blocking file I/O): the output text, or why it failed.
    fn run(&self, arguments: Value) -> Result<String, String> {
        fn parse<T: serde::de::DeserializeOwned>(
            name: &str,
            arguments: Value,
            expected: &str,
        ) -> Result<T, String> {
            serde_json::from_value(arguments)
                .map_err(|err| format!("invalid arguments for {name}: {err}; expected {expected}"))
        }
        let workspace = &self.workspace;
        match self.kind {
            ToolKind::ReadFile => {
                let args: ReadFileArgs = parse(
                    "read_file",
                    arguments,
                    r#"{"path": string, "offset"?: integer >= 1, "limit"?: integer >= 1}"#,
                )?;
                workspace.read_file(&args.path, args.offset, args.limit)
            }
            ToolKind::ListDir => {
                let args: ListDirArgs = parse("list_dir", arguments, r#"{"path"?: string}"#)?;
                workspace.list_dir(args.path.as_deref().unwrap_or("."))
            }
            ToolKind::SearchText => {
                let args: SearchTextArgs = parse(
                    "search_text",
                    arguments,
                    r#"{"pattern": string, "path"?: string, "regex"?: boolean}"#,
                )?;
                workspace.search_text(&args.pattern, args.path.as_deref(), args.regex)
            }
        }
    }
}

#[async_trait]
impl Tool for WorkspaceTool {
    fn spec(&self) -> ToolSpec {
        let (description, parameters) = match self.kind {
            ToolKind::ReadFile => (
                "Read a text file of the workspace. Lines come numbered; long files are shown in pages \
                 (use offset to read on).",
                json!({
                    "type": "object",
                    "properties": {
                        "path": { "type": "string", "description": "Path relative to the workspace" },
                        "offset": { "type": "integer", "minimum": 1, "description": "First line (default 1)" },
                        "limit": { "type": "integer", "minimum": 1, "description": "Lines to read (default 2000)" }
                    },
                    "required": ["path"]
                }),
            ),
            ToolKind::ListDir => (
                "List a directory of the workspace (directories end with /, symlinks with @).",
                json!({
                    "type": "object",
                    "properties": {
                        "path": { "type": "string", "description": "Path relative to the workspace (default .)" }
                    }
                }),
            ),
            ToolKind::SearchText => (
                "Find lines containing a text (or matching a regex) in a file or directory of the workspace; \
                 hidden directories, target and node_modules are skipped.",
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": { "type": "string", "description": "Text to find" },
                        "path": { "type": "string", "description": "File or directory (default: everything)" },
                        "regex": { "type": "boolean", "description": "Treat pattern as a regex (default false)" }
                    },
                    "required": ["pattern"]
                }),
            ),
        };
        ToolSpec { name: self.name().to_owned(), description: description.to_owned(), parameters }
    }

    async fn call(&self, arguments: Value) -> ToolOutput {
        let tool = self.clone();
        match tokio::task::spawn_blocking(move || tool.run(arguments)).await {
            Ok(Ok(text)) => ToolOutput::ok(text),
            Ok(Err(message)) => ToolOutput::error(format!("error: {message}")),
            Err(err) => ToolOutput::error(format!("error: {} failed: {err}", self.name())),
        }
    }
}

enum Matcher {
    Substring(String),
    Regex(Regex),
}

impl Matcher {
    fn is_match(&self, line: &str) -> bool {
        match self {
            Matcher::Substring(needle) => line.contains(needle.as_str()),
            Matcher::Regex(regex) => regex.is_match(line),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Matches,
    Bytes,
    Files,
}

struct Search<'w> {
    workspace: &'w Workspace,
    matcher: Matcher,
    out: String,
    matches: usize,
    files: usize,
    stopped: Option<Stop>,
}

impl Search<'_> {
    fn file(&mut self, path: &Path) {
        if self.files >= MAX_SEARCH_FILES {
            self.stopped = Some(Stop::Files);
            return;
        }
        self.files += 1;
        let Ok(mut file) = fs::File::open(path) else { return };
        let mut bytes = Vec::new();
        if file.by_ref().take(MAX_SEARCH_FILE_BYTES + 1).read_to_end(&mut bytes).is_err()
            || bytes.len() as u64 > MAX_SEARCH_FILE_BYTES
            || is_binary(&bytes)
        {
            return;
        }
        let text = String::from_utf8_lossy(&bytes);
        let shown = self.workspace.display(path);
        for (index, line) in text.lines().enumerate() {
            if !self.matcher.is_match(line) {
                continue;
            }
            let entry =
                format!("{shown}:{}: {}\n", index + 1, cut_line(line.trim_end(), MAX_MATCH_LINE_CHARS));
            if self.out.len() + entry.len() > MAX_OUTPUT_BYTES {
                self.stopped = Some(Stop::Bytes);
                return;
            }
            self.out.push_str(&entry);
            self.matches += 1;
            if self.matches >= MAX_MATCHES {
                self.stopped = Some(Stop::Matches);
                return;
            }
        }
    }
}

/// Whether `path`, with `.` and `..` resolved textually, stays under `root`.
fn lexically_inside(path: &Path, root: &Path) -> bool {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() {
                    return false;
                }
            }
            other => normal.push(other),
        }
    }
    normal.starts_with(root)
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// The first `max` characters of `line`, marked when cut.
fn cut_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{} … [line cut at {max} characters]", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// A workspace holding `src/lib.rs`, `README.md`, a hidden dir, a `target` dir, and a
    /// sibling `secret.txt` outside it.
    struct Fixture {
        _dir: tempfile::TempDir,
        outside: PathBuf,
        workspace: Workspace,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(root.join("target")).unwrap();
        fs::write(root.join("src/lib.rs"), "pub fn answer() -> u32 {\n    42\n}\n").unwrap();
        fs::write(root.join("README.md"), "# Demo\nThe answer is 42.\n").unwrap();
        fs::write(root.join(".git/config"), "answer = 42\n").unwrap();
        fs::write(root.join("target/out.txt"), "answer 42\n").unwrap();
        let outside = dir.path().join("secret.txt");
        fs::write(&outside, "the password is hunter2\n").unwrap();
        let workspace = Workspace::new(&root).unwrap();
        Fixture { _dir: dir, outside, workspace }
    }

    #[test]
    fn read_file_numbers_lines_and_pages() {
        let f = fixture();
        assert_eq!(
            f.workspace.read_file("src/lib.rs", None, None),
            Ok("     1\tpub fn answer() -> u32 {\n     2\t    42\n     3\t}".to_owned())
        );
        assert_eq!(
            f.workspace.read_file("src/lib.rs", Some(2), Some(1)),
            Ok("     2\t    42\n[lines 2-2 of 3; read on with offset 3]".to_owned())
        );
        assert_eq!(f.workspace.read_file("./src/../src/lib.rs", Some(3), None), Ok("     3\t}".to_owned()));
        assert_eq!(
            f.workspace.read_file("src/lib.rs", Some(9), None),
            Err("offset 9 is past the end of src/lib.rs, which has 3 lines".to_owned())
        );
        assert_eq!(
            f.workspace.read_file("src", None, None),
            Err("src is a directory; use list_dir to see what it holds".to_owned())
        );
        assert_eq!(
            f.workspace.read_file("nope.rs", None, None),
            Err("nope.rs: no such file or directory in the workspace".to_owned())
        );
    }

    #[test]
    fn read_file_refuses_binary_files_and_cuts_long_lines() {
        let f = fixture();
        fs::write(f.workspace.root().join("blob.bin"), b"\x7fELF\0\0\x01").unwrap();
        assert_eq!(
            f.workspace.read_file("blob.bin", None, None),
            Err("blob.bin is a binary file; read_file shows text files only".to_owned())
        );
        fs::write(f.workspace.root().join("long.txt"), "x".repeat(MAX_LINE_CHARS + 5)).unwrap();
        assert_eq!(
            f.workspace.read_file("long.txt", None, None),
            Ok(format!("     1\t{} … [line cut at {MAX_LINE_CHARS} characters]", "x".repeat(MAX_LINE_CHARS)))
        );
    }

    #[test]
    fn read_file_output_is_bounded() {
        let f = fixture();
        let line = "y".repeat(1000);
        let text = (0..500).map(|_| line.as_str()).collect::<Vec<_>>().join("\n");
        fs::write(f.workspace.root().join("big.txt"), text).unwrap();
        let out = f.workspace.read_file("big.txt", None, None).unwrap();
        assert!(out.len() <= MAX_OUTPUT_BYTES + 100, "{}", out.len());
        // 1008 bytes per numbered line: 99 lines fit in 100,000 bytes.
        assert!(out.ends_with("[lines 1-99 of 500; read on with offset 100]"), "{}", &out[out.len() - 80..]);
    }

    #[test]
    fn paths_that_leave_the_workspace_are_refused() {
        let f = fixture();
        let outside = f.outside.to_str().unwrap();
        for path in ["../secret.txt", "src/../../secret.txt", outside, "/etc/passwd", "../nonexistent"] {
            let error = f.workspace.read_file(path, None, None).unwrap_err();
            assert!(error.starts_with(&format!("{path} leaves the workspace")), "{path}: {error}");
            let error = f.workspace.list_dir(path).unwrap_err();
            assert!(error.contains("leaves the workspace"), "{path}: {error}");
            let error = f.workspace.search_text("password", Some(path), false).unwrap_err();
            assert!(error.contains("leaves the workspace"), "{path}: {error}");
        }
        // An absolute path inside the workspace is fine.
        let inside = f.workspace.root().join("README.md");
        assert_eq!(
            f.workspace.read_file(inside.to_str().unwrap(), Some(2), None),
            Ok("     2\tThe answer is 42.".to_owned())
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_pointing_out_of_the_workspace_are_refused() {
        let f = fixture();
        let root = f.workspace.root();
        std::os::unix::fs::symlink(&f.outside, root.join("escape.txt")).unwrap();
        std::os::unix::fs::symlink(f.outside.parent().unwrap(), root.join("up")).unwrap();
        std::os::unix::fs::symlink(root.join("README.md"), root.join("readme-link")).unwrap();

        let error = f.workspace.read_file("escape.txt", None, None).unwrap_err();
        assert!(error.starts_with("escape.txt leaves the workspace (it resolves to "), "{error}");
        let error = f.workspace.read_file("up/secret.txt", None, None).unwrap_err();
        assert!(error.starts_with("up/secret.txt leaves the workspace"), "{error}");
        let error = f.workspace.list_dir("up").unwrap_err();
        assert!(error.starts_with("up leaves the workspace"), "{error}");
        // A link that stays inside is followed.
        assert_eq!(
            f.workspace.read_file("readme-link", Some(1), Some(1)),
            Ok("     1\t# Demo\n[lines 1-1 of 2; read on with offset 2]".to_owned())
        );
        // The search neither follows the directory link nor reads the escaping file link.
        assert_eq!(
            f.workspace.search_text("hunter2", None, false),
            Ok("no matches for \"hunter2\" in . (3 files searched; hidden directories, target and node_modules \
                skipped)"
                .to_owned())
        );
        // The listing shows links as links.
        assert_eq!(
            f.workspace.list_dir(".").unwrap(),
            ".git/\nREADME.md\nescape.txt@\nreadme-link@\nsrc/\ntarget/\nup@"
        );
    }

    #[test]
    fn list_dir_sorts_and_marks_directories() {
        let f = fixture();
        assert_eq!(f.workspace.list_dir("."), Ok(".git/\nREADME.md\nsrc/\ntarget/".to_owned()));
        assert_eq!(f.workspace.list_dir("src"), Ok("lib.rs".to_owned()));
        assert_eq!(
            f.workspace.list_dir("README.md"),
            Err("README.md is a file; use read_file to read it".to_owned())
        );
        fs::create_dir(f.workspace.root().join("empty")).unwrap();
        assert_eq!(f.workspace.list_dir("empty"), Ok("(empty is empty)".to_owned()));
    }

    #[test]
    fn search_text_finds_substrings_and_regexes_and_skips_hidden_and_build_dirs() {
        let f = fixture();
        assert_eq!(
            f.workspace.search_text("42", None, false),
            Ok("README.md:2: The answer is 42.\nsrc/lib.rs:2:     42".to_owned())
        );
        assert_eq!(
            f.workspace.search_text(r"fn \w+\(", Some("src"), true),
            Ok("src/lib.rs:1: pub fn answer() -> u32 {".to_owned())
        );
        assert_eq!(
            f.workspace.search_text("answer", Some("README.md"), false),
            Ok("README.md:2: The answer is 42.".to_owned())
        );
        // A regex metacharacter is literal in substring mode.
        assert_eq!(
            f.workspace.search_text("answer(", None, false),
            Ok("src/lib.rs:1: pub fn answer() -> u32 {".to_owned())
        );
        let error = f.workspace.search_text("answer(", None, true).unwrap_err();
        assert!(error.starts_with("invalid regular expression: "), "{error}");
        assert_eq!(
            f.workspace.search_text("", None, false),
            Err("the pattern is empty; give the text (or regular expression) to look for".to_owned())
        );
    }

    #[test]
    fn search_text_output_is_bounded() {
        let f = fixture();
        let text = (0..MAX_MATCHES + 50).map(|i| format!("needle {i}")).collect::<Vec<_>>().join("\n");
        fs::write(f.workspace.root().join("many.txt"), text).unwrap();
        let out = f.workspace.search_text("needle", None, false).unwrap();
        assert_eq!(out.lines().count(), MAX_MATCHES + 1);
        assert!(out.ends_with("[stopped after 200 matches; narrow the pattern or the path]"), "{out}");
    }

    #[tokio::test]
    async fn the_agent_tools_parse_arguments_and_report_errors() {
        let f = fixture();
        let tools = builtin_tools(&f.workspace);
        let names: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
        assert_eq!(names, ["read_file", "list_dir", "search_text"]);
        let (read, list, search) = (&tools[0], &tools[1], &tools[2]);
        assert_eq!(
            read.call(json!({ "path": "src/lib.rs", "limit": 1 })).await,
            ToolOutput::ok("     1\tpub fn answer() -> u32 {\n[lines 1-1 of 3; read on with offset 2]")
        );
        assert_eq!(list.call(json!({})).await, ToolOutput::ok(".git/\nREADME.md\nsrc/\ntarget/"));
        assert_eq!(
            search.call(json!({ "pattern": "4[0-9]", "regex": true, "path": "src" })).await,
            ToolOutput::ok("src/lib.rs:2:     42")
        );
        assert_eq!(
            read.call(json!({ "file": "x" })).await,
            ToolOutput::error(
                "error: invalid arguments for read_file: missing field `path`; expected {\"path\": string, \"offset\"?: integer >= 1, \"limit\"?: integer >= 1}"
            )
        );
        let escaped = read.call(json!({ "path": "../secret.txt" })).await;
        assert!(
            escaped.is_error && escaped.content.starts_with("error: ../secret.txt leaves the workspace"),
            "{escaped:?}"
        );
    }
}
