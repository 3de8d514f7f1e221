//! The compaction policy, in one place: how much of the window a request may use, which trigger
//! fires, where a compaction cuts the history, whether another compaction may run in this turn,
//! and the ladder of ever smaller summarizer inputs.
//!
//! Everything here is pure (numbers and messages in, a decision out): the agent calls it before
//! every request of a turn, and `phosphor compact --dry-run` calls the same functions, so a dry run
//! and a real turn cannot disagree.

use std::borrow::Cow;
use std::ops::Range;

use phosphor_base::config::Options;
use phosphor_base::tokens::REQUEST_OVERHEAD_TOKENS;
use phosphor_base::{Message, ModelInfo, Role, TokenCounter, ToolSpec};

use crate::events::CompactionReason;

/// Room kept for the answer: the model's max output, but never more than a quarter of the window
/// (a model configured with 32k output tokens on a 64k window would otherwise compact at half).
pub fn reserve(info: &ModelInfo) -> u64 {
    info.max_output_tokens.min(info.context_window / 4)
}

/// Tokens the session-state trail of a summary may take on a `window`-token session model:
/// `summarize_state_max_tokens`, but never more than an eighth of the window.
pub fn state_budget(options: &Options, window: u64) -> u64 {
    options.summarize_state_max_tokens.min(window / 8)
}

/// The most tokens a summary of `input` tokens may have: a quarter of the input, at least
/// [`MIN_SUMMARY_TOKENS`], at most `ceiling` (the summarizer's output reserve and the agent's
/// `summary_max_output_tokens`). A 2,000-token history is not asked for a 2,048-token summary.
pub fn summary_budget(input: u64, ceiling: u64) -> u64 {
    (input / 4).max(MIN_SUMMARY_TOKENS).min(ceiling)
}

/// The smallest summary budget (room for the sections of the default prompt).
pub const MIN_SUMMARY_TOKENS: u64 = 512;

/// Whether observation masking runs before a request of `estimate` tokens on a `window`-token
/// model (`mask_threshold` 0 turns it off). It runs before the compaction triggers, so a request
/// that masking brings under `summarize_threshold` needs no summary.
pub fn should_mask(estimate: u64, window: u64, options: &Options) -> bool {
    options.mask_threshold > 0.0 && fraction(estimate, window) >= options.mask_threshold
}

/// Whether the summary of the next compaction is prepared in the background before a request of
/// `estimate` tokens that the triggers let go: from `summarize_prepare_at` of the window (0 turns
/// it off, as `disable_auto_summarize` does: the forced triggers do not wait for a preparation).
pub fn should_prepare(estimate: u64, window: u64, options: &Options) -> bool {
    options.summarize_prepare_at > 0.0
        && !options.disable_auto_summarize
        && fraction(estimate, window) >= options.summarize_prepare_at
}

/// Tokens of the newest tool calls and outputs masking leaves whole: `mask_keep_recent_tokens`, but
/// never more than an eighth of the window.
pub fn mask_keep_budget(options: &Options, window: u64) -> u64 {
    options.mask_keep_recent_tokens.min(window / 8)
}

/// The least a masking step must clear on a `window`-token model: a tenth of the window. A smaller
/// step would only delay the summary that is coming anyway, and a request kept between the masking
/// and the summary thresholds for longer costs more than the summary saves (measured on replays of
/// aider sessions, whose tool outputs are small: docs/BENCHMARKS.md).
pub fn mask_min_gain(window: u64) -> u64 {
    window / 10
}

/// Tokens a masked output's placeholder takes, about (a tool name, a path, a size).
const PLACEHOLDER_TOKENS: u64 = 40;

/// Where masking should now end: the index after the last history message whose tool traffic is
/// masked (outputs replaced by placeholders, long argument values cut:
/// [`mask_tool_traffic`](phosphor_prune::mask_tool_traffic)), so that the newest tool calls and
/// outputs that stay whole total at most `keep` tokens (`counts` are the messages' counts as
/// shown). The latest tool round always stays whole (the model has not seen its outputs yet).
/// `None` when that would not move the boundary past `masked` (the current one) or would clear less
/// than `min_gain` tokens (see [`mask_min_gain`]).
pub fn mask_point(
    history: &[Message],
    counts: &[u64],
    masked: usize,
    keep: u64,
    min_gain: u64,
) -> Option<usize> {
    let latest_calls = history.iter().rposition(|m| m.tool_calls().next().is_some()).unwrap_or(0);
    let mut kept = 0;
    let mut until = None;
    for (index, message) in history.iter().enumerate().rev() {
        if message.tool_results().next().is_none() && message.tool_calls().next().is_none() {
            continue;
        }
        kept += counts.get(index).copied().unwrap_or(0);
        if kept > keep && index < latest_calls {
            until = Some(index + 1);
            break;
        }
    }
    let until = until.filter(|&until| until > masked)?;
    let unmasked =
        |m: &Message| m.tool_results().any(|r| !r.content.starts_with(phosphor_prune::MASKED_PREFIX));
    let gain: u64 = (masked..until)
        .map(|i| {
            let count = counts.get(i).copied().unwrap_or(0);
            let message = &history[i];
            if unmasked(message) {
                count.saturating_sub(PLACEHOLDER_TOKENS)
            } else {
                // The calls' long argument values (whole files written, edits) are cut too.
                (count as f64 * phosphor_prune::masked_argument_share(message)) as u64
            }
        })
        .sum();
    (gain >= min_gain.max(1)).then_some(until)
}

