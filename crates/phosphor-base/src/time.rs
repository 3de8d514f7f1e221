//! UTC calendar dates from Unix milliseconds, without a clock or a time-zone database.

/// A UTC date and time to the minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcMinute {
    /// The year.
    pub year: i64,
    /// The month, 1 to 12.
    pub month: u32,
    /// The day of the month, 1 to 31.
    pub day: u32,
    /// The hour, 0 to 23.
    pub hour: u32,
    /// The minute, 0 to 59.
    pub minute: u32,
}

impl UtcMinute {
    /// The UTC date and time of `ms` Unix milliseconds (civil-from-days, Howard Hinnant's algorithm).
    pub fn from_unix_ms(ms: i64) -> UtcMinute {
        let secs = ms.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let of_day = secs.rem_euclid(86_400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        UtcMinute {
            year,
            month: month as u32,
            day: day as u32,
            hour: (of_day / 3600) as u32,
            minute: (of_day % 3600 / 60) as u32,
        }
    }

    /// `YYYY-MM-DD`.
    pub fn date(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl std::fmt::Display for UtcMinute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:02}:{:02}", self.date(), self.hour, self.minute)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        for (ms, expected) in [
            (0, "1970-01-01 00:00"),
            (951_782_400_000, "2000-02-29 00:00"),
            (1_796_206_815_000, "2026-12-02 10:20"),
            (-86_400_000, "1969-12-31 00:00"),
        ] {
            assert_eq!(UtcMinute::from_unix_ms(ms).to_string(), expected, "{ms}");
        }
    }
}
