//! `phosphor compact`: compacts a transcript file with the agent's own compaction.
//!
//! The transcript is imported into a temporary in-memory session, [`SessionAgent::compact`] runs on it
//! exactly as `/compact` does in a chat, and the session's history (the summary, plus the recent
//! messages kept when `summarize_keep_recent_tokens > 0`) is written back in the layout the file had.
//! Leading system messages are the agent's system prompt: they are not summarized, and are written
//! back first, unchanged.

use std::io;
use std::sync::Arc;

use anyhow::{Result, bail};
use phosphor_agent::eval::split_system;
use phosphor_agent::{
    AgentEvent, AgentSettings, CompactionReason, SUMMARY_PREFIX, SessionAgent, first_summary_input, policy,
};
use phosphor_base::config::{Config, DEFAULT_MAX_OUTPUT_TOKENS, Options};
use phosphor_base::{ApproxCounter, Message, ModelInfo, Role, TokenCounter, ToolSpec};
use phosphor_prompt::Profiles;
use phosphor_store::{SessionStore, SqliteStore};
use phosphor_wire::chat::{ToOpenAiOptions, to_openai_with};
use tokio::sync::mpsc::unbounded_channel;

use crate::cli::CompactArgs;
use crate::format::thousands;
use crate::models::{self, Purpose};
use crate::render::Renderer;
use crate::transcript::{self, Layout, Transcript};
use crate::{Globals, Interrupted, config_check, print_out, session, warn};

/// Runs `phosphor compact`.
pub async fn compact(globals: &Globals, args: CompactArgs) -> Result<()> {
    let (text, source) = transcript::read_input(&args.input)?;
    let transcript = transcript::parse(&text, &source)?;
    for warning in &transcript.warnings {
        warn(format_args!("{source}: {warning}"));
    }
    let loaded = config_check::load(&globals.workspace, globals.config.as_deref())?;
    for warning in &loaded.warnings {
        warn(warning);
    }
    if args.dry_run {
        return print_out(&dry_run(&transcript, &source, &loaded.config, args.context_window));
    }

    let models = models::build(&loaded.config, Purpose::Compact, globals.model_path.as_deref()).await?;
    let (system, rest, system_prompt) = split_system(&transcript.messages);
    if rest.is_empty() {
        bail!("{source}: nothing to compact: the transcript has no messages besides the system prompt");
    }
    let store = SqliteStore::in_memory().await?;
    let agent = SessionAgent::new(Arc::new(store.clone()), models, loaded.config.options.clone())
        .with_system_prompt(system_prompt)
        .with_profiles(Profiles::discover(&globals.workspace))
        .with_settings(AgentSettings {
            workspace: Some(globals.workspace.display().to_string()),
            ..AgentSettings::default()
        });
    let session = agent.create_session(source.clone()).await?;
    agent.import_messages(&session, rest).await?;

    let (events, mut received) = unbounded_channel();
    let mut renderer = Renderer::new(Box::new(io::stderr()), Box::new(io::stderr()));
    let report = session::drive(
        agent.compact(&session.id, args.instructions.as_deref(), Some(&events)),
        &mut received,
        |event| match event {
            AgentEvent::CompactionFinished { .. } | AgentEvent::Warning { .. } => renderer.event(&event),
            _ => Ok(()),
        },
    )
    .await;
    let result = match report {
        Ok(Some(_)) => store.history(&session.id).await.map_err(anyhow::Error::from),
        Ok(None) => Err(Interrupted.into()),
        Err(err) => Err(err),
    };
    store.close().await;
    let history = result?;

    let mut compacted: Vec<Message> = system.to_vec();
    compacted.extend(history.into_iter().map(|message| {
        if message.is_summary { summary_for_transcript(&message, args.summary_flag) } else { message }
    }));
    let values = to_openai_with(&compacted, &ToOpenAiOptions { ids: false, summary_flag: args.summary_flag });
    transcript::write_output(args.output.as_deref(), &transcript::render(values, &transcript.layout)?)
}

