//! How `epochal up`'s closing summary keeps to a terminal's size whatever the
//! application wrote: a list shows its first [`LIST_SHOWN`] items and counts
//! the rest, a value shows its first [`VALUE_SHOWN`] characters, a line its
//! first [`LINE_SHOWN`], and a character that would move the cursor or turn
//! the text around (a newline, an escape, a bidirectional override) is
//! written as an escape (`\n`, `\u{1b}`). Only the printing is cut:
//! `results.json` keeps every piece of evidence the checkers gave, whole.

use std::fmt::Display;

use serde_json::Value;

use crate::checker::Evidence;

/// Items of one list the summary shows; the rest are counted.
pub const LIST_SHOWN: usize = 10;
/// Characters of one record value the summary shows.
pub const VALUE_SHOWN: usize = 32;
/// Characters of one line of a checker's (a message, an anomaly's summary).
pub const LINE_SHOWN: usize = 400;
/// What a cut text ends with.
const CUT: &str = "…";

/// `c` as the summary writes it: itself, or an escape when it is a control
/// character or one that changes how the text around it reads.
fn escape(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_control() || invisible(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        c => out.push(c),
    }
}

/// Zero-width characters, bidirectional controls and the byte-order mark.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}'
    )
}

/// `text` escaped, whole.
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        escape(c, &mut out);
    }
    out
}

/// `text` escaped and cut to its first `max` characters (an escape is never
/// split), ending with `…` when cut.
pub fn cut(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut shown = 0;
    let mut one = String::new();
    for c in text.chars() {
        one.clear();
        escape(c, &mut one);
        let width = one.chars().count();
        if shown + width > max {
            out.push_str(CUT);
            return out;
        }
        shown += width;
        out.push_str(&one);
    }
    out
}

/// A record value as the summary shows it.
pub fn value(text: &str) -> String {
    cut(text, VALUE_SHOWN)
}

/// The first [`LIST_SHOWN`] of `items` joined by `separator`, then `and N
/// more` for the rest.
pub fn listed<T: Display>(items: &[T], separator: &str) -> String {
    let shown: Vec<String> = items
        .iter()
        .take(LIST_SHOWN)
        .map(ToString::to_string)
        .collect();
    let mut line = shown.join(separator);
    if let Some(more) = more(items.len()) {
        line.push_str(separator);
        line.push_str(&more);
    }
    line
}

/// `and N more` when `total` items leave some unshown.
pub fn more(total: usize) -> Option<String> {
    (total > LIST_SHOWN).then(|| format!("and {} more", total - LIST_SHOWN))
}

/// One line of a checker's (a message, a count's name), escaped and cut.
pub fn line(text: &str) -> String {
    cut(text, LINE_SHOWN)
}

/// One piece of evidence as `anomaly: summary`: every value its details
/// name that is long or holds characters to escape is cut wherever the
/// summary quotes it, and the line is cut to [`LINE_SHOWN`].
pub fn evidence(evidence: &Evidence) -> String {
    let mut named = Vec::new();
    values(&evidence.details.json(), false, &mut named);
    named.sort_by_key(|v| std::cmp::Reverse(v.len()));
    named.dedup();
    let mut summary = evidence.summary.clone();
    for v in named {
        let shown = value(&v);
        if shown != v && !v.is_empty() {
            summary = summary.replace(&v, &shown);
        }
    }
    line(&format!("{}: {summary}", evidence.anomaly))
}

/// The record values `json` (an anomaly's details) names: strings under a
/// key that names a value (`value`, `values`, `then_value`, `skipped`), a
/// non-UTF-8 one (`{"base16": "…"}`) as the summary writes it, `0x…`.
fn values(json: &Value, under_value: bool, out: &mut Vec<String>) {
    match json {
        Value::String(s) if under_value => out.push(s.clone()),
        Value::Array(items) => {
            for item in items {
                values(item, under_value, out);
            }
        }
        Value::Object(map) if under_value && map.len() == 1 && map.contains_key("base16") => {
            if let Some(Value::String(hex)) = map.get("base16") {
                out.push(format!("0x{hex}"));
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let named = under_value || key.contains("value") || key == "skipped";
                values(item, named, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Anomaly;
    use crate::checker::evidence::Duplicate;
    use crate::topic_partition::PartitionRef;

    #[test]
    fn a_value_is_escaped_and_cut_without_splitting_an_escape() {
        assert_eq!(value("short"), "short");
        assert_eq!(
            escaped("a\nb\u{1b}[31m\u{202e}"),
            "a\\nb\\u{1b}[31m\\u{202e}"
        );
        let long = "x".repeat(1000);
        assert_eq!(value(&long), format!("{}…", "x".repeat(VALUE_SHOWN)));
        // 30 characters, then an escape of 6 that would pass 32: cut before it.
        let text = format!("{}\u{1b}tail", "y".repeat(30));
        assert_eq!(value(&text), format!("{}…", "y".repeat(30)));
        assert_eq!(value("grüße 😀"), "grüße 😀");
    }

    #[test]
    fn a_list_shows_ten_and_counts_the_rest() {
        let items: Vec<u32> = (1..=25).collect();
        assert_eq!(
            listed(&items, ", "),
            "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, and 15 more"
        );
        assert_eq!(listed(&items[..3], " "), "1 2 3");
        assert_eq!(more(10), None);
    }

    #[test]
    fn evidence_cuts_the_values_its_details_name_and_the_line() {
        let v = format!("librdkafka-test\n{}", "v".repeat(5000));
        let e = Evidence::new(
            Anomaly::Duplicate,
            format!("value {v} is at offsets [3, 9] of t-0 (b1)"),
            Duplicate {
                log: "b1".into(),
                offsets: vec![3, 9],
                partition: PartitionRef::new("t", 0),
                value: v.clone(),
            },
        );
        let shown = evidence(&e);
        let cut_value = format!("librdkafka-test\\n{}…", "v".repeat(VALUE_SHOWN - 17));
        assert_eq!(
            shown,
            format!("duplicate: value {cut_value} is at offsets [3, 9] of t-0 (b1)")
        );
        // A summary long for other reasons is cut at the line's bound.
        let offsets: Vec<i64> = (0..5000).collect();
        let e = Evidence::new(
            Anomaly::Duplicate,
            format!("value 7 is at offsets {offsets:?} of t-0 (b1)"),
            Duplicate {
                log: "b1".into(),
                offsets,
                partition: PartitionRef::new("t", 0),
                value: "7".into(),
            },
        );
        let shown = evidence(&e);
        assert_eq!(shown.chars().count(), LINE_SHOWN + 1, "{shown}");
        assert!(shown.ends_with('…'));
    }
}
