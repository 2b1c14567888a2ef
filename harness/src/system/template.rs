//! A system file's command-line template: text with `{name}` placeholders
//! (`{{` and `}}` for literal braces), parsed once at load so an unknown name
//! fails with the file's line, not when a broker starts.

use std::fmt;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Placeholder(String),
}

/// A parsed template (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

/// Why a template's text is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("`{text}`: an unclosed `{{` (write `{{{{` for a literal brace)")]
    Unclosed { text: String },
    #[error("`{text}`: a lone `}}` (write `}}}}` for a literal brace)")]
    LoneClose { text: String },
    #[error("`{text}`: an empty placeholder `{{}}`")]
    Empty { text: String },
}

impl Template {
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => {
                    return Err(TemplateError::LoneClose { text: text.into() });
                }
                '{' => {
                    let mut name = String::new();
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        name.push(c);
                    }
                    if !closed {
                        return Err(TemplateError::Unclosed { text: text.into() });
                    }
                    if name.is_empty() {
                        return Err(TemplateError::Empty { text: text.into() });
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Placeholder(name));
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template { parts })
    }

    /// The placeholders' names, in order.
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Placeholder(name) => Some(name.as_str()),
            Part::Text(_) => None,
        })
    }

    /// The text with each placeholder replaced by `value(name)`; `None` for a
    /// name the caller cannot fill is the caller's bug (names are checked at
    /// load against the ones each template may use), so it panics naming it.
    pub fn expand(&self, value: impl Fn(&str) -> Option<String>) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Placeholder(name) => out.push_str(
                    &value(name).unwrap_or_else(|| panic!("no value for placeholder {{{name}}}")),
                ),
            }
        }
        out
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Text(text) => f.write_str(&text.replace('{', "{{").replace('}', "}}"))?,
                Part::Placeholder(name) => write!(f, "{{{name}}}")?,
            }
        }
        Ok(())
    }
}

impl<'de> serde::Deserialize<'de> for Template {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Template::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for Template {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_expand_and_braces_escape() {
        let t = Template::parse("http://{etcd}/{{x}}-{node}").unwrap();
        assert_eq!(t.placeholders().collect::<Vec<_>>(), ["etcd", "node"]);
        let out = t.expand(|name| Some(format!("<{name}>")));
        assert_eq!(out, "http://<etcd>/{x}-<node>");
        assert_eq!(t.to_string(), "http://{etcd}/{{x}}-{node}");
        assert_eq!(Template::parse(&t.to_string()).unwrap(), t);
    }

    #[test]
    fn malformed_templates_say_what_is_wrong() {
        assert!(matches!(
            Template::parse("--x {node"),
            Err(TemplateError::Unclosed { .. })
        ));
        assert!(matches!(
            Template::parse("a}b"),
            Err(TemplateError::LoneClose { .. })
        ));
        assert!(matches!(
            Template::parse("{}"),
            Err(TemplateError::Empty { .. })
        ));
    }
}
