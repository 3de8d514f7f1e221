//! `phosphor chat`: an interactive session on stdin and stdout, with slash commands.

use std::io::{self, BufRead, IsTerminal, Write};

use anyhow::Result;
use phosphor_base::Session;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::cli::ChatArgs;
use crate::format::{preview, thousands};
use crate::render::Renderer;
use crate::session::{self, Setup};
use crate::{Globals, Interrupted, sessions};

const HELP: &str = "\
commands:
  /compact [instructions]  compact the session now, optionally saying what the summary should focus on
  /summary                 show the current summary
  /tokens                  tokens of the next request, the window and the compaction threshold
  /sessions                the most recent sessions
  /new                     start a new session
  /exit                    leave (so do Ctrl-D, and Ctrl-C at the prompt)
Ctrl-C during an answer cancels it; the session stays usable. Start a message with // to send a leading /.";

/// Runs `phosphor chat`.
pub async fn chat(globals: &Globals, args: ChatArgs) -> Result<()> {
    let setup = session::setup(globals).await?;
    let current = session::choose(&*setup.store, &args.session).await;
    let result = match current {
        Ok(current) => {
            let renderer = Renderer::new(Box::new(io::stdout()), Box::new(io::stdout()));
            let interactive = io::stdin().is_terminal();
            Chat { setup: &setup, current, renderer, interactive }.run().await
        }
        Err(err) => Err(err),
    };
    setup.store.close().await;
    result
}

struct Chat<'a> {
    setup: &'a Setup,
    current: Option<Session>,
    renderer: Renderer,
    /// Whether stdin is a terminal: it shows the prompt, and echoes `^C` itself when Ctrl-C is pressed.
    interactive: bool,
}

/// What to do after a line.
enum Flow {
    Continue,
    Exit,
}

