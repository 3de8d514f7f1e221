//! The evaluation corpus (`eval/corpus/`) is what the converter makes of aider's chat history:
//! sessions chosen by `aider::corpus_sessions`, converted by `aider::transcript`, written as
//! OpenAI chat-completions JSON. `PHOSPHOR_UPDATE_CORPUS=1` rewrites the files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::PathBuf;

use phosphor_agent::eval::aider;
use phosphor_wire::chat::{ToOpenAiOptions, parse_transcript_with_warnings, to_openai_with};

/// Aider sessions in the corpus.
const SESSIONS: usize = 4;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../eval/corpus")
}

#[test]
fn the_checked_in_corpus_is_the_conversion_of_aiders_history() {
    let Some(path) = phosphor_base::testing::test_model("PHOSPHOR_REPLAY_AIDER") else { return };
    let text = fs::read_to_string(path).unwrap();
    let chosen = aider::corpus_sessions(&text, SESSIONS);
    assert_eq!(chosen.len(), SESSIONS);
    let update = std::env::var_os("PHOSPHOR_UPDATE_CORPUS").is_some_and(|v| v == "1");
    for (number, turns) in chosen {
        let messages = aider::transcript(&turns);
        let json = serde_json::to_string_pretty(&to_openai_with(
            &messages,
            &ToOpenAiOptions { ids: false, summary_flag: false },
        ))
        .unwrap()
            + "\n";
        let file = corpus_dir().join(format!("aider-session-{number}.json"));
        if update {
            fs::write(&file, &json).unwrap();
        }
        let checked_in = fs::read_to_string(&file).unwrap_or_else(|e| {
            panic!("{}: {e}; regenerate with PHOSPHOR_UPDATE_CORPUS=1 cargo test -p phosphor-agent --test corpus", file.display())
        });
        assert!(checked_in == json, "{} is stale; regenerate with PHOSPHOR_UPDATE_CORPUS=1", file.display());
    }
}

#[test]
fn every_corpus_file_reads_back_with_its_tool_calls_paired() {
    let mut files = 0;
    for entry in fs::read_dir(corpus_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let (messages, warnings) =
                parse_transcript_with_warnings(&fs::read_to_string(&path).unwrap()).unwrap();
            assert!(warnings.is_empty(), "{}: {warnings:?}", path.display());
            assert!(messages.len() >= 12, "{}", path.display());
            phosphor_prune::check_tool_pairing(&messages).unwrap();
            files += 1;
        }
    }
    assert_eq!(files, SESSIONS);
}
