//! `phosphor eval`: every compaction strategy on the same transcripts, scored by the probes derived
//! from them ([`phosphor_agent::eval`] does the work; this reads the files and prints).

use std::fs;

use anyhow::{Context, Result, bail};
use phosphor_agent::eval::{
    self, EvalSetup, EvalTranscript, Judge, Strategy, Windowed, aider, claude_code, report, split_system,
};
use phosphor_agent::{AgentSettings, SessionAgent};
use phosphor_prompt::Profiles;

use crate::cli::EvalArgs;
use crate::models::{self, Purpose};
use crate::transcript;
use crate::{Globals, config_check, print_out, warn};

/// Runs `phosphor eval`.
pub async fn eval(globals: &Globals, args: EvalArgs) -> Result<()> {
    let mut transcripts = Vec::new();
    for path in &args.input {
        transcripts.extend(read(path)?);
    }
    if let Some(max) = args.max_transcripts {
        transcripts.truncate(usize::try_from(max).unwrap_or(usize::MAX));
    }
    if transcripts.is_empty() {
        bail!(
            "no transcript to evaluate: the inputs hold no conversation (an aider history needs a session of 3 turns or more)"
        );
    }
    let loaded = config_check::load(&globals.workspace, globals.config.as_deref())?;
    for warning in &loaded.warnings {
        warn(warning);
    }
    let mut models = models::build(&loaded.config, Purpose::Compact, globals.model_path.as_deref()).await?;
    let window = args.context_window.unwrap_or_else(|| models.large.info().context_window);
    // The judge and the answering model work at their own windows: only the strategies fit `window`.
    let judge = match args.judge {
        Some(choice) => {
            let mut judge = Judge::new(models.large.clone(), models.choose(choice)?);
            if let Some(path) = &args.judge_template {
                judge.template =
                    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                judge.template_name = path.display().to_string();
            }
            Some(judge)
        }
        None => None,
    };
    models.large = Windowed::wrap(models.large.clone(), window);
    let options = loaded.config.options.clone();
    let workspace = globals.workspace.clone();
    let setup = EvalSetup {
        agent: Box::new(move |store, system_prompt| {
            SessionAgent::new(store, models.clone(), options.clone())
                .with_system_prompt(system_prompt)
                .with_profiles(Profiles::discover(&workspace))
                .with_settings(AgentSettings {
                    workspace: Some(workspace.display().to_string()),
                    ..AgentSettings::default()
                })
        }),
        strategies: if args.strategies.is_empty() { Strategy::ALL.to_vec() } else { dedup(args.strategies) },
        judge,
    };
    let evaluation = eval::evaluate(&setup, &transcripts, &mut |line| eprintln!("{line}")).await?;
    if let Some(path) = &args.report {
        fs::write(path, report::html(&evaluation)).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if args.json {
        print_out(&(report::json(&evaluation) + "\n"))
    } else {
        print_out(&report::table(&evaluation))
    }
}

fn dedup(strategies: Vec<Strategy>) -> Vec<Strategy> {
    let mut seen = Vec::new();
    for strategy in strategies {
        if !seen.contains(&strategy) {
            seen.push(strategy);
        }
    }
    seen
}

/// The transcripts of one input: one for a transcript file, one per session of three turns or more
/// for an aider history (`.md`), one per session for a Claude Code session log (named `FILE#N` by
/// session number in both).
fn read(path: &std::path::Path) -> Result<Vec<EvalTranscript>> {
    let (text, source) = transcript::read_input(path)?;
    if claude_code::is_session_log(&text) {
        let sessions = claude_code::sessions(&text).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
        return Ok(sessions
            .into_iter()
            .enumerate()
            .map(|(index, session)| EvalTranscript {
                source: format!("{source}#{}", index + 1),
                system_prompt: String::new(),
                messages: session.messages,
            })
            .collect());
    }
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("md")) {
        return Ok(aider::sessions(&text)
            .into_iter()
            .enumerate()
            .filter(|(_, turns)| turns.len() >= aider::MIN_EVAL_TURNS)
            .map(|(index, turns)| EvalTranscript {
                source: format!("{source}#{}", index + 1),
                system_prompt: String::new(),
                messages: aider::transcript(&turns),
            })
            .collect());
    }
    let parsed = transcript::parse(&text, &source)?;
    for warning in &parsed.warnings {
        warn(format_args!("{source}: {warning}"));
    }
    let (_, rest, system_prompt) = split_system(&parsed.messages);
    if rest.is_empty() {
        bail!("{source}: nothing to evaluate: the transcript has no messages besides the system prompt");
    }
    Ok(vec![EvalTranscript { source, system_prompt, messages: rest.to_vec() }])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_claude_code_session_log_is_one_transcript_per_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let line = |session: &str, kind: &str, content: &str| {
            format!(
                r#"{{"type":"{kind}","sessionId":"{session}","message":{{"id":"m-{session}","role":"{kind}","content":{content}}}}}"#
            )
        };
        let log = [
            line("a", "user", r#""Fix the build""#),
            line("a", "assistant", r#"[{"type":"text","text":"Fixed."}]"#),
            line("b", "user", r#""Add a test""#),
            line("b", "assistant", r#"[{"type":"text","text":"Added."}]"#),
        ]
        .join("\n");
        std::fs::write(&path, log).unwrap();
        let transcripts = read(&path).unwrap();
        let names: Vec<String> = transcripts.iter().map(|t| t.source.clone()).collect();
        let source = path.display().to_string();
        assert_eq!(names, [format!("{source}#1"), format!("{source}#2")]);
        assert_eq!(transcripts[1].messages[0].text_content(), "Add a test");

        std::fs::write(&path, format!("{}\nnot json", line("a", "user", r#""Fix""#))).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{source}: line 2, column 2: not JSON")), "{err}");
    }
}