/// Tokens every request spends besides the history: the system prompt (one system message, as it
/// is sent), the tool schemas and the request framing.
pub fn fixed_tokens(system_prompt: &str, tools: &[ToolSpec], counter: &dyn TokenCounter) -> u64 {
    let system =
        if system_prompt.is_empty() { 0 } else { counter.count_message(&Message::system(system_prompt)) };
    let tools: u64 = tools.iter().map(|t| counter.count_tool(t)).sum();
    REQUEST_OVERHEAD_TOKENS + system + tools
}

/// Which trigger fires for a request of `estimate` tokens on a `window`-token model that keeps
/// `reserve` tokens for the answer, if any. Overflow and the output reserve are forced (on even
/// with `disable_auto_summarize`); the threshold is the check made before every request.
pub fn trigger(estimate: u64, reserve: u64, window: u64, options: &Options) -> Option<CompactionReason> {
    if estimate > window {
        Some(CompactionReason::Overflow)
    } else if estimate + reserve > window {
        Some(CompactionReason::OutputReserve)
    } else if !options.disable_auto_summarize && fraction(estimate, window) >= options.summarize_threshold {
        Some(CompactionReason::Threshold)
    } else {
        None
    }
}

/// `estimate / window`, for the threshold and for messages (a zero window counts as one token).
pub fn fraction(estimate: u64, window: u64) -> f64 {
    estimate as f64 / window.max(1) as f64
}

/// Whether a request can be sent once the triggers have had their chance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fit {
    /// Below the threshold, with room for the answer.
    Fits,
    /// With room for the answer, but still at or above the threshold: go on, with a warning.
    OverThreshold,
    /// No room for the answer: the turn stops with `StillOverflowing`.
    Overflows,
}

/// How a request of `estimate` tokens fits (see [`Fit`]).
pub fn fit(estimate: u64, reserve: u64, window: u64, options: &Options) -> Fit {
    if estimate + reserve > window {
        Fit::Overflows
    } else if !options.disable_auto_summarize && fraction(estimate, window) >= options.summarize_threshold {
        Fit::OverThreshold
    } else {
        Fit::Fits
    }
}

/// Whether the progress rule and the backstop allow a compaction now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// Compact.
    Allowed,
    /// No model response arrived since the last compaction: compacting again cannot fold more.
    NoResponseSince,
    /// The turn already ran `summarize_max_per_turn` compactions.
    Backstop(u32),
}

/// The progress rule: a turn that already ran `compactions` automatic compactions, with
/// `responses_since` model responses since the session's last compaction, may compact again only
/// when a response arrived since (so compactions never outnumber responses and cannot loop) and
/// the per-turn backstop `summarize_max_per_turn` is not reached. "Something left to fold" is the
/// rule's other half: [`cut`] returns `None` when there is nothing.
pub fn permit(compactions: u32, responses_since: u32, options: &Options) -> Permit {
    if compactions >= options.summarize_max_per_turn {
        Permit::Backstop(options.summarize_max_per_turn)
    } else if responses_since == 0 {
        Permit::NoResponseSince
    } else {
        Permit::Allowed
    }
}

/// Where a compaction cuts a history: `fold` is summarized, what follows it stays verbatim after
/// the summary, and `pinned` (inside `fold`) is the user message that opened the turn in
/// progress, shown verbatim right after the summary too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The messages the summary replaces (never the previous summary, which is in the prompt).
    pub fold: Range<usize>,
    /// The turn's user message, when the turn's own tool rounds are folded.
    pub pinned: Option<usize>,
}

/// What a [`cut`] may keep verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepBudget {
    /// Tokens that may stay verbatim after the summary: the window less the fixed tokens, the
    /// answer's reserve and the summary's own budget.
    pub room: u64,
    /// `summarize_keep_recent_tokens`.
    pub keep_recent: u64,
}

