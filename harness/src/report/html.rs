//! The few pieces of HTML and SVG writing every part of the report shares:
//! escaping, and a time axis that maps the history's clock onto pixels.

use std::fmt::Write;

/// Text made safe inside an element or a double-quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON made safe inside a `<script type="application/json">` element: the
/// only sequence that could end the element early is `</`, and `<!--` could
/// open a comment state, so every `<` is written as its JSON escape.
pub fn script_json(value: &serde_json::Value) -> String {
    value.to_string().replace('<', "\\u003c")
}

/// The id of an op's element and link target: `op-12`.
pub fn op_anchor(index: u64) -> String {
    format!("op-{index}")
}

/// The id of a final-log row: `log-t-0-17`.
pub fn log_anchor(partition: &str, offset: i64) -> String {
    format!(
        "log-{}-{offset}",
        partition.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
    )
}

/// The run's time on the horizontal axis: from 0 to `end_ns` of the
/// history's clock across `width` pixels, after a left margin for lane
/// labels.
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    pub end_ns: u64,
    pub left: f64,
    pub width: f64,
}

impl Axis {
    pub const LABELS: f64 = 150.0;
    pub const WIDTH: f64 = 1100.0;

    pub fn new(end_ns: u64) -> Axis {
        Axis {
            end_ns: end_ns.max(1),
            left: Self::LABELS,
            width: Self::WIDTH,
        }
    }

    /// The x of a time, clamped to the axis.
    pub fn x(&self, time_ns: u64) -> f64 {
        self.left + self.width * (time_ns.min(self.end_ns) as f64 / self.end_ns as f64)
    }

    /// Tick marks and their labels in seconds along `y`, with vertical grid
    /// lines down to `bottom`.
    pub fn ticks(&self, y: f64, bottom: f64, out: &mut String) {
        let seconds = self.end_ns as f64 / 1e9;
        let step = nice_step(seconds / 8.0);
        let mut t = 0.0;
        while t <= seconds + 1e-9 {
            let x = self.left + self.width * (t / seconds.max(1e-9));
            let _ = write!(
                out,
                r#"<line class="grid" x1="{x:.1}" y1="{y:.1}" x2="{x:.1}" y2="{bottom:.1}"/><text class="tick" x="{x:.1}" y="{:.1}">{}s</text>"#,
                y - 3.0,
                trim_float(t)
            );
            t += step;
        }
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * magnitude >= raw {
            return m * magnitude;
        }
    }
    10.0 * magnitude
}

/// `1.5`, `2`, `0.25`: a tick label without trailing zeros.
fn trim_float(t: f64) -> String {
    let text = format!("{t:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// As much of `label` as fits in `width` pixels (about 6.5 px a character).
pub fn fit(label: &str, width: f64) -> String {
    let room = ((width - 4.0) / 6.5).floor().max(0.0) as usize;
    if label.chars().count() <= room {
        label.to_owned()
    } else {
        label.chars().take(room).collect()
    }
}

/// `1.234 s` or `85 ms` or `420 µs`: a duration a person reads at once.
pub fn duration(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.3} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{} µs", ns / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_every_character_that_could_leave_text_or_an_attribute() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn script_json_cannot_close_its_script_element() {
        let text = script_json(&serde_json::json!({"v": "</script><!--"}));
        assert!(!text.contains("</"), "{text}");
        assert!(!text.contains("<!--"), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["v"], "</script><!--");
    }

    #[test]
    fn labels_fit_their_width() {
        assert_eq!(fit("b1@0 isr [b1,b2]", 1000.0), "b1@0 isr [b1,b2]");
        assert_eq!(fit("b1@0 isr [b1,b2]", 30.0), "b1@0");
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(1.2), 2.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(trim_float(2.5), "2.5");
        assert_eq!(trim_float(3.0), "3");
    }
}
