//! `SessionAgent` and its builder: the models, options and tools of an agent, its per-session
//! queue and cache. A turn is in `turn.rs`, a compaction in `compaction.rs`, the rules both follow
//! in `policy.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use phosphor_base::config::{Options, SummarizeModel};
use phosphor_base::{
    ChatModel, Message, MessageStatus, Part, Passthrough, Role, Session, TokenCounter, TokenLedger, ToolSpec,
};
use phosphor_prompt::Profiles;
use phosphor_store::SessionStore;
use tracing::Instrument;

use crate::compaction::CompactionReport;
use crate::error::{AgentError, Result};
use crate::events::{AgentEvent, CompactionReason, EventSender, emit};
use crate::policy;
use crate::prepare::Preparation;
use crate::shown::{SUMMARY_PREFIX, masked_len, shown_ledger, summary_as_context};
use crate::tool::{Tool, Tools};
use crate::turn::TurnOutcome;

/// The models a session can use.
#[derive(Clone)]
pub struct Models {
    /// The session's model: it answers every turn (`summarize_model: "main"` routes here, and
    /// `"large"` too unless `configured_large` is set).
    pub large: Arc<dyn ChatModel>,
    /// The cheaper model (`summarize_model: "small"`).
    pub small: Option<Arc<dyn ChatModel>>,
    /// The local model (`summarize_model: "embedded"`).
    pub embedded: Option<Arc<dyn ChatModel>>,
    /// The configured large model when the session runs another one (the CLI's `--model-path`):
    /// `summarize_model: "large"` means it, `"main"` means the session's model. `None`: `large` is
    /// the configured large model, and both mean it.
    pub configured_large: Option<Arc<dyn ChatModel>>,
}

impl Models {
    /// Only a large model.
    pub fn new(large: Arc<dyn ChatModel>) -> Models {
        Models { large, small: None, embedded: None, configured_large: None }
    }

    /// The model a choice of `summarize_model` (or `phosphor eval --judge`) means, or an error that
    /// says what to configure.
    pub fn choose(&self, choice: SummarizeModel) -> Result<Arc<dyn ChatModel>> {
        match choice {
            SummarizeModel::Main => Ok(self.large.clone()),
            SummarizeModel::Large => Ok(self.configured_large.clone().unwrap_or_else(|| self.large.clone())),
            SummarizeModel::Small => self.small.clone().ok_or(AgentError::ModelNotConfigured {
                choice: "small",
                hint: "add models.small to phosphor.json",
            }),
            SummarizeModel::Embedded => self.embedded.clone().ok_or(AgentError::ModelNotConfigured {
                choice: "embedded",
                hint: "enable embedded_models.inference in phosphor.json and build with an embedded engine",
            }),
        }
    }
}

/// Tunables beyond `phosphor.json`'s options.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// Model calls allowed in one turn before it stops (tool loops are bounded).
    pub max_tool_rounds: u32,
    /// How often a streaming summary is written to the store.
    pub persist_interval: Duration,
    /// The workspace directory, shown to the summarizer.
    pub workspace: Option<String>,
    /// The most tokens a summary may have (also capped by the summarizer's own limit and a
    /// quarter of its window).
    pub summary_max_output_tokens: u64,
}

impl Default for AgentSettings {
    fn default() -> AgentSettings {
        AgentSettings {
            max_tool_rounds: 25,
            persist_interval: Duration::from_millis(250),
            workspace: None,
            summary_max_output_tokens: 4096,
        }
    }
}

/// Runs turns on sessions of a store, compacting automatically (see the crate docs).
pub struct SessionAgent {
    pub(crate) store: Arc<dyn SessionStore>,
    pub(crate) models: Models,
    pub(crate) options: Options,
    pub(crate) tools: Tools,
    pub(crate) system_prompt: String,
    pub(crate) profiles: Profiles,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) settings: AgentSettings,
    slots: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
    pub(crate) preparation_counters: crate::prepare::PreparationCounters,
    /// [`policy::fixed_tokens`] of the system prompt and tools, counted once (the builder resets it).
    fixed: std::sync::OnceLock<u64>,
}

/// Per-session state. Its mutex is the session's FIFO queue: a prompt that arrives while a turn
/// or compaction runs waits here, in arrival order, and runs as soon as the lock is released.
#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) cache: Option<Cache>,
    /// The session's prepared summary while no operation holds the cache: it outlives a cache
    /// dropped to be reloaded (a shared store, a store error), and is checked against the history
    /// before use.
    preparation: Option<Preparation>,
}

