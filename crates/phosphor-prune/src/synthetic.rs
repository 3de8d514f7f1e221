//! Deterministic synthetic agent transcripts for benchmarks and tests (shared with other crates'
//! benches; not part of the stable API).
//!
//! A transcript is a sequence of turns: a user prompt, then one to four assistant steps that each
//! write some text and call one to three tools (`read_file`, `bash`, `grep`, `list_dir`), each
//! call answered by a tool message, then a closing assistant answer. Tool outputs are source code,
//! build and test logs, grep hits and directory listings, from a hundred bytes to 64 KiB, and about
//! one line in eight carries non-ASCII text (accents, CJK, emoji). The pairing rule holds.

use phosphor_base::message::{Message, Part, Role, ToolCall};

/// A xorshift64* generator: tiny, seeded, and the same sequence on every platform.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (any value, 0 included).
    pub fn new(seed: u64) -> XorShift {
        // Mix the seed so nearby seeds diverge at once; the state must never be 0.
        let mixed = (seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        XorShift(if mixed == 0 { 0x2545_F491_4F6C_DD1D } else { mixed })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high - low + 1)
    }

    /// True with probability `percent / 100`.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One of `items`.
    pub fn pick<'t>(&mut self, items: &[&'t str]) -> &'t str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "the", "cache", "config", "parser", "request", "token", "session", "error", "value", "buffer", "stream",
    "index", "model", "summary", "handler", "retry", "limit", "window", "message", "result", "update",
    "check", "field", "path",
];
const INTL: &[&str] = &[
    "キャッシュを更新する",
    "größer als erwartet",
    "日本語のコメント",
    "déjà vu: réessayer",
    "✓ passed",
    "⚠ deprecated",
    "🚀 deployed",
    "→ next step",
    "Ошибка: файл не найден",
    "중요한 변경 사항",
    "naïve café façade",
    "🙂👍🏽👨‍👩‍👧",
];
const IDENTS: &[&str] = &[
    "count", "len", "buf", "cfg", "state", "msg", "ctx", "input", "output", "total", "idx", "item", "node",
    "span",
];
const TYPES: &[&str] =
    &["usize", "u64", "String", "&str", "Vec<u8>", "Option<Message>", "Result<()>", "bool"];
const LEVELS: &[&str] = &["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"];
const DIRS: &[&str] = &["src", "crates/core/src", "crates/agent/src", "tests", "benches", "src/bin"];
const FILES: &[&str] =
    &["lib.rs", "main.rs", "config.rs", "message.rs", "tokens.rs", "prune.rs", "agent.rs", "error.rs"];

/// Builds one transcript; keeps the generator and the running counters.
struct Writer {
    rng: XorShift,
    messages: Vec<Message>,
    bytes: usize,
    calls: usize,
}

impl Writer {
    fn words(&mut self, out: &mut String, count: usize) {
        for i in 0..count {
            if i > 0 {
                out.push(' ');
            }
            if self.rng.chance(4) {
                out.push_str(self.rng.pick(INTL));
            } else {
                out.push_str(self.rng.pick(WORDS));
            }
        }
    }

    fn sentence(&mut self, low: usize, high: usize) -> String {
        let mut out = String::new();
        let count = self.rng.between(low, high);
        self.words(&mut out, count);
        out.push('.');
        out
    }

    fn path(&mut self) -> String {
        format!("{}/{}", self.rng.pick(DIRS), self.rng.pick(FILES))
    }

    /// A line of the kind of output `tool` prints.
    fn line(&mut self, tool: &str, n: usize, out: &mut String) {
        let intl = self.rng.chance(12);
        match tool {
            "read_file" => {
                let indent = self.rng.below(3) * 4;
                out.extend(std::iter::repeat_n(' ', indent));
                match self.rng.below(5) {
                    0 => {
                        out.push_str("// ");
                        self.words(out, 6);
                    }
                    1 => {
                        let (name, ty) = (self.rng.pick(IDENTS), self.rng.pick(TYPES));
                        out.push_str(&format!("pub fn {name}_{n}(&self, {name}: {ty}) -> {ty} {{"));
                    }
                    2 => {
                        let (a, b) = (self.rng.pick(IDENTS), self.rng.pick(IDENTS));
                        out.push_str(&format!("let {a} = self.{b}.iter().map(|x| x + {n}).sum::<u64>();"));
                    }
                    3 => out.push('}'),
                    _ => {
                        let name = self.rng.pick(IDENTS);
                        out.push_str(&format!("if {name} > {n} {{ return Err(Error::Limit({name})); }}"));
                    }
                }
            }
            "bash" => {
                let level = self.rng.pick(LEVELS);
                let path = self.path();
                out.push_str(&format!(
                    "2025-06-{:02}T12:{:02}:{:02}.{:03}Z {level:<5} {path}:{n}: ",
                    1 + n % 28,
                    n % 60,
                    (n * 7) % 60,
                    (n * 13) % 1000
                ));
                self.words(out, 8);
            }
            "grep" => {
                let path = self.path();
                let (a, b) = (self.rng.pick(IDENTS), self.rng.pick(IDENTS));
                out.push_str(&format!("{path}:{}:    let {a} = {b}.clone();", 10 + n));
            }
            _ => {
                let path = self.path();
                out.push_str(&format!("{:>8}  {path}", (n * 977) % 100_000));
            }
        }
        if intl {
            out.push_str(" // ");
            out.push_str(self.rng.pick(INTL));
        }
        out.push('\n');
    }

