//! The outline an answer must follow: headed sections of short bullet lines.
//!
//! A small model asked for a summary in sections tends to copy the instructions back, or to loop.
//! Constrained to an [`Outline`], it cannot: the headings are written for it, every line under one
//! is a bullet of bounded length, each section has at most a few, and the answer ends after the
//! last. The local engines sample under it (llama.cpp through its grammar sampler, as
//! [`Outline::gbnf`]; mistral.rs through its regex constraint, as [`Outline::regex`]); remote
//! servers never get it. The one description of the shape is this type: both forms are derived
//! from it.
//!
//! ```
//! use phosphor_base::outline::{Outline, Section};
//!
//! let outline = Outline::new(vec![Section::new("Goal", 2), Section::new("Next", 1)]);
//! assert!(outline.gbnf().starts_with("root ::= \"## Goal\\n\" "));
//! assert!(outline.accepts("## Goal\n- Fix the test\n## Next\n- Run it\n"));
//! assert!(!outline.accepts("## Goal\n## Next\n- Run it\n"));
//! ```

use serde::{Deserialize, Serialize};

/// The longest bullet line, in characters after the `- `.
pub const MAX_LINE_CHARS: usize = 240;

/// Headed sections, in order, each with one to a few bullet lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outline {
    /// The sections in the order they are written.
    pub sections: Vec<Section>,
}

/// One section: `## {heading}` on a line of its own, then 1 to `max_lines` lines `- ...`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    /// The heading's text (without the `## `).
    pub heading: String,
    /// The most bullet lines the section may have; at least 1.
    pub max_lines: u8,
}

impl Section {
    /// A section of at most `max_lines` lines (at least 1).
    pub fn new(heading: impl Into<String>, max_lines: u8) -> Self {
        Self { heading: heading.into(), max_lines: max_lines.max(1) }
    }
}

impl Outline {
    /// An outline of these sections.
    pub fn new(sections: Vec<Section>) -> Self {
        Self { sections }
    }

    /// The outline as a GBNF grammar (llama.cpp's grammar format), rule `root`. A line starts with
    /// a character that is neither a space nor `#`, so no line is empty and none is a heading.
    pub fn gbnf(&self) -> String {
        let sections: Vec<String> = self
            .sections
            .iter()
            .map(|s| {
                format!("{} line{{1,{}}}", gbnf_literal(&format!("## {}\n", s.heading)), s.max_lines.max(1))
            })
            .collect();
        format!(
            "root ::= {}\nline ::= \"- \" [^\\n#\\t ] [^\\n]{{0,{}}} \"\\n\"\n",
            sections.join(" "),
            MAX_LINE_CHARS - 1
        )
    }

    /// The outline as a regular expression of the whole answer (mistral.rs's regex constraint).
    pub fn regex(&self) -> String {
        let line = format!("- [^\\n#\\t ][^\\n]{{0,{}}}\\n", MAX_LINE_CHARS - 1);
        self.sections
            .iter()
            .map(|s| format!("## {}\\n({line}){{1,{}}}", regex_literal(&s.heading), s.max_lines.max(1)))
            .collect()
    }

    /// Whether `text` is a whole answer of this outline (what either constraint lets through).
    pub fn accepts(&self, text: &str) -> bool {
        let mut rest = text;
        for section in &self.sections {
            let Some(after) = rest.strip_prefix(&format!("## {}\n", section.heading)) else { return false };
            rest = after;
            let mut lines = 0;
            while let Some(after) = rest.strip_prefix("- ") {
                let Some((line, next)) = after.split_once('\n') else { return false };
                let valid_start = line.chars().next().is_some_and(|c| !matches!(c, '#' | '\t' | ' '));
                if !valid_start || line.chars().count() > MAX_LINE_CHARS {
                    return false;
                }
                lines += 1;
                rest = next;
            }
            if lines == 0 || lines > usize::from(section.max_lines.max(1)) {
                return false;
            }
        }
        rest.is_empty()
    }
}

/// A GBNF string literal.
fn gbnf_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `text` matched literally in a regular expression.
fn regex_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outline() -> Outline {
        Outline::new(vec![Section::new("Goal", 2), Section::new("Done (so far)", 3), Section::new("Next", 1)])
    }

    #[test]
    fn the_grammar_writes_the_headings_and_bounds_the_lines() {
        assert_eq!(
            outline().gbnf(),
            "root ::= \"## Goal\\n\" line{1,2} \"## Done (so far)\\n\" line{1,3} \"## Next\\n\" line{1,1}\n\
             line ::= \"- \" [^\\n#\\t ] [^\\n]{0,239} \"\\n\"\n"
        );
        let quoted = Outline::new(vec![Section::new("a \"b\" \\c", 1)]);
        assert!(quoted.gbnf().starts_with("root ::= \"## a \\\"b\\\" \\\\c\\n\" line{1,1}\n"));
    }

    #[test]
    fn the_regex_is_the_same_shape() {
        assert_eq!(
            outline().regex(),
            "## Goal\\n(- [^\\n#\\t ][^\\n]{0,239}\\n){1,2}## Done \\(so far\\)\\n(- [^\\n#\\t ][^\\n]{0,239}\\n){1,3}\
             ## Next\\n(- [^\\n#\\t ][^\\n]{0,239}\\n){1,1}"
        );
    }

    #[test]
    fn accepts_only_whole_answers_of_the_outline() {
        let o = outline();
        let good = "## Goal\n- Fix `cargo test`\n## Done (so far)\n- Edited src/lib.rs\n- Ran tests\n## Next\n- Commit\n";
        assert!(o.accepts(good));
        for bad in [
            "",
            "## Goal\n- Fix it\n",                            // sections missing
            "## Goal\n## Done (so far)\n- x\n## Next\n- y\n", // a section without lines
            "## Goal\n- a\n- b\n- c\n## Done (so far)\n- x\n## Next\n- y\n", // too many lines
            "## Goal\n-  a\n## Done (so far)\n- x\n## Next\n- y\n", // starts with a space
            "## Goal\n- # a\n## Done (so far)\n- x\n## Next\n- y\n", // a heading in a line
            "## Goal\n- a\n## Done (so far)\n- x\n## Next\n- y\nmore", // text after the end
            "## Next\n- y\n## Goal\n- a\n## Done (so far)\n- x\n", // out of order
        ] {
            assert!(!o.accepts(bad), "{bad:?}");
        }
        let long =
            format!("## Goal\n- {}\n## Done (so far)\n- x\n## Next\n- y\n", "a".repeat(MAX_LINE_CHARS + 1));
        assert!(!o.accepts(&long));
        assert_eq!(Section::new("x", 0).max_lines, 1);
    }
}
