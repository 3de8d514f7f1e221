//! The command line: global flags and every subcommand, parsed with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use phosphor_agent::eval::Strategy;
use phosphor_base::config::SummarizeModel;

/// Keeps LLM agent sessions alive past the model's context window by compacting them.
#[derive(Debug, Parser)]
#[command(name = "phosphor", version, about, propagate_version = true)]
pub struct Cli {
    /// The session database: a SQLite file (default: phosphor/sessions.db in the platform's local data
    /// directory), or a Postgres database (`postgres://user:password@host:port/database`).
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// A configuration file read on top of the global and workspace ones.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The workspace: where the workspace configuration and profiles are looked up, and the only
    /// directory the built-in tools may read (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// A local GGUF model to use as the session's model (run in-process; overrides models.large).
    #[arg(long, global = true, value_name = "FILE")]
    pub model_path: Option<PathBuf>,

    /// More logging on stderr (-v info and error causes, -vv debug, -vvv trace); RUST_LOG wins when set.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// An interactive session: type a message, watch the answer stream; /help lists the slash commands.
    Chat(ChatArgs),
    /// One turn: the answer on stdout (the prompt from the argument, or stdin when absent).
    Run(RunArgs),
    /// Compacts a transcript file (OpenAI chat-completions JSON, JSON lines, or {"messages": [...]}).
    Compact(CompactArgs),
    /// Measures what each compaction strategy keeps of transcripts (probes derived from them).
    Eval(EvalArgs),
    /// An OpenAI-compatible proxy that compacts any client's conversation (POST /v1/chat/completions).
    Serve(ServeArgs),
    /// Stored sessions.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Configuration files.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Summarization prompt profiles.
    #[command(subcommand)]
    Profiles(ProfilesCommand),
    /// Local (embedded) models.
    #[command(subcommand)]
    Models(ModelsCommand),
}

/// `phosphor models ...`.
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// The short model names, which the embedded engine can run, and which are downloaded already.
    List,
    /// Downloads a model now (default: the configured one, else the default model), with progress.
    Pull {
        /// A short name or a Hugging Face repo id (`owner/name` or `owner/name:file.gguf`).
        name: Option<String>,
    },
}

/// Which session a turn goes to.
#[derive(Debug, Clone, Args)]
pub struct SessionChoice {
    /// Add to this session (an id, or an unambiguous prefix of one).
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    pub session: Option<String>,

    /// Add to the most recently updated session (a new one when there is none).
    #[arg(short = 'c', long = "continue")]
    pub continue_latest: bool,
}

/// `phosphor chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Which session to resume.
    #[command(flatten)]
    pub session: SessionChoice,
}

/// `phosphor run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The prompt; read from stdin when absent.
    pub prompt: Option<String>,

    /// Print every agent event as one JSON object per line instead of the answer text.
    #[arg(long)]
    pub json: bool,

    /// Which session to add the turn to.
    #[command(flatten)]
    pub session: SessionChoice,
}

/// `phosphor compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The transcript to compact; `-` reads stdin.
    #[arg(long, short, value_name = "FILE")]
    pub input: PathBuf,

    /// Where to write the compacted transcript (default: stdout).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Extra instructions for the summarizer (what to focus on).
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,

    /// Mark the summary with a non-standard `"is_summary": true` field, so that phosphor reading the
    /// transcript again continues from it (strict OpenAI servers reject the field).
    #[arg(long)]
    pub summary_flag: bool,

    /// Show the tokens before and after pruning and whether compaction would trigger; call no model.
    #[arg(long)]
    pub dry_run: bool,

    /// The context window to check the threshold against in --dry-run (default: models.large's).
    #[arg(long, value_name = "TOKENS", requires = "dry_run")]
    pub context_window: Option<u64>,
}

