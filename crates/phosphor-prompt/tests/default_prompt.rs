//! Snapshots of the compiled-in default prompt, rendered for the situations compaction meets.

use phosphor_prompt::{DEFAULT_TEMPLATE, Profiles, SummaryContext, Tier};
use pretty_assertions::assert_eq;

/// A first compaction of a realistic session: no previous summary, no custom instructions.
fn first_compaction() -> SummaryContext {
    SummaryContext {
        previous_summary: None,
        custom_instructions: None,
        session_id: "0197a3c2-5e1f-7b20-9c4d-2f6e8a1b3c5d".to_owned(),
        session_title: "Add retry to the HTTP client".to_owned(),
        message_count: 87,
        tokens_before: 104_512,
        context_window: 131_072,
        model: "qwen3-coder-30b".to_owned(),
        workspace: Some("/home/ana/src/fetcher".to_owned()),
        files: vec!["src/client.rs".to_owned(), "src/retry.rs".to_owned(), "tests/client.rs".to_owned()],
        tools_used: vec!["bash".to_owned(), "edit".to_owned(), "read".to_owned()],
        date: "2025-06-14".to_owned(),
    }
}

/// Renders `ctx` with the compiled-in default and checks that nothing was skipped.
fn render(ctx: &SummaryContext) -> phosphor_prompt::Result<String> {
    let prompt = Profiles::with_roots(None, None).render("default", ctx)?;
    assert_eq!((prompt.tier, prompt.path, prompt.warnings), (Tier::Default, None, Vec::<String>::new()));
    Ok(prompt.text)
}

#[test]
fn first_compaction_prompt() {
    insta::assert_snapshot!("first_compaction", render(&first_compaction()).unwrap());
}

#[test]
fn prompt_with_previous_summary_asks_for_a_merge() {
    let ctx = SummaryContext {
        previous_summary: Some(
            "## Goal\nThe user wants \"retries with exponential backoff, at most 5 attempts\".\n\n\
             ## Next steps\n1. Write `src/retry.rs`."
                .to_owned(),
        ),
        message_count: 31,
        ..first_compaction()
    };
    insta::assert_snapshot!("with_previous_summary", render(&ctx).unwrap());
}

#[test]
fn prompt_with_custom_instructions_has_a_focus_section() {
    let ctx = SummaryContext {
        custom_instructions: Some("Keep every benchmark number exactly.".to_owned()),
        ..first_compaction()
    };
    insta::assert_snapshot!("with_custom_instructions", render(&ctx).unwrap());
}

#[test]
fn prompt_with_nothing_optional_leaves_out_every_optional_section() {
    let ctx = SummaryContext { session_id: "s1".to_owned(), ..SummaryContext::default() };
    insta::assert_snapshot!("minimal", render(&ctx).unwrap());
}

#[test]
fn default_template_stays_short_for_small_models() {
    let lines = DEFAULT_TEMPLATE.lines().count();
    assert!(lines < 60, "the default template has {lines} lines; keep it under 60");
}
