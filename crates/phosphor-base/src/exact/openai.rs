//! OpenAI's encodings, through tiktoken.

use crate::tokens::TokenCounter;
use tiktoken_rs::CoreBPE;

/// The OpenAI encodings [`TiktokenCounter`] offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TiktokenEncoding {
    /// `o200k_base`: GPT-4o, GPT-4.1, GPT-5, the o-series reasoning models.
    O200kBase,
    /// `cl100k_base`: GPT-4, GPT-3.5 Turbo, the `text-embedding-3` models.
    Cl100kBase,
}

impl TiktokenEncoding {
    /// The encoding's name as OpenAI spells it.
    pub const fn name(self) -> &'static str {
        match self {
            TiktokenEncoding::O200kBase => "o200k_base",
            TiktokenEncoding::Cl100kBase => "cl100k_base",
        }
    }

    /// The encoding an OpenAI model uses, from its id. Accepts the bare id (`gpt-4o-mini`,
    /// `o3-2025-04-16`), a fine-tune (`ft:gpt-4o-mini-2024-07-18:org::abc`) and the `openai/`
    /// prefix routers put in front (`openai/gpt-4.1`). `None` for anything else: other
    /// vendors' models do not use these encodings.
    pub fn for_model(model_id: &str) -> Option<TiktokenEncoding> {
        let id = model_id.trim().to_ascii_lowercase();
        let id = match id.strip_prefix("ft:") {
            Some(rest) => rest.split(':').next().unwrap_or(rest),
            None => &id,
        };
        let id = id.strip_prefix("openai/").unwrap_or(id);
        // `name` itself or `name-<anything>` (a dated snapshot, `-mini`, `-turbo`).
        let family =
            |name: &str| id == name || id.strip_prefix(name).is_some_and(|rest| rest.starts_with('-'));
        if id.starts_with("gpt-5")
            || ["gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "o1", "o3", "o4", "o4-mini", "codex-mini"]
                .iter()
                .any(|name| family(name))
            // gpt-oss uses o200k_harmony: o200k_base plus special tokens, so the same
            // counts for ordinary text.
            || family("gpt-oss")
        {
            Some(TiktokenEncoding::O200kBase)
        } else if [
            "gpt-4",
            "gpt-3.5",
            "gpt-35-turbo",
            "text-embedding-ada-002",
            "text-embedding-3-small",
            "text-embedding-3-large",
        ]
        .iter()
        .any(|name| family(name))
        {
            Some(TiktokenEncoding::Cl100kBase)
        } else {
            None
        }
    }
}

/// Exact counts with an OpenAI encoding, embedded in the binary (no download).
///
/// The encoding's tables are built once per process, on first use, and shared by every
/// counter: the first construction costs a few hundred milliseconds, later ones nothing.
#[derive(Clone, Copy)]
pub struct TiktokenCounter {
    encoding: TiktokenEncoding,
    bpe: &'static CoreBPE,
}

impl std::fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiktokenCounter").field("encoding", &self.encoding).finish_non_exhaustive()
    }
}

impl TiktokenCounter {
    /// A counter for `encoding`.
    pub fn new(encoding: TiktokenEncoding) -> TiktokenCounter {
        // The singletons build the table on first call, from data compiled into the crate.
        let bpe = match encoding {
            TiktokenEncoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            TiktokenEncoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        };
        TiktokenCounter { encoding, bpe }
    }

    /// `o200k_base` (GPT-4o and later).
    pub fn o200k() -> TiktokenCounter {
        TiktokenCounter::new(TiktokenEncoding::O200kBase)
    }

    /// `cl100k_base` (GPT-4, GPT-3.5 Turbo).
    pub fn cl100k() -> TiktokenCounter {
        TiktokenCounter::new(TiktokenEncoding::Cl100kBase)
    }

    /// The counter for an OpenAI model id; see [`TiktokenEncoding::for_model`].
    pub fn for_model(model_id: &str) -> Option<TiktokenCounter> {
        TiktokenEncoding::for_model(model_id).map(TiktokenCounter::new)
    }

    /// The encoding counted with.
    pub fn encoding(&self) -> TiktokenEncoding {
        self.encoding
    }
}

impl TokenCounter for TiktokenCounter {
    fn name(&self) -> &str {
        self.encoding.name()
    }

    fn count_text(&self, text: &str) -> u64 {
        self.bpe.encode_ordinary(text).len() as u64
    }
}
