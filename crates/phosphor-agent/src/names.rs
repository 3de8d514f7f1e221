//! The names a change to a file defines or touches, read off the code it carries (an edit's old
//! and new text, a written file, a patch's lines), so that the session-state trail can say where
//! in a file the work happened: `src/repo.py (edited: get_head, get_tracked_files)`.
//!
//! A line defines a name when, after its indentation and modifiers (`pub`, `pub(crate)`, `async`,
//! `export`, `default`, `static`, `public`, `private`, `protected`, `abstract`, `final`, `unsafe`,
//! `const`, `extern`, `override`), it opens with a definition keyword and the name is followed as
//! code would follow it:
//! - `def`, `fn`, `func`, `function`: the name, then right after it `(` or `<`, or after spaces a
//!   `(` on a line that ends with `{` or `:` (Go's receiver `func (r *T) Name(` is skipped; a `def`
//!   may also end its line, as Ruby's do);
//! - `class`, `struct`, `enum`, `trait`, `interface`, `type`: the name, then right after it `(`,
//!   `<` or `[`; or a `:` on a line that ends with `:` or `{`; or, after spaces, `{`, `=`, `;`,
//!   `extends`, `implements`, `struct`, `interface`, `where`, or the end of the line.
//!
//! So `class Foo(Base):`, `pub(crate) async fn run<T>(`, `export default function App(`,
//! `type Config struct {` define names, while prose that happens to start with a keyword ("class
//! names are case-sensitive", "function calls (see below)", "enum values: red, green") does not,
//! and the changes of prose and data files ([`is_prose`]: `.md`, `.txt`, `.json`, ...) are not
//! read at all. Methods without a keyword (Java's `public void run(`, JavaScript's `run() {`) are
//! not recognised: the rule prefers saying less to listing what is not a name.

/// Names one file keeps in the trail, at most (the newest).
pub const MAX_NAMES_PER_FILE: usize = 8;

const MODIFIERS: &[&str] = &[
    "pub",
    "async",
    "export",
    "default",
    "static",
    "public",
    "private",
    "protected",
    "abstract",
    "final",
    "unsafe",
    "const",
    "extern",
    "override",
];
const FUNCTION_KEYWORDS: &[&str] = &["def", "fn", "func", "function"];
const TYPE_KEYWORDS: &[&str] = &["class", "struct", "enum", "trait", "interface", "type"];
const TYPE_FOLLOWERS: &[&str] = &["extends", "implements", "struct", "interface", "where"];

/// The name `line` defines, if it defines one (see the module documentation).
pub fn defined_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    let keyword = loop {
        let (word, after) = split_word(rest);
        if MODIFIERS.contains(&word) {
            rest = after.trim_start();
            if word == "pub" && rest.starts_with('(') {
                rest = rest[rest.find(')')? + 1..].trim_start();
            }
            continue;
        }
        break word;
    };
    let function = FUNCTION_KEYWORDS.contains(&keyword);
    if !function && !TYPE_KEYWORDS.contains(&keyword) {
        return None;
    }
    let after_keyword = &rest[keyword.len()..];
    // `function* gen(`
    let after_keyword = after_keyword.strip_prefix('*').unwrap_or(after_keyword);
    if !after_keyword.starts_with(char::is_whitespace) {
        return None;
    }
    let mut rest = after_keyword.trim_start();
    if keyword == "func" && rest.starts_with('(') {
        rest = rest[rest.find(')')? + 1..].trim_start();
    }
    let (name, after) = split_word(rest);
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let follows = if function {
        // Right after the name, as code writes it ("function calls (see below)" is prose).
        // `function foo (a) {`, spaced as some styles write it, where the line ends as code's.
        after.starts_with(['(', '<'])
            || (keyword == "def" && after.trim().is_empty())
            || (after.trim_start().starts_with('(') && after.trim_end().ends_with(['{', ':']))
    } else {
        // `(`, `<`, `[` right after the name; a `:` right after it when the line ends as a
        // definition's does (Python's `class A:`, Rust's `trait T: Send {`), not as prose's
        // ("enum values: red, green"); `{`, `=`, `;`, a follower word or nothing after spaces.
        let spaced = after.trim_start();
        after.starts_with(['(', '<', '['])
            || (spaced.starts_with(':') && after.trim_end().ends_with([':', '{']))
            || spaced.is_empty()
            || spaced.starts_with(['{', '=', ';'])
            || TYPE_FOLLOWERS.contains(&split_word(spaced).0)
    };
    follows.then_some(name)
}

/// The names `texts` (one change's code) define, in order of first appearance, each once, the
/// first [`MAX_NAMES_PER_FILE`] (a file written whole lists what it starts with).
pub fn names_of_change<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut names = Vec::new();
    for line in texts.into_iter().flat_map(str::lines) {
        if names.len() == MAX_NAMES_PER_FILE {
            break;
        }
        if let Some(name) = defined_name(line) {
            note_name(&mut names, name);
        }
    }
    names
}

/// Extensions of files that hold prose or data, not code: their changes name nothing (a README's
/// "function calls (see below)" is not a function).
const PROSE_EXTENSIONS: &[&str] = &[
    "md", "markdown", "mdx", "txt", "rst", "adoc", "org", "json", "jsonl", "yaml", "yml", "toml", "csv",
    "lock",
];