/// Where to cut `history` (`counts[i]` is message `i`'s tokens as a model is shown it).
///
/// `turn` is the index of the user message that opened the turn in progress (`None` for a manual
/// compaction, which may fold everything). Rules:
/// - A leading summary is never folded (it is the previous summary, given to the summarizer).
/// - The turn's user message always stays verbatim after the summary.
/// - Inside a turn with tool rounds (an assistant message and the results of its calls), the
///   longest suffix of whole rounds costing at most `max(keep_recent, the latest round)` stays,
///   within `room`; the rounds before it are folded together with everything before the turn, and
///   the turn's user message is then `pinned`. A round that does not fit `room` is folded too.
/// - Otherwise (no round yet, or every round kept) the whole turn stays, and recent whole turns
///   before it stay as far as `min(keep_recent, room)` allows.
///
/// A cut never falls between a tool call and its result. `None` when nothing would be folded.
pub fn cut(history: &[Message], counts: &[u64], turn: Option<usize>, budget: KeepBudget) -> Option<Cut> {
    let first = usize::from(history.first().is_some_and(|m| m.is_summary));
    let end = history.len();
    if end <= first {
        return None;
    }
    let sum = |range: Range<usize>| counts[range].iter().sum::<u64>();
    // Recent whole turns before `limit` that cost at most `keep` tokens and `room`.
    let keep_turns_before = |limit: usize, room: u64, keep: u64| {
        first
            + phosphor_prune::keep_recent_split_by(&history[first..limit], keep.min(room), |i| {
                counts[first + i]
            })
    };
    let cut = match turn {
        None => Cut { fold: first..keep_turns_before(end, budget.room, budget.keep_recent), pinned: None },
        Some(user) => {
            let user = user.clamp(first, end - 1);
            let room = budget.room.saturating_sub(counts[user]);
            let rounds: Vec<usize> =
                (user + 1..end).filter(|&i| history[i].role == Role::Assistant).collect();
            let kept_rounds = match rounds.last() {
                None => user + 1,
                Some(&latest) => {
                    let allowed = room.min(budget.keep_recent.max(sum(latest..end)));
                    let (mut keep, mut tokens) = (end, 0);
                    for &start in rounds.iter().rev() {
                        tokens += sum(start..keep);
                        if tokens > allowed {
                            break;
                        }
                        keep = start;
                    }
                    keep
                }
            };
            if kept_rounds == user + 1 {
                // The whole turn stays; what is left of both budgets may keep earlier turns.
                let whole_turn = sum(user + 1..end);
                let fold_end = keep_turns_before(
                    user,
                    room.saturating_sub(whole_turn),
                    budget.keep_recent.saturating_sub(whole_turn),
                );
                Cut { fold: first..fold_end, pinned: None }
            } else {
                Cut { fold: first..kept_rounds, pinned: Some(user) }
            }
        }
    };
    (!cut.fold.is_empty()).then_some(cut)
}

/// The most of the folded history's tokens a summary request may take, its instructions
/// included, before the oldest turns are read as headlines, and then as outlines ([`Ladder`]): a
/// third. Where tool traffic is the bulk, pruning alone reads a session in far less (a tenth of
/// the real Claude Code sessions of docs/BENCHMARKS.md); where the conversation is the bulk
/// (aider's sessions), the oldest answers are read by their opening and the oldest long requests
/// by their start and end (the session-state trail keeps the requests verbatim, newest first,
/// within its budget).
pub const SUMMARY_INPUT_SHARE: f64 = 1.0 / 3.0;

/// A headline turn's assistant prose, in characters: about the sentence in which an answer says
/// what it sets out to do.
pub const HEADLINE_ANSWER_CHARS: usize = 160;

/// A headline turn's user message text (each text part) longer than this many characters keeps
/// its start and its end (`phosphor_prune::shorten_user_messages`).
pub const HEADLINE_REQUEST_CHARS: usize = 600;

/// An outline turn's assistant prose, in characters: where every older turn read as a headline is
/// still over the target, the oldest turns are read as outlines ([`Ladder`]): their requests as in
/// a headline, each answer by its first clause, and each call by its name and identifying
/// arguments (every other value, and every tool output, longer than the marker cut to the marker
/// alone; arguments that are not JSON are cut whole).
pub const OUTLINE_ANSWER_CHARS: usize = 80;

/// The tokens the history as the summarizer reads it may take: [`SUMMARY_INPUT_SHARE`] of the
/// `fold_tokens` it folds, less the `instructions` sent with it, and never less than
/// [`MIN_SUMMARY_INPUT_TOKENS`].
pub fn summary_input_target(fold_tokens: u64, instructions: u64) -> u64 {
    ((fold_tokens as f64 * SUMMARY_INPUT_SHARE) as u64)
        .saturating_sub(instructions)
        .max(MIN_SUMMARY_INPUT_TOKENS)
}

