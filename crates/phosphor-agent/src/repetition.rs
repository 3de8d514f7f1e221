//! The repetition guard of summary streams: small models decoding greedily fall into loops
//! (`1.0.0:1.0.0:1.0.0:...`, the same bullet again and again) and would run to the output limit.
//! The guard watches the end of the streamed text for a unit that repeats; the compaction then
//! stops the stream and keeps the text up to the first occurrence of the unit.

/// The longest repeating unit looked for, in bytes (a few lines of text).
const MAX_PERIOD: usize = 512;
/// The repeats must cover at least this many bytes: a ruler of dashes or a short table row
/// repeated a few times is not a loop.
const MIN_LOOP_BYTES: usize = 256;
/// And the unit must occur at least this many times.
const MIN_REPEATS: usize = 3;

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
pub(crate) fn find_loop(text: &str) -> Option<Loop> {
    let bytes = text.as_bytes();
    let len = bytes.len();
    if len < MIN_LOOP_BYTES {
        return None;
    }
    for period in 1..=MAX_PERIOD.min(len / MIN_REPEATS) {
        // How far back from the end every byte equals the byte one period earlier.
        let mut run = 0;
        while run + period < len && bytes[len - 1 - run] == bytes[len - 1 - run - period] {
            run += 1;
        }
        let region = run + period;
        if region >= MIN_LOOP_BYTES && region / period >= MIN_REPEATS {
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
