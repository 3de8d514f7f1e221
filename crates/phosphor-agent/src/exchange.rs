//! Sessions of clients that keep their own history (an OpenAI-compatible proxy's, `phosphor
//! serve`): each request resends the whole conversation, the agent stores what is new, compacts
//! exactly as in a turn, and answers one model call. The client runs its own tools.
//!
//! [`SessionAgent::claim`] recognises which stored session a request continues: the stored
//! session whose messages are the longest prefix of the request's (see its documentation for the
//! rules), and [`SessionAgent::finish`] records where it stands after the answer.

use std::borrow::Cow;
use std::sync::Arc;

use phosphor_base::{
    ChatModel, ChatRequest, FinishReason, Message, MessageStatus, Part, Passthrough, Role, Session, ToolSpec,
    Usage,
};
use phosphor_store::{Head, Lease, StoreError};
use tracing::Instrument;

use crate::agent::{Cache, Frame, SessionAgent};
use crate::compaction::CompactionReport;
use crate::error::{AgentError, Result};
use crate::events::{AgentEvent, EventSender, emit};
use crate::policy;
use crate::turn::{Sampling, Step, TurnState};

/// One request of a client that keeps its own history.
#[derive(Clone, Default)]
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
    /// The model the client asked for, when it is not the session model (`models.large`): it
    /// answers, its window bounds the session from this request on, and `summarize_model:
    /// "main"` means it. `None`: the session model.
    pub model: Option<Arc<dyn ChatModel>>,
    /// What the client sent for an upstream of its own API (`phosphor_base::Passthrough`): sent
    /// with the answer's request when the model speaks that API, never with a summary's.
    pub passthrough: Option<Passthrough>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("system_prompt", &self.system_prompt)
            .field("tools", &self.tools)
            .field("messages", &self.messages)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("temperature", &self.temperature)
            .field("model", &self.model.as_ref().map(|m| m.info().model.clone()))
            .field("passthrough", &self.passthrough)
            .finish()
    }
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
        let Exchange { system_prompt, tools, messages, max_output_tokens, temperature, model, passthrough } =
            exchange;
        let fixed = policy::fixed_tokens(&system_prompt, &tools, self.counter.as_ref());
        let frame = Frame { system_prompt, tools, fixed };
        if cache.frame.as_ref() != Some(&frame) {
            cache.frame = Some(frame);
        }
        cache.model = model;
        cache.passthrough = passthrough;
        let info = self.model_of(cache).info().clone();
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

impl SessionAgent {
    /// Whether a request can go as it came, with no session: `exchange.messages` (the whole
    /// conversation) with its system prompt and tools is under every trigger of the answering
    /// model's window (masking, the threshold, the output reserve), so no compaction would run.
    /// `phosphor serve` asks it of a client's requests for other models than the session model
    /// (Claude Code's calls to its small model: titles, topic checks) and sends those that fit to
    /// [`SessionAgent::pass_through`]; the others take the session's way ([`SessionAgent::claim`],
    /// [`SessionAgent::respond`]) and are compacted there.
    pub fn fits_as_sent(&self, exchange: &Exchange) -> bool {
        let info = exchange.model.as_ref().unwrap_or(&self.models.large).info();
        let estimate = self.estimate_sent(exchange);
        !policy::should_mask(estimate, info.context_window, &self.options)
            && policy::trigger(estimate, policy::reserve(info), info.context_window, &self.options).is_none()
    }

    fn estimate_sent(&self, exchange: &Exchange) -> u64 {
        let counter = self.counter.as_ref();
        policy::fixed_tokens(&exchange.system_prompt, &exchange.tools, counter)
            + exchange.messages.iter().map(|m| counter.count_message(m)).sum::<u64>()
    }