impl Chat<'_> {
    async fn run(mut self) -> Result<()> {
        self.banner().await?;
        let mut lines = stdin_lines();
        loop {
            if self.interactive {
                let mut stdout = io::stdout().lock();
                write!(stdout, "› ")?;
                stdout.flush()?;
            }
            let line = tokio::select! {
                line = lines.recv() => line,
                Ok(()) = tokio::signal::ctrl_c() => {
                    self.renderer.line("")?;
                    return Err(Interrupted.into());
                }
            };
            let Some(line) = line else { return Ok(()) };
            let line = line?;
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            let flow = match text.strip_prefix('/') {
                Some(rest) if !rest.starts_with('/') => self.slash(rest).await?,
                Some(rest) => self.turn(rest).await?,
                None => self.turn(text).await?,
            };
            if let Flow::Exit = flow {
                return Ok(());
            }
        }
    }

    async fn banner(&mut self) -> Result<()> {
        let info = self.setup.agent.large_model().info().clone();
        let threshold = self.setup.agent.options().summarize_threshold;
        let mut text = format!(
            "phosphor chat · {} · {}-token window · compaction at {:.0}% · workspace {}",
            info.model,
            thousands(info.context_window),
            threshold * 100.0,
            self.setup.workspace.root().display()
        );
        if let Some(current) = &self.current {
            let count = self.setup.store.count_messages(&current.id).await.map_err(anyhow::Error::from)?;
            text.push_str(&format!(
                "\nresuming session {} · {} · {count} messages",
                current.id,
                if current.title.is_empty() { "(untitled)".to_owned() } else { preview(&current.title, 60) }
            ));
        }
        text.push_str("\n/help lists the commands; Ctrl-D leaves");
        self.renderer.line(&text)?;
        Ok(())
    }

    /// The current session, created now if there is none yet.
    async fn session_id(&mut self) -> Result<String> {
        if let Some(current) = &self.current {
            return Ok(current.id.clone());
        }
        let created = self.setup.agent.create_session("").await?;
        let id = created.id.clone();
        self.current = Some(created);
        Ok(id)
    }

    async fn turn(&mut self, prompt: &str) -> Result<Flow> {
        let id = self.session_id().await?;
        let (events, mut received) = unbounded_channel();
        let renderer = &mut self.renderer;
        let result =
            session::drive(self.setup.agent.run_turn(&id, prompt, Some(&events)), &mut received, |event| {
                renderer.event(&event)
            })
            .await;
        match result {
            Ok(Some(_)) => self.renderer.end_line()?,
            Ok(None) => {
                let text = self.cancelled("cancelled; the session is kept, type another message");
                self.renderer.line(&text)?
            }
            Err(err) => self.error(err)?,
        }
        Ok(Flow::Continue)
    }

    /// The line shown when Ctrl-C stopped a turn or a compaction: a terminal has echoed `^C` already,
    /// so only input from elsewhere (a pipe, where the signal came from `kill`) gets it written out.
    fn cancelled(&self, message: &str) -> String {
        if self.interactive { message.to_owned() } else { format!("^C {message}") }
    }

    /// Shows a failed turn or command and goes on; fails only when the terminal itself fails.
    fn error(&mut self, err: anyhow::Error) -> Result<()> {
        if err.downcast_ref::<io::Error>().is_some() {
            return Err(err);
        }
        self.renderer.end_line()?;
        eprintln!("error: {err}");
        Ok(())
    }

    async fn slash(&mut self, command: &str) -> Result<Flow> {
        let (name, rest) = command.split_once(char::is_whitespace).unwrap_or((command, ""));
        let rest = rest.trim();
        match name {
            "exit" | "quit" => return Ok(Flow::Exit),
            "help" => self.renderer.line(HELP)?,
            "new" => {
                self.current = None;
                self.renderer.line("new session: it is stored with your next message")?;
            }
            "sessions" => {
                let list = sessions::list(&*self.setup.store, &self.setup.db, false, 20).await?;
                self.renderer.line(list.trim_end())?;
                if let Some(current) = &self.current {
                    self.renderer.line(&format!("current: {}", current.id))?;
                }
            }
            "tokens" => match &self.current {
                None => self.renderer.line("no session yet: your first message starts one")?,
                Some(current) => {
                    let status = self.setup.agent.token_status(&current.id).await?;
                    let window = status.context_window.max(1);
                    self.renderer.line(&format!(
                        "next request ≈ {} tokens of the {}-token window ({:.1}%); compaction at {:.0}% ({} tokens); \
                         session current_tokens {}",
                        thousands(status.estimated_tokens),
                        thousands(status.context_window),
                        status.estimated_tokens as f64 * 100.0 / window as f64,
                        status.threshold * 100.0,
                        thousands((status.threshold * window as f64).ceil() as u64),
                        thousands(status.current_tokens),
                    ))?;
                }
            },
            "summary" => self.show_summary().await?,
            "compact" => self.compact(if rest.is_empty() { None } else { Some(rest) }).await?,
            other => self.renderer.line(&format!("unknown command /{other}; /help lists the commands"))?,
        }
        Ok(Flow::Continue)
    }

    async fn show_summary(&mut self) -> Result<()> {
        let Some(current) = &self.current else {
            return Ok(self.renderer.line("no session yet: your first message starts one")?);
        };
        let store = &self.setup.store;
        let session = store.session(&current.id).await?;
        let summary = match session.and_then(|s| s.summary_message_id) {
            Some(id) => store.message(&id).await?,
            None => None,
        };
        match summary {
            Some(summary) => {
                self.renderer.line(&format!("── summary ──\n{}", summary.text_content().trim_end()))?
            }
            None => self.renderer.line("no summary yet: this session has not been compacted")?,
        }
        Ok(())
    }

    async fn compact(&mut self, instructions: Option<&str>) -> Result<()> {
        let Some(current) = &self.current else {
            return Ok(self.renderer.line("nothing to compact: no session yet")?);
        };
        let id = current.id.clone();
        let (events, mut received) = unbounded_channel();
        let renderer = &mut self.renderer;
        let mut failure_shown = false;
        let result = session::drive(
            self.setup.agent.compact(&id, instructions, Some(&events)),
            &mut received,
            |event| {
                failure_shown |= matches!(event, phosphor_agent::AgentEvent::CompactionFailed { .. });
                renderer.event(&event)
            },
        )
        .await;
        match result {
            Ok(Some(_)) => {}
            Ok(None) => {
                let text = self.cancelled("compaction cancelled; the session is unchanged");
                self.renderer.line(&text)?
            }
            // Shown as a `⟳ compaction failed` line already, unless it failed before it started.
            Err(err) if failure_shown && err.downcast_ref::<io::Error>().is_none() => {}
            Err(err) => self.error(err)?,
        }
        Ok(())
    }
}

/// The lines of stdin, read on a thread of their own (a blocked read never holds up the runtime).
fn stdin_lines() -> UnboundedReceiver<io::Result<String>> {
    let (sender, receiver) = unbounded_channel();
    std::thread::spawn(move || {
        for line in io::stdin().lock().lines() {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}