/// A history the summarizer reads in fewer tokens is read without headlines or outlines whatever
/// it folds: there a headline saves less than it costs the summary (a few turns, whose
/// instructions alone may be a third of the request).
pub const MIN_SUMMARY_INPUT_TOKENS: u64 = 1_000;

/// How a [`Ladder`] measures an input against its target: the tokens of the history as the
/// summarizer reads it, and the most it should take ([`summary_input_target`]).
pub struct Reading<'a> {
    /// The most tokens the input should take; `u64::MAX` reads no turn as a headline or an outline
    /// before the ladder's last rungs.
    pub target: u64,
    /// Tokens of an input as the summarizer would read it.
    pub measure: &'a (dyn Fn(&[Cow<'a, Message>]) -> u64 + Sync),
}

/// The ladder of ever smaller summarizer inputs (docs/DECISIONS.md, "Shedding ladder"): 0 standard
/// pruning (and, at every level, the turns before the newest folded one read in brief: their
/// assistant prose cut to `summarize_assistant_text_chars`, their calls' arguments and the outputs
/// of their file changes that went through to `summarize_tool_output_aggressive_chars`; and every
/// plan write but the latest left out, `state::elide_superseded_plans`); 1 aggressive pruning;
/// 2 every tool output omitted; 3 every turn before the newest read as a headline; 4 every turn
/// before the newest read as an outline; 5.. the oldest turns dropped one at a time (never the
/// previous summary, which is in the prompt, nor the latest turn). At levels 0 to 2, as many of
/// the oldest turns as it takes to bring the input within the [`Reading`]'s target are read as
/// headlines: their prose cut to [`HEADLINE_ANSWER_CHARS`], their tool outputs and calls'
/// arguments to `summarize_tool_output_aggressive_chars`, and their user messages over
/// [`HEADLINE_REQUEST_CHARS`] to their start and end; and where every turn before the newest read
/// as a headline is still over the target, as many of the oldest as it takes are read as outlines
/// instead: their prose cut to [`OUTLINE_ANSWER_CHARS`], and every tool output and every value in
/// their calls' arguments but the identifying ones (paths, commands, ids) cut to its marker.
pub struct Ladder<'a> {
    fold: &'a [Message],
    options: &'a Options,
    reading: Reading<'a>,
    /// Where each turn of `fold` starts.
    starts: Vec<usize>,
    /// How deep the previous rung read the oldest turns: the first `depth` turns as headlines, and
    /// past every older turn, the first `depth - older` of them as outlines (see [`Ladder::read`]).
    /// A later rung reads no shallower, so that no rung is larger than the one before.
    depth: usize,
    /// How many of the oldest turns the latest rung dropped.
    dropped: usize,
    level: u32,
    /// The smallest input tried so far, in tokens (a rung no smaller is skipped).
    pub smallest_tokens: u64,
}

