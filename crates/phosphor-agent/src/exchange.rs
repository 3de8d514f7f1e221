//! Sessions of clients that keep their own history (an OpenAI-compatible proxy's, `phosphor
//! serve`): each request resends the whole conversation, the agent stores what is new, compacts
//! exactly as in a turn, and answers one model call. The client runs its own tools.
//!
//! [`SessionIndex`] recognises which stored session a request continues: the stored session whose
//! messages are the longest prefix of the request's (see its documentation for the rules).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use phosphor_core::{FinishReason, Message, MessageStatus, Part, Role, ToolSpec, Usage};
use tracing::Instrument;

use crate::agent::{Cache, Frame, SessionAgent};
use crate::compaction::CompactionReport;
use crate::error::{AgentError, Result};
use crate::events::{AgentEvent, EventSender, emit};
use crate::policy;
use crate::turn::{Sampling, Step, TurnState};

/// One request of a client that keeps its own history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exchange {
    /// The client's system prompt (its leading system messages, joined).
    pub system_prompt: String,
    /// The client's tools: the model may call them, the client runs them.
    pub tools: Vec<ToolSpec>,
    /// The messages the session does not hold yet, in order: the client's new user messages, its
    /// tool results, an assistant message it wrote itself.
    pub messages: Vec<Message>,
    /// The most tokens the answer may have (capped by the model's limit and what fits).
    pub max_output_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
}

/// The answer to an [`Exchange`].
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The stored assistant message (text, reasoning, tool calls).
    pub message: Message,
    /// The model call's usage (estimated where the backend reported none).
    pub usage: Usage,
    /// Why the answer ended, when the backend said.
    pub finish_reason: Option<FinishReason>,
    /// The compactions this request ran, in order.
    pub compactions: Vec<CompactionReport>,
}

/// How many times one exchange sends its request: the first time, and again after each
/// compaction that followed a rejection (the progress rule refuses a second one in a row, so two
/// would do; one more is slack, never a loop).
const MAX_ATTEMPTS: u32 = 3;

impl SessionAgent {
    /// Stores `exchange.messages` in the session, compacts when the triggers fire (as a turn does
    /// before each request: masking, thresholds, overflow, the progress rule), and asks the session
    /// model once, with the client's system prompt and tools. The answer is stored and returned;
    /// its tool calls are the client's to run. Requests on one session run one at a time, in
    /// arrival order. On error every message stays stored and the session stays usable.
    ///
    /// `summarize_max_per_turn` counts the compactions of this request: a stateless client's turn
    /// spans several requests the agent cannot tell apart, and the progress rule (no compaction
    /// without a model response since the last one) is what rules out a loop across them.
    pub async fn respond(
        &self,
        session_id: &str,
        exchange: Exchange,
        events: Option<&EventSender>,
    ) -> Result<Reply> {
        self.with_session(session_id, events, async |cache: &mut Cache| {
            self.exchange(cache, exchange, events).await
        })
        .instrument(crate::agent::invoke_agent_span(session_id))
        .await
    }

    async fn exchange(
        &self,
        cache: &mut Cache,
        exchange: Exchange,
        events: Option<&EventSender>,
    ) -> Result<Reply> {
        let Exchange { system_prompt, tools, messages, max_output_tokens, temperature } = exchange;
        let fixed = policy::fixed_tokens(&system_prompt, &tools, self.counter.as_ref());
        let frame = Frame { system_prompt, tools, fixed };
        if cache.frame.as_ref() != Some(&frame) {
            cache.frame = Some(frame);
        }
        let info = self.models.large.info().clone();
        let overhead = fixed + policy::reserve(&info);

        // Every new message is stored first, whatever happens next; one that cannot fit even
        // alone is stored failed (never history) and stops the request.
        let mut too_large = None;
        for message in messages {
            let mut stored = self.new_message(&cache.session.id, message.role, message.parts);
            stored.model = message.model;
            let tokens = self.counter.count_message(&stored);
            if tokens + overhead > info.context_window {
                stored.status = MessageStatus::Failed;
                too_large.get_or_insert(tokens);
                self.store.append_message(&stored).await?;
                continue;
            }
            self.store.append_message(&stored).await?;
            if cache.session.title.is_empty() && stored.role == Role::User {
                cache.session.title = crate::turn::title_from(&stored.text_content());
            }
            cache.push(self.counter.as_ref(), stored);
        }
        if let Some(tokens) = too_large {
            return Err(AgentError::MessageTooLarge {
                tokens,
                overhead,
                window: info.context_window,
                model: info.model,
            });
        }

        let user_id = cache
            .history
            .iter()
            .rev()
            .find(|m| m.role == Role::User && !m.is_summary)
            .map(|m| m.id.clone())
            .unwrap_or_default();
        let mut turn = TurnState::new(user_id);
        let sampling = Sampling { max_output_tokens, temperature };
        for _ in 0..MAX_ATTEMPTS {
            if let Step::Answered { message, usage, finish_reason, .. } =
                self.step(cache, &mut turn, &sampling, events).await?
            {
                emit(events, AgentEvent::TurnFinished { message_id: message.id.clone(), model_calls: 1 });
                return Ok(Reply {
                    message: *message,
                    usage: usage.unwrap_or_default(),
                    finish_reason,
                    compactions: turn.compactions,
                });
            }
        }
        Err(AgentError::StillOverflowing {
            tokens: self.estimate(cache),
            reserve: policy::reserve(&info),
            window: info.context_window,
            model: info.model.clone(),
            tried: format!(
                "the model rejected the request as too long {MAX_ATTEMPTS} times; {}",
                turn.tried()
            ),
        })
    }
}

