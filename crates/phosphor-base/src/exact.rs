//! Exact token counters behind [`TokenCounter`]: OpenAI's encodings (feature `tiktoken`) and
//! Hugging Face tokenizers, read from a `tokenizer.json` or rebuilt from the vocabulary a GGUF
//! file carries (feature `hf-tokenizers`).
//!
//! Every counter counts text as ordinary text: no BOS/EOS or other special tokens are added.
//! A special token's text that appears *inside* the text (`<|im_start|>` in a rendered chat
//! template) counts as that one token with Hugging Face tokenizers, as the model would see it,
//! and as ordinary text with tiktoken (`encode_ordinary`).
//!
//! Building a tokenizer is costly (tiktoken's o200k table takes a few hundred milliseconds, a
//! GGUF vocabulary tens of milliseconds); counting is cheap. Build a counter once and share it:
//! both kinds are cheap to clone and are `Send + Sync`.
//!
//! ```
//! # #[cfg(feature = "tiktoken")] {
//! use phosphor_base::exact::TiktokenCounter;
//! use phosphor_base::tokens::TokenCounter;
//!
//! let counter = TiktokenCounter::for_model("gpt-4o-mini").unwrap();
//! assert_eq!((counter.name(), counter.count_text("hello world")), ("o200k_base", 2));
//! # }
//! ```

#[cfg(any(feature = "tiktoken", feature = "hf-tokenizers"))]
use crate::tokens::TokenCounter;

#[cfg(feature = "tiktoken")]
pub use self::openai::{TiktokenCounter, TiktokenEncoding};

#[cfg(feature = "hf-tokenizers")]
pub use self::hf::{HfCounter, TokenizerError};

#[cfg(feature = "tiktoken")]
mod openai {
    use super::TokenCounter;
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
}

#[cfg(feature = "hf-tokenizers")]
mod hf {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use tokenizers::decoders::byte_fallback::ByteFallback;
    use tokenizers::decoders::byte_level::ByteLevel;
    use tokenizers::decoders::fuse::Fuse;
    use tokenizers::decoders::sequence::Sequence as DecoderSequence;
    use tokenizers::decoders::strip::Strip;
    use tokenizers::models::bpe::{BPE, Vocab};
    use tokenizers::normalizers::{Prepend, Replace, Sequence as NormalizerSequence};
    use tokenizers::pre_tokenizers::sequence::Sequence;
    use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
    use tokenizers::{
        AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer,
    };

    use super::TokenCounter;
    use crate::gguf::{GgufMetadata, GgufValue};
    use crate::tokens::ApproxCounter;

