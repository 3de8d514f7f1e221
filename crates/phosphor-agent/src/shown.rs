//! How a summary is shown to a model, and token counts of the history as it is shown.

use std::borrow::Cow;

use phosphor_core::{Message, TokenCounter, TokenLedger};

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
