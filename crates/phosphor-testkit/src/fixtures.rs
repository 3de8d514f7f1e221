//! Error bodies as real servers send them, for tests of error classification and recovery.
//!
//! The files live in `crates/phosphor-testkit/fixtures/errors/`; `fixtures/README.md` says where
//! each shape comes from.

use crate::server::MockResponse;

/// One server's error answer: its status and its body, verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorFixture {
    /// The file name under `fixtures/errors/`, without extension.
    pub name: &'static str,
    /// The server that answers this way.
    pub server: &'static str,
    /// The HTTP status it answers with.
    pub status: u16,
    /// The `Content-Type` it sends.
    pub content_type: &'static str,
    /// The body, byte for byte.
    pub body: &'static str,
}

impl ErrorFixture {
    /// This answer as a scripted response.
    pub fn response(&self) -> MockResponse {
        MockResponse::Raw {
            status: self.status,
            headers: vec![("Content-Type".to_owned(), self.content_type.to_owned())],
            body: self.body.to_owned(),
        }
    }
}

const JSON: &str = "application/json";
const HTML: &str = "text/html";

macro_rules! fixture {
    ($name:literal, $ext:literal, $server:literal, $status:literal, $content_type:expr) => {
        ErrorFixture {
            name: $name,
            server: $server,
            status: $status,
            content_type: $content_type,
            body: include_str!(concat!("../fixtures/errors/", $name, ".", $ext)),
        }
    };
}

/// Every stored error answer: context overflows first, then errors that are not overflows.
pub const ERROR_FIXTURES: &[ErrorFixture] = &[
    fixture!("openai_context_length_exceeded", "json", "OpenAI", 400, JSON),
    fixture!("anthropic_prompt_too_long", "json", "Anthropic", 400, JSON),
    fixture!("anthropic_input_plus_max_tokens", "json", "Anthropic", 400, JSON),
    fixture!("gemini_input_token_count", "json", "Gemini (OpenAI-compatible endpoint)", 400, JSON),
    fixture!("openrouter_context_length", "json", "OpenRouter", 400, JSON),
    fixture!("vllm_context_length", "json", "vLLM", 400, JSON),
    fixture!("llamacpp_exceed_context_size", "json", "llama.cpp server", 400, JSON),
    fixture!("lmstudio_context_overflow", "json", "LM Studio", 400, JSON),
    fixture!("mistralrs_sequence_too_long", "json", "mistral.rs server", 422, JSON),
    fixture!("deepseek_context_length", "json", "DeepSeek", 400, JSON),
    fixture!("cerebras_context_length_exceeded", "json", "Cerebras", 400, JSON),
    fixture!("nginx_413", "html", "nginx in front of any server", 413, HTML),
    fixture!("openai_rate_limit_tpm", "json", "OpenAI", 429, JSON),
    fixture!("openai_insufficient_quota", "json", "OpenAI", 429, JSON),
    fixture!("openai_max_tokens_too_large", "json", "OpenAI", 400, JSON),
    fixture!("anthropic_max_tokens_over_output_limit", "json", "Anthropic", 400, JSON),
    fixture!("openai_invalid_api_key", "json", "OpenAI", 401, JSON),
    fixture!("openai_unsupported_region", "json", "OpenAI", 403, JSON),
    fixture!("openai_server_error", "json", "OpenAI", 500, JSON),
    fixture!("cloudflare_502", "html", "Cloudflare in front of any server", 502, HTML),
    fixture!("openai_overloaded_503", "json", "OpenAI", 503, JSON),
];

/// The fixture called `name`.
///
/// # Panics
/// When there is none; the message lists the names there are.
pub fn error_fixture(name: &str) -> &'static ErrorFixture {
    match ERROR_FIXTURES.iter().find(|f| f.name == name) {
        Some(fixture) => fixture,
        None => {
            let names: Vec<&str> = ERROR_FIXTURES.iter().map(|f| f.name).collect();
            panic!("no error fixture {name:?}; there are: {}", names.join(", "))
        }
    }
}
