//! One line of the trail: a value kept on one line, cut at a length.

/// Characters kept of one command, error line, plan item or path.
const MAX_LINE_CHARS: usize = 200;
/// What stands for a line break in a trail line (a multi-line command is kept on one line).
pub(crate) const LINE_BREAK: &str = " ⏎ ";

/// `text` on one line, cut to [`MAX_LINE_CHARS`] characters with `…`.
pub(super) fn clip(text: &str) -> String {
    let one_line = text.trim().replace('\n', LINE_BREAK);
    match one_line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}