    /// Sends a request as it came (see [`SessionAgent::fits_as_sent`]): once, unchanged but for
    /// tool pairing, to `exchange.model` (else the session model), storing nothing.
    pub async fn pass_through(&self, exchange: Exchange, events: Option<&EventSender>) -> Result<Reply> {
        let model = exchange.model.clone().unwrap_or_else(|| self.models.large.clone());
        let info = model.info();
        let estimate = self.estimate_sent(&exchange);
        let mut messages: Vec<Cow<'_, Message>> = Vec::with_capacity(exchange.messages.len() + 1);
        if !exchange.system_prompt.is_empty() {
            messages.push(Cow::Owned(Message::system(&exchange.system_prompt)));
        }
        messages.extend(exchange.messages.iter().map(Cow::Borrowed));
        let sampling =
            Sampling { max_output_tokens: exchange.max_output_tokens, temperature: exchange.temperature };
        let request = ChatRequest {
            messages: phosphor_prune::repair_tool_pairing(messages)
                .into_iter()
                .map(Cow::into_owned)
                .collect(),
            tools: exchange.tools.clone(),
            max_output_tokens: Some(sampling.output_limit(info, estimate)),
            temperature: sampling.temperature,
            passthrough: exchange.passthrough.clone(),
            ..ChatRequest::default()
        };
        let completion = self.call_model(model.as_ref(), request, events).await?;
        let usage = completion.usage.unwrap_or_default();
        let finish_reason = completion.finish_reason.clone();
        let mut message = completion.into_message(Some(info.model.clone()));
        message.id = crate::agent::new_id();
        message.created_at = crate::agent::now_ms();
        message.updated_at = message.created_at;
        emit(events, AgentEvent::TurnFinished { message_id: message.id.clone(), model_calls: 1 });
        Ok(Reply { message, usage, finish_reason, compactions: Vec::new() })
    }
}

/// A session a request of a stateless client works on, taken by [`SessionAgent::claim`] and given
/// back by [`SessionAgent::finish`].
#[derive(Debug)]
pub struct Claim {
    /// The session.
    pub session_id: String,
    /// The request's messages the session does not hold yet (what [`Exchange::messages`] takes).
    pub new: Vec<Message>,
    namespace: String,
    /// The chain of what the session held, and its length in counted messages.
    head: Chain,
    held: usize,
    lease: Lease,
}

/// How many times [`SessionAgent::claim`] looks again when a session it found moved on before it
/// could claim it (another proxy answered on it meanwhile); then the request branches.
const CLAIM_TRIES: usize = 3;

