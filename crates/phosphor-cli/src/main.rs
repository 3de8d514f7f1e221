//! `phosphor`: chat with a coding agent whose session compacts itself when the context window fills,
//! compact transcript files, and inspect stored sessions.
//!
//! ```text
//! phosphor compact --input examples/transcript.json --dry-run   # tokens before/after pruning, no model
//! phosphor run "Where is the config parsed?"                    # one turn, the answer on stdout
//! phosphor run --continue "And where is it validated?"          # the same session, compacted when needed
//! phosphor chat                                                 # interactive; /help for slash commands
//! phosphor sessions show <ID>                                   # the history a model sees, summary marked
//! phosphor config check                                         # every value and the file it came from
//! ```
//!
//! Global flags (`--db PATH`, `--config FILE`, `--workspace DIR`, `-v`) are accepted before or after
//! the command. Sessions live in SQLite at `phosphor/sessions.db` in the platform's local data
//! directory unless `--db` says otherwise. Models are remote OpenAI-compatible endpoints configured
//! in `phosphor.json` (`providers` and `models.large`, optionally `models.small`), or a local GGUF
//! model run in-process by the embedded engine: `--model-path FILE`, `embedded_models.inference`,
//! and, with no model configured at all, the default embedded model (downloaded on first use).
//! `phosphor models list | pull` shows and downloads local models.
//!
//! `chat` and `run` give the model three read-only tools confined to the workspace directory
//! (`--workspace`, default the current directory): `read_file`, `list_dir` and `search_text`. Paths
//! that leave it (`..`, absolute paths elsewhere, symlinks pointing out) get an error result; nothing
//! is ever written.
//!
//! # Logging and telemetry
//!
//! Log lines go to stderr: warnings by default, more with `-v`/`-vv`/`-vvv`, or exactly what
//! `RUST_LOG` says. With the `otel` cargo feature (on by default), setting
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (spans go to `{endpoint}/v1/traces`) or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as given) also exports the tracing spans over OTLP/HTTP:
//! each turn (`invoke_agent phosphor`), each compaction, and each model call (`chat {model}`, a client
//! span with the GenAI attributes `gen_ai.request.model`, `gen_ai.usage.input_tokens`,
//! `gen_ai.usage.output_tokens`, ...). Phosphor's spans at `info` are exported whatever `-v` and
//! `RUST_LOG` say. The SDK's variables apply: `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the
//! default, or `http/json`; gRPC is not built in), `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_EXPORTER_OTLP_TIMEOUT`, their `_TRACES_` forms, `OTEL_BSP_*`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_SERVICE_NAME` (default `phosphor`) and `OTEL_SDK_DISABLED=true`. Spans are sent in batches
//! while the command runs and the rest at exit, which waits at most 5 seconds. Telemetry never
//! changes a command's result: a collector that is unreachable or refuses costs one `warning:` line.
//! Without the variables nothing of OpenTelemetry is set up; a build without `otel` ignores them (and
//! says so with `-v`).
//!
//! # Exit codes
//!
//! | Code | Meaning                                                                      |
//! |------|------------------------------------------------------------------------------|
//! | 0    | success                                                                      |
//! | 1    | an error: one `error: ...` line on stderr (`-v` adds the chain of causes)    |
//! | 2    | a usage error: unknown flag, missing argument, conflicting options, empty prompt |
//! | 130  | interrupted with Ctrl-C (during a turn or compaction, or at the chat prompt) |
//!
//! # Design notes
//!
//! `phosphor serve` (`serve/`, axum) is a proxy over `SessionAgent::respond` with three fronts,
//! chat completions, Anthropic Messages and OpenAI Responses, and one way through them
//! (`serve/front.rs`): the request is read by its phosphor-wire format into an `Inbound`, its session
//! found with `SessionAgent::claim` in the namespace the client names (`X-Phosphor-Session`, else the
//! client's own conversation key: `X-Claude-Code-Session-Id`, Codex's `session-id` or
//! `prompt_cache_key`), and the answer written back by the same format, whole or as its stream events
//! while the model writes. `count_tokens` answers `SessionAgent::count_request`: the stored session as
//! it stands after its compactions plus what is new, read only. A request runs in its own task to its
//! end even when the client disconnects, so what it stores stays consistent. Errors map to one
//! `Failure` with a status that says whose fault it was (the client's 4xx, the upstream's status, 502
//! when it had none, 504 after `--request-timeout`), written in the request's API's shape.
//!
//! Which model answers is `serve/route.rs`'s one rule: the request's `model` goes upstream, with a
//! configured slot's provider and window when a slot has that id, else `models.large`'s provider and
//! the window of `phosphor_base::windows::lookup` (the configuration's `models.windows`, ids or `*`
//! patterns, then the built-in table; exact id first, then the pattern with the most literal
//! characters), else a 400 that shows the entry to add. The agent takes that model per request
//! (`Exchange::model`, kept on the session's cache: it answers, its window bounds the compaction, and
//! `summarize_model: "main"` means it), so one `SessionAgent` serves every model. Requests for the
//! session model are sessions; requests for another model go as they came while
//! `SessionAgent::fits_as_sent` (under masking, the threshold and the output reserve of that model's
//! window) and store nothing, which keeps Claude Code's small-model side calls out of the store; one
//! that does not fit takes the session's way. The client's own key (`phosphor_llm::Credential`: an
//! `x-api-key`, or a bearer such as an OAuth token) is used only when neither the provider
//! (`api_key_env`) nor the proxy (`--api-key-env`) has a key of its own; models built for a key are
//! kept in memory (at most 256), never logged or stored.
//!
//! Telemetry (`telemetry.rs`): the stderr log and the OTLP exporter are two `tracing` layers with
//! their own filters, so `-v` never changes what is exported. The exporter (feature `otel`: the
//! OpenTelemetry SDK's batch thread with the blocking reqwest 0.13 client the workspace already
//! builds, no gRPC) exists only when an `OTEL_EXPORTER_OTLP_*ENDPOINT` is set; exit waits at most 5 s
//! for it, and its failures print one warning and never change the exit code. tracing-opentelemetry
//! exports `u64` fields as strings, so the exporter turns the known token counts back into integers.
//!
//! **Architecture Invariant:** telemetry never changes a command's stdout or exit code.
//!
//! `tests/chat_terminal.rs` runs `phosphor chat` on a real pseudo-terminal (util-linux `script`):
//! typed lines, `/tokens`, Ctrl-C (`\x03` through the terminal's line discipline) during a paced
//! answer, then a next answer and `/exit`.

