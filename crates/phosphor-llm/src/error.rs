//! What a server says when it fails, turned into [`phosphor_base::Error`]: [`classify_error`].
//!
//! This crate has no error enum of its own: [`ChatModel`](phosphor_base::ChatModel) streams
//! [`phosphor_base::Error`], whose variants already say what the caller should do (compact on
//! [`Error::ContextOverflow`], wait on [`Error::RateLimited`], fix the key on [`Error::Auth`], ...).
//! Everything here maps into it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

pub use phosphor_base::error::{Error, Result};

/// The longest excerpt of a body that is not JSON kept in an error message.
const RAW_EXCERPT_CHARS: usize = 300;

/// Phrases (lowercase) that only a context-window overflow produces, one or more per server:
/// OpenAI, Azure, OpenRouter, vLLM, DeepSeek, Mistral, Anthropic, Gemini, llama.cpp, LM Studio,
/// mistral.rs, Cerebras, xAI, TGI, Ollama. A rate limit that mentions tokens ("tokens per min")
/// and an output limit ("max_tokens is too large", Anthropic's "max_tokens: N > M, which is the
/// maximum allowed number of output tokens") match none of them. Anthropic's "input length and
/// `max_tokens` exceed context limit: 199759 + 8192 > 200000" is an overflow: the input plus the
/// answer budget does not fit the window, which a compaction (or a smaller answer budget) cures.
const OVERFLOW_PHRASES: &[&str] = &[
    "maximum context length",
    "context_length_exceeded",
    "context length exceeded",
    "context window exceeded",
    "exceeds the context window",
    "exceeds the available context size",
    "exceeds the context length",
    "prompt is too long",
    "input is too long",
    "maximum prompt length",
    "prompt sequence length is greater than",
    "reduce the length of the messages",
    "context the overflows",
    "context length of only",
    "too large for model with",
    "tokens + `max_new_tokens` must be <=",
    "exceeds the maximum number of tokens allowed",
    "exceed context limit",
];

/// Phrases followed by the number of tokens the request had.
const REQUESTED_PHRASES: &[&str] = &[
    "resulted in",
    "you requested about",
    "you requested",
    "current length is",
    "input token count (",
    "keep the first",
    "request contains",
    "prompt contains",
    "prompt is too long:",
    "exceed context limit:",
];

/// Phrases followed by the size of the context window.
const LIMIT_PHRASES: &[&str] = &[
    "maximum context length is",
    "context length of only",
    "while limit is",
    "maximum number of tokens allowed (",
    "maximum prompt length is",
    "sequence length is greater than",
    "tokens >",
    "too large for model with",
    "must be <=",
];

/// Anthropic's "exceed context limit: INPUT + MAX_TOKENS > WINDOW": the window is the number after
/// the `>` that follows the phrase.
fn limit_after_sum(text: &str) -> Option<u64> {
    let start = text.find("exceed context limit:")?;
    let rest = &text[start..];
    let gt = rest.find('>')?;
    number_after(rest, &rest[..=gt])
}

/// What an error body says, whatever its server's format.
#[derive(Debug, Default, PartialEq)]
struct ErrorBody {
    message: Option<String>,
    /// `code` as text (OpenAI's `"context_length_exceeded"`, or OpenRouter's `400` written out).
    code: Option<String>,
    /// `code` when it is an HTTP status (OpenRouter, vLLM, Gemini, llama.cpp).
    status_code: Option<u16>,
    /// `type`, or Gemini's `status`.
    kind: Option<String>,
    /// llama.cpp's `n_prompt_tokens`.
    prompt_tokens: Option<u64>,
    /// llama.cpp's `n_ctx`.
    context_size: Option<u64>,
}

fn text_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(text) if !text.trim().is_empty() => Some(text.clone()),
        _ => None,
    }
}

/// Reads the error formats servers use: `{"error": {...}}` (OpenAI and most others), a JSON array
/// around it (Gemini), `{"error": "text"}` (LM Studio), a bare object with `message` (vLLM,
/// Cerebras, mistral.rs), FastAPI's `{"detail": ...}`.
fn parse_body(body: &str) -> ErrorBody {
    let Ok(value) = serde_json::from_str::<Value>(body.trim()) else {
        return ErrorBody::default();
    };
    let value = match value {
        Value::Array(items) => items.into_iter().next().unwrap_or(Value::Null),
        value => value,
    };
    let top = match value {
        Value::Object(top) => top,
        Value::String(text) => return ErrorBody { message: Some(text), ..ErrorBody::default() },
        _ => return ErrorBody::default(),
    };
    let mut out = ErrorBody::default();
    let empty = Map::new();
    let fields = match top.get("error") {
        Some(Value::Object(error)) => error,
        Some(Value::String(text)) => {
            out.message = Some(text.clone());
            &empty
        }
        _ => &top,
    };
    out.message = out
        .message
        .or_else(|| text_of(fields.get("message")))
        .or_else(|| text_of(top.get("message")))
        .or_else(|| text_of(top.get("detail")));
    match fields.get("code").or_else(|| top.get("code")) {
        Some(Value::String(code)) => out.code = Some(code.clone()),
        Some(Value::Number(number)) => {
            out.code = Some(number.to_string());
            out.status_code =
                number.as_u64().and_then(|n| u16::try_from(n).ok()).filter(|n| (100..600).contains(n));
        }
        _ => {}
    }
    out.kind = text_of(fields.get("type")).or_else(|| text_of(fields.get("status")));
    out.prompt_tokens = fields.get("n_prompt_tokens").and_then(Value::as_u64);
    out.context_size = fields.get("n_ctx").and_then(Value::as_u64);
    out
}