/// `phosphor eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Transcripts (OpenAI chat-completions JSON, JSON lines, or {"messages": [...]}); a `.md` file is
    /// an aider chat history, each session of three turns or more its own transcript; a Claude Code
    /// session log (`~/.claude/projects/*/*.jsonl`) gives one transcript per session.
    #[arg(long, short, value_name = "FILE", required = true, num_args = 1..)]
    pub input: Vec<PathBuf>,

    /// The strategies to compare, in this order (default: all): original, truncate, mask, summary,
    /// summary+state-trail, prepared.
    #[arg(long = "strategy", value_name = "NAME", value_parser = parse_strategy)]
    pub strategies: Vec<Strategy>,

    /// The context window every strategy fits to (default: the session model's).
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(256..))]
    pub context_window: Option<u64>,

    /// Evaluate at most this many transcripts (the first ones, in input order).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_transcripts: Option<u64>,

    /// Also have the session model answer every probe from each strategy's context, and this model
    /// grade the answers from 0 to 5: main, large, small or embedded (as `summarize_model`).
    #[arg(long, value_name = "MODEL", value_parser = parse_judge)]
    pub judge: Option<SummarizeModel>,

    /// The judge's rubric: a minijinja template given kind, question, expected and answer (default:
    /// the built-in one, crates/phosphor-prompt/profiles/default/judge.md.tpl).
    #[arg(long, value_name = "FILE", requires = "judge")]
    pub judge_template: Option<PathBuf>,

    /// Print the results as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Also write a self-contained HTML report (a chart, and what each strategy kept of each probe).
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}

fn parse_strategy(name: &str) -> Result<Strategy, String> {
    Strategy::parse(name)
}

/// `phosphor serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on. Anything but loopback requires --api-key-env.
    #[arg(long, value_name = "IP:PORT", default_value = crate::serve::DEFAULT_LISTEN, value_parser = crate::serve::parse_listen)]
    pub listen: std::net::SocketAddr,

    /// Clients must send `Authorization: Bearer <key>`, the key being this environment variable's value.
    #[arg(long, value_name = "NAME")]
    pub api_key_env: Option<String>,

    /// The largest request body accepted (413 above it).
    #[arg(long, value_name = "BYTES", default_value_t = 32 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Seconds a request may take, compaction included (504 after it).
    #[arg(long, value_name = "SECONDS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: u64,

    /// Requests answered at once; more get 429 with retry-after.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_concurrent: u64,
}

/// A model choice spelled as in `summarize_model` (its one parser: the configuration's).
fn parse_judge(name: &str) -> Result<SummarizeModel, String> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).map_err(|_| {
        format!("unknown model {name:?}: expected one of {}", SummarizeModel::ALLOWED.join(", "))
    })
}

/// `phosphor sessions ...`.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// The most recently updated sessions.
    List {
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// How many sessions to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// A session's messages: by default the history a model would see, from the current summary on.
    Show {
        /// The session id (or an unambiguous prefix).
        id: String,
        /// Every stored message, including what came before each summary and unfinished summaries.
        #[arg(long)]
        full: bool,
    },
    /// Every stored message of a session as OpenAI chat-completions JSON (summaries flagged `is_summary`).
    Export {
        /// The session id (or an unambiguous prefix).
        id: String,
        /// JSON lines (one message per line) instead of one JSON array.
        #[arg(long)]
        jsonl: bool,
        /// Where to write (default: stdout).
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

/// `phosphor config ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validates the configuration files and shows the resolved configuration with where each value came from.
    Check,
}

/// `phosphor profiles ...`.
#[derive(Debug, Subcommand)]
pub enum ProfilesCommand {
    /// Every profile template found, by tier.
    List,
    /// Checks the templates of every profile found and of the configured one (or only of NAME).
    Check {
        /// Only this profile.
        name: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_are_accepted_before_and_after_the_command() {
        let cli = Cli::try_parse_from([
            "phosphor", "--db", "a.db", "-vv", "sessions", "list", "--config", "c.json",
        ])
        .unwrap();
        assert_eq!(cli.db, Some(PathBuf::from("a.db")));
        assert_eq!(cli.config, Some(PathBuf::from("c.json")));
        assert_eq!(cli.verbose, 2);
        assert!(matches!(cli.command, Command::Sessions(SessionsCommand::List { json: false, limit: 20 })));
    }

    #[test]
    fn session_and_continue_exclude_each_other() {
        let error =
            Cli::try_parse_from(["phosphor", "run", "--session", "x", "--continue", "hi"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn context_window_needs_dry_run() {
        let error = Cli::try_parse_from(["phosphor", "compact", "-i", "t.json", "--context-window", "10"])
            .unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }
}