impl SessionAgent {
    /// Finds the stored session that a client's whole history (`messages`, system messages
    /// included) continues in `namespace`, claims it, and says which messages are new; or
    /// creates a session for it. The rules (the crate docs, "Sessions of stateless
    /// clients"):
    /// - A session's *chain* is its complete, non-summary, non-system messages in order (what a
    ///   client that sent them and received the answers holds), each reduced to a [`fingerprint`]:
    ///   role, text, tool calls (id, name, arguments as canonical JSON) and tool results (call id,
    ///   content). Reasoning, ids, timestamps and models do not count, so a client that drops them
    ///   still matches. The store keeps each session's *head*: the hash of its whole chain.
    /// - Sessions live in *namespaces*: the client's `X-Phosphor-Session` name, or the empty one.
    ///   A new session takes the name as its id the first time, and `NAME~<uuid>` after that.
    /// - A request continues the session of its namespace whose head is the longest prefix of the
    ///   request's chain; the rest of the request is new. Only heads are matched, so a request that
    ///   edits or drops a message the session holds matches none and starts a new session (a
    ///   branch): the stored one is never changed.
    /// - A session is *claimed* while a request works on it, in every process sharing the store: a
    ///   second request with the same prefix meanwhile does not find it and branches, as two
    ///   clients that forked a conversation should.
    pub async fn claim(&self, namespace: &str, messages: Vec<Message>) -> Result<Claim> {
        let chains = Chain::prefixes(&messages);
        let keys: Vec<String> = chains.iter().map(Chain::key).collect();
        let store = self.store();
        for _ in 0..CLAIM_TRIES {
            let mut moved = false;
            for found in store.find_heads(namespace, &keys).await? {
                let Some(lease) = store.try_claim(&found.session_id).await? else { continue };
                // Claimed: unless its head moved between the lookup and the claim, it is ours.
                if store.head(&found.session_id).await?.as_ref() != Some(&found) {
                    lease.release().await;
                    moved = true;
                    continue;
                }
                // A process that died while answering may have stored messages without recording
                // the head: then the stored messages say where the session stands.
                let mut head = found;
                if store.count_messages(&head.session_id).await? != head.stored {
                    head = self.head_of(&head.session_id, namespace).await?;
                    store.set_head(&head).await?;
                }
                let Some(held) = keys.iter().position(|k| *k == head.head) else {
                    lease.release().await;
                    continue;
                };
                let found = head;
                let at = position_after(&messages, held);
                return Ok(Claim {
                    session_id: found.session_id,
                    new: messages[at..].to_vec(),
                    namespace: namespace.to_owned(),
                    head: chains[held],
                    held,
                    lease,
                });
            }
            if !moved {
                break;
            }
        }
        let now = crate::agent::now_ms();
        let mut id = if namespace.is_empty() { None } else { Some(namespace.to_owned()) };
        loop {
            let session_id = id.take().unwrap_or_else(|| format!("{namespace}~{}", uuid::Uuid::now_v7()));
            match store.create_session(&Session::new(session_id.clone(), "", now)).await {
                Err(StoreError::AlreadyExists { .. }) => continue,
                result => result?,
            }
            let Some(lease) = store.try_claim(&session_id).await? else { continue };
            return Ok(Claim {
                session_id,
                new: messages,
                namespace: namespace.to_owned(),
                head: Chain::default(),
                held: 0,
                lease,
            });
        }
    }

    /// Records where the claimed session stands and gives it back: after `reply`, its chain
    /// extended by the new messages and the answer; after an error, its chain as stored. A store
    /// error is returned after the claim is given back (the session is then found by the head it
    /// had, and a client continuing it branches).
    pub async fn finish(&self, claim: Claim, reply: Option<&Reply>) -> Result<()> {
        let Claim { session_id, new, namespace, head, held, lease } = claim;
        let recorded: Result<()> = async {
            let head = match reply {
                Some(reply) => {
                    let mut head = head;
                    let mut len = held;
                    for message in new.iter().chain(std::iter::once(&reply.message)).filter(|m| counts(m)) {
                        head = head.then(message);
                        len += 1;
                    }
                    let stored = self.store().count_messages(&session_id).await?;
                    Head {
                        session_id: session_id.clone(),
                        namespace,
                        head: head.key(),
                        len: len as u64,
                        stored,
                    }
                }
                None => self.head_of(&session_id, &namespace).await?,
            };
            Ok(self.store().set_head(&head).await?)
        }
        .await;
        lease.release().await;
        recorded
    }

    /// Tokens of the request Phosphor would send upstream for a client's whole history now
    /// (`messages`, as [`SessionAgent::claim`] takes them), with this system prompt and these
    /// tools: the stored session the history continues counts as it stands (its summary and what
    /// followed, not the history the client holds), plus the messages it does not hold yet. A
    /// history no session holds counts whole. Read only: nothing is claimed or stored. A request
    /// whose count is over the compaction threshold compacts on its way, so what is sent is
    /// smaller still.
    pub async fn count_request(
        &self,
        namespace: &str,
        system_prompt: &str,
        tools: &[ToolSpec],
        messages: &[Message],
    ) -> Result<u64> {
        let counter = self.counter.as_ref();
        let fixed = policy::fixed_tokens(system_prompt, tools, counter);
        let count = |messages: &[Message]| -> u64 { messages.iter().map(|m| counter.count_message(m)).sum() };
        let keys: Vec<String> = Chain::prefixes(messages).iter().map(Chain::key).collect();
        for found in self.store().find_heads(namespace, &keys).await? {
            let Some(held) = keys.iter().position(|k| *k == found.head) else { continue };
            let history = self
                .with_session(&found.session_id, None, async |cache: &mut Cache| Ok(cache.ledger.total()))
                .await?;
            return Ok(fixed + history + count(&messages[position_after(messages, held)..]));
        }
        Ok(fixed + count(messages))
    }