    /// What can go wrong building a Hugging Face tokenizer. Each variant names the file or the
    /// GGUF key at fault; none is worth retrying as is. A caller that only needs an estimate can
    /// fall back to [`ApproxCounter`].
    #[derive(Debug, thiserror::Error)]
    #[non_exhaustive]
    pub enum TokenizerError {
        /// The tokenizer file could not be read. Check the path and its permissions.
        #[error("cannot read tokenizer file {}: {source}", path.display())]
        Io {
            /// The file.
            path: PathBuf,
            /// The underlying error.
            #[source]
            source: std::io::Error,
        },
        /// The `tokenizer.json` is not one the `tokenizers` crate can load (malformed JSON, an
        /// unknown component). The message says what; fix or replace the file.
        #[error("invalid tokenizer.json ({origin}): {source}")]
        Parse {
            /// Where the JSON came from: a path, or `bytes`.
            origin: String,
            /// The `tokenizers` crate's error.
            #[source]
            source: Box<dyn std::error::Error + Send + Sync>,
        },
        /// The GGUF metadata lacks a key the tokenizer needs: the file carries no usable
        /// tokenizer. Use the model's `tokenizer.json` instead.
        #[error("gguf tokenizer: missing metadata key `{key}`")]
        MissingKey {
            /// The key.
            key: &'static str,
        },
        /// A GGUF key has the wrong type. The file is malformed.
        #[error("gguf tokenizer: metadata key `{key}` is {found}; expected {expected}")]
        WrongType {
            /// The key.
            key: &'static str,
            /// What was expected.
            expected: &'static str,
            /// What was found.
            found: String,
        },
        /// `tokenizer.ggml.model` names a tokenizer kind this crate does not rebuild. Use the
        /// model's `tokenizer.json` with [`HfCounter::from_file`] instead.
        #[error(
            "gguf tokenizer model `{model}` (tokenizer.ggml.model) is not supported: supported are `gpt2` (byte-level BPE) and `llama` (SentencePiece)"
        )]
        UnsupportedModel {
            /// The model kind found.
            model: String,
        },
        /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not know. Use the model's
        /// `tokenizer.json` with [`HfCounter::from_file`] instead.
        #[error(
            "gguf pre-tokenizer `{pre}` (tokenizer.ggml.pre) is not supported; supported are {}",
            supported_pre_tokenizers()
        )]
        UnsupportedPreTokenizer {
            /// The pre-tokenizer found.
            pre: String,
        },
        /// An entry of a per-token array is malformed (a merge without a space, a type that is
        /// not an integer). The file is malformed.
        #[error("gguf tokenizer: `{key}`[{index}] is {found}; expected {expected}")]
        BadEntry {
            /// The array's key.
            key: &'static str,
            /// The entry's index.
            index: usize,
            /// What was expected.
            expected: &'static str,
            /// What was found.
            found: String,
        },
        /// A per-token array does not have one entry per token. The file is malformed.
        #[error("gguf tokenizer: `{key}` has {found} entries but `tokenizer.ggml.tokens` has {tokens}")]
        LengthMismatch {
            /// The array's key.
            key: &'static str,
            /// Its length.
            found: usize,
            /// The vocabulary's size.
            tokens: usize,
        },
        /// A special-token id is outside the vocabulary. The file is malformed.
        #[error("gguf tokenizer: `{key}` is {id} but the vocabulary has {tokens} tokens")]
        BadTokenId {
            /// The key.
            key: &'static str,
            /// The id found.
            id: u64,
            /// The vocabulary's size.
            tokens: usize,
        },
        /// The `tokenizers` crate refused the vocabulary built from the GGUF (a merge naming a
        /// token that is not in the vocabulary, say). The file is malformed.
        #[error("gguf tokenizer: cannot build the {what}: {source}")]
        Build {
            /// The part being built.
            what: &'static str,
            /// The `tokenizers` crate's error.
            #[source]
            source: Box<dyn std::error::Error + Send + Sync>,
        },
    }

    /// Exact counts with a Hugging Face tokenizer.
    ///
    /// Truncation and padding settings in a `tokenizer.json` are switched off: they would cap or
    /// inflate counts. Cloning shares the tokenizer.
    #[derive(Clone)]
    pub struct HfCounter {
        tokenizer: Arc<Tokenizer>,
        name: String,
    }

    impl std::fmt::Debug for HfCounter {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("HfCounter").field("name", &self.name).finish_non_exhaustive()
        }
    }

    impl HfCounter {
        /// Wraps a tokenizer, switching off truncation and padding; `name` is shown by
        /// [`TokenCounter::name`] after `hf:`.
        pub fn new(mut tokenizer: Tokenizer, name: &str) -> HfCounter {
            // Clearing truncation cannot fail: only setting it validates anything.
            let _ = tokenizer.with_truncation(None);
            tokenizer.with_padding(None);
            HfCounter { tokenizer: Arc::new(tokenizer), name: format!("hf:{name}") }
        }

        /// A counter from the bytes of a `tokenizer.json`; named `hf:tokenizer.json`.
        pub fn from_json_bytes(json: &[u8]) -> Result<HfCounter, TokenizerError> {
            HfCounter::parse(json, "bytes", "tokenizer.json")
        }

        /// A counter from a `tokenizer.json` file; named `hf:<path>`.
        pub fn from_file(path: impl AsRef<Path>) -> Result<HfCounter, TokenizerError> {
            let path = path.as_ref();
            let json =
                std::fs::read(path).map_err(|source| TokenizerError::Io { path: path.to_owned(), source })?;
            let shown = path.display().to_string();
            HfCounter::parse(&json, &shown, &shown)
        }

        fn parse(json: &[u8], origin: &str, name: &str) -> Result<HfCounter, TokenizerError> {
            let tokenizer = Tokenizer::from_bytes(json)
                .map_err(|source| TokenizerError::Parse { origin: origin.to_owned(), source })?;
            Ok(HfCounter::new(tokenizer, name))
        }

        /// A counter from the tokenizer a GGUF file embeds, rebuilt as llama.cpp runs it; named
        /// `hf:<general.name>` (or `hf:gguf`).
        ///
        /// - `tokenizer.ggml.model = "gpt2"`: byte-level BPE from `tokens` and `merges`, split
        ///   first by the regexes llama.cpp uses for `tokenizer.ggml.pre` (SmolLM, Qwen, Llama 3,
        ///   GPT-2, DeepSeek, Mistral's tekken, ... — see [`TokenizerError::UnsupportedPreTokenizer`]
        ///   for the list); a missing `pre` means llama.cpp's `default`.
        /// - `"llama"`: SentencePiece BPE from `tokens` and `scores`, with merges ranked by score
        ///   as Hugging Face's converter derives them, byte fallback to `<0xNN>` tokens and `▁` for
        ///   spaces, one prefixed to the text and after each special token unless
        ///   `tokenizer.ggml.add_space_prefix` is false.
        ///
        /// Control and unknown tokens (`tokenizer.ggml.token_type` 2 and 3) become special added
        /// tokens and user-defined ones (4) plain added tokens, so that their text inside the input
        /// counts as one token.
        pub fn from_gguf(metadata: &GgufMetadata) -> Result<HfCounter, TokenizerError> {
            let tokenizer = gguf_tokenizer(metadata)?;
            Ok(HfCounter::new(tokenizer, metadata.name().unwrap_or("gguf")))
        }

        /// The tokenizer, for encoding or decoding beyond counting.
        pub fn tokenizer(&self) -> &Tokenizer {
            &self.tokenizer
        }
    }

    impl TokenCounter for HfCounter {
        fn name(&self) -> &str {
            &self.name
        }

        /// Encodes without adding special tokens (`encode_fast`: the same ids as `encode`,
        /// without computing character offsets). Should the tokenizer fail on some input, the
        /// count falls back to [`ApproxCounter`] and a warning is logged.
        fn count_text(&self, text: &str) -> u64 {
            match self.tokenizer.encode_fast(text, false) {
                Ok(encoding) => encoding.len() as u64,
                Err(error) => {
                    tracing::warn!(counter = %self.name, %error, "tokenizer failed; counting approximately");
                    ApproxCounter.count_text(text)
                }
            }
        }
    }

    // ---- GGUF -> tokenizers -------------------------------------------------------------

    const KEY_MODEL: &str = "tokenizer.ggml.model";
    const KEY_PRE: &str = "tokenizer.ggml.pre";
    const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
    const KEY_MERGES: &str = "tokenizer.ggml.merges";
    const KEY_SCORES: &str = "tokenizer.ggml.scores";
    const KEY_TYPES: &str = "tokenizer.ggml.token_type";
    const KEY_UNK: &str = "tokenizer.ggml.unknown_token_id";
    const KEY_ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
    const SPECIAL_ID_KEYS: [&str; 4] = [
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        KEY_UNK,
        "tokenizer.ggml.padding_token_id",
    ];

    /// llama.cpp's token types (`llama_token_type`).
    const TYPE_NORMAL: i64 = 1;
    const TYPE_UNKNOWN: i64 = 2;
    const TYPE_CONTROL: i64 = 3;
    const TYPE_USER_DEFINED: i64 = 4;
    const TYPE_UNDEFINED: i64 = 0;

    const GPT2_RE: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
    const LLAMA3_RE: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const QWEN2_RE: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

    /// How byte-level BPE vocabularies split text before merging, by `tokenizer.ggml.pre`:
    /// llama.cpp's regexes (`llm_tokenizer_bpe` in `llama-vocab.cpp`), each applied to the pieces
    /// the previous one left, matches and the text between them both kept, which is what a
    /// sequence of Hugging Face `Split` pre-tokenizers with `Isolated` does. Where llama.cpp
    /// rewrote a pattern for its own regex engine, the original from `tokenizer.json` is used.
    struct PreTokenizerSpec {
        names: &'static [&'static str],
        regexes: &'static [&'static str],
        /// A piece that is itself in the vocabulary is one token, merges or not (Llama 3, tekken).
        ignore_merges: bool,
    }

    const PRE_TOKENIZERS: &[PreTokenizerSpec] = &[
        PreTokenizerSpec {
            names: &["default"],
            regexes: &[r"[\p{P}\$\+<=>\^~\|]+", GPT2_RE, r"\p{N}+", "[0-9][0-9][0-9]"],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &[
                "llama3",
                "llama-v3",
                "llama-bpe",
                "falcon3",
                "falcon-h1",
                "pixtral",
                "midm-2.0",
                "lfm2",
            ],
            regexes: &[LLAMA3_RE],
            ignore_merges: true,
        },
        PreTokenizerSpec {
            names: &["dbrx", "smaug-bpe", "glm4", "chatglm-bpe"],
            regexes: &[LLAMA3_RE],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &[
                "gpt-2",
                "phi-2",
                "jina-es",
                "jina-de",
                "gigachat",
                "jina-v2-es",
                "jina-v2-de",
                "a.x-4.0",
                "mellum",
                "jina-v1-en",
                "jina-v2-code",
                "roberta-bpe",
                "exaone4",
                "mpt",
                "olmo",
                "jais",
                "trillion",
                "granite-docling",
            ],
            regexes: &[GPT2_RE],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &["smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"],
            regexes: &[r"\p{N}", GPT2_RE],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &["qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2", "hunyuan", "grok-2"],
            regexes: &[QWEN2_RE],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &["falcon"],
            regexes: &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2_RE, "[0-9][0-9][0-9]"],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &["deepseek-v3", "hunyuan-dense"],
            regexes: &[
                r"\p{N}{1,3}",
                "[一-龥\u{3040}-ゟ゠-ヿ]+",
                r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
            ],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &["deepseek-coder"],
            regexes: &["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[一-龥\u{0800}-一가-\u{D7FF}]+", r"\p{N}"],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &["poro-chat", "bloom", "gpt3-finnish"],
            regexes: &[r" ?[^(\s|.,!?…。，、।۔،)]+"],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &["viking"],
            regexes: &[r" ?[^(\s|.,!?…。，、।۔،)]+", r"\p{N}"],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &["tekken"],
            regexes: &[
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            ],
            ignore_merges: true,
        },
        PreTokenizerSpec {
            names: &["gpt-4o", "llama4", "minimax-m2"],
            regexes: &[
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            ],
            ignore_merges: false,
        },
        PreTokenizerSpec {
            names: &["seed-coder"],
            regexes: &[
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
            ],
            ignore_merges: false,
        },
    ];

    fn supported_pre_tokenizers() -> String {
        PRE_TOKENIZERS
            .iter()
            .flat_map(|spec| spec.names)
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn describe(value: &GgufValue) -> String {
        match value {
            GgufValue::Array { item_type, items } => format!("an array of {} {item_type:?}", items.len()),
            GgufValue::String(s) if s.len() > 40 => {
                format!("the string {:?}...", s.chars().take(40).collect::<String>())
            }
            GgufValue::String(s) => format!("the string {s:?}"),
            other => format!("{other:?}"),
        }
    }

    fn required<'a>(meta: &'a GgufMetadata, key: &'static str) -> Result<&'a GgufValue, TokenizerError> {
        meta.get(key).ok_or(TokenizerError::MissingKey { key })
    }

    fn array<'a>(value: &'a GgufValue, key: &'static str) -> Result<&'a [GgufValue], TokenizerError> {
        value.as_array().ok_or_else(|| TokenizerError::WrongType {
            key,
            expected: "an array",
            found: describe(value),
        })
    }

    fn strings<'a>(value: &'a GgufValue, key: &'static str) -> Result<Vec<&'a str>, TokenizerError> {
        array(value, key)?
            .iter()
            .enumerate()
            .map(|(index, item)| {
                item.as_str().ok_or_else(|| TokenizerError::BadEntry {
                    key,
                    index,
                    expected: "a string",
                    found: describe(item),
                })
            })
            .collect()
    }

    /// An optional per-token array, checked to have one entry per token.
    fn per_token<'a>(
        meta: &'a GgufMetadata,
        key: &'static str,
        tokens: usize,
    ) -> Result<Option<&'a [GgufValue]>, TokenizerError> {
        let Some(value) = meta.get(key) else { return Ok(None) };
        let items = array(value, key)?;
        if items.len() != tokens {
            return Err(TokenizerError::LengthMismatch { key, found: items.len(), tokens });
        }
        Ok(Some(items))
    }

    fn token_id(
        meta: &GgufMetadata,
        key: &'static str,
        tokens: usize,
    ) -> Result<Option<usize>, TokenizerError> {
        let Some(value) = meta.get(key) else { return Ok(None) };
        let id = value.as_u64().ok_or_else(|| TokenizerError::WrongType {
            key,
            expected: "a non-negative integer",
            found: describe(value),
        })?;
        match usize::try_from(id) {
            Ok(index) if index < tokens => Ok(Some(index)),
            _ => Err(TokenizerError::BadTokenId { key, id, tokens }),
        }
    }

    fn build_error(what: &'static str) -> impl FnOnce(tokenizers::Error) -> TokenizerError {
        move |source| TokenizerError::Build { what, source }
    }

    fn gguf_tokenizer(meta: &GgufMetadata) -> Result<Tokenizer, TokenizerError> {
        let model_value = required(meta, KEY_MODEL)?;
        let model = model_value.as_str().ok_or_else(|| TokenizerError::WrongType {
            key: KEY_MODEL,
            expected: "a string",
            found: describe(model_value),
        })?;
        if model != "gpt2" && model != "llama" {
            return Err(TokenizerError::UnsupportedModel { model: model.to_owned() });
        }
        let mut tokens: Vec<String> =
            strings(required(meta, KEY_TOKENS)?, KEY_TOKENS)?.into_iter().map(str::to_owned).collect();
        // llama.cpp renames empty tokens so that every token text is unique and non-empty.
        for (i, token) in tokens.iter_mut().enumerate() {
            if token.is_empty() {
                *token = format!("[EMPTY_{i}]");
            }
        }
        let types = match per_token(meta, KEY_TYPES, tokens.len())? {
            None => None,
            Some(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| {
                        item.as_i64().ok_or_else(|| TokenizerError::BadEntry {
                            key: KEY_TYPES,
                            index,
                            expected: "an integer token type",
                            found: describe(item),
                        })
                    })
                    .collect::<Result<Vec<i64>, _>>()?,
            ),
        };

        let mut tokenizer = if model == "gpt2" {
            byte_level_bpe(meta, &tokens)?
        } else {
            sentencepiece_bpe(meta, &tokens, types.as_deref())?
        };

        let mut special: Vec<usize> = Vec::new();
        let mut user_defined: Vec<usize> = Vec::new();
        match &types {
            Some(types) => {
                for (id, &token_type) in types.iter().enumerate() {
                    match token_type {
                        TYPE_UNKNOWN | TYPE_CONTROL => special.push(id),
                        TYPE_USER_DEFINED => user_defined.push(id),
                        _ => {}
                    }
                }
            }
            // Without types, at least the declared special tokens are matched whole.
            None => {
                for key in SPECIAL_ID_KEYS {
                    special.extend(token_id(meta, key, tokens.len())?);
                }
            }
        }
        let added = |ids: &[usize], is_special: bool| -> Vec<AddedToken> {
            ids.iter().map(|&id| AddedToken::from(tokens[id].clone(), is_special).normalized(false)).collect()
        };
        tokenizer.add_special_tokens(&added(&special, true));
        tokenizer.add_tokens(&added(&user_defined, false));
        Ok(tokenizer)
    }

    fn byte_level_bpe(meta: &GgufMetadata, tokens: &[String]) -> Result<Tokenizer, TokenizerError> {
        let pre = match meta.get(KEY_PRE) {
            None => {
                tracing::warn!("gguf has no {KEY_PRE}; splitting text as llama.cpp's `default` does");
                "default"
            }
            Some(value) => value.as_str().ok_or_else(|| TokenizerError::WrongType {
                key: KEY_PRE,
                expected: "a string",
                found: describe(value),
            })?,
        };
        let spec = PRE_TOKENIZERS
            .iter()
            .find(|spec| spec.names.contains(&pre))
            .ok_or_else(|| TokenizerError::UnsupportedPreTokenizer { pre: pre.to_owned() })?;

        let merges = strings(required(meta, KEY_MERGES)?, KEY_MERGES)?
            .into_iter()
            .enumerate()
            .map(|(index, merge)| {
                merge.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())).ok_or_else(|| {
                    TokenizerError::BadEntry {
                        key: KEY_MERGES,
                        index,
                        expected: "two tokens separated by a space",
                        found: format!("{merge:?}"),
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let vocab: Vocab = tokens.iter().enumerate().map(|(id, token)| (token.clone(), id as u32)).collect();
        let mut bpe = BPE::builder().vocab_and_merges(vocab, merges).ignore_merges(spec.ignore_merges);
        if let Some(unk) = token_id(meta, KEY_UNK, tokens.len())? {
            bpe = bpe.unk_token(tokens[unk].clone());
        }
        let bpe = bpe.build().map_err(build_error("byte-level BPE model"))?;

        let mut steps = Vec::with_capacity(spec.regexes.len() + 1);
        for regex in spec.regexes {
            let split =
                Split::new(SplitPattern::Regex((*regex).to_owned()), SplitDelimiterBehavior::Isolated, false)
                    .map_err(build_error("pre-tokenizer"))?;
            steps.push(PreTokenizerWrapper::Split(split));
        }
        steps.push(PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, false, false)));

        let mut tokenizer = Tokenizer::new(bpe);
        tokenizer.with_pre_tokenizer(Some(Sequence::new(steps)));
        tokenizer.with_decoder(Some(ByteLevel::new(false, false, false)));
        Ok(tokenizer)
    }

    fn sentencepiece_bpe(
        meta: &GgufMetadata,
        tokens: &[String],
        types: Option<&[i64]>,
    ) -> Result<Tokenizer, TokenizerError> {
        let scores = per_token(meta, KEY_SCORES, tokens.len())?
            .ok_or(TokenizerError::MissingKey { key: KEY_SCORES })?
            .iter()
            .enumerate()
            .map(|(index, item)| {
                item.as_f64().ok_or_else(|| TokenizerError::BadEntry {
                    key: KEY_SCORES,
                    index,
                    expected: "a float score",
                    found: describe(item),
                })
            })
            .collect::<Result<Vec<f64>, _>>()?;
        let merges = sentencepiece_merges(tokens, &scores, types);
        let vocab: Vocab = tokens.iter().enumerate().map(|(id, token)| (token.clone(), id as u32)).collect();
        let unk = token_id(meta, KEY_UNK, tokens.len())?.unwrap_or(0);
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .unk_token(tokens[unk].clone())
            .fuse_unk(true)
            .byte_fallback(true)
            .build()
            .map_err(build_error("SentencePiece BPE model"))?;

        let add_space_prefix = match meta.get(KEY_ADD_SPACE_PREFIX) {
            None => true,
            Some(value) => value.as_bool().ok_or_else(|| TokenizerError::WrongType {
                key: KEY_ADD_SPACE_PREFIX,
                expected: "a bool",
                found: describe(value),
            })?,
        };
        // As llama.cpp (and SentencePiece's dummy prefix) do: a `▁` before the text and after
        // every special token, even where a space is already there; then spaces become `▁`.
        // Hugging Face's "legacy" Llama tokenizers are built the same way.
        let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
        if add_space_prefix {
            normalizers.push(Prepend::new("▁".to_owned()).into());
        }
        normalizers.push(Replace::new(" ", "▁").map_err(build_error("normalizer"))?.into());
        let mut tokenizer = Tokenizer::new(bpe);
        tokenizer.with_normalizer(Some(NormalizerSequence::new(normalizers)));
        let mut decoders: Vec<DecoderWrapper> = vec![
            Replace::new("▁", " ").map_err(build_error("decoder"))?.into(),
            ByteFallback::new().into(),
            Fuse::new().into(),
        ];
        if add_space_prefix {
            decoders.push(Strip::new(' ', 1, 0).into());
        }
        tokenizer.with_decoder(Some(DecoderSequence::new(decoders)));
        Ok(tokenizer)
    }

    /// BPE merges for a SentencePiece vocabulary, as Hugging Face's `SentencePieceExtractor`
    /// derives them: every split of a piece into two vocabulary pieces is a merge, ranked by the
    /// whole piece's score, highest first (ties in vocabulary order). Pieces SentencePiece never
    /// produces from text (control, byte, unused) yield no merges.
    fn sentencepiece_merges(
        tokens: &[String],
        scores: &[f64],
        types: Option<&[i64]>,
    ) -> Vec<(String, String)> {
        let ids: HashMap<&str, usize> = tokens.iter().enumerate().map(|(id, t)| (t.as_str(), id)).collect();
        let mut ranked: Vec<(f64, usize, usize)> = Vec::new();
        for (id, piece) in tokens.iter().enumerate() {
            let mergeable =
                types.is_none_or(|t| matches!(t[id], TYPE_NORMAL | TYPE_USER_DEFINED | TYPE_UNDEFINED));
            if !mergeable {
                continue;
            }
            let start = ranked.len();
            for (at, _) in piece.char_indices().skip(1) {
                let (left, right) = piece.split_at(at);
                if let (Some(&l), Some(&r)) = (ids.get(left), ids.get(right)) {
                    ranked.push((scores[id], l, r));
                }
            }
            ranked[start..].sort_by_key(|&(_, l, r)| (l, r));
        }
        // Stable: equal scores keep vocabulary order.
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        ranked.into_iter().map(|(_, l, r)| (tokens[l].clone(), tokens[r].clone())).collect()
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::gguf::GgufValueType;
        use pretty_assertions::assert_eq;
        use tokenizers::models::wordlevel::WordLevel;
        use tokenizers::pre_tokenizers::whitespace::Whitespace;
        use tokenizers::{TruncationParams, TruncationStrategy};

        fn ids(counter: &HfCounter, text: &str) -> Vec<u32> {
            counter.tokenizer().encode(text, false).unwrap().get_ids().to_vec()
        }

        fn string_array(items: &[String]) -> GgufValue {
            GgufValue::Array {
                item_type: GgufValueType::String,
                items: items.iter().map(|s| GgufValue::String(s.clone())).collect(),
            }
        }

        fn meta(kv: Vec<(&str, GgufValue)>) -> GgufMetadata {
            GgufMetadata {
                version: 3,
                tensor_count: 0,
                kv: kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                parameters: None,
            }
        }

        #[test]
        fn json_tokenizer_counts_and_ignores_truncation() {
            let vocab = [("hello", 0), ("world", 1), ("[UNK]", 2)]
                .into_iter()
                .map(|(w, i)| (w.to_owned(), i))
                .collect();
            let model = WordLevel::builder().vocab(vocab).unk_token("[UNK]".into()).build().unwrap();
            let mut tokenizer = Tokenizer::new(model);
            tokenizer.with_pre_tokenizer(Some(Whitespace {}));
            tokenizer
                .with_truncation(Some(TruncationParams {
                    max_length: 1,
                    strategy: TruncationStrategy::LongestFirst,
                    ..TruncationParams::default()
                }))
                .unwrap();
            let json = tokenizer.to_string(false).unwrap();
            let counter = HfCounter::from_json_bytes(json.as_bytes()).unwrap();
            assert_eq!(counter.name(), "hf:tokenizer.json");
            assert_eq!(ids(&counter, "hello world zebra hello"), vec![0, 1, 2, 0]);
            assert_eq!(counter.count_text("hello world zebra hello"), 4);
            assert_eq!(counter.count_text(""), 0);

            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("tokenizer.json");
            std::fs::write(&path, &json).unwrap();
            let from_file = HfCounter::from_file(&path).unwrap();
            assert_eq!(
                (from_file.name(), from_file.count_text("world world")),
                (format!("hf:{}", path.display()).as_str(), 2)
            );
        }

        #[test]
        fn bad_json_and_missing_files_say_where() {
            let err = HfCounter::from_json_bytes(b"{\"model\": 3}").unwrap_err();
            assert!(err.to_string().starts_with("invalid tokenizer.json (bytes): "), "{err}");
            let err = HfCounter::from_file("/nonexistent/tokenizer.json").unwrap_err();
            assert!(
                err.to_string().starts_with("cannot read tokenizer file /nonexistent/tokenizer.json: "),
                "{err}"
            );
        }

        /// GPT-2's byte-to-character map: printable bytes stand for themselves, the rest are
        /// shifted past U+0100.
        fn byte_chars() -> Vec<String> {
            let mut shifted = 0;
            (0u32..256)
                .map(|b| {
                    let printable =
                        (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
                    let c = if printable {
                        b
                    } else {
                        shifted += 1;
                        255 + shifted
                    };
                    char::from_u32(c).unwrap().to_string()
                })
                .collect()
        }

        /// A byte-level vocabulary: the 256 byte characters, then merged tokens, then specials.
        fn byte_level_meta(pre: Option<&str>, merges: &[&str], specials: &[&str]) -> GgufMetadata {
            let mut tokens = byte_chars();
            for merge in merges {
                tokens.push(merge.replace(' ', ""));
            }
            let mut types = vec![GgufValue::I32(1); tokens.len()];
            for special in specials {
                tokens.push((*special).to_owned());
                types.push(GgufValue::I32(3));
            }
            let mut kv = vec![
                ("general.name", GgufValue::String("Tiny BPE".into())),
                (KEY_MODEL, GgufValue::String("gpt2".into())),
                (KEY_TOKENS, string_array(&tokens)),
                (KEY_TYPES, GgufValue::Array { item_type: GgufValueType::I32, items: types }),
                (KEY_MERGES, string_array(&merges.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>())),
            ];
            if let Some(pre) = pre {
                kv.push((KEY_PRE, GgufValue::String(pre.into())));
            }
            meta(kv)
        }

        const HELLO_MERGES: &[&str] = &[
            "H e", "l l", "ll o", "He llo", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "1 2", "12 3", "123 4",
        ];

        #[test]
        fn gguf_byte_level_bpe_counts_merged_words() {
            let meta = byte_level_meta(Some("gpt-2"), HELLO_MERGES, &["<|im_start|>"]);
            let counter = HfCounter::from_gguf(&meta).unwrap();
            assert_eq!(counter.name(), "hf:Tiny BPE");
            let hello = 256 + 3; // "Hello" is the fourth merged token
            let world = 256 + 8;
            let comma = u32::from(b','); // the first 256 tokens are the bytes, in order
            assert_eq!(ids(&counter, "Hello world"), vec![hello, world]);
            assert_eq!(ids(&counter, "Hello, world"), vec![hello, comma, world]);
            assert_eq!(counter.count_text("Hello, world!"), 4);
            // The special token's text counts as one token; unmerged bytes count one each.
            let special = 256 + HELLO_MERGES.len() as u32;
            assert_eq!(ids(&counter, "<|im_start|>Hello"), vec![special, hello]);
            assert_eq!(counter.count_text("Héllo"), 4, "H, the two bytes of é, llo");
            assert_eq!(
                counter.tokenizer().decode(&ids(&counter, "Hello, wörld 🚀"), false).unwrap(),
                "Hello, wörld 🚀"
            );
        }

        #[test]
        fn gguf_pre_tokenizer_decides_how_digits_split() {
            let count = |pre: Option<&str>| {
                let counter = HfCounter::from_gguf(&byte_level_meta(pre, HELLO_MERGES, &[])).unwrap();
                counter.count_text("1234")
            };
            assert_eq!(count(Some("gpt-2")), 1, "gpt-2 keeps digit runs whole");
            assert_eq!(count(Some("smollm")), 4, "smollm splits every digit");
            assert_eq!(count(Some("qwen2")), 4, "qwen2 splits every digit");
            assert_eq!(count(Some("llama-bpe")), 2, "llama 3 splits digits in threes");
            assert_eq!(count(None), 2, "llama.cpp's default splits digits in threes");
        }

        #[test]
        fn every_known_pre_tokenizer_builds_and_round_trips() {
            let text = "Hello, world! It's 2024-06-01\n\n\tdon't   stop 你好世界 Ünïcödé 🚀";
            for name in PRE_TOKENIZERS.iter().flat_map(|spec| spec.names) {
                let counter = HfCounter::from_gguf(&byte_level_meta(Some(name), HELLO_MERGES, &[])).unwrap();
                let ids = ids(&counter, text);
                assert!(ids.len() <= text.len(), "{name}");
                assert_eq!(counter.tokenizer().decode(&ids, false).unwrap(), text, "{name}");
            }
        }

        #[test]
        fn llama3_ignore_merges_takes_whole_vocabulary_words() {
            // "ab" is in the vocabulary but no merge builds it: only ignore_merges finds it.
            let mut meta = byte_level_meta(Some("llama-bpe"), &["H e"], &[]);
            if let Some(GgufValue::Array { items, .. }) = meta.kv.get_mut(KEY_TOKENS) {
                items.push(GgufValue::String("ab".into()));
            }
            if let Some(GgufValue::Array { items, .. }) = meta.kv.get_mut(KEY_TYPES) {
                items.push(GgufValue::I32(1));
            }
            assert_eq!(HfCounter::from_gguf(&meta).unwrap().count_text("ab"), 1);
            meta.kv.insert(KEY_PRE.into(), GgufValue::String("qwen2".into()));
            assert_eq!(HfCounter::from_gguf(&meta).unwrap().count_text("ab"), 2);
        }

        fn sentencepiece_meta(add_space_prefix: Option<bool>) -> GgufMetadata {
            let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
            let mut types = vec![2, 3, 3];
            let mut scores = vec![0.0, 0.0, 0.0];
            for b in 0..=255u8 {
                tokens.push(format!("<0x{b:02X}>"));
                types.push(6);
                scores.push(0.0);
            }
            for (piece, score) in [
                ("▁", -1.0),
                ("h", -2.0),
                ("e", -3.0),
                ("l", -4.0),
                ("o", -5.0),
                ("ll", -6.0),
                ("he", -7.0),
                ("▁he", -8.0),
                ("llo", -9.0),
                ("▁hello", -10.0),
            ] {
                tokens.push(piece.into());
                types.push(1);
                scores.push(score);
            }
            let mut kv = vec![
                (KEY_MODEL, GgufValue::String("llama".into())),
                (KEY_TOKENS, string_array(&tokens)),
                (
                    KEY_TYPES,
                    GgufValue::Array {
                        item_type: GgufValueType::I32,
                        items: types.into_iter().map(GgufValue::I32).collect(),
                    },
                ),
                (
                    KEY_SCORES,
                    GgufValue::Array {
                        item_type: GgufValueType::F32,
                        items: scores.into_iter().map(GgufValue::F32).collect(),
                    },
                ),
                (KEY_UNK, GgufValue::U32(0)),
            ];
            if let Some(prefix) = add_space_prefix {
                kv.push((KEY_ADD_SPACE_PREFIX, GgufValue::Bool(prefix)));
            }
            meta(kv)
        }

        #[test]
        fn gguf_sentencepiece_merges_by_score_and_falls_back_to_bytes() {
            let counter = HfCounter::from_gguf(&sentencepiece_meta(None)).unwrap();
            assert_eq!(counter.name(), "hf:gguf");
            let piece = |p: &str| counter.tokenizer().token_to_id(p).unwrap();
            let byte = |b: u8| 3 + u32::from(b);
            assert_eq!(ids(&counter, "hello"), vec![piece("▁hello")]);
            assert_eq!(ids(&counter, "hello!"), vec![piece("▁hello"), byte(b'!')]);
            assert_eq!(ids(&counter, "hi"), vec![piece("▁"), piece("h"), byte(b'i')]);
            assert_eq!(ids(&counter, "hello hello"), vec![piece("▁hello"), piece("▁hello")]);
            assert_eq!(ids(&counter, " hello"), vec![piece("▁"), piece("▁hello")]);
            assert_eq!(ids(&counter, "hello</s>hello"), vec![piece("▁hello"), 2, piece("▁hello")]);
            assert_eq!(ids(&counter, "é"), vec![piece("▁"), byte(0xC3), byte(0xA9)]);
            assert_eq!(
                counter.tokenizer().decode(&ids(&counter, "hello hi é"), false).unwrap(),
                "hello hi é"
            );

            let no_prefix = HfCounter::from_gguf(&sentencepiece_meta(Some(false))).unwrap();
            assert_eq!(ids(&no_prefix, "hello"), vec![piece("he"), piece("llo")]);
        }

        #[test]
        fn sentencepiece_merges_follow_scores() {
            let tokens: Vec<String> =
                ["a", "b", "c", "ab", "bc", "abc", "<c>"].iter().map(|s| (*s).to_owned()).collect();
            let scores = [-1.0, -2.0, -3.0, -5.0, -4.0, -6.0, 0.0];
            let types = [1, 1, 1, 1, 1, 1, 3];
            let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
            assert_eq!(
                sentencepiece_merges(&tokens, &scores, Some(&types)),
                vec![pair("b", "c"), pair("a", "b"), pair("a", "bc"), pair("ab", "c")]
            );
        }

        #[test]
        fn unsupported_or_malformed_gguf_tokenizers_are_named() {
            let check = |meta: &GgufMetadata, expected: &str| {
                assert_eq!(HfCounter::from_gguf(meta).unwrap_err().to_string(), expected);
            };
            check(&meta(vec![]), "gguf tokenizer: missing metadata key `tokenizer.ggml.model`");
            check(
                &meta(vec![(KEY_MODEL, GgufValue::String("bert".into()))]),
                "gguf tokenizer model `bert` (tokenizer.ggml.model) is not supported: supported are `gpt2` (byte-level BPE) and `llama` (SentencePiece)",
            );
            check(
                &meta(vec![(KEY_MODEL, GgufValue::U8(1))]),
                "gguf tokenizer: metadata key `tokenizer.ggml.model` is U8(1); expected a string",
            );

            let mut bpe = byte_level_meta(Some("kimi-k2"), HELLO_MERGES, &[]);
            let err = HfCounter::from_gguf(&bpe).unwrap_err().to_string();
            assert!(err.starts_with("gguf pre-tokenizer `kimi-k2` (tokenizer.ggml.pre) is not supported; supported are `default`, `llama3`"), "{err}");
            bpe.kv.insert(KEY_PRE.into(), GgufValue::String("gpt-2".into()));
            bpe.kv.insert(KEY_MERGES.into(), string_array(&["H e".into(), "Hello".into()]));
            check(
                &bpe,
                "gguf tokenizer: `tokenizer.ggml.merges`[1] is \"Hello\"; expected two tokens separated by a space",
            );
            bpe.kv.insert(KEY_MERGES.into(), string_array(&["H e".into(), "Q zz".into()]));
            let err = HfCounter::from_gguf(&bpe).unwrap_err().to_string();
            assert!(err.starts_with("gguf tokenizer: cannot build the byte-level BPE model: "), "{err}");
            bpe.kv.insert(
                KEY_TYPES.into(),
                GgufValue::Array { item_type: GgufValueType::I32, items: vec![GgufValue::I32(1)] },
            );
            check(
                &bpe,
                "gguf tokenizer: `tokenizer.ggml.token_type` has 1 entries but `tokenizer.ggml.tokens` has 268",
            );

            let mut spm = sentencepiece_meta(None);
            spm.kv.insert(KEY_UNK.into(), GgufValue::U32(100_000));
            check(
                &spm,
                "gguf tokenizer: `tokenizer.ggml.unknown_token_id` is 100000 but the vocabulary has 269 tokens",
            );
            spm.kv.remove(KEY_SCORES);
            check(&spm, "gguf tokenizer: missing metadata key `tokenizer.ggml.scores`");
        }

        /// The real model fetched for integration tests (SmolLM2-135M, a `gpt2`/`smollm`
        /// tokenizer), when `PHOSPHOR_TEST_MODEL` names it (see [`crate::testing::test_model`]).
        #[test]
        fn counts_with_the_test_models_tokenizer_when_present() {
            let Some(path) = crate::testing::test_model("PHOSPHOR_TEST_MODEL") else { return };
            let file = std::fs::File::open(&path).unwrap();
            let meta = GgufMetadata::read(std::io::BufReader::new(file)).unwrap();
            let counter = HfCounter::from_gguf(&meta).unwrap();
            assert_eq!(counter.count_text("Hello, world!"), 4);
            // Ids from llama.cpp's own tokenizer (`llama-tokenize --ids --no-bos`) on the same file.
            for (text, expected) in [
                ("Hello, world!", vec![19556, 28, 905, 17]),
                ("hello world", vec![28120, 905]),
                ("  multiple   spaces\n\n\ttabs  ", vec![216, 2701, 256, 5600, 1116, 197, 100, 7366, 256]),
                (
                    "The year 2024 had 366 days; π≈3.14159.",
                    vec![
                        504, 713, 216, 34, 32, 34, 36, 761, 216, 35, 38, 38, 2009, 43, 25143, 40533, 226, 35,
                        30, 33, 36, 33, 37, 41, 30,
                    ],
                ),
                (
                    "日本語のテキスト 🚀 émoji",
                    vec![
                        23274, 115, 40993, 179, 120, 248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100,
                        226, 15107, 244, 218, 26411, 15771, 10381,
                    ],
                ),
                ("<|im_start|>user\nhi<|im_end|>\n", vec![1, 4093, 198, 6004, 2, 198]),
                (
                    "fn main() {\n    println!(\"{}\", 1234567);\n}",
                    vec![
                        7853, 1085, 1000, 1662, 472, 1628, 34115, 17, 43331, 1002, 216, 33, 34, 35, 36, 37,
                        38, 39, 4258, 198, 109,
                    ],
                ),
                (
                    "don't won't I'll we're THEY'RE",
                    vec![12420, 982, 3763, 982, 339, 3060, 392, 2316, 6462, 73, 23, 3256],
                ),
                ("a\r\nb\n\n\n c", vec![81, 201, 198, 82, 16506, 265]),
            ] {
                assert_eq!(ids(&counter, text), expected, "{text:?}");
            }
        }
    }
}

#[cfg(all(test, feature = "tiktoken"))]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn o200k_and_cl100k_count_known_strings() {
        let (o200k, cl100k) = (TiktokenCounter::o200k(), TiktokenCounter::cl100k());
        assert_eq!((o200k.name(), cl100k.name()), ("o200k_base", "cl100k_base"));
        for counter in [o200k, cl100k] {
            assert_eq!(counter.count_text("hello world"), 2, "{}", counter.name());
            assert_eq!(counter.count_text(""), 0, "{}", counter.name());
        }
        // OpenAI's cookbook ("How to count tokens with tiktoken") lists these cl100k_base counts.
        for (text, expected) in [
            ("tiktoken is great!", 6),
            ("antidisestablishmentarianism", 6),
            ("2 + 2 = 4", 7),
            ("お誕生日おめでとう", 9),
        ] {
            assert_eq!(cl100k.count_text(text), expected, "{text:?}");
        }
        // o200k's larger vocabulary covers Japanese better.
        assert!(o200k.count_text("お誕生日おめでとう") < 9);
        // Special tokens' text is ordinary text.
        assert!(cl100k.count_text("<|endoftext|>") > 1);
    }

    #[test]
    fn openai_model_ids_map_to_their_encoding() {
        use TiktokenEncoding::{Cl100kBase, O200kBase};
        for (model, expected) in [
            ("gpt-4o", Some(O200kBase)),
            ("gpt-4o-mini-2024-07-18", Some(O200kBase)),
            ("chatgpt-4o-latest", Some(O200kBase)),
            ("gpt-4.1-nano", Some(O200kBase)),
            ("o1", Some(O200kBase)),
            ("o3-mini", Some(O200kBase)),
            ("o4-mini-2025-04-16", Some(O200kBase)),
            ("gpt-5", Some(O200kBase)),
            ("gpt-5.1-codex", Some(O200kBase)),
            ("openai/gpt-oss-20b", Some(O200kBase)),
            ("ft:gpt-4o-mini-2024-07-18:acme::abc123", Some(O200kBase)),
            ("GPT-4o", Some(O200kBase)),
            ("gpt-4", Some(Cl100kBase)),
            ("gpt-4-turbo-2024-04-09", Some(Cl100kBase)),
            ("gpt-3.5-turbo", Some(Cl100kBase)),
            ("text-embedding-3-small", Some(Cl100kBase)),
            ("o10", None),
            ("gpt-4x", None),
            ("claude-sonnet-4", None),
            ("qwen2.5-coder", None),
        ] {
            assert_eq!(TiktokenEncoding::for_model(model), expected, "{model}");
        }
        assert_eq!(TiktokenCounter::for_model("gpt-4o").map(|c| c.encoding()), Some(O200kBase));
        assert!(TiktokenCounter::for_model("llama3").is_none());
    }
}
