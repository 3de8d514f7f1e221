//! `phosphor run`: one turn, the answer on stdout (or every event as JSON lines with `--json`).

use std::io::{self, IsTerminal, Read, Write};

use anyhow::{Result, anyhow};
use tokio::sync::mpsc::unbounded_channel;

use crate::cli::RunArgs;
use crate::render::Renderer;
use crate::session::{self, Setup};
use crate::{Globals, Interrupted, UsageError};

/// Runs `phosphor run`.
pub async fn run(globals: &Globals, args: RunArgs) -> Result<()> {
    let prompt = match args.prompt.clone() {
        Some(prompt) => prompt,
        None => {
            if io::stdin().is_terminal() {
                eprintln!("reading the prompt from stdin; end it with Ctrl-D");
            }
            let mut prompt = String::new();
            io::stdin()
                .read_to_string(&mut prompt)
                .map_err(|err| anyhow!("reading the prompt from stdin: {err}"))?;
            // `echo question | phosphor run`: the final newline is not part of the question.
            prompt.trim_end_matches(['\n', '\r']).to_owned()
        }
    };
    if prompt.trim().is_empty() {
        return Err(UsageError("the prompt is empty; give it as an argument or on stdin".to_owned()).into());
    }
    let setup = session::setup(globals).await?;
    let result = turn(&setup, &args, prompt).await;
    setup.store.close().await;
    result
}

async fn turn(setup: &Setup, args: &RunArgs, prompt: String) -> Result<()> {
    let session = match session::choose(&*setup.store, &args.session).await? {
        Some(session) => session,
        None => setup.agent.create_session("").await?,
    };
    let (events, mut received) = unbounded_channel();
    let future = setup.agent.run_turn(&session.id, prompt, Some(&events));
    if args.json {
        let outcome = session::drive(future, &mut received, |event| {
            let line = serde_json::to_string(&event).map_err(io::Error::other)?;
            let mut stdout = io::stdout().lock();
            writeln!(stdout, "{line}")?;
            stdout.flush()
        })
        .await?;
        return outcome.map(|_| ()).ok_or_else(|| Interrupted.into());
    }
    // On a terminal the answer streams as it is written; into a pipe or file only the final answer goes,
    // so that `answer=$(phosphor run ...)` holds just that. Progress lines go to stderr either way.
    let streaming = io::stdout().is_terminal();
    let mut renderer = Renderer::new(Box::new(io::stdout()), Box::new(io::stderr()));
    let outcome = session::drive(future, &mut received, |event| match event {
        phosphor_agent::AgentEvent::TextDelta { .. } | phosphor_agent::AgentEvent::TurnFinished { .. }
            if !streaming =>
        {
            Ok(())
        }
        event => renderer.event(&event),
    })
    .await?;
    let Some(outcome) = outcome else {
        renderer.end_line()?;
        return Err(Interrupted.into());
    };
    if !streaming {
        let mut text = outcome.final_message.text_content();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        crate::print_out(&text)?;
    }
    Ok(())
}