    fn output(&mut self, tool: &str) -> String {
        let size = match self.rng.below(10) {
            0..=3 => self.rng.between(60, 400),
            4..=7 => self.rng.between(1_024, 8_192),
            _ => self.rng.between(16_384, 65_536),
        };
        let mut out = String::with_capacity(size + 200);
        let mut n = 0;
        while out.len() < size {
            n += 1;
            self.line(tool, n, &mut out);
        }
        out
    }

    fn push(&mut self, mut message: Message) {
        let index = self.messages.len();
        self.bytes += message_bytes(&message);
        message.id = format!("m{index:07}");
        message.session_id = "synthetic".to_owned();
        message.created_at = 1_750_000_000_000 + index as i64 * 1_000;
        message.updated_at = message.created_at;
        self.messages.push(message);
    }

    fn turn(&mut self) {
        let prompt = self.sentence(8, 60);
        self.push(Message::user(prompt));
        for _ in 0..self.rng.between(1, 4) {
            let mut parts = vec![Part::Text { text: self.sentence(5, 40) }];
            let mut calls = Vec::new();
            for _ in 0..self.rng.between(1, 3) {
                self.calls += 1;
                let name = self.rng.pick(&[
                    "read_file",
                    "bash",
                    "grep",
                    "list_dir",
                    "read_file",
                    "bash",
                    "write_file",
                    "edit_file",
                ]);
                let arguments = match name {
                    // Writes and edits carry file contents in their arguments, as in real sessions.
                    "write_file" => {
                        let (path, content) = (self.path(), self.output("read_file"));
                        serde_json::json!({ "path": path, "content": content }).to_string()
                    }
                    "edit_file" => {
                        let path = self.path();
                        let (old, new) = (self.output("read_file"), self.output("read_file"));
                        serde_json::json!({ "path": path, "old_string": old, "new_string": new }).to_string()
                    }
                    "bash" => {
                        format!(r#"{{"command":"cargo test -p {} -- --nocapture"}}"#, self.rng.pick(IDENTS))
                    }
                    "grep" => format!(
                        r#"{{"pattern":"{}","path":"{}"}}"#,
                        self.rng.pick(IDENTS),
                        self.rng.pick(DIRS)
                    ),
                    _ => format!(r#"{{"path":"{}"}}"#, self.path()),
                };
                let call =
                    ToolCall { id: format!("call_{:06}", self.calls), name: name.to_owned(), arguments };
                calls.push(call.clone());
                parts.push(Part::ToolCall(call));
            }
            self.push(Message::new(Role::Assistant, parts));
            for call in calls {
                let failed = self.rng.chance(5);
                let content = match call.name.as_str() {
                    "write_file" | "edit_file" => {
                        format!("updated {} ({} bytes)", call.name, call.arguments.len())
                    }
                    name => self.output(name),
                };
                self.push(Message::tool_result(call.id, call.name, content, failed));
            }
        }
        let answer = self.sentence(20, 120);
        self.push(Message::assistant(answer));
    }
}

/// The bytes of text a model reads in `message`: text, reasoning, tool calls' ids, names and
/// arguments, and tool results' ids and content.
pub fn message_bytes(message: &Message) -> usize {
    message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { text } | Part::Reasoning { text, .. } => text.len(),
            Part::ToolCall(call) => call.id.len() + call.name.len() + call.arguments.len(),
            Part::ToolResult(result) => result.call_id.len() + result.content.len(),
            Part::Image { url, .. } => url.len(),
            Part::Finish { .. } => 0,
        })
        .sum()
}

/// [`message_bytes`] summed over `messages`.
pub fn transcript_bytes(messages: &[Message]) -> usize {
    messages.iter().map(message_bytes).sum()
}

/// A transcript of whole turns holding at least `target_bytes` bytes of text (by
/// [`message_bytes`]), the same for the same `seed`.
pub fn transcript(target_bytes: usize, seed: u64) -> Vec<Message> {
    let mut writer = Writer { rng: XorShift::new(seed), messages: Vec::new(), bytes: 0, calls: 0 };
    writer
        .push(Message::system("You are a coding agent. Use the tools to inspect and change the repository."));
    while writer.bytes < target_bytes {
        writer.turn();
    }
    writer.messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_tool_pairing;

    #[test]
    fn transcripts_are_deterministic_sized_and_paired() {
        let a = transcript(300_000, 7);
        assert_eq!(a, transcript(300_000, 7));
        assert_ne!(a, transcript(300_000, 8));
        let bytes = transcript_bytes(&a);
        assert!((300_000..300_000 + 65_536 * 12 + 10_000).contains(&bytes), "{bytes} bytes");
        assert_eq!(check_tool_pairing(&a), Ok(()));
        let non_ascii = a.iter().flat_map(|m| m.tool_results()).filter(|r| !r.content.is_ascii()).count();
        let results = a.iter().flat_map(|m| m.tool_results()).count();
        assert!(non_ascii * 2 > results, "{non_ascii} of {results} outputs hold non-ASCII text");
        let longest = a.iter().flat_map(|m| m.tool_results()).map(|r| r.content.len()).max().unwrap_or(0);
        assert!((16_384..65_536 + 200).contains(&longest), "longest output {longest}");
    }

    #[test]
    fn below_stays_in_range_and_spreads() {
        let mut rng = XorShift::new(0);
        let mut seen = [0_usize; 10];
        for _ in 0..10_000 {
            seen[rng.below(10)] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1_200).contains(&n)), "{seen:?}");
    }
}
