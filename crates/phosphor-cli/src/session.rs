//! What `chat` and `run` share: the agent over the session database, with the workspace tools; which
//! session a turn goes to; and driving a turn while rendering its events and watching for Ctrl-C.

use std::future::Future;
use std::path::PathBuf;

use anyhow::Result;
use phosphor_agent::{AgentEvent, AgentSettings, SessionAgent};
use phosphor_base::Session;
use phosphor_prompt::Profiles;
use phosphor_store::SessionStore;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::cli::SessionChoice;
use crate::models::{self, Purpose};
use crate::tools::{Workspace, builtin_tools};
use crate::{Globals, config_check, sessions, warn};

/// The agent of `chat` and `run`, and what it was built from.
pub struct Setup {
    /// The agent, with the workspace tools.
    pub agent: SessionAgent,
    /// The session database (the agent holds a clone).
    pub store: sessions::Db,
    /// Where the database is.
    pub db: PathBuf,
    /// The directory the tools may read.
    pub workspace: Workspace,
}

/// Loads the configuration (warnings to stderr), builds the models, opens the database and the agent.
pub async fn setup(globals: &Globals) -> Result<Setup> {
    let loaded = config_check::load(&globals.workspace, globals.config.as_deref())?;
    for warning in &loaded.warnings {
        warn(warning);
    }
    let models = models::build(&loaded.config, Purpose::Turns, globals.model_path.as_deref()).await?;
    let workspace = Workspace::new(&globals.workspace)?;
    let db = sessions::db_path(globals.db.as_deref())?;
    let store = sessions::open_store(&db).await?;
    let mut agent = SessionAgent::new(store.shared(), models, loaded.config.options.clone())
        .with_system_prompt(system_prompt(&workspace))
        .with_profiles(Profiles::discover(workspace.root()))
        .with_settings(AgentSettings {
            workspace: Some(workspace.root().display().to_string()),
            ..AgentSettings::default()
        });
    for tool in builtin_tools(&workspace) {
        agent = agent.with_tool(tool);
    }
    Ok(Setup { agent, store, db, workspace })
}

/// The system prompt of `chat` and `run`.
fn system_prompt(workspace: &Workspace) -> String {
    format!(
        "You are a coding assistant working in the directory {}. You can read files (read_file), list \
         directories (list_dir) and search text (search_text), all relative to that directory; you cannot \
         write files or run commands. Look before you answer, cite paths and line numbers, and be concise.",
        workspace.root().display()
    )
}

/// The session `choice` names: `Some` for `--session` and (when one exists) `--continue`, `None` for a new one.
pub async fn choose(store: &dyn SessionStore, choice: &SessionChoice) -> Result<Option<Session>> {
    if let Some(id) = &choice.session {
        return Ok(Some(sessions::find_session(store, id).await?));
    }
    if choice.continue_latest {
        let latest = store.latest_session().await?;
        if latest.is_none() {
            warn("there is no session to continue; starting a new one");
        }
        return Ok(latest);
    }
    Ok(None)
}

/// Runs `future` (a turn or a compaction) while handing each of its events to `on_event`, until it
/// finishes or Ctrl-C is pressed. `Ok(None)` means Ctrl-C: the future was dropped, which cancels it and
/// leaves the session usable (what was stored stays stored; an unfinished summary is never used).
pub async fn drive<T, E>(
    future: impl Future<Output = Result<T, E>>,
    events: &mut UnboundedReceiver<AgentEvent>,
    mut on_event: impl FnMut(AgentEvent) -> std::io::Result<()>,
) -> Result<Option<T>>
where
    E: std::error::Error + Send + Sync + 'static,
{
    tokio::pin!(future);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    // Off when the signal handler cannot be installed: the future then runs to the end.
    let mut watching = true;
    loop {
        tokio::select! {
            biased;
            Some(event) = events.recv() => on_event(event)?,
            result = &mut future => {
                while let Ok(event) = events.try_recv() {
                    on_event(event)?;
                }
                return Ok(Some(result?));
            }
            signal = &mut ctrl_c, if watching => match signal {
                Ok(()) => return Ok(None),
                Err(err) => {
                    tracing::warn!("cannot watch for Ctrl-C: {err}");
                    watching = false;
                }
            },
        }
    }
}
