//! Hugging Face tokenizers: from a `tokenizer.json`, or rebuilt from a GGUF file's vocabulary.

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

use crate::gguf::{GgufMetadata, GgufValue};
use crate::tokens::ApproxCounter;
use crate::tokens::TokenCounter;

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
        names: &["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"],
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

fn token_id(meta: &GgufMetadata, key: &'static str, tokens: usize) -> Result<Option<usize>, TokenizerError> {
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
fn sentencepiece_merges(tokens: &[String], scores: &[f64], types: Option<&[i64]>) -> Vec<(String, String)> {
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
mod tests;
