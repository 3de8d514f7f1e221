//! Transcript files: read in any of the three layouts, written back in the layout they were read in.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use anyhow::{Context, Result};
use phosphor_base::Message;
use phosphor_wire::chat::parse_transcript_with_warnings;
use serde_json::{Map, Value};

/// How a transcript file is laid out.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// A JSON array of messages.
    Array,
    /// An object with a `messages` array; the other keys (here without `messages`) are kept.
    Object(Map<String, Value>),
    /// One message object per line.
    Lines,
}

/// A transcript as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The messages.
    pub messages: Vec<Message>,
    /// The layout to write results in.
    pub layout: Layout,
    /// Fields that were present but ignored, one line each.
    pub warnings: Vec<String>,
}

/// Reads a transcript from `text`; `source` names it in errors.
pub fn parse(text: &str, source: &str) -> Result<Transcript> {
    let (messages, warnings) =
        parse_transcript_with_warnings(text).map_err(|err| anyhow::anyhow!("{source}: {err}"))?;
    let layout = match serde_json::from_str::<Value>(text.strip_prefix('\u{feff}').unwrap_or(text)) {
        Ok(Value::Array(_)) => Layout::Array,
        Ok(Value::Object(mut object)) if object.contains_key("messages") => {
            object.remove("messages");
            Layout::Object(object)
        }
        _ => Layout::Lines,
    };
    Ok(Transcript { messages, layout, warnings })
}

/// Reads the text of `path`, or stdin for `-`.
pub fn read_input(path: &Path) -> Result<(String, String)> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        io::stdin().read_to_string(&mut text).context("reading the transcript from stdin")?;
        Ok((text, "<stdin>".to_owned()))
    } else {
        let text = fs::read_to_string(path).map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?;
        Ok((text, path.display().to_string()))
    }
}

/// The file text of `messages` (OpenAI JSON values) in `layout`.
pub fn render(messages: Vec<Value>, layout: &Layout) -> Result<String> {
    let mut out = match layout {
        Layout::Array => serde_json::to_string_pretty(&Value::Array(messages))?,
        Layout::Object(rest) => {
            let mut object = rest.clone();
            object.insert("messages".to_owned(), Value::Array(messages));
            serde_json::to_string_pretty(&Value::Object(object))?
        }
        Layout::Lines => {
            let lines = messages.iter().map(serde_json::to_string).collect::<Result<Vec<_>, _>>()?;
            lines.join("\n")
        }
    };
    if !out.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// Writes `text` to `path`, or stdout when `None`.
pub fn write_output(path: Option<&Path>, text: &str) -> Result<()> {
    match path {
        Some(path) => fs::write(path, text).map_err(|err| anyhow::anyhow!("{}: {err}", path.display())),
        None => {
            let mut stdout = io::stdout().lock();
            stdout.write_all(text.as_bytes())?;
            stdout.flush()?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_wire::chat::to_openai;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn check(input: &str, layout: Layout, output: &str) {
        let transcript = parse(input, "t").unwrap();
        assert_eq!(transcript.layout, layout);
        assert_eq!(transcript.messages.len(), 2);
        let rendered = render(to_openai(&transcript.messages), &transcript.layout).unwrap();
        // Key order depends on serde_json's `preserve_order` (on when a dependency enables it):
        // compare the values, and the layout through the line structure.
        let values = |text: &str| -> Vec<serde_json::Value> {
            if transcript.layout == Layout::Lines {
                text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
            } else {
                vec![serde_json::from_str(text).unwrap()]
            }
        };
        assert_eq!(values(&rendered), values(output));
        assert_eq!(rendered.lines().count(), output.lines().count(), "{rendered}");
        assert_eq!(rendered.ends_with('\n'), output.ends_with('\n'));
    }

    #[test]
    fn each_layout_is_written_back_as_read() {
        let user = r#"{"role":"user","content":"hi"}"#;
        let assistant = r#"{"role":"assistant","content":"hello"}"#;
        check(
            &format!("[{user},{assistant}]"),
            Layout::Array,
            "[\n  {\n    \"content\": \"hi\",\n    \"role\": \"user\"\n  },\n  {\n    \"content\": \"hello\",\n    \
             \"role\": \"assistant\"\n  }\n]\n",
        );
        check(
            &format!("{user}\n\n{assistant}\n"),
            Layout::Lines,
            "{\"content\":\"hi\",\"role\":\"user\"}\n{\"content\":\"hello\",\"role\":\"assistant\"}\n",
        );
        let object = format!(r#"{{"model":"gpt-4.1","messages":[{user},{assistant}]}}"#);
        let transcript = parse(&object, "t").unwrap();
        assert_eq!(
            transcript.layout,
            Layout::Object(Map::from_iter([("model".to_owned(), json!("gpt-4.1"))]))
        );
        let written: Value =
            serde_json::from_str(&render(to_openai(&transcript.messages), &transcript.layout).unwrap())
                .unwrap();
        assert_eq!(
            written,
            json!({ "model": "gpt-4.1", "messages": [{ "role": "user", "content": "hi" }, { "role": "assistant", "content": "hello" }] })
        );
    }

    #[test]
    fn errors_name_the_source() {
        let error = parse(r#"[{"role":"robot"}]"#, "chat.json").unwrap_err();
        assert!(error.to_string().starts_with("chat.json: $[0].role: "), "{error}");
    }
}
