//! How a summary is shown to a model, and token counts of the history as it is shown.

use std::borrow::Cow;

use phosphor_base::{Message, Part, TokenCounter, TokenLedger};

/// What precedes a summary when it is shown to a model.
pub const SUMMARY_PREFIX: &str = "This conversation continues from an earlier part that was compacted. \
Summary of everything before this point:\n\n";

/// A summary as the model sees it: a user message with [`SUMMARY_PREFIX`] (the summary flag cannot be
/// expressed on the wire, and a model reads a summary best as context it was given). Others unchanged.
pub(crate) fn summary_as_context(message: &Message) -> Cow<'_, Message> {
    if !message.is_summary {
        return Cow::Borrowed(message);
    }
    let mut shown = Message::user(format!("{SUMMARY_PREFIX}{}", message.text_content()));
    shown.id = message.id.clone();
    shown.session_id = message.session_id.clone();
    Cow::Owned(shown)
}

/// Opens the history in a summary request (see [`transcript`]).
pub(crate) const TRANSCRIPT_INTRO: &str = "The conversation to summarize, oldest first. [user] and [assistant] \
open what each said, [call NAME] is a tool call with its JSON arguments, and [NAME result] or [NAME error] is \
what the tool returned.";

/// A history as a summarizer reads it: one transcript, each message opened by its speaker
/// (`[user]`, `[assistant]`), each tool call a `[call NAME] {arguments}` line and each tool output
/// a `[NAME result]` (or `[NAME error]`) paragraph, messages a blank line apart, images in place.
/// Call ids, roles and per-message framing are gone: a summarizer needs none of them (a call's
/// output follows it), they were a seventh of a tool-heavy summary request, and a transcript
/// reads as something to summarize rather than a conversation to continue. A summary in the
/// history reads as context ([`SUMMARY_PREFIX`]); reasoning is not shown.
pub(crate) fn transcript<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<Part> {
    let mut out = Transcript::default();
    for message in messages {
        if message.is_summary {
            out.open(SUMMARY_PREFIX);
            out.text.push_str(&message.text_content());
            continue;
        }
        let speaker = format!("[{}] ", message.role.as_str());
        let mut opened = false;
        for part in &message.parts {
            match part {
                Part::Text { text } => {
                    if !opened {
                        out.open(&speaker);
                        opened = true;
                    }
                    out.text.push_str(text);
                }
                Part::Image { .. } => {
                    if !opened {
                        out.open(&speaker);
                        opened = true;
                    }
                    out.parts.push(Part::Text { text: std::mem::take(&mut out.text) });
                    out.parts.push(part.clone());
                }
                Part::ToolCall(call) => {
                    if opened {
                        out.text.push('\n');
                    } else {
                        out.open("");
                        opened = true;
                    }
                    out.text.push_str(&format!("[call {}] {}", call.name, call.arguments));
                }
                Part::ToolResult(result) => {
                    let outcome = if result.is_error { "error" } else { "result" };
                    out.open(&format!("[{} {outcome}] ", result.name));
                    out.text.push_str(&result.content);
                    opened = true;
                }
                Part::Reasoning { .. } | Part::Finish { .. } => {}
            }
        }
    }
    if !out.text.is_empty() {
        out.parts.push(Part::Text { text: out.text });
    }
    out.parts
}

/// A [`transcript`] being written: the parts so far and the text after them.
#[derive(Default)]
struct Transcript {
    parts: Vec<Part>,
    text: String,
}

impl Transcript {
    /// Starts a paragraph with `label`, a blank line after what came before.
    fn open(&mut self, label: &str) {
        if !self.text.is_empty() || !self.parts.is_empty() {
            self.text.push_str("\n\n");
        }
        self.text.push_str(label);
    }
}

/// The history as a model is shown it: a summary as context, and the tool outputs of
/// `history[..masked]` masked (observation masking).
pub(crate) fn shown_history(history: &[Message], masked: usize) -> Vec<Cow<'_, Message>> {
    let mut shown: Vec<Cow<'_, Message>> = history.iter().map(summary_as_context).collect();
    phosphor_prune::mask_tool_traffic(&mut shown, masked);
    shown
}

/// Counts each message as it is sent (see [`shown_history`]).
pub(crate) fn shown_ledger(counter: &dyn TokenCounter, history: &[Message], masked: usize) -> TokenLedger {
    TokenLedger::from_messages(counter, shown_history(history, masked).iter().map(|m| m.as_ref()))
}

/// The masking boundary of `history` for a session that masks up to message `masked_until`:
/// the index after it, or 0 when the history no longer holds it (a summary folded it).
pub(crate) fn masked_len(history: &[Message], masked_until: Option<&str>) -> usize {
    masked_until.and_then(|id| history.iter().position(|m| m.id == id)).map_or(0, |at| at + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::{Role, ToolCall};
    use pretty_assertions::assert_eq;

    #[test]
    fn a_transcript_names_speakers_calls_and_outputs_and_keeps_images_in_place() {
        let image = Part::Image { url: "data:image/png;base64,AAAA".into(), detail: None };
        let call = |id: &str, args: &str| {
            Part::ToolCall(ToolCall { id: id.into(), name: "bash".into(), arguments: args.into() })
        };
        let messages = [
            Message { is_summary: true, ..Message::assistant("Earlier work.") },
            Message::new(Role::User, vec![Part::Text { text: "Why does this fail?".into() }, image.clone()]),
            Message::new(
                Role::Assistant,
                vec![
                    Part::reasoning("hidden"),
                    Part::Text { text: "Let me run it.".into() },
                    call("call_9f", r#"{"command":"make"}"#),
                    call("call_a0", r#"{"command":"make test"}"#),
                ],
            ),
            Message::tool_result("call_9f", "bash", "built", false),
            Message::tool_result("call_a0", "bash", "1 failed", true),
            Message::new(Role::Assistant, vec![call("call_b1", "{}")]),
        ];
        let parts = transcript(&messages);
        let text = |part: &Part| match part {
            Part::Text { text } => text.clone(),
            other => panic!("not text: {other:?}"),
        };
        assert_eq!(parts.len(), 3);
        assert_eq!(text(&parts[0]), format!("{SUMMARY_PREFIX}Earlier work.\n\n[user] Why does this fail?"));
        assert_eq!(parts[1], image);
        assert_eq!(
            text(&parts[2]),
            "\n\n[assistant] Let me run it.\n[call bash] {\"command\":\"make\"}\n[call bash] {\"command\":\"make test\"}\
             \n\n[bash result] built\n\n[bash error] 1 failed\n\n[call bash] {}"
        );
        // No ids, no reasoning.
        assert!(
            !parts.iter().any(
                |p| matches!(p, Part::Text { text } if text.contains("call_") || text.contains("hidden"))
            )
        );
        assert_eq!(transcript(&[]), Vec::<Part>::new());
    }
}
