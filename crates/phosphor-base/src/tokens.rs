//! Token accounting: the approximate count `ceil(bytes/4)`, exact counts from real tokenizers,
//! and running totals so that a turn never re-counts the whole history.

use crate::message::{Message, Part};
use crate::model::{ChatRequest, ToolSpec};

/// Tokens added for each message on top of its content: the role marker and the delimiters a
/// chat template wraps around a message. OpenAI documents 3 for its chat format (`<|start|>role`,
/// `<|message|>`, `<|end|>`); llama-style templates spend 4 to 5. We take 4.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;

/// Tokens charged for an image part. The real cost depends on size and detail; 85 is OpenAI's
/// low-detail figure and keeps the estimate finite for transcripts that carry images.
pub const IMAGE_TOKENS: u64 = 85;

/// Tokens added once per request: the assistant-turn primer every chat template ends with.
pub const REQUEST_OVERHEAD_TOKENS: u64 = 3;

/// Counts tokens of text. Implementations must be cheap to call repeatedly and thread-safe.
pub trait TokenCounter: Send + Sync {
    /// A short name for logs and benchmark tables (`approx`, `o200k_base`, ...).
    fn name(&self) -> &str;

    /// Tokens in `text`.
    fn count_text(&self, text: &str) -> u64;

    /// Tokens one message costs in a request: its content plus [`MESSAGE_OVERHEAD_TOKENS`].
    fn count_message(&self, message: &Message) -> u64 {
        let mut total = MESSAGE_OVERHEAD_TOKENS;
        if let Some(name) = &message.name {
            total += self.count_text(name);
        }
        for part in &message.parts {
            total += match part {
                Part::Text { text } | Part::Reasoning { text, .. } => self.count_text(text),
                Part::Image { .. } => IMAGE_TOKENS,
                Part::ToolCall(call) => {
                    self.count_text(&call.id) + self.count_text(&call.name) + self.count_text(&call.arguments)
                }
                Part::ToolResult(result) => {
                    self.count_text(&result.call_id) + self.count_text(&result.content)
                }
                Part::Finish { .. } => 0,
            };
        }
        total
    }

    /// Tokens a tool definition costs (its JSON as sent).
    fn count_tool(&self, tool: &ToolSpec) -> u64 {
        let schema = serde_json::to_string(&tool.parameters).unwrap_or_default();
        self.count_text(&tool.name) + self.count_text(&tool.description) + self.count_text(&schema) + 8
    }

    /// Tokens of a whole request: messages, tool definitions and the reply primer.
    fn count_request(&self, request: &ChatRequest) -> u64 {
        REQUEST_OVERHEAD_TOKENS
            + request.messages.iter().map(|m| self.count_message(m)).sum::<u64>()
            + request.tools.iter().map(|t| self.count_tool(t)).sum::<u64>()
    }
}

/// The default estimate: `ceil(utf8_bytes / 4)` per text. No tokenizer, no allocation.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxCounter;

impl ApproxCounter {
    /// `ceil(bytes / 4)`.
    pub const fn count_bytes(bytes: usize) -> u64 {
        (bytes as u64).div_ceil(4)
    }
}

impl TokenCounter for ApproxCounter {
    fn name(&self) -> &str {
        "approx"
    }

    fn count_text(&self, text: &str) -> u64 {
        ApproxCounter::count_bytes(text.len())
    }
}

/// Running token totals of a message sequence: each message is counted once, when added.
///
/// The agent keeps one for the history since the latest summary; a summary calls
/// [`TokenLedger::reset`] with the summary message.
#[derive(Debug, Clone, Default)]
pub struct TokenLedger {
    counts: Vec<u64>,
    total: u64,
}

impl TokenLedger {
    /// An empty ledger.
    pub fn new() -> TokenLedger {
        TokenLedger::default()
    }

    /// A ledger over `messages`, counting each once.
    pub fn from_messages<'a>(
        counter: &dyn TokenCounter,
        messages: impl IntoIterator<Item = &'a Message>,
    ) -> TokenLedger {
        let mut ledger = TokenLedger::new();
        for message in messages {
            ledger.push(counter, message);
        }
        ledger
    }

    /// Counts `message` and adds it; returns its count.
    pub fn push(&mut self, counter: &dyn TokenCounter, message: &Message) -> u64 {
        let count = counter.count_message(message);
        self.counts.push(count);
        self.total += count;
        count
    }

    /// Replaces the last message's count (a streamed message that grew); returns the new count.
    pub fn update_last(&mut self, counter: &dyn TokenCounter, message: &Message) -> u64 {
        let count = counter.count_message(message);
        if let Some(last) = self.counts.last_mut() {
            self.total = self.total - *last + count;
            *last = count;
        } else {
            self.counts.push(count);
            self.total = count;
        }
        count
    }

    /// Starts over from `messages` (after a compaction: the summary and what follows it).
    pub fn reset<'a>(&mut self, counter: &dyn TokenCounter, messages: impl IntoIterator<Item = &'a Message>) {
        *self = TokenLedger::from_messages(counter, messages);
    }

    /// The sum of every counted message.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// How many messages are counted.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no message is counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Each message's count, in order.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Role, ToolCall};

    #[test]
    fn approx_is_ceil_of_bytes_over_four() {
        for (text, expected) in [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("héllo", 2), ("日本語", 3)]
        {
            assert_eq!(ApproxCounter.count_text(text), expected, "{text:?}");
        }
    }

    #[test]
    fn message_count_adds_framing_and_every_part() {
        let mut message = Message::new(
            Role::Assistant,
            vec![
                Part::Text { text: "abcdefgh".into() },
                Part::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: "{\"p\":1}".into(),
                }),
            ],
        );
        assert_eq!(ApproxCounter.count_message(&message), MESSAGE_OVERHEAD_TOKENS + 2 + 1 + 1 + 2);
        message.parts.push(Part::Image { url: "data:".into(), detail: None });
        assert_eq!(ApproxCounter.count_message(&message), MESSAGE_OVERHEAD_TOKENS + 6 + IMAGE_TOKENS);
    }

    #[test]
    fn ledger_counts_incrementally_and_matches_a_full_count() {
        let messages: Vec<Message> = (0..50).map(|i| Message::user("x".repeat(i * 7))).collect();
        let mut ledger = TokenLedger::new();
        for m in &messages {
            ledger.push(&ApproxCounter, m);
        }
        let full: u64 = messages.iter().map(|m| ApproxCounter.count_message(m)).sum();
        assert_eq!(ledger.total(), full);
        let mut grown = messages[49].clone();
        grown.parts.push(Part::Text { text: "more text".into() });
        ledger.update_last(&ApproxCounter, &grown);
        assert_eq!(
            ledger.total(),
            full - ApproxCounter.count_message(&messages[49]) + ApproxCounter.count_message(&grown)
        );
        ledger.reset(&ApproxCounter, &messages[..1]);
        assert_eq!((ledger.len(), ledger.total()), (1, MESSAGE_OVERHEAD_TOKENS));
    }
}
