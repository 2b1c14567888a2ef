//! Where in a TOML text a `toml` error is: its line (1-based) and the key it
//! is at, so every file a person writes (a schedule, a system) fails with
//! `file:line: key `k`: message` rather than a byte offset.

/// A `toml` error placed in its source text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TomlErrorAt {
    pub line: usize,
    /// The key the error is at, when toml's span points at one.
    pub key: Option<String>,
    pub message: String,
}

impl TomlErrorAt {
    pub(crate) fn of(src: &str, err: &toml::de::Error) -> TomlErrorAt {
        let span = err.span().unwrap_or(0..0);
        TomlErrorAt {
            line: line_of_offset(src, span.start),
            key: key_at(src, span),
            message: err.message().trim().to_owned(),
        }
    }
}

pub(crate) fn line_of_offset(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// The key an error span is at: the span itself when it covers a bare key (an
/// unknown field), else the key before the nearest `=` left of it on the line.
fn key_at(src: &str, span: std::ops::Range<usize>) -> Option<String> {
    let text = src.get(span.clone())?.trim();
    let is_key = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    // A number (`3`, `-1`) is a value, never the key it is the value of.
    let number = text
        .trim_start_matches(['-', '+'])
        .bytes()
        .all(|b| b.is_ascii_digit());
    if is_key(text) && !number {
        return Some(text.to_owned());
    }
    let line_start = src[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let before = &src[line_start..span.start];
    let eq = before.rfind('=')?;
    // Only when the span follows that `=` directly (an inline table may open in
    // between) is it that key's value; inside an array the line's first key is
    // the one to name.
    let direct = before[eq + 1..]
        .bytes()
        .all(|b| b.is_ascii_whitespace() || b == b'{' || b == b'[');
    let eq = if direct { eq } else { before.find('=')? };
    let key = before[..eq]
        .trim_end()
        .rsplit(|c: char| c.is_whitespace() || c == '{' || c == ',')
        .next()?;
    is_key(key).then(|| key.to_owned())
}

/// The first line that assigns `key` or opens a table ending in it.
pub(crate) fn key_line(src: &str, key: &str) -> Option<usize> {
    src.lines()
        .position(|l| {
            let l = l.trim();
            // `key = ..` at the line's start or inside an inline table.
            let assigned = l.match_indices(key).any(|(i, _)| {
                let before = l[..i].trim_end();
                (before.is_empty() || before.ends_with('{') || before.ends_with(','))
                    && l[i + key.len()..].trim_start().starts_with('=')
            });
            assigned
                || (l.starts_with('[') && l.trim_end_matches(']').ends_with(&format!(".{key}")))
        })
        .map(|i| i + 1)
}
