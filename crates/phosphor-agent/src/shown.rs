//! How a summary is shown to a model, and token counts of the history as it is shown.

use std::borrow::Cow;

use phosphor_core::{Message, TokenCounter, TokenLedger};

use crate::artifacts::TRAIL_HEADING;

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

/// Counts each message as it is sent (a summary with its preface).
pub(crate) fn shown_ledger(counter: &dyn TokenCounter, history: &[Message]) -> TokenLedger {
    let mut ledger = TokenLedger::new();
    for message in history {
        ledger.push(counter, &summary_as_context(message));
    }
    ledger
}

/// The summary text without the artifact trail (the trail is merged separately).
pub(crate) fn strip_trail(text: &str) -> &str {
    match text.rfind(TRAIL_HEADING) {
        Some(at) => text[..at].trim_end(),
        None => text,
    }
}
