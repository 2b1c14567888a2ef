//! The binary's exit codes (the table in cli/mod.rs's docs), and the code
//! of a verdict. 1 and 2 follow Jepsen (invalid, unknown).

use crate::checker::Verdict;

pub const EXIT_VALID: u8 = 0;
pub const EXIT_INVALID: u8 = 1;
pub const EXIT_UNKNOWN: u8 = 2;
pub const EXIT_USAGE: u8 = 3;
pub const EXIT_HARNESS_ERROR: u8 = 4;

/// The exit code of a verdict.
pub fn exit_code(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Valid => EXIT_VALID,
        Verdict::Invalid => EXIT_INVALID,
        // A run's verdict is never not-applicable (checker::check folds it).
        Verdict::Unknown | Verdict::NotApplicable => EXIT_UNKNOWN,
    }
}
