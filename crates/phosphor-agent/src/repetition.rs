//! The repetition guard of summary streams: small models decoding greedily fall into loops
//! (`1.0.0:1.0.0:1.0.0:...`, the same bullet again and again) and would run to the output limit.
//! The guard watches the end of the streamed text for a unit that repeats; the compaction then
//! stops the stream and keeps the text up to the first occurrence of the unit.
//!
//! Some models loop *nearly*: the same tool-call line again and again with `call_15`, `call_16`,
//! ... counting up (Gemma 3 270M does). Units that differ only in their digits count as repeats
//! too, with a higher bar (more repeats over more bytes), since a real table of figures also
//! repeats everything but its digits for a few rows.

/// The longest repeating unit looked for, in bytes: a screenful. Small models also loop by
/// copying the transcript they were given, turn after turn, then again from the same turn: Gemma
/// 3 270M copied a 1,118-byte stretch of an aider session five times over until its output limit
/// (docs/BENCHMARKS.md). Checking every period up to this costs a few thousand byte comparisons
/// per check, nothing beside decoding a token.
const MAX_PERIOD: usize = 2_048;
/// The repeats must cover at least this many bytes: a ruler of dashes or a short table row
/// repeated a few times is not a loop.
const MIN_LOOP_BYTES: usize = 256;
/// And the unit must occur at least this many times.
const MIN_REPEATS: usize = 3;
/// The bar for units that repeat with different digits: repeats, and bytes they cover.
const MIN_NEAR_REPEATS: usize = 6;
const MIN_NEAR_LOOP_BYTES: usize = 512;

/// A loop at the end of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loop {
    /// Where to cut the text: the end of the unit's first occurrence (a character boundary).
    pub(crate) keep: usize,
    /// The unit's length in bytes.
    pub(crate) period: usize,
    /// How many times the unit occurs (the last one may be partial).
    pub(crate) repeats: usize,
}

/// The loop `text` ends in, if any: the shortest unit of at most [`MAX_PERIOD`] bytes that
/// repeats at least [`MIN_REPEATS`] times over at least [`MIN_LOOP_BYTES`] bytes at its end. The
/// unit is taken where the repeats begin, so it may be a rotation of what the model meant to repeat
/// (`" loop"` for `"loop "` after a space).
///
/// Failing that, the same with digits compared as equal, for at least [`MIN_NEAR_REPEATS`] repeats
/// over [`MIN_NEAR_LOOP_BYTES`] bytes.
pub(crate) fn find_loop(text: &str) -> Option<Loop> {
    find_loop_by(text, |a, b| a == b, MIN_REPEATS, MIN_LOOP_BYTES).or_else(|| {
        find_loop_by(
            text,
            |a, b| a == b || (a.is_ascii_digit() && b.is_ascii_digit()),
            MIN_NEAR_REPEATS,
            MIN_NEAR_LOOP_BYTES,
        )
    })
}

/// [`find_loop`] with bytes compared by `same`, and its bar.
fn find_loop_by(
    text: &str,
    same: impl Fn(u8, u8) -> bool,
    min_repeats: usize,
    min_bytes: usize,
) -> Option<Loop> {
    let bytes = text.as_bytes();
    let len = bytes.len();
    if len < min_bytes {
        return None;
    }
    for period in 1..=MAX_PERIOD.min(len / min_repeats) {
        // How far back from the end every byte equals the byte one period earlier.
        let mut run = 0;
        while run + period < len && same(bytes[len - 1 - run], bytes[len - 1 - run - period]) {
            run += 1;
        }
        let region = run + period;
        if region >= min_bytes && region / period >= min_repeats {
            let mut keep = len - run;
            while !text.is_char_boundary(keep) {
                keep -= 1;
            }
            return Some(Loop { keep, period, repeats: region / period });
        }
    }
    None
}

/// Checks a growing text every [`CHECK_EVERY`] bytes, not on every delta.
#[derive(Debug, Default)]
pub(crate) struct Guard {
    checked_len: usize,
}

/// Bytes of new text between two checks.
const CHECK_EVERY: usize = 32;