mod chat;
mod cli;
mod compact;
mod config_check;
mod cpu;
mod eval;
mod format;
mod models;
mod profiles;
mod render;
mod run;
mod serve;
mod session;
mod sessions;
mod telemetry;
mod tools;
mod transcript;

use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow};
use clap::Parser;
use phosphor_base::config::ConfigSources;
use phosphor_prompt::Profiles;

use crate::cli::{Cli, Command, ConfigCommand, ModelsCommand, ProfilesCommand, SessionsCommand};

/// A command called the wrong way (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Ctrl-C stopped the command (exit code 130).
#[derive(Debug)]
pub struct Interrupted;

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// What every command gets from the global flags.
#[derive(Debug, Clone)]
pub struct Globals {
    /// `--db`.
    pub db: Option<PathBuf>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--workspace`, or the current directory.
    pub workspace: PathBuf,
    /// `--model-path`.
    pub model_path: Option<PathBuf>,
}

/// How long the program waits, at exit, for a local model to notice that its answer is no longer read.
const ENGINE_EXIT_WAIT: Duration = Duration::from_secs(60);

fn main() -> ExitCode {
    if let Err(message) = cpu::check() {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    let telemetry = telemetry::init(cli.verbose);
    let verbose = cli.verbose;
    let code = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => {
            let result = runtime.block_on(dispatch(cli));
            // Leave at once: a blocked stdin reader must not keep the process alive.
            runtime.shutdown_timeout(Duration::from_millis(200));
            // But not under a model still finishing a step: exiting then kills the process mid-decode.
            if !phosphor_embedded::wait_until_idle(ENGINE_EXIT_WAIT) {
                eprintln!(
                    "warning: the local model was still running {ENGINE_EXIT_WAIT:?} after the command ended"
                );
            }
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => report(&err, verbose),
            }
        }
        Err(err) => report(&anyhow!("cannot start the async runtime: {err}"), verbose),
    };
    // After the runtime: the spans of the command have all ended.
    telemetry.shutdown();
    code
}

/// Prints `error: ...` (and the causes with `-v`) and picks the exit code.
fn report(err: &anyhow::Error, verbose: u8) -> ExitCode {
    let _ = io::stdout().flush();
    if err
        .chain()
        .any(|cause| cause.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe))
    {
        // The reader went away (`phosphor sessions export ID | head`): not an error.
        return ExitCode::SUCCESS;
    }
    if err.downcast_ref::<Interrupted>().is_some() {
        eprintln!("interrupted");
        return ExitCode::from(130);
    }
    eprintln!("error: {err}");
    if verbose > 0 {
        for cause in err.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
    }
    ExitCode::from(if err.downcast_ref::<UsageError>().is_some() { 2 } else { 1 })
}

async fn dispatch(cli: Cli) -> Result<()> {
    let workspace = match &cli.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|err| anyhow!("cannot read the current directory: {err}"))?,
    };
    let globals = Globals { db: cli.db, config: cli.config, workspace, model_path: cli.model_path };
    match cli.command {
        Command::Sessions(command) => sessions_command(&globals, command).await,
        Command::Config(ConfigCommand::Check) => {
            let sources = ConfigSources::discover(&globals.workspace, globals.config.as_deref());
            let report = config_check::check(&sources, &globals.workspace, &|var| std::env::var(var).ok())?;
            print_out(&report)
        }
        Command::Profiles(ProfilesCommand::List) => {
            print_out(&profiles::list(&Profiles::discover(&globals.workspace)))
        }
        Command::Profiles(ProfilesCommand::Check { name }) => {
            let configured = match &name {
                Some(_) => String::new(),
                None => {
                    config_check::load(&globals.workspace, globals.config.as_deref())?.config.options.profile
                }
            };
            let mut out = String::new();
            let result = profiles::check(
                &Profiles::discover(&globals.workspace),
                name.as_deref(),
                &configured,
                &mut out,
            );
            print_out(&out)?;
            result
        }
        Command::Chat(args) => chat::chat(&globals, args).await,
        Command::Run(args) => run::run(&globals, args).await,
        Command::Compact(args) => compact::compact(&globals, args).await,
        Command::Eval(args) => eval::eval(&globals, args).await,
        Command::Serve(args) => serve::serve(&globals, args).await,
        Command::Models(command) => {
            let config = config_check::load(&globals.workspace, globals.config.as_deref())?.config;
            match command {
                ModelsCommand::List => print_out(&models::list(&phosphor_embedded::HubSettings::from_env())),
                ModelsCommand::Pull { name } => models::pull(&config, name.as_deref()).await,
            }
        }
    }
}

async fn sessions_command(globals: &Globals, command: SessionsCommand) -> Result<()> {
    let db = sessions::db_path(globals.db.as_deref())?;
    let store = sessions::open_store(&db).await?;
    let result = match command {
        SessionsCommand::List { json, limit } => sessions::list(&*store, &db, json, limit).await,
        SessionsCommand::Show { id, full } => sessions::show(&*store, &id, full).await,
        SessionsCommand::Export { id, jsonl, output } => {
            let text = sessions::export(&*store, &id, jsonl).await;
            match (text, output) {
                (Ok(text), Some(path)) => {
                    transcript::write_output(Some(&path), &text).map(|()| String::new())
                }
                (text, _) => text,
            }
        }
    };
    store.close().await;
    print_out(&result?)
}

/// Writes `text` to stdout (a closed pipe is reported as an error and then treated as success).
pub fn print_out(text: &str) -> Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Prints a warning line on stderr.
pub fn warn(message: impl fmt::Display) {
    eprintln!("warning: {message}");
}
