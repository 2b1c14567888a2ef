//! A duration as a person types one: `120s`, `2m`, `1500ms`, or bare seconds.
//! The one parser of that form, shared by `campaign --duration` (cli/) and a
//! suite's `[[campaign]] duration` (gate/suite.rs), so both read it alike.

use std::time::Duration;

/// A duration that is not a number with `ms`, `s`, `m` or no unit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a duration like 120s, 2m or 1500ms")]
pub struct DurationError {
    /// As given, trimmed.
    pub text: String,
}

/// `120s`, `2m`, `1500ms`, or bare seconds.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    let bad = || DurationError { text: s.to_owned() };
    let (number, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| (&s[..i], &s[i..]));
    let n: u64 = number.parse().map_err(|_| bad())?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap prints this after `error: invalid value ... for '--duration'`,
    /// and a suite's load error carries it.
    #[test]
    fn a_duration_has_a_unit_or_is_seconds() {
        assert_eq!(parse_duration(" 90s ").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(
            parse_duration("1500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert_eq!(
            parse_duration(" 5h ").unwrap_err().to_string(),
            r#""5h" is not a duration like 120s, 2m or 1500ms"#
        );
    }
}