/// Whether `path` names a file of prose or data (by its extension), whose changes name nothing.
pub fn is_prose(path: &str) -> bool {
    path.rsplit_once('.')
        .filter(|(_, extension)| !extension.contains(['/', '\\']))
        .is_some_and(|(_, extension)| PROSE_EXTENSIONS.contains(&extension.to_ascii_lowercase().as_str()))
}

/// Adds `name` to one change's `names` unless it is there or [`MAX_NAMES_PER_FILE`] are.
pub fn note_name(names: &mut Vec<String>, name: &str) {
    if names.len() < MAX_NAMES_PER_FILE && !names.iter().any(|n| n == name) {
        names.push(name.to_owned());
    }
}

/// Adds `newer` names to `names` (older first): each once, at its newest place, the last
/// [`MAX_NAMES_PER_FILE`] kept.
pub fn add_names(names: &mut Vec<String>, newer: impl IntoIterator<Item = impl AsRef<str>>) {
    for name in newer {
        let name = name.as_ref();
        names.retain(|n| n != name);
        names.push(name.to_owned());
    }
    let excess = names.len().saturating_sub(MAX_NAMES_PER_FILE);
    names.drain(..excess);
}

/// The identifier at the start of `text` (letters, digits, `_`, `$`) and what follows it.
fn split_word(text: &str) -> (&str, &str) {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).unwrap_or(text.len());
    text.split_at(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn definitions_in_common_languages_are_recognised() {
        let cases = [
            ("def get_head(self):", Some("get_head")),
            ("    async def fetch(url: str) -> bytes:", Some("fetch")),
            ("class GitRepo:", Some("GitRepo")),
            ("class TestRepo(unittest.TestCase):", Some("TestRepo")),
            ("pub(crate) async fn run_turn<'a>(", Some("run_turn")),
            ("pub fn defined_name(line: &str) -> Option<&str> {", Some("defined_name")),
            ("    const fn max() -> u32 {", Some("max")),
            ("pub struct Ladder<'a> {", Some("Ladder")),
            ("struct Unit;", Some("Unit")),
            ("pub(crate) enum FileOp {", Some("FileOp")),
            ("export default function App() {", Some("App")),
            ("function* walk(node) {", Some("walk")),
            ("export interface Props extends Base {", Some("Props")),
            ("type Config struct {", Some("Config")),
            ("type Handler = (req: Request) => void;", Some("Handler")),
            ("func (r *Repo) Head() (string, error) {", Some("Head")),
            ("func main() {", Some("main")),
            ("public abstract class Shape {", Some("Shape")),
            ("  def save", Some("save")),
            ("class names are case-sensitive", None),
            ("function calls (see below)", None),
            ("enum values: red, green", None),
            ("type definitions: see types.ts", None),
            ("trait Tool: Send + Sync {", Some("Tool")),
            ("class Foo : public Base {", Some("Foo")),
            ("function foo (a) {", Some("foo")),
            ("class Shape:", Some("Shape")),
            ("type List[T any] []T", Some("List")),
            ("type of input", None),
            ("the function returns", None),
            ("fn", None),
            ("def 3d(x):", None),
            ("define(x)", None),
            ("classify(x)", None),
            ("let x = 1;", None),
            ("public void run() {", None),
            ("pub(crate", None),
            ("", None),
        ];
        for (line, expected) in cases {
            assert_eq!(defined_name(line), expected, "{line:?}");
        }
    }

    #[test]
    fn prose_and_data_files_are_told_by_their_extension() {
        for path in ["README.md", "docs/notes.TXT", "Cargo.toml", "data/x.json"] {
            assert!(is_prose(path), "{path}");
        }
        for path in ["src/lib.rs", "app.py", "Makefile", "v1.md/main.go", "notes"] {
            assert!(!is_prose(path), "{path}");
        }
    }

    #[test]
    fn names_are_listed_once_and_the_newest_kept() {
        let code = "class A:\n    def run(self):\n        pass\n\nclass B(A):\n    def run(self):\n";
        assert_eq!(names_of_change([code]), ["A", "run", "B"]);
        let mut names = vec!["old".to_owned(), "run".to_owned()];
        add_names(&mut names, ["run", "new"]);
        assert_eq!(names, ["old", "run", "new"]);
        add_names(&mut names, (0..MAX_NAMES_PER_FILE).map(|i| format!("f{i}")));
        assert_eq!(names.len(), MAX_NAMES_PER_FILE);
        assert_eq!(names.first().map(String::as_str), Some("f0"));
        // One change: in order of first appearance, the first few.
        let many: String = (0..20).map(|i| format!("fn f{i}() {{}}\n")).collect();
        let change = names_of_change(["fn b() {}\nfn a() {}", "fn a() {}", &many]);
        assert_eq!(change.len(), MAX_NAMES_PER_FILE);
        assert_eq!(change[..3], ["b", "a", "f0"]);
    }

    proptest! {
        #[test]
        fn a_name_is_an_identifier_from_its_line(line in "\\PC{0,60}") {
            if let Some(name) = defined_name(&line) {
                prop_assert!(line.contains(name));
                prop_assert!(!name.is_empty());
                prop_assert!(name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$'));
            }
        }
    }
}