impl<'a> Ladder<'a> {
    /// The ladder over the messages a compaction folds.
    pub fn new(fold: &'a [Message], options: &'a Options, reading: Reading<'a>) -> Ladder<'a> {
        let starts = phosphor_prune::turn_starts(fold);
        Ladder { fold, options, reading, starts, depth: 0, dropped: 0, level: 0, smallest_tokens: u64::MAX }
    }

    /// The next rung's level and input; `None` when nothing is left to shed.
    pub fn next_input(&mut self) -> Option<(u32, Vec<Cow<'a, Message>>)> {
        let level = self.level;
        self.level += 1;
        let chars = if level == 0 {
            self.options.summarize_tool_output_chars
        } else {
            self.options.summarize_tool_output_aggressive_chars
        };
        let older = self.starts.len().saturating_sub(1);
        let depth = match level {
            0..=2 => self.depth_within_target(chars, level, older),
            3 => self.depth.max(older),
            _ => 2 * older,
        };
        self.depth = depth;
        let mut input = self.read(chars, level, depth);
        if level >= 5 {
            let turns = (level - 4) as usize;
            let dropped = phosphor_prune::drop_oldest_turns(&mut input, turns);
            if dropped == 0 || turns > older {
                return None;
            }
            self.dropped = turns;
        }
        Some((level, input))
    }

    /// How the latest rung read the turns before the newest: how many of the oldest it dropped,
    /// how many after those it read as outlines, how many after those as headlines, and how many
    /// turns there are before the newest (those that may be read either way).
    pub fn reading(&self) -> TurnsRead {
        let older = self.starts.len().saturating_sub(1);
        let outlines = self.depth.saturating_sub(older).min(older);
        TurnsRead {
            dropped: self.dropped,
            outlines: outlines - self.dropped.min(outlines),
            headlines: self.depth.min(older) - outlines,
            older,
        }
    }

    /// The least depth, no less than the previous rung's, that brings the input at `level` within
    /// the target (every turn but the newest an outline when none does).
    fn depth_within_target(&self, chars: usize, level: u32, older: usize) -> usize {
        let within =
            |depth: usize| (self.reading.measure)(&self.read(chars, level, depth)) <= self.reading.target;
        let deepest = 2 * older;
        let least = self.depth.min(deepest);
        if least == deepest || within(least) {
            return least;
        }
        // Each step deeper reads a turn in fewer characters (by the token count, a request just
        // over the limit or a short value cut to its marker may cost a token or two more, no
        // more): the least depth that fits is found by halving.
        let (mut fits, mut over) = (deepest, least);
        while fits - over > 1 {
            let middle = over + (fits - over) / 2;
            if within(middle) {
                fits = middle;
            } else {
                over = middle;
            }
        }
        fits
    }

    /// The input at `level` read to `depth`: the first `depth` of the turns before the newest as
    /// headlines, and past all of them (a depth over their count), the first `depth - older` as
    /// outlines.
    fn read(&self, chars: usize, level: u32, depth: usize) -> Vec<Cow<'a, Message>> {
        let brief = self.options.summarize_tool_output_aggressive_chars;
        let newest_turn = self.starts.last().copied().unwrap_or(0);
        let older = self.starts.len().saturating_sub(1);
        // Where the first `turns` turns end.
        let end_of = |turns: usize| {
            if turns == 0 { 0 } else { self.starts.get(turns).copied().unwrap_or(newest_turn) }
        };
        let headline_end = end_of(depth.min(older));
        let outline_end = end_of(depth.saturating_sub(older).min(older));
        let mut input = phosphor_prune::prune_messages_by(self.fold, |at| {
            if at < outline_end {
                return phosphor_prune::Limits { outputs: 0, arguments: 0 };
            }
            phosphor_prune::Limits {
                outputs: if at < headline_end { brief.min(chars) } else { chars },
                arguments: if at < newest_turn { brief.min(chars) } else { chars },
            }
        });
        phosphor_prune::prune_assistant_prose(
            &mut input,
            newest_turn,
            self.options.summarize_assistant_text_chars,
        );
        phosphor_prune::prune_assistant_prose(&mut input, headline_end, HEADLINE_ANSWER_CHARS);
        phosphor_prune::prune_assistant_prose(&mut input, outline_end, OUTLINE_ANSWER_CHARS);
        phosphor_prune::shorten_user_messages(&mut input, headline_end, HEADLINE_REQUEST_CHARS);
        crate::state::brief_file_change_outputs(&mut input, self.fold, newest_turn, brief);
        crate::state::elide_superseded_plans(&mut input);
        if level >= 2 {
            phosphor_prune::omit_oldest_tool_outputs(&mut input, usize::MAX);
        }
        input
    }
}