/// Recognises the stored session a client's history continues, without reading the store.
///
/// The rules (see docs/ARCHITECTURE.md, "Sessions of stateless clients"):
/// - A session's *chain* is its complete, non-summary messages in order (what a client that sent
///   them and received the answers holds), each reduced to a [`fingerprint`]: role, text,
///   tool calls (id, name, arguments as canonical JSON) and tool results (call id, content).
///   Reasoning, ids, timestamps and models do not count, so a client that drops them still matches.
/// - Sessions live in *namespaces*: the part of the id before the first `~`. A client that names
///   its session (`X-Phosphor-Session: NAME`) works in namespace `NAME`; one that does not, in the
///   empty namespace (ids `~<uuid>`).
/// - A request continues the session of its namespace whose whole chain is the longest prefix of
///   the request's messages; the rest of the request is new. Only the sessions' current heads are
///   indexed, so a request that edits or drops a message the session holds matches none of them
///   and starts a new session (a branch): the stored one is never changed.
/// - A session is *claimed* while a request works on it ([`SessionIndex::claim`]): a second
///   request with the same prefix meanwhile does not find it and branches, as two clients that
///   forked a conversation should.
#[derive(Debug, Default)]
pub struct SessionIndex {
    /// (namespace, chain hash of a session's whole chain) → session id.
    heads: HashMap<(String, Chain), String>,
    /// session id → its head and length.
    sessions: HashMap<String, (Chain, usize)>,
}

/// A hash of a chain of fingerprints (128 bits: two independent keyed hashes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Chain(u64, u64);

impl Chain {
    /// The chain extended by one message.
    pub fn then(self, message: &Message) -> Chain {
        let print = fingerprint(message);
        let hash = |seed: u64, previous: u64| {
            let mut hasher = DefaultHasher::new();
            (seed, previous, &print).hash(&mut hasher);
            hasher.finish()
        };
        Chain(hash(1, self.0), hash(2, self.1))
    }

    /// The chains of every prefix of `messages` that [`counts`] (`result[i]` covers the first `i`
    /// counted messages; `result[0]` is the empty chain).
    pub fn prefixes<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<Chain> {
        let mut chains = vec![Chain::default()];
        for message in messages.into_iter().filter(|m| counts(m)) {
            let last = *chains.last().unwrap_or(&Chain::default());
            chains.push(last.then(message));
        }
        chains
    }
}

/// Whether a stored message is part of what a client holds: complete, not a summary, not a
/// system message.
pub fn counts(message: &Message) -> bool {
    message.status.is_complete() && !message.is_summary && message.role != Role::System
}

/// What identifies a message across a client's round trip (see [`SessionIndex`]).
pub fn fingerprint(message: &Message) -> String {
    let mut print = format!("{:?}", message.role);
    for part in &message.parts {
        match part {
            Part::Text { text } => {
                let text = text.trim();
                if !text.is_empty() {
                    print.push_str("\u{1}t");
                    print.push_str(text);
                }
            }
            Part::ToolCall(call) => {
                let arguments = serde_json::from_str::<serde_json::Value>(&call.arguments)
                    .map_or_else(|_| call.arguments.clone(), |v| v.to_string());
                print.push_str(&format!("\u{1}c{}\u{2}{}\u{2}{arguments}", call.id, call.name));
            }
            Part::ToolResult(result) => {
                print.push_str(&format!("\u{1}r{}\u{2}{}", result.call_id, result.content.trim()));
            }
            Part::Image { url, .. } => {
                print.push_str("\u{1}i");
                print.push_str(url);
            }
            Part::Reasoning { .. } | Part::Finish { .. } => {}
        }
    }
    print
}

/// The namespace of a session id: the part before the first `~`.
pub fn namespace(session_id: &str) -> &str {
    session_id.split('~').next().unwrap_or("")
}

