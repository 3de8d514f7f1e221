//! Small text formatting helpers: thousands separators, UTC timestamps, one-line previews.

/// `n` with commas between thousands: `91234` → `91,234`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM` UTC.
pub fn utc_minutes(ms: i64) -> String {
    phosphor_base::time::UtcMinute::from_unix_ms(ms).to_string()
}

/// The first line of `text`, at most `max` characters, with `…` when anything was left out.
pub fn preview(text: &str, max: usize) -> String {
    let trimmed = text.trim();
    let line = trimmed.lines().next().unwrap_or("");
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None if line.len() < trimmed.len() => format!("{line}…"),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn thousands_groups_digits() {
        for (n, expected) in
            [(0, "0"), (999, "999"), (1000, "1,000"), (91_234, "91,234"), (1_047_576, "1,047,576")]
        {
            assert_eq!(thousands(n), expected);
        }
    }

    #[test]
    fn utc_minutes_formats_civil_time() {
        assert_eq!(utc_minutes(0), "1970-01-01 00:00");
        assert_eq!(utc_minutes(1_709_210_096_000), "2024-02-29 12:34");
    }

    #[test]
    fn preview_takes_the_first_line() {
        assert_eq!(preview("  hello\nworld", 20), "hello…");
        assert_eq!(preview("abcdef", 3), "abc…");
        assert_eq!(preview("abc", 3), "abc");
    }
}
