//! `phosphor-agent`: an agent loop over a stored session that compacts its history automatically
//! when the model's context window fills (docs/ARCHITECTURE.md is the map, "Design notes" below the details, docs/DECISIONS.md the reasons), without
//! compaction loops, orphaned tool results or lost messages.
//!
//! A turn ([`SessionAgent::run_turn`]):
//! 1. stores the user message (it is never lost, whatever happens next);
//! 2. before **every** request of the turn, runs the triggers of [`policy::trigger`]: the
//!    **post-user-message overflow check** (the estimated request exceeds the window, or leaves no
//!    room for the model's maximum answer: forced) and the **pre-request threshold check**
//!    (`estimate / window >= summarize_threshold`, unless `disable_auto_summarize`);
//! 3. a compaction inside the turn may fold the turn's own earlier tool rounds: the user message
//!    that opened the turn stays verbatim right after the summary, the most recent round(s) stay
//!    verbatim, and no tool call is separated from its result ([`policy::cut`]);
//! 4. asks the large model, runs its tool calls and loops until it answers (bounded), storing
//!    every message;
//! 5. if the model rejects a request as too long, compacts and retries.
//!
//! Compactions follow a progress rule instead of a fixed count ([`policy::permit`]): one may run
//! only when something is left to fold and a model response arrived since the previous one, so
//! compactions never outnumber responses and cannot loop; `summarize_max_per_turn` (default 8)
//! is a backstop. When the triggers fire and no compaction can bring the request under the window
//! with room for the answer, the turn stops with [`AgentError::StillOverflowing`], which names
//! the tokens, the window, the model and what was tried; when it fits but stays above the
//! threshold, the turn goes on with one warning.
//!
//! Every summary ends with a [`SessionState`] trail that Phosphor writes itself, whatever the model
//! wrote: the user's requests verbatim, the latest plan, files with their last change, commands
//! with their outcome, within `summarize_state_max_tokens`.
//!
//! Compaction never deletes or rewrites stored messages: it appends a summary message, and the
//! session's summary pointer moves to it only once it completed.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn phosphor_store::SessionStore>, model: std::sync::Arc<dyn phosphor_base::ChatModel>) -> Result<(), phosphor_agent::AgentError> {
//! use phosphor_agent::{Models, SessionAgent};
//! use phosphor_base::config::Options;
//!
//! let agent = SessionAgent::new(store, Models::new(model), Options::default())
//!     .with_system_prompt("You are a careful coding assistant.");
//! let session = agent.create_session("demo").await?;
//! let (events, mut rx) = tokio::sync::mpsc::unbounded_channel();
//! let outcome = agent.run_turn(&session.id, "Where is the config parsed?", Some(&events)).await?;
//! println!("{}", outcome.final_message.text_content());
//! # Ok(()) }
//! ```
//!
//! # Design notes
//!
//! **A compaction in three parts.** `SessionAgent::plan` fixes what a compaction folds and how it
//! asks (the cut, the pinned request, the session-state trail, the rendered prompt, the summarizer)
//! from the cache; `compaction::write_summary` walks the shedding ladder and streams the summary,
//! persisting it in batches or, for a prepared one, in memory only; `SessionAgent::install` adds the
//! trail and moves the pointer and token fields in one transaction. An inline compaction runs the
//! three in a row. With `summarize_prepare_at`, `turn::step` starts a preparation below the triggers
//! (`policy::should_prepare`): a `tokio` task runs `write_summary` on an `Arc<Plan>` that keeps the
//! history prefix it was cut from (`Plan::prefix`: the previous summary and the folded messages). It
//! lives on the session's cache and, between operations, on its queue slot (so a cache dropped to be
//! reloaded from a shared store keeps it); dropping it aborts the task. At a trigger,
//! `SessionAgent::use_prepared` installs it only when `Plan::matches` the history (the same messages,
//! compared by value, not just ids: an edit counts), waiting for it if it still runs (it started
//! earlier on less, so it finishes before a new one would); a second, inline summary then folds what
//! came after its cut in the same step when the triggers still fire (the progress rule counts the pair
//! as one step, since the first folded only old messages). Any other compaction discards it first.
//! Across processes the task holds the store claim `prepare:<session id>`; the claim is released when
//! the summary is written, so a second process may prepare its own only after that, and a summary
//! prepared by one process is never used by another (it reloads and compacts inline). Nothing is
//! stored before `install`: the summary is appended `streaming` and completed in the same call, so a
//! crash mid-preparation leaves no trace and a crash between the two leaves a `streaming` row that the
//! next load marks `cancelled`. `SessionAgent::preparations` counts started, used and discarded ones.
//!
//! **Sessions of stateless clients.** An OpenAI-protocol client resends its whole history with every
//! request and runs its own tools. `SessionAgent::respond` takes what the session does not hold yet
//! (an `Exchange`: the client's system prompt, tools and new messages), stores it, runs the same
//! triggers as a turn before its one model call (`turn::step`, shared with turns: masking,
//! thresholds, the output reserve, overflow recovery, the progress rule) and stores the answer, whose
//! tool calls are the client's to run. A new message too large for the window is stored `failed` and
//! answered with `MessageTooLarge`. `summarize_max_per_turn` counts per request, since the agent
//! cannot tell which requests make one client turn; the progress rule still rules out a loop. Which
//! session a request continues is `SessionAgent::claim`'s rule, and `SessionAgent::finish` records
//! where the session stands afterwards:
//! - A session's *chain* is its complete, non-summary messages in order, each reduced to a fingerprint
//!   (role, text, tool calls with canonical JSON arguments, tool results); reasoning, ids, timestamps
//!   and model names do not count, so a client that drops them still matches. Chains are hashed
//!   (the first 128 bits of SHA-256, the same in every build and process) and the store keeps each
//!   session's *head* (`session_heads`: the hash of its whole chain, its length, and how many
//!   messages the session held then).
//! - *Namespaces*: the part of a session id before the first `~`. A client that sends
//!   `X-Phosphor-Session: NAME` works in namespace `NAME` (its first session is `NAME`, later branches
//!   `NAME~<uuid>`); one that does not, in the empty namespace (`~<uuid>`).
//! - A request continues the session of its namespace whose whole chain is the longest prefix of the
//!   request's messages; the rest is new. A request that edits, drops or reorders a message a session
//!   holds matches no head and starts a new session with everything it sent (a branch): a stored
//!   session is never changed.
//! - A session is *claimed* while a request works on it (`SessionStore::try_claim`): a second
//!   request with the same prefix meanwhile, to this proxy or another on the same store, does not find
//!   it and branches, as two clients that forked a conversation should. After the request the session
//!   goes back under its new head (or the head its stored messages give, after an error).
//! - Several proxies share one Postgres database: heads and claims live in the store, and every
//!   operation on a session, in any process, holds the store's session lock (`lock_session`, a
//!   Postgres advisory lock held across the whole request, compaction included) and reloads the
//!   session when the store is shared (`is_shared`), since another process may have written it.
//!   Claims and locks are advisory locks held by a connection of their own, so a process that dies
//!   (even SIGKILL) frees them with its connections, and a lease dropped unreleased closes its
//!   connection: nothing wedges a session. A proxy that died after storing a request's messages but
//!   before recording the head leaves a head whose message count is behind: the next claim sees it,
//!   rebuilds the head from the stored messages, and the request that is sent again finds its
//!   messages already stored (nothing is stored twice). The summary it was writing stays `streaming`
//!   until the next holder of the lock loads the session and marks it `cancelled`; it is never shown.
//!   On SQLite, which one process owns, claims live in the process and the lock is the agent's own
//!   queue.
//! - `phosphor serve` records a head for every stored session that has none when it starts
//!   (`record_missing_heads`: sessions of `phosphor chat` or `run`), so clients continue them.
//!
//! **The policy has one owner.** `policy.rs` is pure (numbers and messages in, a decision out):
//! the output reserve, the fixed tokens of a request (system prompt as one system message, tool
//! schemas, framing), the triggers, whether a request fits after them, the progress rule, where a
//! compaction cuts the history, and the shedding ladder. `phosphor compact --dry-run` calls the same
//! functions, so a dry run and a real turn cannot disagree; its "summarizer input" row is the user
//! message of the summary request at the ladder's first rung, built by the same function as a
//! compaction's (`first_summary_input`, every message folded, as with
//! `summarize_keep_recent_tokens` at 0), without the instructions (their
//! size depends on the profile and the summarizing model, which a dry run does not load). Because
//! it does not know them, the dry run holds that input to a third of the transcript with nothing
//! taken off for instructions; a compaction takes them off, and on a conversation-heavy
//! transcript may read a turn or two more as headlines or outlines than the dry run shows. Its tests are tables:
//! (estimate, reserve, window, options) -> trigger and fit; (compactions, responses) -> permit;
//! (history with token counts, turn, room, keep_recent) -> cut.
//!
//! **Long turns.** The triggers run before every request of a turn, not only the first. A
//! compaction inside a turn may fold the turn's own earlier tool rounds: the user message that
//! opened the turn stays verbatim right after the summary (the summary's `pinned_message`), the most
//! recent round stays verbatim (more rounds within `summarize_keep_recent_tokens`; a round too large
//! for the room left is folded too), and the cut falls only at a round boundary, so no call is
//! separated from its result. "One compaction per turn" is replaced by a progress rule: a compaction
//! runs only when something is left to fold and at least one model response arrived since the
//! previous compaction, so compactions never outnumber responses and a turn cannot loop;
//! `summarize_max_per_turn` (default 8) is a backstop. A response counts when it is stored, however
//! it arrived: answered by the model in this process, or sent by a stateless client as part of its
//! history. So a conversation that reaches `phosphor serve` already over the window (a client resumed
//! through it, a new database) compacts on its first request, as many rungs as it takes: its answers
//! are responses the summary has not folded yet. When the triggers fire and no compaction can
//! bring the request under the window with room for the answer, the turn stops with
//! `StillOverflowing`, naming the tokens, the reserve, the window, the model and what was tried
//! (compactions run; nothing left to fold; no response since the last one; the backstop). A
//! rejected request (the provider counts more than we do) compacts and retries under the same rule.
//!
//! **Summaries that end.** Every summary stream, from any model, goes through the repetition guard
//! (`repetition.rs`): every 32 new bytes it looks for a unit of up to 2,048 bytes repeated at least 3
//! times over at least 256 bytes at the end of the text (a screenful: besides repeating a line, small
//! models copy their transcript's last turns over and over, a 1,118-byte unit on an aider session);
//! on a loop the stream is dropped (which stops
//! the model), the text is cut after the unit's first occurrence, and a warning event says so (the
//! compaction span records `phosphor.compaction.repetition_trimmed`). The summary may be as long as
//! what it folds calls for (`policy::summary_budget`: a quarter of the folded tokens, at least 512,
//! at most the summarizer's reserve and `summary_max_output_tokens`), so a 2,000-token history is
//! not asked for a 2,048-token summary. Summary requests carry `ChatRequest::repeat_penalty`
//! (`summarize_repeat_penalty`, default 1.0, which is off: on SmolLM2 a penalty of 1.1 turned a loop
//! the guard stops early into a run to the output limit): the llama.cpp engine applies llama.cpp's
//! repetition penalty (last 64 tokens) to the logits before its greedy choice, which it makes itself
//! straight off the logits (llama.cpp's samplers copy every logit first: 1.2 ms a token for Gemma 3's
//! vocabulary, docs/BENCHMARKS.md), mistral.rs sets its repetition penalty; phosphor-llm does not send it
//! (the OpenAI API has no such parameter) and the chat path never sets it.
//!
//! **Observation masking** runs before the compaction triggers of every request: when the estimate
//! reaches `mask_threshold` of the window (`policy::should_mask`), `policy::mask_point` moves the
//! masking boundary so that the newest tool calls and outputs shown whole total at most `policy::mask_keep_budget`
//! (`mask_keep_recent_tokens`, at most an eighth of the window); the latest tool round is always
//! whole, a step must clear at least a tenth of the window (`policy::mask_min_gain`; smaller steps
//! only delay the summary that comes anyway, and on replays of aider sessions, whose outputs are small,
//! they made the turn send more tokens in all), and the boundary only moves forward.
//! The boundary is the session's `masked_until` (SQLite migration 0003), so every process shows the
//! same request; `shown::shown_history` applies it (and shows a summary as context) for both the
//! request and the token ledger, with `phosphor_prune::mask_tool_traffic` writing the placeholders
//! (tool name, up to three identifying arguments, the size cleared) and cutting the masked calls'
//! long argument values to `MASKED_ARGUMENT_CHARS` (100; identifying values such as paths and commands
//! keep up to 1,000), as Anthropic's API clears old tool inputs: in coding sessions whole files written
//! and the text of edits are tool inputs, and masking outputs alone left them in every request. A
//! summary that masking avoids leaves every later request carrying the masked history instead of the
//! summary, so a masked call keeps little: at 200 characters, an aider session replayed on an 8k
//! window sent 1.05x the tokens of summaries only, at 100 fewer, and so does every replay
//! (docs/BENCHMARKS.md); an edit cut at 100 still shows its change behind 25 characters of context. The store is never changed. A
//! summary folds masked outputs like any other (its input is pruned from the stored messages), and
//! the boundary stays meaningful only while its message is in the history.
//!
//! **The session-state trail** (`state/`) is what survives a compaction whatever the model
//! writes: Phosphor renders it from the folded messages and appends it to the summary text under
//! `## Session state`; the next compaction parses it back from the previous summary, merges what the
//! new fold shows and renders it again, so it carries across any number of summaries. Summaries
//! written before it existed (`## Artifact trail`, files and commands only) are still read. The
//! heading counts only as a whole line, and continuation lines of a quoted request are indented, so
//! a request cannot pose as a heading. The rules:
//! - *Requests*: every user message of the fold (not the summary), trimmed, repeats kept once at
//!   their newest place. Rendered newest first as numbered items.
//! - *Plan*: the latest tool call whose arguments hold (at the top or up to two levels down) a
//!   non-empty list of objects that each have a text (`content`, `step`, `text`, `title`, `task`,
//!   `description` or `name`) and a status (`status`, `state`, or a `done`/`completed`/`checked`
//!   flag). A newer plan replaces the older one whole.
//! - *Files*: paths come from the argument keys `phosphor-prune` owns (`PATH_KEYS`, `PATHS_KEYS`)
//!   and from patches in any string value (codex's `*** Add/Update/Delete File:` and `*** Move to:`,
//!   a unified diff's `+++ b/`). The operation: a text editor's `command` (`view`, `create`,
//!   `str_replace`, `insert`, `undo_edit`) first; then words in the tool's name (delete/remove,
//!   move/rename, edit/patch/replace/insert/apply/update/modify, write/create/save); then the
//!   arguments' shape (`old_string`-like keys: edited; `content`-like keys: written); read
//!   otherwise. A read never hides an earlier change.
//! - *Names* (`names.rs`): a changed file's line also lists the names its changes define or touch
//!   (`- aider/repo.py (edited: get_head, get_tracked_files)`), so that a continuing agent knows
//!   where in a file the work was, whatever the summary says. They are read off the change's code:
//!   every string value of a call that edits or writes one file (both texts of an edit), or each
//!   file's lines of a patch (a diff line's marker aside; a hunk header's text after its last `@@`,
//!   where diffs name the enclosing function); files of prose or data (`.md`, `.txt`, `.rst`,
//!   `.json`, `.yaml`, `.toml`, ...) give none. A line counts when, past its indentation and
//!   modifiers (`pub`, `pub(crate)`, `async`, `export`, `default`, `static`, `public`, `private`,
//!   `protected`, `abstract`, `final`, `unsafe`, `const`, `extern`, `override`), it opens with
//!   `def`/`fn`/`func`/`function` and a name with `(` or `<` right after it, or a spaced `(` on a
//!   line that ends with `{` or `:` (Go's receiver skipped; a `def` may end its line), or with
//!   `class`/`struct`/`enum`/`trait`/`interface`/`type` and a name with `(`, `<` or `[` right after
//!   it, or a `:` on a line that ends with `:` or `{`, or after spaces `{`, `=`, `;`, `extends`,
//!   `implements`, `struct`, `interface`, `where` or the line's end. So prose that starts with a keyword ("class names are ...", "function calls (see
//!   below)", "enum values: red, green") names nothing, and neither do methods without a keyword
//!   (Java's `public void run(`): the rule says less rather than list what is not a name. One change gives its first eight names in
//!   order; a file keeps the eight newest across changes and summaries; a deleted file none.
//!   Commands name nothing, reads neither.
//! - *Commands*: values of `COMMAND_KEYS` (an array is joined with spaces), each kept once with its
//!   latest outcome, the 40 most recent. The outcome comes from the call's result: the last exit
//!   status it states (`exit code: N`, `"exit_code": N`, `exited with code N`, `returncode`) gives
//!   `ok` (0) or `exit N:` with the first line that mentions an error or failure (or the first
//!   line); a result marked as an error gives `failed:` with that line; with no status, an output
//!   with a line only failures print (`error:`/`error[`/`fatal:` at the start, `test result: FAILED`,
//!   `panicked at`, a Python traceback, `npm ERR!`, `command not found`, `No such file or
//!   directory`) gives `reported a failure:` with it, and anything else `done` (no status is not
//!   success: a test run that failed without saying so would otherwise read `ok`). A run that goes
//!   through (`ok`, `done`) after a failure of the same command keeps that failure in a note, `ok
//!   (failed before: exit 101: error[E0308]: mismatched types)`, carried by later runs that go
//!   through and dropped by the next failure: the error met, and that it was fixed, are what a
//!   continuing agent needs of a run it would otherwise see only as `ok`. A result finds its
//!   command by the call's id and the command's text, so parallel calls keep their own outcomes.
//! - *Errors*: the first line of failed results of tools that are not commands, the 20 most recent.
//! - *Last answer*: the text of the fold's last assistant answer: a message with text and no tool
//!   call (text beside a call is narration, "Let me edit.", and would hide the answer a reply
//!   accepts), not a summary. A longer one keeps its last 800 characters behind `... [truncated]`:
//!   it ends with what it concluded or asks. Every line is quoted with `> ` (an empty one is `>`)
//!   so that none can pose as a section. A newer answer replaces it; over the budget it goes whole. With
//!   `summarize_keep_recent_tokens` at 0 (the default) a compaction at a turn's start folds the
//!   answer the new request replies to; "yes, do it, and add a test" needs the proposal it accepts,
//!   whether the model's summary kept it or not.
//! - *Budget* (`policy::state_budget`: `summarize_state_max_tokens`, at most an eighth of the
//!   session model's window), counted with the session model's counter. Requests get at least half;
//!   one request at most half of theirs (the newest always shows, cut with the truncation marker).
//!   The other sections take the rest and, when over, lose their oldest lines first: errors, then
//!   commands, then read files, then the last answer (whole), then changed files, then plan items. A compaction keeps that budget
//!   free when it decides how much history stays verbatim.
//! - An empty model summary is accepted (with a warning): the summary is then the trail alone.
//!
//! **Counters.** Every model says how its tokens are counted (`ChatModel::counter`, default the
//! approximation): `phosphor-llm` uses tiktoken for OpenAI model families (o200k_base for GPT-4o,
//! GPT-4.1, GPT-5, the o-series and gpt-oss; cl100k_base for GPT-4 and GPT-3.5) and the
//! approximation for other vendors; the llama.cpp engine counts with llama.cpp's own tokenizer and
//! the model's vocabulary (exact by definition); the mistral.rs engine with the GGUF vocabulary
//! rebuilt as a Hugging Face tokenizer (`phosphor-base`'s `exact.rs`, which is why that code stays).
//! The agent counts the session model's requests with the session model's counter, and a summary
//! request with the summarizer's. Calibration from reported usage stays as the safety net. The
//! counters stay in `phosphor-base`: they are small, feature-gated, and every crate that counts
//! already depends on phosphor-base; a crate of their own would add an edge and save nothing.
//!
//! **Architecture Invariant:** every request sent to a model has a result for every tool call and a
//! call for every result (`repair_tool_pairing` runs on every request). The test doubles check it on
//! every request they receive, as OpenAI's servers do: the scripted model answers an unpaired request
//! with `BadRequest` (400) and the mock server with a 400 error body, whatever was scripted, so no test
//! that goes through either can pass with an unpaired request, even one that never calls the check
//! itself.
//!
//! **Architecture Invariant:** compactions in a turn never outnumber its model responses (plus one
//! before the first request when the previous turn ended with a response); the session's summary
//! pointer and token fields move only in the same transaction that completes the summary.
//!
//! **Evaluation** (`eval/`, `phosphor eval`). `probes.rs` derives probes from a transcript,
//! `mod.rs` runs the strategies, `report.rs` writes the table, JSON and HTML, `aider.rs` converts
//! aider chat histories, `claude_code.rs` Claude Code session logs (the conversion rules are in its
//! module documentation). The rules, chosen so that a score means the same on any transcript:
//!
//! - Probes ask about the history *before the last turn* (the last user message and what follows).
//!   Every strategy keeps the last turn, so a fact found there tells strategies apart in no way; a
//!   probe whose key strings all appear in the last turn is dropped.
//! - *artifact* probes are the files and commands the session-state trail's own rules recognise
//!   (`SessionState::collect`): one owner for "which call touched which file". A tool the trail does
//!   not recognise is invisible to the probes as well; the trail cannot score where the probes
//!   cannot look. *recall* probes are URLs, error lines, code-like identifiers (`snake_case`,
//!   `CamelCase`, `a::b`, backticked spans) and numbers of three or more digits; *intent* probes
//!   are each user request's distinctive terms (code-like words first, then the longest words of
//!   four letters or more that are not stop words, five at most); *continuation* probes are the open
//!   items of the latest plan, the last failed command and the assistant's last words. At most 24
//!   probes per kind, spread evenly over the history.
//! - A context is compared as a model reads it: texts, tool outputs, and tool-call arguments decoded
//!   from their JSON (a command with quotes is found as the model sees it), lower case, white space
//!   collapsed. A probe scores the share of its keys found.
//! - Strategies run at one window: the session model wrapped by `eval::Windowed`, which changes only
//!   the window it reports. `truncate` drops the oldest turns (`phosphor_prune::drop_oldest_turns`)
//!   until the request fits with the answer's reserve; `mask` is the agent's masking step
//!   (`policy::mask_point`, `mask_tool_traffic`) on the whole transcript; the summary strategies are
//!   one real compaction (`SessionAgent::compact` on an in-memory SQLite session the transcript is
//!   imported into with `SessionAgent::import_messages`, as `phosphor compact` does), `summary`
//!   being its summary with the trail cut off (`state::strip`).
//! - The judged mode (`eval/judge.rs`, `--judge`): the session model, at its own window, is given a
//!   strategy's context (the system prompt, then the context as the agent would send it) and the
//!   probe's question, and answers in at most 256 tokens; the judge model (a `summarize_model` choice,
//!   resolved by `Models::choose`, the one owner of what those names mean) is given the rubric template
//!   (`phosphor-prompt`'s `judge.md.tpl`, or `--judge-template FILE`) with the question, the probe's
//!   expected answer taken from the full history, and the answer, and replies with a grade 0 to 5 (the
//!   first lone digit of its reply). A context that does not fit the answering model is not asked
//!   (`unfit`); a reply without a grade is recorded with the reply (`no_grade`) and a warning, not an
//!   error, since small judges do that and one stray reply must not lose an hour of grading. A model
//!   that fails is an error. The rubric is rendered once before anything runs, so a broken template
//!   fails first. Judged scores are mean grades over the graded probes, next to (never mixed into) the
//!   deterministic shares.

mod agent;
mod compaction;
mod error;
pub mod eval;
mod events;
pub mod exchange;
pub mod names;
pub mod policy;
mod prepare;
mod repetition;
mod shown;
pub mod state;
mod tool;
mod turn;

pub use agent::{AgentSettings, Models, SessionAgent, TokenStatus};
pub use compaction::{CompactionReport, SummaryInput, first_summary_input};
pub use error::{AgentError, Result};
pub use events::{AgentEvent, CompactionReason, EventSender};
pub use exchange::{Claim, Exchange, Reply};
pub use prepare::Preparations;
pub use shown::SUMMARY_PREFIX;
pub use state::{FileOp, SessionState};
pub use tool::{Tool, ToolOutput, Tools};
pub use turn::TurnOutcome;
