//! The judged mode of an evaluation: a model answers each probe from a strategy's context alone, and
//! a judge model grades the answer against what the full history says, 0 to 5 (the rubric is
//! `phosphor_prompt::JUDGE_TEMPLATE`, which `phosphor eval --judge-template FILE` replaces).

use std::sync::Arc;

use phosphor_base::{ChatModel, ChatRequest, Message};

use super::Probe;
use crate::error::{AgentError, Result};
use crate::shown::summary_as_context;

/// What the answering model is told, as the system message before the context.
pub const ANSWER_INSTRUCTIONS: &str = "You are continuing the work of the conversation below. Answer the question \
that follows it from what the conversation says, in one to three sentences, with exact names, paths, commands and \
numbers. If the conversation does not say, answer \"unknown\".";

/// Tokens an answer may have.
pub const ANSWER_TOKENS: u64 = 256;
/// Tokens a grade may have (a digit, and room for a model that explains first).
pub const GRADE_TOKENS: u64 = 16;
/// The highest grade.
pub const MAX_GRADE: u8 = 5;

/// The models and rubric of the judged mode.
#[derive(Clone)]
pub struct Judge {
    /// Answers probes from a context (the session model, at its own window).
    pub answerer: Arc<dyn ChatModel>,
    /// Grades the answers.
    pub judge: Arc<dyn ChatModel>,
    /// The rubric template's name in errors (a path, or `judge.md.tpl` for the built-in one).
    pub template_name: String,
    /// The rubric template (minijinja; given `kind`, `question`, `expected`, `answer`).
    pub template: String,
}

impl Judge {
    /// A judge with the built-in rubric.
    pub fn new(answerer: Arc<dyn ChatModel>, judge: Arc<dyn ChatModel>) -> Judge {
        Judge {
            answerer,
            judge,
            template_name: "judge.md.tpl".to_owned(),
            template: phosphor_prompt::JUDGE_TEMPLATE.to_owned(),
        }
    }

    /// Checks that the rubric renders, so that a broken template fails before any model is asked.
    pub fn check(&self) -> Result<()> {
        let probe = Probe {
            kind: super::ProbeKind::Intent,
            question: "q".into(),
            answer: "a".into(),
            keys: Vec::new(),
            message: 0,
        };
        self.rubric(&probe, "answer").map(|_| ())
    }

    fn rubric(&self, probe: &Probe, answer: &str) -> Result<String> {
        let ctx = serde_json::json!({
            "kind": probe.kind.as_str(),
            "question": probe.question,
            "expected": probe.answer,
            "answer": answer,
        });
        phosphor_prompt::render_template(&self.template_name, &self.template, ctx)
            .map_err(|message| AgentError::Eval { message: format!("the judge's template: {message}") })
    }

    /// The verdict on `probe` from `context` (`context_tokens` counted with the answering model's
    /// counter). An error is a model that failed; a reply that holds no grade is a verdict.
    pub async fn grade(&self, probe: &Probe, context: &[Message], context_tokens: u64) -> Result<Verdict> {
        if context_tokens + ANSWER_TOKENS > self.answerer.info().context_window {
            return Ok(Verdict::Unfit);
        }
        let mut messages = vec![Message::system(ANSWER_INSTRUCTIONS)];
        messages.extend(context.iter().map(|m| summary_as_context(m).into_owned()));
        messages.push(Message::user(probe.question.clone()));
        let answer = self.answerer.complete(request(messages, ANSWER_TOKENS)).await?.text;
        let rubric = self.rubric(probe, answer.trim())?;
        let verdict = self.judge.complete(request(vec![Message::user(rubric)], GRADE_TOKENS)).await?.text;
        Ok(match parse_grade(&verdict) {
            Some(grade) => Verdict::Grade(grade),
            None => Verdict::NoGrade(verdict.chars().take(MAX_REPLY_CHARS).collect()),
        })
    }
}

/// How much of a reply without a grade a verdict keeps.
pub const MAX_REPLY_CHARS: usize = 200;

/// The judged outcome of one probe on one strategy's context. In JSON: `{"grade": 4}`, `"unfit"`,
/// or `{"no_grade": "the judge's reply"}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The judge's grade, 0 to [`MAX_GRADE`].
    Grade(u8),
    /// The context and an answer do not fit the answering model's window: nothing was asked.
    Unfit,
    /// The judge replied without a grade (its reply, cut at [`MAX_REPLY_CHARS`]); small models do.
    NoGrade(String),
}

fn request(messages: Vec<Message>, max_output_tokens: u64) -> ChatRequest {
    ChatRequest {
        messages,
        tools: Vec::new(),
        max_output_tokens: Some(max_output_tokens),
        temperature: Some(0.0),
        conversation_id: None,
        repeat_penalty: None,
        outline: None,
        passthrough: None,
    }
}

/// The first digit from 0 to [`MAX_GRADE`] of a judge's reply that stands alone (not part of a
/// longer number: "Grade: 4/5" is 4, "10" is no grade).
pub fn parse_grade(reply: &str) -> Option<u8> {
    let bytes = reply.as_bytes();
    (0..bytes.len()).find_map(|i| {
        let digit = bytes[i];
        let alone = i == 0 || !bytes[i - 1].is_ascii_digit();
        let next_alone = !bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
        (digit.is_ascii_digit() && alone && next_alone && digit - b'0' <= MAX_GRADE).then(|| digit - b'0')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grade_is_the_first_lone_digit_up_to_five() {
        assert_eq!(parse_grade("4"), Some(4));
        assert_eq!(parse_grade("Grade: 3/5"), Some(3));
        assert_eq!(parse_grade(" 0\n"), Some(0));
        assert_eq!(parse_grade("10 out of 10, so 5"), Some(5));
        assert_eq!(parse_grade("7"), None);
        assert_eq!(parse_grade("excellent"), None);
    }

    #[test]
    fn the_built_in_rubric_renders_every_field() {
        let judge = Judge::new(
            Arc::new(phosphor_testkit::ScriptedModel::new(Vec::new())),
            Arc::new(phosphor_testkit::ScriptedModel::new(Vec::new())),
        );
        let probe = Probe {
            kind: super::super::ProbeKind::Artifact,
            question: "What happened to src/a.rs?".into(),
            answer: "It was edited.".into(),
            keys: vec!["src/a.rs".into()],
            message: 0,
        };
        let text = judge.rubric(&probe, "It was read.").unwrap();
        for part in ["Question (artifact): What happened to src/a.rs?", "It was edited.", "It was read."] {
            assert!(text.contains(part), "{part} missing:\n{text}");
        }
        let broken = Judge { template: "{{ nope }}".into(), template_name: "my.tpl".into(), ..judge };
        let error = broken.check().unwrap_err().to_string();
        assert!(error.contains("my.tpl line 1"), "{error}");
    }
}