/// The session as the model sees it, kept between turns so that a turn never re-reads or
/// re-counts the whole history. Rebuilt from the store whenever it is missing.
pub(crate) struct Cache {
    pub(crate) session: Session,
    pub(crate) history: Vec<Message>,
    pub(crate) ledger: TokenLedger,
    /// (tokens the provider reported for the last request, our estimate of that request):
    /// corrects our estimate when the provider counts more than we do.
    pub(crate) calibration: Option<(u64, u64)>,
    /// Model responses stored since the session's last compaction (the progress rule of
    /// [`policy::Progress`] starts a turn from it).
    pub(crate) responses_since_compaction: u32,
    /// The tool outputs of `history[..masked]` are shown masked (from `session.masked_until`).
    pub(crate) masked: usize,
    /// The system prompt and tools of the last request a proxied client sent
    /// ([`SessionAgent::respond`]); `None`: the agent's own.
    pub(crate) frame: Option<Frame>,
    /// The model the last proxied request named ([`crate::Exchange::model`]), when it is not the
    /// session model: it answers, and its window is the session's ([`SessionAgent::model_of`]).
    pub(crate) model: Option<Arc<dyn ChatModel>>,
    /// What the last proxied request passed through to an upstream of its own API
    /// ([`crate::Exchange::passthrough`]), sent with each of its model requests (not summaries).
    pub(crate) passthrough: Option<Passthrough>,
    /// The summary prepared for the session's next compaction ([`crate::prepare`]).
    pub(crate) preparation: Option<Preparation>,
}

/// What a request carries besides the history, when a client sends its own: the system prompt,
/// the tools, and their [`policy::fixed_tokens`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Frame {
    pub(crate) system_prompt: String,
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) fixed: u64,
}

impl Cache {
    /// Appends a stored message to the history. A model response counts toward the progress rule
    /// whoever wrote it: the agent's own model, or a stateless client that sent its history
    /// (a session that arrives long through `serve` may compact at once).
    pub(crate) fn push(&mut self, counter: &dyn TokenCounter, message: Message) {
        if is_response(&message) {
            self.responses_since_compaction = self.responses_since_compaction.saturating_add(1);
        }
        self.ledger.push(counter, &summary_as_context(&message));
        self.history.push(message);
    }
}

/// Whether a stored message is a model response, as the progress rule counts them: a complete
/// assistant message that is not a summary.
fn is_response(message: &Message) -> bool {
    message.role == Role::Assistant && !message.is_summary && message.status.is_complete()
}

impl SessionAgent {
    /// An agent over `store` with `models` and the compaction `options` of `phosphor.json`.
    /// Requests to the session's model are counted with that model's own counter
    /// ([`ChatModel::counter`]: exact where the backend knows the tokenizer).
    pub fn new(store: Arc<dyn SessionStore>, models: Models, options: Options) -> SessionAgent {
        let counter = models.large.counter();
        SessionAgent {
            store,
            models,
            options,
            tools: Tools::default(),
            system_prompt: String::new(),
            profiles: Profiles::with_roots(None, None),
            counter,
            settings: AgentSettings::default(),
            slots: std::sync::Mutex::new(HashMap::new()),
            preparation_counters: Default::default(),
            fixed: std::sync::OnceLock::new(),
        }
    }