/// A message for a body that says nothing readable: the HTML title, or an excerpt.
fn describe_raw(body: &str) -> String {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return "empty response body".to_owned();
    }
    let lower = trimmed.to_ascii_lowercase();
    if let (Some(start), Some(end)) = (lower.find("<title>"), lower.find("</title>"))
        && start + 7 <= end
    {
        return trimmed[start + 7..end].trim().to_owned();
    }
    let collapsed = trimmed.split_whitespace().collect::<Vec<_>>().join(" ");
    match collapsed.char_indices().nth(RAW_EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &collapsed[..cut]),
        None => collapsed,
    }
}

/// The first number (commas allowed as thousands separators) right after `phrase` in `text`,
/// with at most a few spaces or punctuation marks between.
fn number_after(text: &str, phrase: &str) -> Option<u64> {
    let start = text.find(phrase)? + phrase.len();
    let rest = &text[start..];
    let skip = rest.find(|c: char| c.is_ascii_digit())?;
    if skip > 3 || rest[..skip].chars().any(char::is_alphanumeric) {
        return None;
    }
    let digits: String = rest[skip..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn first_number(text: &str, phrases: &[&str]) -> Option<u64> {
    phrases.iter().find_map(|phrase| number_after(text, phrase))
}

fn overflow(message: String, body: &ErrorBody) -> Error {
    let lower = message.to_lowercase();
    Error::ContextOverflow {
        requested_tokens: body.prompt_tokens.or_else(|| first_number(&lower, REQUESTED_PHRASES)),
        limit_tokens: body
            .context_size
            .or_else(|| first_number(&lower, LIMIT_PHRASES))
            .or_else(|| limit_after_sum(&lower)),
        message,
    }
}

/// Whether `message` is a context-window overflow in any server's words.
fn mentions_overflow(message: &str) -> bool {
    let lower = message.to_lowercase();
    OVERFLOW_PHRASES.iter().any(|phrase| lower.contains(phrase))
}

/// Classifies a failed call from its HTTP status (`None` when there was none: an error event
/// inside a `200` stream, or a status that was lost) and its body, as any OpenAI-compatible
/// server sends it.
///
/// - `413`, and any other status but `401`, `403`, `429` and `5xx` whose body is a context-window
///   overflow (by the codes `context_length_exceeded` / `exceed_context_size_error`, or by a
///   phrase only an overflow produces), give [`Error::ContextOverflow`] with the requested and
///   limit token counts when the text or fields carry them. A `5xx` is an overflow only with one
///   of those two codes.
/// - `429` gives [`Error::RateLimited`] (its `retry_after` read from "try again in 8s" when the
///   message says so), except OpenAI's `insufficient_quota`, which waiting does not cure:
///   [`Error::BadRequest`].
/// - `401` and `403` give [`Error::Auth`]; `408` and `5xx` give [`Error::Transient`]; any other
///   status gives [`Error::BadRequest`].
/// - Without a status, a numeric `code` in the body stands for it (OpenRouter, vLLM, Gemini), and
///   the `code`/`type` names decide otherwise (`rate_limit_exceeded`, `invalid_api_key`,
///   `server_error`, ...); what is left is a [`Error::BadRequest`].
///
/// ```
/// use phosphor_llm::{classify_error, Error};
///
/// let body = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#;
/// let error = classify_error(Some(400), body);
/// assert!(matches!(error, Error::ContextOverflow { requested_tokens: Some(5000), limit_tokens: Some(4096), .. }));
/// ```
pub fn classify_error(status: Option<u16>, body: &str) -> Error {
    let parsed = parse_body(body);
    let message = parsed.message.clone().unwrap_or_else(|| describe_raw(body));
    let status = status.or(parsed.status_code);
    let code = parsed.code.as_deref().unwrap_or_default().to_ascii_lowercase();
    let kind = parsed.kind.as_deref().unwrap_or_default().to_ascii_lowercase();
    let named = |names: &[&str]| names.iter().any(|name| code == *name || kind == *name);
    let overflow_code = named(&["context_length_exceeded", "exceed_context_size_error"]);
    let quota = named(&["insufficient_quota"]);

    match status {
        Some(429) if quota => Error::BadRequest { status, message },
        Some(429) => Error::RateLimited { retry_after: retry_hint(&message), message },
        Some(401 | 403) => Error::Auth { message },
        Some(413) => overflow(message, &parsed),
        Some(500..) if overflow_code => overflow(message, &parsed),
        Some(408 | 500..) => Error::Transient { status, message },
        _ if overflow_code || mentions_overflow(&message) => overflow(message, &parsed),
        Some(_) => Error::BadRequest { status, message },
        None if quota => Error::BadRequest { status, message },
        None if named(&[
            "rate_limit_exceeded",
            "rate_limit_error",
            "tokens",
            "requests",
            "resource_exhausted",
        ]) =>
        {
            Error::RateLimited { retry_after: retry_hint(&message), message }
        }
        None if named(&[
            "invalid_api_key",
            "authentication_error",
            "permission_error",
            "unauthenticated",
            "permission_denied",
        ]) =>
        {
            Error::Auth { message }
        }
        None if named(&[
            "server_error",
            "overloaded_error",
            "api_error",
            "internal_error",
            "internal",
            "unavailable",
            "service_unavailable",
            "timeout",
        ]) =>
        {
            Error::Transient { status, message }
        }
        None => Error::BadRequest { status, message },
    }
}

/// The wait a rate-limit message asks for: OpenAI writes "Please try again in 8s", "in 1.054s",
/// "in 20ms" or "in 6m0s".
fn retry_hint(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let start = lower.find("try again in ")? + "try again in ".len();
    parse_go_duration(lower[start..].split_whitespace().next()?.trim_end_matches(['.', ',']))
}

/// Parses durations written like Go's `time.Duration` (`1h2m3.5s`, `250ms`).
fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut total = 0.0_f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).ok()
}