/// The tool schemas of a transcript kept as an object with a chat request's `"tools"` beside its
/// `"messages"` (`[{"type": "function", "function": {"name", "description", "parameters"}}]`).
fn tool_specs(layout: &Layout) -> Vec<ToolSpec> {
    let Layout::Object(object) = layout else { return Vec::new() };
    let Some(tools) = object.get("tools").and_then(serde_json::Value::as_array) else { return Vec::new() };
    tools
        .iter()
        .filter_map(|tool| {
            let function = tool.get("function")?;
            Some(ToolSpec {
                name: function.get("name")?.as_str()?.to_owned(),
                description: function.get("description").and_then(|d| d.as_str()).unwrap_or("").to_owned(),
                parameters: function.get("parameters").cloned().unwrap_or(serde_json::Value::Null),
            })
        })
        .collect()
}

/// A summary as it goes into a transcript: the user message a model is shown in its place (the agent's
/// [`SUMMARY_PREFIX`] and the summary), flagged `is_summary` only when asked for.
fn summary_for_transcript(summary: &Message, flag: bool) -> Message {
    let mut shown = Message::user(format!("{SUMMARY_PREFIX}{}", summary.text_content()));
    shown.is_summary = flag;
    shown
}

/// The `--dry-run` report: tokens as read and after each pruning (tool outputs and long values in
/// tool-call arguments), the history as the summarizer would read it at the shedding ladder's first
/// rung ([`first_summary_input`], every message folded as with `summarize_keep_recent_tokens` 0,
/// the instructions aside), and whether compaction would trigger. The request is estimated as the agent frames it (the leading system messages as one
/// system prompt, the transcript's tool schemas, the request framing) and the decision is the
/// agent's own ([`policy::trigger`] with [`policy::reserve`]), so a dry run and a real turn agree.
pub fn dry_run(
    transcript: &Transcript,
    source: &str,
    config: &Config,
    window_override: Option<u64>,
) -> String {
    let options: &Options = &config.options;
    let messages = &transcript.messages;
    // The configured session model's own counter, as the agent would count (exact for OpenAI
    // model families); the approximation without one.
    let counter: Arc<dyn TokenCounter> = match &config.models.large {
        Some(model) => phosphor_llm::counter_for(&model.model),
        None => Arc::new(ApproxCounter),
    };
    let counter = counter.as_ref();
    let (_, rest, system_prompt) = split_system(messages);
    let tools = tool_specs(&transcript.layout);
    let fixed = policy::fixed_tokens(&system_prompt, &tools, counter);
    let systems = messages.iter().filter(|m| m.role == Role::System).count();
    let results = messages.iter().flat_map(Message::tool_results).count();
    let layout = match transcript.layout {
        Layout::Array => "a JSON array",
        Layout::Object(_) => "an object with \"messages\"",
        Layout::Lines => "JSON lines",
    };
    let standard = phosphor_prune::prune(rest, options.summarize_tool_output_chars, counter);
    let aggressive = phosphor_prune::prune(rest, options.summarize_tool_output_aggressive_chars, counter);
    let before = standard.tokens_before + fixed;
    let mut out = format!(
        "{source}: {} messages ({systems} system), {results} tool results, {} tool schemas, {layout}\n\
         tokens (estimated by {}: {}, plus per-message framing):\n",
        messages.len(),
        tools.len(),
        counter.name(),
        if counter.name() == ApproxCounter.name() {
            "a quarter of the bytes"
        } else {
            "the model's own tokens"
        },
    );
    let rows = [
        ("as read".to_owned(), before, None),
        (
            format!("standard pruning ({} chars per tool output)", options.summarize_tool_output_chars),
            standard.tokens_after + fixed,
            Some((standard.truncated_results, standard.truncated_arguments)),
        ),
        (
            format!(
                "aggressive pruning ({} chars per tool output)",
                options.summarize_tool_output_aggressive_chars
            ),
            aggressive.tokens_after + fixed,
            Some((aggressive.truncated_results, aggressive.truncated_arguments)),
        ),
    ];
    // What the summarizer reads, as `compact` imports it: a leading summary is never folded (it
    // goes with the instructions), and a summary flag elsewhere is dropped.
    let fold: Vec<Message> = match rest.split_first() {
        Some((first, others)) if first.is_summary => others,
        _ => rest,
    }
    .iter()
    .map(|m| Message { is_summary: false, ..m.clone() })
    .collect();
    let summary_input = first_summary_input(&fold, options, counter)
        .map(|input| (counter.count_message(&input.message), input.turns));
    let input_label = "summarizer input (instructions aside)";
    let label_width = rows
        .iter()
        .map(|(label, _, _)| label.chars().count())
        .chain([input_label.chars().count()])
        .max()
        .unwrap_or(0);
    let number_width = thousands(before).len();
    for (label, tokens, cut) in rows {
        out.push_str(&format!("  {label:<label_width$}  {:>number_width$}", thousands(tokens)));
        if let Some((outputs, arguments)) = cut {
            let plural = |n: usize| if n == 1 { "" } else { "s" };
            out.push_str(&format!(
                "  (-{}; {outputs} tool output{} cut",
                thousands(before - tokens),
                plural(outputs)
            ));
            if arguments > 0 {
                out.push_str(&format!(", {arguments} argument value{} cut", plural(arguments)));
            }
            out.push(')');
        }
        out.push('\n');
    }
    if let Some((tokens, turns)) = summary_input {
        out.push_str(&format!(
            "  {input_label:<label_width$}  {:>number_width$}  ({:.2} of as read",
            thousands(tokens),
            tokens as f64 / before.max(1) as f64
        ));
        let policy::TurnsRead { outlines, headlines, older, .. } = turns;
        if outlines > 0 && headlines == 0 {
            out.push_str(&format!("; all {older} earlier turns as outlines"));
        } else if outlines > 0 {
            out.push_str(&format!(
                "; the oldest {outlines} of {older} earlier turns as outlines, the {headlines} after them as headlines"
            ));
        } else if headlines > 0 {
            out.push_str(&format!("; the oldest {headlines} of {older} earlier turns as headlines"));
        }
        out.push_str(")\n");
    }

    let large = config.models.large.as_ref();
    let (window, max_output, whose) = match (window_override, large) {
        (Some(window), model) => (
            window,
            model.map_or(DEFAULT_MAX_OUTPUT_TOKENS, |m| m.max_output_tokens),
            "given with --context-window".to_owned(),
        ),
        (None, Some(model)) => {
            (model.context_window, model.max_output_tokens, format!("models.large, {}", model.model))
        }
        (None, None) => {
            out.push_str(
                "compaction: cannot tell: no models.large is configured; pass --context-window TOKENS to check the \
                 threshold\n",
            );
            return out;
        }
    };
    let window = window.max(1);
    let info = ModelInfo {
        provider: String::new(),
        model: String::new(),
        context_window: window,
        max_output_tokens: max_output,
    };
    let reserve = policy::reserve(&info);
    let threshold = options.summarize_threshold;
    let threshold_tokens = (threshold * window as f64).ceil() as u64;
    let percent = policy::fraction(before, window) * 100.0;
    out.push_str(&format!(
        "window: {} tokens ({whose}); threshold {threshold} = {} tokens; {} reserved for the answer\n",
        thousands(window),
        thousands(threshold_tokens),
        thousands(reserve),
    ));
    let verdict = match policy::trigger(before, reserve, window, options) {
        Some(CompactionReason::Overflow) => {
            format!("would trigger: {} tokens exceed the window (forced, overflow)", thousands(before))
        }
        Some(CompactionReason::OutputReserve) => format!(
            "would trigger: {} tokens leave less than {} tokens for the answer (forced, output reserve)",
            thousands(before),
            thousands(reserve)
        ),
        Some(_) => format!(
            "would trigger: {percent:.1}% of the window is at or above the {:.0}% threshold",
            threshold * 100.0
        ),
        None if options.disable_auto_summarize => {
            format!(
                "would not trigger: {percent:.1}% of the window, and options.disable_auto_summarize is on"
            )
        }
        None => format!(
            "would not trigger: {percent:.1}% of the window, below the {:.0}% threshold ({} tokens to go)",
            threshold * 100.0,
            thousands(threshold_tokens.saturating_sub(before))
        ),
    };
    out.push_str(&format!("compaction: {verdict}\n"));
    let prepare_at = options.summarize_prepare_at;
    if prepare_at > 0.0 && !options.disable_auto_summarize {
        let prepare_tokens = (prepare_at * window as f64).ceil() as u64;
        let when = if !policy::should_prepare(before, window, options) {
            format!("starts in {} tokens", thousands(prepare_tokens.saturating_sub(before)))
        } else if policy::trigger(before, reserve, window, options).is_some() {
            "would have started earlier; the trigger fires now".to_owned()
        } else {
            "would start now, in the background".to_owned()
        };
        out.push_str(&format!(
            "preparation: from {prepare_at} = {} tokens (options.summarize_prepare_at): {when}\n",
            thousands(prepare_tokens)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use phosphor_base::config::parse_str;
    use pretty_assertions::assert_eq;
    use std::path::Path;

    fn transcript() -> Transcript {
        let big = "x".repeat(4000);
        let text = serde_json::json!([
            { "role": "system", "content": "You are helpful." },
            { "role": "user", "content": "Read it" },
            { "role": "assistant", "content": null, "tool_calls": [
                { "id": "c1", "type": "function", "function": { "name": "read_file", "arguments": "{}" } } ] },
            { "role": "tool", "tool_call_id": "c1", "content": big },
            { "role": "assistant", "content": "Done." }
        ])
        .to_string();
        transcript::parse(&text, "t.json").unwrap()
    }

    fn config(json: &str) -> Config {
        parse_str(json, Path::new("phosphor.json")).unwrap().0
    }

    /// The summarizer-input row of a dry run of `messages` on a 200k window, and the numbers in it.
    fn summarizer_input_row(messages: Vec<serde_json::Value>) -> (String, Vec<f64>) {
        let transcript = transcript::parse(&serde_json::Value::from(messages).to_string(), "s.json").unwrap();
        let report = dry_run(&transcript, "s.json", &config("{}"), Some(200_000));
        let row = report.lines().find(|l| l.contains("summarizer input")).expect(&report).to_owned();
        let numbers = row
            .replace(',', "")
            .split(|c: char| !c.is_ascii_digit() && c != '.')
            .filter_map(|w| w.parse().ok())
            .collect();
        (row, numbers)
    }

    #[test]
    fn a_dry_run_of_a_conversation_heavy_session_shows_its_headlines() {
        // Thirty turns of a 300-character request and a 2,000-character answer: cut to 600
        // characters, the answers still leave more than a third, so the oldest turns are read as
        // headlines (a 160-character answer each) until the input is within a third.
        let messages: Vec<serde_json::Value> = (0..30)
            .flat_map(|turn| {
                [
                    serde_json::json!({ "role": "user", "content": format!("{turn} {}", "r".repeat(300)) }),
                    serde_json::json!({ "role": "assistant", "content": format!("{turn} {}", "a".repeat(2_000)) }),
                ]
            })
            .collect();
        let (row, numbers) = summarizer_input_row(messages);
        // input tokens, its share of the transcript, headlines, earlier turns
        let [_, share, headlines, older] = numbers[..] else { panic!("{row}") };
        assert!(share <= 0.34, "{row}");
        assert!(headlines >= 1.0 && headlines < older && older == 29.0, "{row}");
        assert!(row.contains(" earlier turns as headlines)"), "{row}");
    }

    #[test]
    fn a_dry_run_of_a_session_of_edits_shows_its_outlines() {
        // Twenty turns of a short request, an answer and an edit of 300 characters on each side:
        // with every older turn a headline the input is still over a third, so the oldest are read
        // as outlines (the request, an 80-character answer, the edit by its path).
        let messages: Vec<serde_json::Value> = (0..20)
            .flat_map(|turn| {
                let arguments = serde_json::json!({
                    "path": format!("src/module_{turn}.rs"),
                    "old_string": format!("{turn} {}", "o".repeat(300)),
                    "new_string": format!("{turn} {}", "n".repeat(300)),
                });
                [
                    serde_json::json!({ "role": "user", "content": format!("{turn} fix the parser in module {turn}") }),
                    serde_json::json!({
                        "role": "assistant",
                        "content": format!("{turn} {}", "a".repeat(400)),
                        "tool_calls": [{ "id": format!("c{turn}"), "type": "function",
                            "function": { "name": "edit_file", "arguments": arguments.to_string() } }],
                    }),
                    serde_json::json!({ "role": "tool", "tool_call_id": format!("c{turn}"), "content": "x".repeat(200) }),
                ]
            })
            .collect();
        let (row, numbers) = summarizer_input_row(messages);
        // input tokens, its share of the transcript, outlines, earlier turns, headlines
        let [_, share, outlines, older, headlines] = numbers[..] else { panic!("{row}") };
        assert!(share <= 0.34, "{row}");
        assert!(outlines >= 1.0 && outlines < older && outlines + headlines == older, "{row}");
        assert!(row.contains(" earlier turns as outlines, the "), "{row}");
    }

    #[test]
    fn dry_run_reports_pruning_and_the_trigger() {
        let transcript = transcript();
        let with_window = |window: u64| {
            config(&format!(
                r#"{{ "providers": {{ "p": {{ "base_url": "http://x" }} }},
                     "models": {{ "large": {{ "provider": "p", "model": "big", "context_window": {window}, "max_output_tokens": 100 }} }} }}"#
            ))
        };
        let report = dry_run(&transcript, "t.json", &with_window(100_000), None);
        // 4000 bytes of tool output is 1000 tokens; 200 chars + the marker is 54; 50 chars + the marker is 17.
        // The summarizer reads the history as one transcript (`[read_file result] xxx...`), with an
        // introduction and a closing ask, and with the newest turn's output at 200 characters.
        assert_eq!(
            report,
            "t.json: 5 messages (1 system), 1 tool results, 0 tool schemas, a JSON array\n\
             tokens (estimated by approx: a quarter of the bytes, plus per-message framing):\n  \
             as read                                        1,037\n  \
             standard pruning (200 chars per tool output)      91  (-946; 1 tool output cut)\n  \
             aggressive pruning (50 chars per tool output)     54  (-983; 1 tool output cut)\n  \
             summarizer input (instructions aside)            159  (0.15 of as read)\n\
             window: 100,000 tokens (models.large, big); threshold 0.8 = 80,000 tokens; 100 reserved for the answer\n\
             compaction: would not trigger: 1.0% of the window, below the 80% threshold (78,963 tokens to go)\n"
        );
        let prepared = |window: u64| {
            config(&format!(
                r#"{{ "options": {{ "summarize_prepare_at": 0.5 }}, "providers": {{ "p": {{ "base_url": "http://x" }} }},
                     "models": {{ "large": {{ "provider": "p", "model": "big", "context_window": {window}, "max_output_tokens": 100 }} }} }}"#
            ))
        };
        let report = dry_run(&transcript, "t.json", &prepared(100_000), None);
        assert!(
            report.ends_with(
                "preparation: from 0.5 = 50,000 tokens (options.summarize_prepare_at): starts in 48,963 tokens\n"
            ),
            "{report}"
        );
        let report = dry_run(&transcript, "t.json", &prepared(1_500), None);
        assert!(
            report.ends_with(
                "= 750 tokens (options.summarize_prepare_at): would start now, in the background\n"
            ),
            "{report}"
        );
        let report = dry_run(&transcript, "t.json", &prepared(1_200), None);
        assert!(report.ends_with("the trigger fires now\n"), "{report}");
        let report = dry_run(&transcript, "t.json", &with_window(1_200), None);
        assert!(
            report.ends_with(
                "compaction: would trigger: 86.4% of the window is at or above the 80% threshold\n"
            ),
            "{report}"
        );
        let report = dry_run(&transcript, "t.json", &with_window(100_000), Some(1_000));
        assert!(report.contains("window: 1,000 tokens (given with --context-window)"), "{report}");
        assert!(
            report
                .ends_with("compaction: would trigger: 1,037 tokens exceed the window (forced, overflow)\n"),
            "{report}"
        );
        let report = dry_run(&transcript, "t.json", &config("{}"), None);
        assert!(report.ends_with("pass --context-window TOKENS to check the threshold\n"), "{report}");
    }

    #[test]
    fn dry_run_frames_the_request_as_the_agent_does() {
        // Two leading system messages become one system prompt, joined by a blank line
        // ("You are helpful.\n\nBe brief.": 27 bytes, 7 tokens + 4 framing = 11, where two
        // messages would cost 15); the tool schema beside the messages counts (3 + 3 + 5 + 8 = 19);
        // "Hi" costs 5, and the request framing 3: 38 in all.
        let text = serde_json::json!({
            "messages": [
                { "role": "system", "content": "You are helpful." },
                { "role": "system", "content": "Be brief." },
                { "role": "user", "content": "Hi" }
            ],
            "tools": [{ "type": "function", "function": {
                "name": "read_file", "description": "Reads a file", "parameters": { "type": "object" } } }]
        })
        .to_string();
        let transcript = transcript::parse(&text, "t.json").unwrap();
        let report = dry_run(&transcript, "t.json", &config("{}"), Some(40));
        assert!(report.contains("3 messages (2 system), 0 tool results, 1 tool schemas"), "{report}");
        let as_read = report.lines().find(|line| line.trim_start().starts_with("as read")).unwrap();
        assert_eq!(as_read.split_whitespace().last(), Some("38"), "{report}");
        // 38 of 40 with a 10-token reserve (a quarter of the window): the output-reserve trigger.
        assert!(
            report.ends_with(
                "compaction: would trigger: 38 tokens leave less than 10 tokens for the answer (forced, output reserve)\n"
            ),
            "{report}"
        );
    }

    #[tokio::test]
    async fn a_flagged_summary_at_the_start_becomes_the_session_summary() {
        let store = SqliteStore::in_memory().await.unwrap();
        let model = Arc::new(phosphor_testkit::ScriptedModel::new(Vec::new()));
        let agent = SessionAgent::new(
            Arc::new(store.clone()),
            phosphor_agent::Models::new(model),
            Options::default(),
        );
        let session = agent.create_session("t").await.unwrap();
        let summary = summary_for_transcript(
            &Message { is_summary: true, ..Message::assistant("## Goal\nShip.") },
            true,
        );
        let messages = vec![
            summary,
            Message::user("next"),
            Message { is_summary: true, ..Message::user("not a summary") },
        ];
        agent.import_messages(&session, &messages).await.unwrap();
        let history = store.history(&session.id).await.unwrap();
        assert_eq!(
            history.iter().map(|m| (m.is_summary, m.text_content())).collect::<Vec<_>>(),
            [
                (true, "## Goal\nShip.".to_owned()),
                (false, "next".to_owned()),
                (false, "not a summary".to_owned())
            ]
        );
    }
}