impl Guard {
    /// The loop `text` (the whole text streamed so far) ends in, checked when it grew enough.
    pub(crate) fn check(&mut self, text: &str) -> Option<Loop> {
        if text.len() < self.checked_len + CHECK_EVERY {
            return None;
        }
        self.checked_len = text.len();
        find_loop(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_looping_tail_is_found_and_cut_after_its_first_occurrence() {
        let text = format!("## Goal\nFix the build.\n## Versions\n{}", "1.0.0:".repeat(100));
        let found = find_loop(&text).expect("a loop");
        assert_eq!(found.period, 6);
        assert_eq!(&text[..found.keep], "## Goal\nFix the build.\n## Versions\n1.0.0:");
        assert_eq!(found.repeats, 100);

        let line = "- Read src/config.rs and fixed the parser.\n";
        let text = format!("## Progress\n{}", line.repeat(8));
        let found = find_loop(&text).expect("a repeated line");
        assert_eq!(found.period, line.len());
        // The unit as it first occurs: here rotated by the newline before the first line.
        assert_eq!(&text[..found.keep], format!("## Progress\n{}", line.trim_end()));

        // A loop cut in the middle of its unit, in a multi-byte script.
        let text = format!("Résumé : {}", "données → résultat ; ".repeat(20));
        let cut = &text[..text.len() - 3];
        let found = find_loop(cut).expect("a loop");
        assert!(cut.is_char_boundary(found.keep));
        assert!(cut[..found.keep].ends_with("données → résultat ; ") || found.keep < cut.len());
    }

    #[test]
    fn a_copy_of_the_transcript_over_and_over_is_a_loop() {
        // Turns that differ by words, not digits (a near loop would take turns that count up).
        let turn = |name: &str| {
            format!(
                "[user] change cmd_diff to show a diff of everything since the {name} commit\n\n\
                 [assistant] Certainly! I'll modify the `cmd_diff` method. Here's the change:\n\
                 [call edit_file] {{\"path\":\"aider/commands.py\",\"old_string\":\"{}\"}}\n\n\
                 [edit_file result] Applied edit to aider/commands.py\n\n",
                "x".repeat(150)
            )
        };
        let copied: String = ["first", "second", "third", "fourth"].into_iter().map(turn).collect();
        assert!((1_000..=MAX_PERIOD).contains(&copied.len()), "{}", copied.len());
        let text = format!("## Goal\nShow the diff.\n\n{}{}", copied.repeat(3), &copied[..copied.len() / 2]);
        let found = find_loop(&text).expect("a copy loop");
        assert_eq!(found.period, copied.len());
        assert_eq!(&text[..found.keep], format!("## Goal\nShow the diff.\n\n{copied}").trim_end());
        // Twice is not yet a loop: a summary may quote a stretch of the transcript and then repeat it.
        assert_eq!(find_loop(&format!("## Goal\nShow the diff.\n\n{}", copied.repeat(2))), None);
    }

    #[test]
    fn a_loop_that_counts_up_is_found_with_a_higher_bar() {
        let line = |n: usize| format!("- Called read_file (call_{n}) on src/lib.rs\n");
        let near: String = (10..40).map(line).collect();
        let text = format!("## Progress\n{near}");
        let found = find_loop(&text).expect("a near loop");
        assert_eq!(found.period, line(10).len());
        assert!(
            text[..found.keep].starts_with("## Progress\n- Called read_file (call_10)"),
            "{}",
            &text[..found.keep]
        );
        assert!(text[..found.keep].len() <= "## Progress\n".len() + line(10).len());
        // Five rows of a table of figures, 500 bytes: under the bar.
        let row = |n: usize| format!("| bench_{n} | {n}{n}.{n} ms | {n}.{n}x | ok |{}\n", " ".repeat(60));
        let table: String = (1..6).map(row).collect();
        assert!(table.len() < MIN_NEAR_LOOP_BYTES);
        assert_eq!(find_loop(&format!("## Figures\n{table}")), None);
    }

    #[test]
    fn ordinary_summaries_and_short_repeats_are_not_loops() {
        let summary = "## Goal\nThe user wants the config parser to accept trailing commas.\n\
                       ## Progress\n- [x] Reproduced the failure\n- [ ] Fix the parser\n\
                       ## Files\n- src/config.rs (edited)\n- tests/config.rs (read)\n"
            .repeat(2);
        assert_eq!(find_loop(&summary), None, "one repeat of a whole summary is not a loop");
        let ruler = format!("Table:\n|{}|\n", "-".repeat(200));
        assert_eq!(find_loop(&ruler), None);
        assert_eq!(find_loop(&"ab".repeat(100)), None, "under 256 bytes");
        assert!(find_loop(&"ab".repeat(128)).is_some());
    }

    #[test]
    fn the_guard_checks_in_steps() {
        let mut guard = Guard::default();
        let mut text = String::from("Summary: ");
        let mut found = None;
        for _ in 0..200 {
            text.push_str("loop ");
            if let Some(l) = guard.check(&text) {
                found = Some(l);
                break;
            }
        }
        let found = found.expect("found while streaming");
        assert_eq!(&text[..found.keep], "Summary: loop");
        assert!(
            text.len() < 256 + 2 * CHECK_EVERY,
            "found soon after the loop is long enough: {}",
            text.len()
        );
    }
}
