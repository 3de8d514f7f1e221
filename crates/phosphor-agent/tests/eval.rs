//! `phosphor_agent::eval` end to end with a scripted summarizer that writes nothing useful
//! ("Summary."): what each strategy keeps of a synthetic coding session, the JSON shape, and the
//! HTML report parsed by a real HTML parser.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use phosphor_agent::eval::{self, EvalSetup, EvalTranscript, ProbeKind, Strategy, Windowed, report};
use phosphor_agent::{Models, SessionAgent, policy};
use phosphor_base::config::Options;
use phosphor_base::{Message, ModelInfo, Part, Role, ToolCall};
use phosphor_testkit::{ScriptedModel, text_turn};

const WINDOW: u64 = 8_192;

async fn evaluation(transcripts: &[EvalTranscript]) -> eval::Evaluation {
    let summarizer = Arc::new(
        ScriptedModel::new((0..8).map(|_| text_turn("Summary.", None)).collect()).with_info(ModelInfo {
            provider: "scripted".into(),
            model: "useless-summarizer".into(),
            context_window: 128_000,
            max_output_tokens: 4096,
        }),
    );
    let models = Models::new(Windowed::wrap(summarizer, WINDOW));
    let setup = EvalSetup {
        agent: Box::new(move |store, prompt| {
            SessionAgent::new(store, models.clone(), Options::default()).with_system_prompt(prompt)
        }),
        strategies: Strategy::ALL.to_vec(),
        judge: None,
    };
    let mut lines = Vec::new();
    let evaluation = eval::evaluate(&setup, transcripts, &mut |line| lines.push(line)).await.unwrap();
    assert!(lines.iter().any(|l| l.contains("compacting with useless-summarizer")), "{lines:?}");
    evaluation
}

/// A coding session of 16 turns: each asks for something of its own, reads a large file, edits it
/// and runs a command (every fifth one fails); a plan is written halfway.
fn session() -> EvalTranscript {
    let call = |id: String, name: &str, arguments: serde_json::Value| {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall(ToolCall { id, name: name.into(), arguments: arguments.to_string() })],
        )
    };
    let mut messages = Vec::new();
    for i in 0..16 {
        messages.push(Message::user(format!(
            "Request {i}: rename `option_{i}` to `setting_{i}` in src/module_{i}.rs and keep the public API stable."
        )));
        let file = format!("src/module_{i}.rs");
        messages.push(call(format!("r{i}"), "read_file", serde_json::json!({ "path": file })));
        let body = format!("pub fn option_{i}() -> u32 {{ {i} }}\n").repeat(120);
        messages.push(Message::tool_result(format!("r{i}"), "read_file", body, false));
        messages.push(call(
            format!("e{i}"),
            "edit_file",
            serde_json::json!({ "path": file, "old_string": format!("option_{i}"), "new_string": format!("setting_{i}") }),
        ));
        messages.push(Message::tool_result(format!("e{i}"), "edit_file", "ok", false));
        let command = format!("cargo test -p module{i}");
        messages.push(call(format!("c{i}"), "bash", serde_json::json!({ "command": command })));
        let (output, failed) = if i % 5 == 4 {
            (format!("error[E0425]: cannot find function `option_{i}`\nexit code 101"), true)
        } else {
            ("test result: ok. 3 passed\nexit code 0".to_owned(), false)
        };
        messages.push(Message::tool_result(format!("c{i}"), "bash", output, failed));
        if i == 8 {
            messages.push(call(
                "plan".into(),
                "TodoWrite",
                serde_json::json!({ "todos": [
                    { "content": "Rename the remaining options", "status": "in_progress" },
                    { "content": "Update the changelog for setting renames", "status": "pending" },
                    { "content": "Read the modules", "status": "completed" }
                ]}),
            ));
            messages.push(Message::tool_result("plan", "TodoWrite", "ok", false));
        }
        messages.push(Message::assistant(format!("Renamed option_{i} to setting_{i} in {file}.")));
    }
    EvalTranscript { source: "session".into(), system_prompt: "You are a coding agent.".into(), messages }
}

