//! The history's clock against the others a run's files are stamped with.
//!
//! Each op's `time_ns` counts from the moment the history opened on the
//! monotonic clock (`Instant`, which is `CLOCK_MONOTONIC` on Linux). The
//! proxy stamps what it records with the same clock, and the brokers' logs
//! carry wall-clock times. One pair of readings taken together when the
//! history opens maps both onto it: the wall clock can be stepped while a
//! run goes on (on this project's VMs a run's wall clock moved 7.5 s ahead
//! of the monotonic clock in 15 s), the monotonic clock cannot.

use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock and the monotonic clock read at one moment, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockPair {
    /// Since the Unix epoch.
    pub unix_ns: u64,
    /// `CLOCK_MONOTONIC`: the same for every process on the machine.
    pub monotonic_ns: u64,
}

impl ClockPair {
    /// Both clocks, now. The wall clock's reading is cut to whole
    /// milliseconds, the precision `clock.json` has always given it
    /// (`history_opened_unix_ms`), so a time placed through the pair and an
    /// op's time counted from that millisecond agree to the nanosecond.
    pub fn now() -> ClockPair {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        ClockPair {
            monotonic_ns: monotonic_now_ns(),
            unix_ns: unix_ms * 1_000_000,
        }
    }

    /// A monotonic reading placed on this pair's wall clock: the wall-clock
    /// time it would have had had the wall clock not moved since the pair
    /// was read.
    pub fn wall_ns_of(&self, monotonic_ns: u64) -> u64 {
        let offset = i128::from(monotonic_ns) - i128::from(self.monotonic_ns);
        u64::try_from((i128::from(self.unix_ns) + offset).max(0)).unwrap_or(u64::MAX)
    }
}

/// `CLOCK_MONOTONIC` in ns.
pub fn monotonic_now_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        (t.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec() as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monotonic_reading_lands_on_the_pairs_wall_clock() {
        let pair = ClockPair {
            unix_ns: 1_000_000,
            monotonic_ns: 500,
        };
        assert_eq!(pair.wall_ns_of(500), 1_000_000);
        assert_eq!(pair.wall_ns_of(1_500), 1_001_000);
        assert_eq!(pair.wall_ns_of(0), 999_500);
    }

    #[test]
    fn now_reads_the_clock_instant_reads() {
        let before = monotonic_now_ns();
        let instant = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let elapsed = instant.elapsed().as_nanos() as u64;
        let after = monotonic_now_ns();
        // The same clock: what both saw pass agrees to well within the
        // sleep, where a clock of another kind could differ by seconds.
        let measured = after - before;
        assert!(
            measured >= elapsed && measured - elapsed < 5_000_000,
            "{measured} {elapsed}"
        );
    }
}