    /// Records the head of every stored session that has none (sessions stored by `phosphor chat`
    /// or `run`, or before heads were kept), in the namespace its id names, so that a client can
    /// continue them. Returns how many it recorded.
    pub async fn record_missing_heads(&self) -> Result<usize> {
        let mut recorded = 0;
        for session in self.store().list_sessions(usize::MAX).await? {
            if self.store().head(&session.id).await?.is_some() {
                continue;
            }
            let head = self.head_of(&session.id, namespace(&session.id)).await?;
            self.store().set_head(&head).await?;
            recorded += 1;
        }
        Ok(recorded)
    }

    /// The head of a session as its stored messages say.
    async fn head_of(&self, session_id: &str, namespace: &str) -> Result<Head> {
        let messages = self.store().messages(session_id).await?;
        let chains = Chain::prefixes(&messages);
        Ok(Head {
            session_id: session_id.to_owned(),
            namespace: namespace.to_owned(),
            head: chains.last().unwrap_or(&Chain::default()).key(),
            len: (chains.len() - 1) as u64,
            stored: messages.len() as u64,
        })
    }
}

/// The index in `messages` after the first `held` counted messages (system messages do not count).
fn position_after(messages: &[Message], held: usize) -> usize {
    let mut seen = 0;
    messages
        .iter()
        .position(|m| {
            if seen == held {
                return true;
            }
            seen += usize::from(counts(m));
            false
        })
        .unwrap_or(messages.len())
}

/// A hash of a chain of fingerprints: the first 128 bits of SHA-256 over the previous chain and the
/// message's fingerprint. Stable across builds and machines, since proxies sharing a store compare
/// the chains they computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Chain([u8; 16]);

impl Chain {
    /// The chain extended by one message.
    pub fn then(self, message: &Message) -> Chain {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        hasher.update(self.0);
        hasher.update(fingerprint(message).as_bytes());
        let digest = hasher.finalize();
        let mut chain = [0; 16];
        chain.copy_from_slice(&digest[..16]);
        Chain(chain)
    }

    /// The chain as the store keeps it: 32 lowercase hexadecimal digits.
    pub fn key(&self) -> String {
        self.0.iter().map(|byte| format!("{byte:02x}")).collect()
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

/// What identifies a message across a client's round trip (see [`SessionAgent::claim`]).
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

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::ToolCall;

    fn call(id: &str, args: &str) -> Message {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall(ToolCall { id: id.into(), name: "shell".into(), arguments: args.into() })],
        )
    }

    #[test]
    fn chains_are_stable_keys_of_every_prefix() {
        let a = Message::user("fix the bug");
        let b = Message::assistant("done");
        let chains = Chain::prefixes([&a, &Message::system("not counted"), &b]);
        assert_eq!(chains.len(), 3);
        assert_eq!(chains[2], Chain::default().then(&a).then(&b));
        // The key is the same in every process and every build: proxies sharing a store compare them.
        assert_eq!(Chain::default().key(), "00000000000000000000000000000000");
        assert_eq!(chains[1].key().len(), 32);
        assert_ne!(chains[1], Chain::prefixes([&b])[1]);
        let with_system = [Message::system("s"), a.clone(), b.clone(), Message::user("next")];
        assert_eq!(position_after(&with_system, 2), 3);
        assert_eq!(position_after(&with_system, 0), 0);
    }

    #[test]
    fn a_fingerprint_ignores_what_clients_drop_and_keeps_what_they_say() {
        let mut with_reasoning = Message::assistant("  answer ");
        with_reasoning.parts.insert(0, Part::reasoning("thinking"));
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