/// How a summary request read the turns before the newest one it folds ([`Ladder::reading`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnsRead {
    /// The oldest turns, left out (the ladder's last rungs).
    pub dropped: usize,
    /// The oldest turns after those, read as outlines.
    pub outlines: usize,
    /// The turns after the outlines read as headlines.
    pub headlines: usize,
    /// The turns before the newest, which are all those that may be read either way or dropped.
    pub older: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::{Part, ToolCall, ToolResult};
    use pretty_assertions::assert_eq;

    fn options(threshold: f64, disabled: bool) -> Options {
        Options { summarize_threshold: threshold, disable_auto_summarize: disabled, ..Options::default() }
    }

    #[test]
    fn the_triggers_and_the_fit_follow_the_table() {
        use CompactionReason::{OutputReserve, Overflow, Threshold};
        // (estimate, reserve, window, threshold, auto summarize disabled) -> trigger, fit
        let cases = [
            (0, 0, 1_000, 0.8, false, None, Fit::Fits),
            (799, 100, 1_000, 0.8, false, None, Fit::Fits),
            (800, 100, 1_000, 0.8, false, Some(Threshold), Fit::OverThreshold),
            (800, 100, 1_000, 0.8, true, None, Fit::Fits),
            (900, 100, 1_000, 0.8, false, Some(Threshold), Fit::OverThreshold),
            (901, 100, 1_000, 0.8, false, Some(OutputReserve), Fit::Overflows),
            (901, 100, 1_000, 0.8, true, Some(OutputReserve), Fit::Overflows),
            (1_000, 0, 1_000, 1.0, false, Some(Threshold), Fit::OverThreshold),
            (1_001, 0, 1_000, 1.0, true, Some(Overflow), Fit::Overflows),
            (5, 0, 0, 0.8, false, Some(Overflow), Fit::Overflows),
        ];
        for (estimate, reserve, window, threshold, disabled, expected, fits) in cases {
            let options = options(threshold, disabled);
            let case = (estimate, reserve, window, threshold, disabled);
            assert_eq!(trigger(estimate, reserve, window, &options), expected, "{case:?}");
            assert_eq!(fit(estimate, reserve, window, &options), fits, "{case:?}");
        }
    }

    #[test]
    fn the_reserve_is_the_max_output_capped_at_a_quarter_of_the_window() {
        let info = |window, max_output_tokens| ModelInfo {
            provider: "p".into(),
            model: "m".into(),
            context_window: window,
            max_output_tokens,
        };
        assert_eq!(reserve(&info(128_000, 4_096)), 4_096);
        assert_eq!(reserve(&info(64_000, 32_000)), 16_000);
        assert_eq!(reserve(&info(3, 100)), 0);
    }

    #[test]
    fn fixed_tokens_count_the_system_prompt_as_sent_and_every_tool() {
        let counter = phosphor_base::ApproxCounter;
        let tool = ToolSpec {
            name: "read_file".into(),
            description: "Reads a file".into(),
            parameters: serde_json::json!({ "type": "object" }),
        };
        assert_eq!(fixed_tokens("", &[], &counter), REQUEST_OVERHEAD_TOKENS);
        assert_eq!(
            fixed_tokens("Be brief.", std::slice::from_ref(&tool), &counter),
            REQUEST_OVERHEAD_TOKENS
                + counter.count_message(&Message::system("Be brief."))
                + counter.count_tool(&tool)
        );
    }

    #[test]
    fn the_progress_rule_needs_a_response_and_stops_at_the_backstop() {
        let options = Options { summarize_max_per_turn: 3, ..Options::default() };
        // (compactions this turn, responses since the last one) -> permit
        let cases = [
            (0, 0, Permit::NoResponseSince),
            (0, 1, Permit::Allowed),
            (2, 5, Permit::Allowed),
            (2, 0, Permit::NoResponseSince),
            (3, 1, Permit::Backstop(3)),
            (9, 0, Permit::Backstop(3)),
        ];
        for (compactions, responses, expected) in cases {
            assert_eq!(permit(compactions, responses, &options), expected, "{compactions} {responses}");
        }
    }

    /// A history from `SUM:5 U:10 A(c1):5 T(c1):100 ...`: kind, optional call id, shown tokens.
    fn history(spec: &str) -> (Vec<Message>, Vec<u64>) {
        spec.split_whitespace()
            .enumerate()
            .map(|(i, token)| {
                let (kind, tokens) = token.split_once(':').expect("kind:tokens");
                let tokens = tokens.parse::<u64>().expect("tokens");
                let (kind, id) = match kind.split_once('(') {
                    Some((kind, id)) => (kind, Some(id.trim_end_matches(')'))),
                    None => (kind, None),
                };
                let message = match (kind, id) {
                    ("SUM", None) => Message { is_summary: true, ..Message::assistant("summary") },
                    ("U", None) => Message::user(format!("prompt {i}")),
                    ("A", None) => Message::assistant("answer"),
                    ("A", Some(id)) => Message::new(
                        Role::Assistant,
                        vec![Part::ToolCall(ToolCall {
                            id: id.into(),
                            name: "t".into(),
                            arguments: "{}".into(),
                        })],
                    ),
                    ("T", Some(id)) => Message::new(
                        Role::Tool,
                        vec![Part::ToolResult(ToolResult {
                            call_id: id.into(),
                            name: "t".into(),
                            // About as long as its count says (four characters a token).
                            content: "o".repeat(tokens as usize * 4),
                            is_error: false,
                        })],
                    ),
                    other => panic!("unknown token {other:?}"),
                };
                (message.with_id(format!("m{i}")), tokens)
            })
            .unzip()
    }

    #[test]
    fn the_summary_budget_follows_the_input_between_a_floor_and_the_ceiling() {
        // (input, ceiling) -> budget
        let cases = [
            (0, 4_096, 512),
            (1_910, 2_048, 512),
            (4_000, 4_096, 1_000),
            (40_000, 4_096, 4_096),
            (10_000, 300, 300),
        ];
        for (input, ceiling, expected) in cases {
            assert_eq!(summary_budget(input, ceiling), expected, "{input} {ceiling}");
        }
    }

    #[test]
    fn masking_keeps_the_newest_tool_traffic_within_the_budget_and_only_moves_forward() {
        let options = Options { mask_threshold: 0.5, mask_keep_recent_tokens: 300, ..Options::default() };
        assert!(!should_mask(499, 1_000, &options));
        assert!(should_mask(500, 1_000, &options));
        assert!(!should_mask(999, 1_000, &Options { mask_threshold: 0.0, ..options.clone() }));
        assert_eq!(mask_keep_budget(&options, 1_600), 200);
        assert_eq!(mask_keep_budget(&options, 100_000), 300);

        // index:                     0    1     2         3          4         5          6    7
        let (h, c) = history("U:10 A(a):5 T(a):200 A(b):5 T(b):200 A(c):5 T(c):200 A:5");
        // (masked so far, keep) -> new boundary
        // Calls count with their outputs: c's call and output are 205 tokens.
        let cases = [
            (0, 300, Some(5)), // c stays, b's output would make 405: b and older are masked
            (0, 404, Some(5)),
            (0, 405, Some(4)), // b's output stays too, its call (410) does not
            (0, 410, Some(3)), // b and c stay
            (0, 615, None),    // everything fits
            (5, 300, None),    // already masked there
            (3, 300, Some(5)), // moves forward only
            (0, 0, Some(5)),   // no budget: every output but the latest round's
        ];
        for (masked, keep, expected) in cases {
            assert_eq!(mask_point(&h, &c, masked, keep, 100), expected, "{masked} {keep}");
        }
        // A step that clears less than the least gain is not taken: a, b clear 2 x (200 - 40).
        assert_eq!(mask_point(&h, &c, 0, 0, 320), Some(5));
        assert_eq!(mask_point(&h, &c, 0, 0, 321), None);
        assert_eq!(mask_min_gain(8_000), 800);
    }

    fn check_cut(
        spec: &str,
        turn: Option<usize>,
        room: u64,
        keep_recent: u64,
        expected: Option<(Range<usize>, Option<usize>)>,
    ) {
        let (messages, counts) = history(spec);
        let got = cut(&messages, &counts, turn, KeepBudget { room, keep_recent });
        let expected = expected.map(|(fold, pinned)| Cut { fold, pinned });
        assert_eq!(got, expected, "{spec} turn {turn:?} room {room} keep {keep_recent}");
    }

    #[test]
    fn cuts_fold_the_turn_s_own_rounds_and_pin_its_request() {
        let long_turn = "U:10 A:5 U:10 A(c1):5 T(c1):100 A(c2):5 T(c2):100 A(c3):5 T(c3):100";
        // Inside a turn: the latest round stays, earlier rounds and turns fold, the request is pinned.
        check_cut(long_turn, Some(2), 10_000, 0, Some((0..7, Some(2))));
        // keep_recent buys more whole rounds (each 105 here).
        check_cut(long_turn, Some(2), 10_000, 210, Some((0..5, Some(2))));
        // Every round affordable: the whole turn stays, only the earlier turn folds, nothing pinned.
        check_cut(long_turn, Some(2), 10_000, 320, Some((0..2, None)));
        // ... and what is left of keep_recent may keep the earlier turn too: nothing to fold.
        check_cut(long_turn, Some(2), 10_000, 1_000, None);
        // A latest round larger than the room folds too.
        check_cut(long_turn, Some(2), 100, 0, Some((0..9, Some(2))));
        // After a summary: the summary is never folded, the pinned request may be folded again.
        let after = "SUM:50 U:10 A(c4):5 T(c4):100 A(c5):5 T(c5):100";
        check_cut(after, Some(1), 10_000, 0, Some((1..4, Some(1))));
        // Nothing left to fold: the summary, the request and its one round.
        check_cut("SUM:50 U:10 A(c4):5 T(c4):100", Some(1), 10_000, 0, None);
        check_cut("SUM:50 U:10", Some(1), 10_000, 0, None);
    }

    #[test]
    fn cuts_at_a_turn_start_or_by_hand_keep_whole_turns() {
        let turns = "U:100 A:100 U:100 A(c1):50 T(c1):50 A:100 U:10";
        // At a turn start the new request stays; keep_recent keeps recent whole turns within the room.
        check_cut(turns, Some(6), 10_000, 0, Some((0..6, None)));
        check_cut(turns, Some(6), 10_000, 300, Some((0..2, None)));
        check_cut(turns, Some(6), 250, 300, Some((0..6, None)));
        // By hand (no turn): everything may fold.
        check_cut(turns, None, 10_000, 0, Some((0..7, None)));
        check_cut(turns, None, 10_000, 10, Some((0..6, None)));
        check_cut("SUM:5", None, 10_000, 0, None);
        check_cut("", None, 10_000, 0, None);
    }

    #[test]
    fn the_ladder_reads_the_oldest_turns_as_headlines_until_the_input_fits_the_target() {
        assert_eq!(summary_input_target(30_000, 400), 9_600);
        assert_eq!(summary_input_target(3_000, 400), MIN_SUMMARY_INPUT_TOKENS);
        let answer = "a".repeat(500);
        let request = format!("{}{}", "r".repeat(400), "e".repeat(400));
        let mut fold = Vec::new();
        for turn in 0..4 {
            fold.push(Message::user(format!("{turn} {request}")));
            fold.push(Message::assistant(format!("{turn} {answer}")));
        }
        let options = Options::default();
        let chars =
            |input: &[Cow<'_, Message>]| input.iter().map(|m| m.text_content().len() as u64).sum::<u64>();
        let whole = chars(&fold.iter().map(Cow::Borrowed).collect::<Vec<_>>());
        let headline = |input: &[Cow<'_, Message>], turn: usize| {
            let (request, answer) = (input[2 * turn].text_content(), input[2 * turn + 1].text_content());
            let short = request.chars().count() <= HEADLINE_REQUEST_CHARS
                && answer.chars().count() == HEADLINE_ANSWER_CHARS + phosphor_prune::TRUNCATION_MARKER.len();
            short && request.ends_with(&"e".repeat(200)) && request.contains(" rrr")
        };
        // Every older turn a headline, as the fourth rung reads them (there is no tool traffic).
        let all_headlines = {
            let mut ladder = Ladder::new(&fold, &options, Reading { target: u64::MAX, measure: &chars });
            chars(&std::iter::from_fn(|| ladder.next_input()).nth(3).unwrap().1)
        };
        // (target, how many of the oldest turns are read as headlines at the first rung)
        for (target, headlines) in
            [(u64::MAX, 0), (whole, 0), (whole - 1, 1), (whole - 1_000, 2), (all_headlines, 3)]
        {
            let mut ladder = Ladder::new(&fold, &options, Reading { target, measure: &chars });
            let (level, input) = ladder.next_input().unwrap();
            assert_eq!(level, 0);
            for turn in 0..4 {
                assert_eq!(headline(&input, turn), turn < headlines, "target {target}, turn {turn}");
            }
            assert_eq!(input[6].as_ref(), &fold[6], "the newest turn is read whole");
            assert_eq!(input[7].as_ref(), &fold[7]);
        }
        // Past every older turn as a headline, the oldest are read as outlines: an 80-character
        // answer, the request as in a headline.
        let outline = |input: &[Cow<'_, Message>], turn: usize| {
            let (request, answer) = (input[2 * turn].text_content(), input[2 * turn + 1].text_content());
            request.chars().count() <= HEADLINE_REQUEST_CHARS
                && answer.chars().count() == OUTLINE_ANSWER_CHARS + phosphor_prune::TRUNCATION_MARKER.len()
        };
        // (target, outlines, headlines after them)
        for (target, outlines, headlines) in [(all_headlines + 1, 0, 3), (all_headlines - 1, 1, 2), (0, 3, 0)]
        {
            let mut ladder = Ladder::new(&fold, &options, Reading { target, measure: &chars });
            let (_, input) = ladder.next_input().unwrap();
            for turn in 0..3 {
                assert_eq!(outline(&input, turn), turn < outlines, "target {target}, turn {turn}");
                assert_eq!(
                    headline(&input, turn),
                    (outlines..outlines + headlines).contains(&turn),
                    "{target} {turn}"
                );
            }
            assert_eq!(ladder.reading(), TurnsRead { dropped: 0, outlines, headlines, older: 3 });
        }
        // Without a target: levels 1 and 2 read no headline, 3 reads every older turn as one, 4 as
        // an outline, 5 and 6 drop the oldest turns, and then there is nothing left to shed.
        let mut ladder = Ladder::new(&fold, &options, Reading { target: u64::MAX, measure: &chars });
        let mut rungs: Vec<(u32, usize, usize, usize)> = Vec::new();
        while let Some((level, input)) = ladder.next_input() {
            let older = 0..input.len() / 2 - 1;
            let headlines = older.clone().filter(|&t| headline(&input, t)).count();
            let outlines = older.filter(|&t| outline(&input, t)).count();
            rungs.push((level, input.len(), headlines, outlines));
            // What the ladder says it read: the dropped turns are neither outlines nor headlines.
            let read = ladder.reading();
            assert_eq!(
                (read.headlines, read.outlines, read.dropped + input.len() / 2),
                (headlines, outlines, 4)
            );
        }
        assert_eq!(
            rungs,
            [
                (0, 8, 0, 0),
                (1, 8, 0, 0),
                (2, 8, 0, 0),
                (3, 8, 3, 0),
                (4, 8, 0, 3),
                (5, 6, 0, 2),
                (6, 4, 0, 1),
                (7, 2, 0, 0)
            ]
        );
    }
}