/// What [`SessionIndex::find`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The session.
    pub session_id: String,
    /// How many of the request's counted messages the session already holds.
    pub held: usize,
}

impl SessionIndex {
    /// Records `session_id` with its stored `messages` (all of them, in order), replacing what the
    /// index knew about it.
    pub fn insert(&mut self, session_id: &str, messages: &[Message]) {
        let chains = Chain::prefixes(messages);
        let head = *chains.last().unwrap_or(&Chain::default());
        self.set(session_id, head, chains.len() - 1);
    }

    /// Moves `session_id`'s head to `head` over `len` counted messages.
    pub fn set(&mut self, session_id: &str, head: Chain, len: usize) {
        self.remove(session_id);
        self.heads.insert((namespace(session_id).to_owned(), head), session_id.to_owned());
        self.sessions.insert(session_id.to_owned(), (head, len));
    }

    /// Forgets `session_id` (while a request works on it, or for good).
    pub fn remove(&mut self, session_id: &str) -> Option<(Chain, usize)> {
        let (head, len) = self.sessions.remove(session_id)?;
        self.heads.remove(&(namespace(session_id).to_owned(), head));
        Some((head, len))
    }

    /// The session of `namespace` whose chain is the longest prefix of `chains` (as
    /// [`Chain::prefixes`] computes them for a request), or `None`.
    pub fn find(&self, namespace: &str, chains: &[Chain]) -> Option<Found> {
        (0..chains.len()).rev().find_map(|held| {
            self.heads
                .get(&(namespace.to_owned(), chains[held]))
                .map(|session_id| Found { session_id: session_id.clone(), held })
        })
    }

    /// [`SessionIndex::find`], and the session found is taken out of the index until the caller
    /// puts it back with [`SessionIndex::set`] or [`SessionIndex::insert`].
    pub fn claim(&mut self, namespace: &str, chains: &[Chain]) -> Option<Found> {
        let found = self.find(namespace, chains)?;
        self.remove(&found.session_id);
        Some(found)
    }

    /// Whether a session of this id is indexed (and not claimed).
    pub fn contains(&self, session_id: &str) -> bool {
        self.sessions.contains_key(session_id)
    }

    /// Sessions indexed.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is indexed.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_core::ToolCall;

    fn call(id: &str, args: &str) -> Message {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall(ToolCall { id: id.into(), name: "shell".into(), arguments: args.into() })],
        )
    }

    #[test]
    fn the_longest_stored_prefix_wins_within_its_namespace() {
        let a = Message::user("fix the bug");
        let b = Message::assistant("done");
        let c = Message::user("now the tests");
        let mut index = SessionIndex::default();
        index.insert("~one", std::slice::from_ref(&a));
        index.insert("~two", &[a.clone(), b.clone()]);
        index.insert("named", &[a.clone(), b.clone()]);
        let request = Chain::prefixes([&a, &b, &c]);
        assert_eq!(index.find("", &request), Some(Found { session_id: "~two".into(), held: 2 }));
        assert_eq!(index.find("named", &request), Some(Found { session_id: "named".into(), held: 2 }));
        assert_eq!(index.find("other", &request), None);
        // An edited history matches only up to where it still agrees with a stored head.
        let edited = Chain::prefixes([&a, &Message::assistant("not done"), &c]);
        assert_eq!(index.find("", &edited), Some(Found { session_id: "~one".into(), held: 1 }));
        // A claimed session is invisible until set back.
        let found = index.claim("", &request).unwrap();
        assert_eq!(index.find("", &request), Some(Found { session_id: "~one".into(), held: 1 }));
        let head = request[3];
        index.set(&found.session_id, head, 3);
        assert_eq!(index.find("", &request), Some(Found { session_id: "~two".into(), held: 3 }));
        assert_eq!(index.len(), 3);
    }

    #[test]
    fn a_fingerprint_ignores_what_clients_drop_and_keeps_what_they_say() {
        let mut with_reasoning = Message::assistant("  answer ");
        with_reasoning.parts.insert(0, Part::Reasoning { text: "thinking".into() });
        with_reasoning.id = "stored-id".into();
        assert_eq!(fingerprint(&with_reasoning), fingerprint(&Message::assistant("answer")));
        // Arguments compare as JSON, whatever the spacing.
        assert_eq!(fingerprint(&call("c1", "{\"a\": 1}")), fingerprint(&call("c1", "{\"a\":1}")));
        assert_ne!(fingerprint(&call("c1", "{\"a\":1}")), fingerprint(&call("c2", "{\"a\":1}")));
        assert_ne!(fingerprint(&Message::user("x")), fingerprint(&Message::assistant("x")));
        let mut summary = Message::assistant("summary");
        summary.is_summary = true;
        assert!(!counts(&summary));
    }
}