    /// Sets the system prompt sent first in every request.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> SessionAgent {
        self.system_prompt = prompt.into();
        self.fixed = std::sync::OnceLock::new();
        self
    }

    /// Registers a tool.
    pub fn with_tool(mut self, tool: Arc<dyn Tool>) -> SessionAgent {
        self.tools.register(tool);
        self.fixed = std::sync::OnceLock::new();
        self
    }

    /// Where summary prompt templates are looked up.
    pub fn with_profiles(mut self, profiles: Profiles) -> SessionAgent {
        self.profiles = profiles;
        self
    }

    /// Other tunables.
    pub fn with_settings(mut self, settings: AgentSettings) -> SessionAgent {
        self.settings = settings;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The options in force.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The session's main model.
    pub fn large_model(&self) -> &Arc<dyn ChatModel> {
        &self.models.large
    }

    /// The model that answers the session's requests and whose window bounds them: the one the
    /// last proxied request named, else the session model (`models.large`).
    pub(crate) fn model_of<'a>(&'a self, cache: &'a Cache) -> &'a Arc<dyn ChatModel> {
        cache.model.as_ref().unwrap_or(&self.models.large)
    }

    /// Creates and stores a new session.
    pub async fn create_session(&self, title: impl Into<String>) -> Result<Session> {
        let session = Session::new(new_id(), title, now_ms());
        self.store.create_session(&session).await?;
        Ok(session)
    }

    /// Estimated tokens of the request the next turn would send (system prompt, tool schemas,
    /// history since the summary), with the window and threshold in force.
    pub async fn token_status(&self, session_id: &str) -> Result<TokenStatus> {
        self.with_session(session_id, None, async |cache: &mut Cache| {
            Ok(TokenStatus {
                estimated_tokens: self.estimate(cache),
                current_tokens: cache.session.current_tokens,
                context_window: self.model_of(cache).info().context_window,
                threshold: self.options.summarize_threshold,
            })
        })
        .await
    }

    /// Runs one turn: stores `prompt`, compacts if needed, asks the large model, runs its tool
    /// calls until it answers, and stores everything. Events go to `events` as they happen.
    ///
    /// If another turn or compaction of the session is running, this one waits for it (a
    /// [`AgentEvent::Queued`] event says so) and then runs; prompts run in arrival order.
    /// Dropping the future cancels the turn; what was stored stays stored and the session stays usable.
    pub async fn run_turn(
        &self,
        session_id: &str,
        prompt: impl Into<String>,
        events: Option<&EventSender>,
    ) -> Result<TurnOutcome> {
        let prompt = prompt.into();
        self.with_session(session_id, events, async |cache: &mut Cache| {
            self.turn(cache, prompt, events).await
        })
        .instrument(invoke_agent_span(session_id))
        .await
    }

    /// Stores `messages` (a transcript read from a file) in `session` with fresh ids (the session id,
    /// `-imported-` and the position, so several transcripts can share a store), as complete
    /// messages. A summary flagged at the start (`"is_summary": true`, as `phosphor compact
    /// --summary-flag` writes it, with or without [`SUMMARY_PREFIX`]) becomes the session's summary,
    /// so compacting again builds on it; a flag anywhere else is dropped.
    pub async fn import_messages(&self, session: &Session, messages: &[Message]) -> Result<()> {
        let now = now_ms();
        let mut summary_id = None;
        for (index, message) in messages.iter().enumerate() {
            let mut stored = message.clone();
            stored.id = format!("{}-imported-{index:06}", session.id);
            stored.session_id = session.id.clone();
            stored.status = MessageStatus::Complete;
            stored.created_at = now;
            stored.updated_at = now;
            stored.summarized_until = None;
            if stored.is_summary && index == 0 {
                let text = stored.text_content();
                stored = Message {
                    parts: Message::assistant(text.strip_prefix(SUMMARY_PREFIX).unwrap_or(&text)).parts,
                    ..stored
                };
                summary_id = Some(stored.id.clone());
            } else {
                stored.is_summary = false;
            }
            self.store.append_message(&stored).await?;
        }
        if let Some(id) = summary_id {
            let mut session = session.clone();
            session.summary_message_id = Some(id);
            self.store.update_session(&session).await?;
        }
        Ok(())
    }

    /// Compacts the session now (`/compact [instructions]`), waiting for a running turn first.
    pub async fn compact(
        &self,
        session_id: &str,
        instructions: Option<&str>,
        events: Option<&EventSender>,
    ) -> Result<CompactionReport> {
        self.with_session(session_id, events, async |cache: &mut Cache| {
            self.summarize(cache, CompactionReason::Manual, instructions, None, events).await
        })
        .await
    }

    /// Runs `work` on the session's cache, in the session's turn: waits for the queue lock (saying
    /// so with a `Queued` event) and for the store's lock on the session (other processes sharing
    /// the store take turns on it too), loads the cache when it is not held or when another process
    /// may have written the session, reports an error as an [`AgentEvent::Error`], and keeps the
    /// cache for the next call unless the store failed (the cache may then be ahead of the store, so
    /// it is rebuilt next time). Every public operation on a session goes through here.
    pub(crate) async fn with_session<T>(
        &self,
        session_id: &str,
        events: Option<&EventSender>,
        work: impl AsyncFnOnce(&mut Cache) -> Result<T>,
    ) -> Result<T> {
        let mut guard = self.lock_session(session_id, events).await;
        let lease = self.store.lock_session(session_id).await?;
        if self.store.is_shared() {
            guard.cache = None;
        }
        let result = self.on_cache(&mut guard, session_id, events, work).await;
        lease.release().await;
        result
    }

    async fn on_cache<T>(
        &self,
        guard: &mut Slot,
        session_id: &str,
        events: Option<&EventSender>,
        work: impl AsyncFnOnce(&mut Cache) -> Result<T>,
    ) -> Result<T> {
        let mut cache = match guard.cache.take() {
            Some(cache) => cache,
            None => self.load(session_id).await?,
        };
        if let Some(preparation) = guard.preparation.take() {
            cache.preparation = Some(preparation);
        }
        let result = work(&mut cache).await;
        guard.preparation = cache.preparation.take();
        if let Err(err) = &result {
            emit(events, AgentEvent::Error { message: err.to_string() });
        }
        if !matches!(result, Err(AgentError::Store(_))) {
            guard.cache = Some(cache);
        }
        result
    }

    /// Waits for the session's turn (saying so with a `Queued` event when it has to wait).
    pub(crate) async fn lock_session(
        &self,
        session_id: &str,
        events: Option<&EventSender>,
    ) -> tokio::sync::OwnedMutexGuard<Slot> {
        let slot = self.slot(session_id);
        match slot.clone().try_lock_owned() {
            Ok(guard) => guard,
            Err(_) => {
                emit(events, AgentEvent::Queued { session_id: session_id.to_owned() });
                slot.lock_owned().await
            }
        }
    }

    fn slot(&self, session_id: &str) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        slots.entry(session_id.to_owned()).or_default().clone()
    }

    /// Rebuilds the cache from the store. Summaries left `Streaming` by a process that died or a
    /// task that was dropped are marked `Cancelled` (they were never used as history).
    pub(crate) async fn load(&self, session_id: &str) -> Result<Cache> {
        let session = self
            .store
            .session(session_id)
            .await?
            .ok_or_else(|| AgentError::SessionNotFound { id: session_id.to_owned() })?;
        let messages = self.store.messages(session_id).await?;
        // Model responses stored after the current summary (all of them without one).
        let since = session
            .summary_message_id
            .as_ref()
            .and_then(|id| messages.iter().position(|m| &m.id == id))
            .map_or(0, |at| at + 1);
        let responses = messages[since..].iter().filter(|m| is_response(m)).count();
        let responses_since_compaction = u32::try_from(responses).unwrap_or(u32::MAX);
        for message in messages {
            if message.status == MessageStatus::Streaming {
                let mut message = message;
                message.status = MessageStatus::Cancelled;
                message.updated_at = now_ms();
                self.store.update_message(&message).await?;
            }
        }
        let history = self.store.history(session_id).await?;
        let masked = masked_len(&history, session.masked_until.as_deref());
        let ledger = shown_ledger(self.counter.as_ref(), &history, masked);
        Ok(Cache {
            session,
            history,
            ledger,
            calibration: None,
            responses_since_compaction,
            masked,
            frame: None,
            model: None,
            passthrough: None,
            preparation: None,
        })
    }

    /// Tokens every request of the session spends besides the history: system prompt, tool
    /// schemas, framing (the client's, when a proxied client sent its own).
    pub(crate) fn fixed_tokens(&self, cache: &Cache) -> u64 {
        cache.frame.as_ref().map_or_else(|| self.own_fixed_tokens(), |frame| frame.fixed)
    }

    /// [`policy::fixed_tokens`] of the agent's own system prompt and tools (counted once).
    pub(crate) fn own_fixed_tokens(&self) -> u64 {
        *self.fixed.get_or_init(|| {
            policy::fixed_tokens(&self.system_prompt, &self.tools.specs(), self.counter.as_ref())
        })
    }

    /// The system prompt and tools of the session's requests.
    pub(crate) fn frame<'a>(&'a self, cache: &'a Cache) -> (&'a str, Vec<ToolSpec>) {
        match &cache.frame {
            Some(frame) => (&frame.system_prompt, frame.tools.clone()),
            None => (&self.system_prompt, self.tools.specs()),
        }
    }

    /// Our estimate of the next request, corrected upward when the provider counted more last time.
    pub(crate) fn estimate(&self, cache: &Cache) -> u64 {
        let raw = self.fixed_tokens(cache) + cache.ledger.total();
        match cache.calibration {
            Some((reported, estimated)) if reported > estimated => raw + (reported - estimated),
            _ => raw,
        }
    }

    pub(crate) fn new_message(&self, session_id: &str, role: Role, parts: Vec<Part>) -> Message {
        let now = now_ms();
        let mut message = Message::new(role, parts);
        message.id = new_id();
        message.session_id = session_id.to_owned();
        message.created_at = now;
        message.updated_at = now;
        message
    }
}

/// Tokens of a session as `/tokens` shows them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenStatus {
    /// Our estimate of the next request.
    pub estimated_tokens: u64,
    /// The session's `current_tokens` field.
    pub current_tokens: u64,
    /// The large model's window.
    pub context_window: u64,
    /// `summarize_threshold`.
    pub threshold: f64,
}

pub(crate) fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The span around a turn or an exchange: OpenTelemetry's `invoke_agent` operation on the session.
pub(crate) fn invoke_agent_span(session_id: &str) -> tracing::Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent phosphor",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.conversation.id = %session_id,
    )
}