/// The wait a response's headers ask for: `retry-after-ms` (milliseconds, OpenAI and Azure)
/// wins over `retry-after` (seconds, or an HTTP date as RFC 9110 allows). A date in the past
/// means no wait.
pub(crate) fn retry_after_from_headers(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| *v >= 0.0) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let value = retry_after?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds.max(0.0)).ok();
    }
    let at = parse_http_date(value)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// Seconds since the Unix epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn parse_http_date(text: &str) -> Option<u64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [_weekday, day, month, year, time, "GMT"] = words.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    let day: i64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let mut clock = time.split(':').map(|part| part.parse::<i64>().ok());
    let (Some(Some(h)), Some(Some(m)), Some(Some(s)), None) =
        (clock.next(), clock.next(), clock.next(), clock.next())
    else {
        return None;
    };
    // Howard Hinnant's days_from_civil.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + m * 60 + s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn retry_after_headers_in_every_form() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_717); // Sun, 06 Nov 1994 08:48:37 GMT
        let check = |ms: Option<&str>, secs: Option<&str>, expected: Option<Duration>| {
            assert_eq!(retry_after_from_headers(ms, secs, now), expected, "{ms:?} {secs:?}");
        };
        check(None, None, None);
        check(None, Some("7"), Some(Duration::from_secs(7)));
        check(None, Some("1.5"), Some(Duration::from_millis(1500)));
        check(Some("250"), Some("7"), Some(Duration::from_millis(250)));
        check(Some("junk"), Some("7"), Some(Duration::from_secs(7)));
        check(None, Some("Sun, 06 Nov 1994 08:49:37 GMT"), Some(Duration::from_secs(60)));
        check(None, Some("Sun, 06 Nov 1994 08:40:00 GMT"), Some(Duration::ZERO));
        check(None, Some("tomorrow"), None);
    }

    #[test]
    fn retry_hints_in_rate_limit_messages() {
        let check = |message: &str, expected: Option<Duration>| {
            assert_eq!(retry_hint(message), expected, "{message}")
        };
        check("Please try again in 8s. Visit https://...", Some(Duration::from_secs(8)));
        check("Please try again in 1.054s.", Some(Duration::from_millis(1054)));
        check("Please try again in 20ms.", Some(Duration::from_millis(20)));
        check("Please try again in 6m0s.", Some(Duration::from_secs(360)));
        check("Please try again later.", None);
    }

    #[test]
    fn numbers_follow_their_phrase_closely() {
        assert_eq!(
            number_after("maximum context length is 128,000 tokens", "maximum context length is"),
            Some(128_000)
        );
        assert_eq!(number_after("limit is not 5", "limit is"), None);
        assert_eq!(number_after("nothing here", "limit is"), None);
    }

    #[test]
    fn html_bodies_are_described_by_their_title() {
        assert_eq!(
            describe_raw("<html><head><title>502 Bad Gateway</title></head></html>"),
            "502 Bad Gateway"
        );
        assert_eq!(describe_raw("  "), "empty response body");
        assert_eq!(describe_raw(&"x".repeat(400)), format!("{}…", "x".repeat(300)));
    }
}