#[tokio::test]
async fn strategies_keep_what_they_should_and_the_report_shows_every_one() {
    // Two transcripts share the evaluation's store: each gets its own session and message ids.
    let evaluation = evaluation(&[session(), session()]).await;
    assert_eq!(evaluation.transcripts.len(), 2);
    let by_name = |name: &str| evaluation.strategies.iter().find(|s| s.name == name).unwrap();
    assert_eq!(evaluation.window, WINDOW);
    assert!(evaluation.probes.len() > 20, "{} probes", evaluation.probes.len());
    for kind in ProbeKind::ALL {
        assert!(evaluation.probes.iter().any(|p| p.probe.kind == kind), "no {kind:?} probe");
    }

    // The upper bound keeps everything, and is over the window.
    let original = by_name("original");
    assert_eq!(original.scores.overall, Some(1.0), "{original:?}");
    assert!(!original.fits_window);
    // The lower bound fits and forgets.
    let truncate = by_name("truncate");
    let reserve = 4096.min(WINDOW / 4);
    assert!(truncate.fits_window && truncate.tokens_after / 2 + reserve <= WINDOW, "{truncate:?}");
    assert!(truncate.scores.overall.unwrap() < 0.5, "{truncate:?}");
    // A useless summary keeps nothing; the state trail keeps every request and the plan.
    let summary = by_name("summary");
    let trail = by_name("summary+state-trail");
    assert!(summary.fits_window && trail.fits_window);
    assert!(trail.tokens_after > summary.tokens_after);
    assert_eq!(summary.seconds, trail.seconds, "one compaction serves both");
    assert!(trail.scores.intent.unwrap() > summary.scores.intent.unwrap(), "{trail:?} {summary:?}");
    assert!(trail.scores.artifact.unwrap() > summary.scores.artifact.unwrap(), "{trail:?} {summary:?}");
    assert!(trail.scores.overall.unwrap() > truncate.scores.overall.unwrap(), "{trail:?} {truncate:?}");
    // A summary prepared ahead keeps the newest turns verbatim after it, and fits as well.
    let prepared = by_name("prepared");
    assert!(prepared.fits_window, "{prepared:?}");
    assert!(prepared.scores.intent.unwrap() >= trail.scores.intent.unwrap(), "{prepared:?} {trail:?}");
    assert!(prepared.tokens_after > trail.tokens_after, "{prepared:?} {trail:?}");
    // Masking keeps the messages, so every request.
    assert_eq!(by_name("mask").scores.intent, Some(1.0));
    assert!(by_name("mask").tokens_after < original.tokens_after);
    // The state budget the compaction reserves is the policy's.
    assert!(policy::state_budget(&Options::default(), WINDOW) > 0);

    // JSON: the shape scripts rely on.
    let json: serde_json::Value = serde_json::from_str(&report::json(&evaluation)).unwrap();
    for (s, name) in json["strategies"].as_array().unwrap().iter().zip(Strategy::ALL.map(Strategy::name)) {
        assert_eq!(s["name"], name);
        for key in ["tokens_before", "tokens_after", "seconds"] {
            assert!(s[key].is_number(), "{key} in {s}");
        }
        for key in ["artifact", "recall", "intent", "continuation", "overall"] {
            assert!(s["scores"][key].is_number(), "scores.{key} in {s}");
        }
    }

    // HTML: it parses, holds the chart with a point per strategy, and a column per strategy.
    let html = scraper::Html::parse_document(&report::html(&evaluation));
    assert!(html.errors.is_empty(), "{:?}", html.errors);
    let select = |css: &str| scraper::Selector::parse(css).unwrap();
    assert_eq!(html.select(&select("svg#chart")).count(), 1);
    let points: Vec<&str> =
        html.select(&select("svg#chart g.point")).map(|g| g.value().attr("data-strategy").unwrap()).collect();
    assert_eq!(points, Strategy::ALL.map(Strategy::name));
    assert_eq!(html.select(&select("table#strategies tr[data-strategy]")).count(), Strategy::ALL.len());
    let rows = html.select(&select("table#probes tr")).count();
    assert_eq!(rows, evaluation.probes.len() + 1);
    let table = report::table(&evaluation);
    eprintln!("{table}");
    for name in Strategy::ALL.map(Strategy::name) {
        assert!(table.contains(name), "{table}");
    }
}

#[tokio::test]
async fn an_unknown_strategy_is_named_with_the_choices() {
    let error = Strategy::parse("summarize").unwrap_err();
    assert_eq!(
        error,
        "unknown strategy \"summarize\": expected one of original, truncate, mask, summary, summary+state-trail, prepared"
    );
}
