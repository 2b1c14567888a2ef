//! The group coordinator's settings, with Kafka's names and defaults.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Field names and units match the broker's `group_*` settings, so building
/// one from `BrokerConfig` is a field-by-field copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`: a JoinGroup asking for less is refused
    /// INVALID_SESSION_TIMEOUT.
    pub min_session_timeout_ms: u64,
    /// `group.max.session.timeout.ms`: a JoinGroup asking for more is refused
    /// INVALID_SESSION_TIMEOUT.
    pub max_session_timeout_ms: u64,
    /// `group.initial.rebalance.delay.ms` (KIP-134): how long the first
    /// rebalance of an empty group waits for more members, extended by this
    /// much again while members keep arriving, up to the rebalance timeout.
    pub initial_rebalance_delay_ms: u64,
    /// How long a member that joined without an id may stay parked in its first
    /// JoinGroup before it is dropped (KAFKA-7610). Kafka fixes it at five
    /// minutes (`GroupCoordinator.NewMemberJoinTimeoutMs`); it is a setting here
    /// only so that tests can shorten it.
    pub new_member_join_timeout_ms: u64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            new_member_join_timeout_ms: 300_000,
        }
    }
}

impl GroupConfig {
    pub(super) fn initial_rebalance_delay(&self) -> Duration {
        capped(self.initial_rebalance_delay_ms)
    }

    pub(super) fn new_member_join_timeout(&self) -> Duration {
        capped(self.new_member_join_timeout_ms)
    }

    /// A negative session timeout is below any minimum.
    pub(super) fn session_timeout_allowed(&self, session_timeout_ms: i32) -> bool {
        u64::try_from(session_timeout_ms).is_ok_and(|ms| {
            (self.min_session_timeout_ms..=self.max_session_timeout_ms).contains(&ms)
        })
    }
}

/// A setting as a duration no longer than any timeout the wire can carry
/// (`INT32` milliseconds, about 24.8 days), so that adding it to an instant
/// cannot overflow.
fn capped(ms: u64) -> Duration {
    Duration::from_millis(ms.min(i32::MAX as u64))
}

/// A timeout from the wire (`INT32` milliseconds); Kafka does not reject a
/// negative rebalance timeout, it just expires at once, which zero does too.
pub(super) fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas_and_survive_toml() {
        let config = GroupConfig::default();
        assert_eq!(config.min_session_timeout_ms, 6_000);
        assert_eq!(config.max_session_timeout_ms, 1_800_000);
        assert_eq!(config.initial_rebalance_delay_ms, 3_000);
        let text = toml::to_string(&config).unwrap();
        assert_eq!(toml::from_str::<GroupConfig>(&text).unwrap(), config);
        let partial: GroupConfig = toml::from_str("initial_rebalance_delay_ms = 0").unwrap();
        assert_eq!(partial.initial_rebalance_delay_ms, 0);
        assert_eq!(partial.min_session_timeout_ms, 6_000);
        assert!(toml::from_str::<GroupConfig>("session_ms = 1").is_err());
    }

    #[test]
    fn session_timeout_bounds_are_inclusive() {
        let config = GroupConfig::default();
        assert!(!config.session_timeout_allowed(5_999));
        assert!(config.session_timeout_allowed(6_000));
        assert!(config.session_timeout_allowed(1_800_000));
        assert!(!config.session_timeout_allowed(1_800_001));
        let zero = GroupConfig {
            min_session_timeout_ms: 0,
            ..config
        };
        assert!(zero.session_timeout_allowed(0));
        assert!(!zero.session_timeout_allowed(-1));
        assert_eq!(millis(-5), Duration::ZERO);
        let huge = GroupConfig {
            initial_rebalance_delay_ms: u64::MAX,
            ..config
        };
        assert_eq!(huge.initial_rebalance_delay(), millis(i32::MAX));
    }
}
