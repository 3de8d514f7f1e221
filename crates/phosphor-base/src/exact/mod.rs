//! Exact token counters behind [`TokenCounter`](crate::tokens::TokenCounter): OpenAI's encodings (feature `tiktoken`) and
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

#[cfg(feature = "tiktoken")]
pub use self::openai::{TiktokenCounter, TiktokenEncoding};

#[cfg(feature = "hf-tokenizers")]
pub use self::hf::{HfCounter, TokenizerError};

#[cfg(feature = "tiktoken")]
mod openai;

#[cfg(feature = "hf-tokenizers")]
mod hf;

#[cfg(all(test, feature = "tiktoken"))]
mod tests {
    use super::*;
    use crate::tokens::TokenCounter;
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
