//! `epochal anomalies`: every anomaly kind a checker can name.

use std::io::Write;

use super::exit::EXIT_VALID;

/// `epochal anomalies`: the table of `checker::Anomaly` (the names suites'
/// `anomaly = "..."` take), as Markdown; always 0.
pub fn anomalies(out: &mut impl Write) -> u8 {
    let _ = out.write_all(crate::checker::anomaly::table().as_bytes());
    EXIT_VALID
}
