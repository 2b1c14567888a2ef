//! How a setting's value goes from what a flag or the file gave to what the
//! broker reads, and back. A codec is one way of doing that (a count with its
//! row's minimum, an address to bind, a list of peers…); each entry of the
//! settings table names its codec, and the codec takes the default, the
//! minimum and the allowed names from the entry's row, never from its own
//! constants. A codec checks one setting alone: which of several bad settings
//! is reported is [`FirstFailure`]'s business.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use clap::ValueEnum;

use super::{ConfigError, Setting, SettingDefault, SettingKind, invalid, split_host_port};

/// What a flag or the file gave for one setting: nothing, or a value (for a
/// repeatable flag, values).
pub trait Given: Sized {
    /// Nothing given: the key is left out of a printed config file.
    fn is_unset(&self) -> bool;
    /// This (a flag's) if given, else `file` (the file's).
    fn over(self, file: Self) -> Self;
}

impl<T> Given for Option<T> {
    fn is_unset(&self) -> bool {
        self.is_none()
    }
    fn over(self, file: Self) -> Self {
        self.or(file)
    }
}

/// Repeated flags replace the file's list whole, never extend it.
impl<T> Given for Vec<T> {
    fn is_unset(&self) -> bool {
        self.is_empty()
    }
    fn over(self, file: Self) -> Self {
        if self.is_empty() { file } else { self }
    }
}

/// Between what was given (`G`) and what the broker reads (`V`) for a setting.
pub(super) trait Codec<G, V> {
    /// The value: the given one checked, or the row's default.
    fn resolve(setting: &Setting, given: G) -> Result<V, ConfigError>;
    /// `value` as given, so that resolving it again gives `value`.
    fn print(setting: &Setting, value: &V) -> G;
}

/// A whole number at least the row's minimum ([`SettingKind::Count`]), else
/// the row's default; a row whose default is `Required` has none.
pub(super) struct Count;

impl<T> Codec<Option<T>, T> for Count
where
    T: Copy + TryFrom<u64> + TryInto<u64>,
{
    /// The message for a minimum of 0 reads as a sign check, since only a
    /// signed field can fail it.
    fn resolve(setting: &Setting, given: Option<T>) -> Result<T, ConfigError> {
        let SettingKind::Count { min } = setting.kind else {
            unreachable!("setting {} is not a count", setting.name)
        };
        let value = match (given, setting.default) {
            (Some(value), _) => value,
            (None, SettingDefault::Count(default)) => T::try_from(default)
                .unwrap_or_else(|_| unreachable!("the default of {} fits its type", setting.name)),
            (None, _) => return Err(ConfigError::Missing(setting.name)),
        };
        match value.try_into() {
            Ok(n) if n >= min => Ok(value),
            _ if min == 0 => Err(invalid(setting.name, "must be >= 0")),
            _ => Err(invalid(setting.name, format!("must be at least {min}"))),
        }
    }

    /// A default TOML integers (i64) cannot hold, such as `flush_messages`'
    /// "never" (`u64::MAX`), is left out: reading the file back gives it again.
    fn print(setting: &Setting, value: &T) -> Option<T> {
        match setting.default {
            SettingDefault::Count(default)
                if default > i64::MAX as u64 && (*value).try_into().ok() == Some(default) =>
            {
                None
            }
            _ => Some(*value),
        }
    }
}

/// `true` or `false`, else the row's default.
pub(super) struct Switch;

impl Codec<Option<bool>, bool> for Switch {
    fn resolve(setting: &Setting, given: Option<bool>) -> Result<bool, ConfigError> {
        let SettingDefault::Bool(default) = setting.default else {
            unreachable!("setting {} has no boolean default", setting.name)
        };
        Ok(given.unwrap_or(default))
    }

    fn print(_: &Setting, value: &bool) -> Option<bool> {
        Some(*value)
    }
}

/// One of an enum's names (clap parsed it), else the row's default name.
pub(super) struct Choice;

impl<E: ValueEnum + Copy> Codec<Option<E>, E> for Choice {
    fn resolve(setting: &Setting, given: Option<E>) -> Result<E, ConfigError> {
        Ok(given.unwrap_or_else(|| {
            E::from_str(setting.default_text(), false).unwrap_or_else(|e| {
                unreachable!("the default of {} is one of its values: {e}", setting.name)
            })
        }))
    }

    fn print(_: &Setting, value: &E) -> Option<E> {
        Some(*value)
    }
}

/// An `IP:PORT` to bind, else the row's default.
pub(super) struct BindAddress;

impl Codec<Option<String>, String> for BindAddress {
    fn resolve(setting: &Setting, given: Option<String>) -> Result<String, ConfigError> {
        let addr = given.unwrap_or_else(|| setting.default_text().to_string());
        addr.parse::<SocketAddr>()
            .map_err(|e| invalid(setting.name, format!("{addr:?}: {e}")))?;
        Ok(addr)
    }

    fn print(_: &Setting, value: &String) -> Option<String> {
        Some(value.clone())
    }
}

/// A `HOST:PORT` another process dials (the host may be a name), or nothing.
pub(super) struct HostPort;

impl Codec<Option<String>, Option<String>> for HostPort {
    fn resolve(setting: &Setting, given: Option<String>) -> Result<Option<String>, ConfigError> {
        if let Some(addr) = &given {
            split_host_port(addr)
                .ok_or_else(|| invalid(setting.name, format!("{addr:?} is not HOST:PORT")))?;
        }
        Ok(given)
    }

    fn print(_: &Setting, value: &Option<String>) -> Option<String> {
        value.clone()
    }
}

/// Any value, but one must be given.
pub(super) struct Required;

impl<T: Clone> Codec<Option<T>, T> for Required {
    fn resolve(setting: &Setting, given: Option<T>) -> Result<T, ConfigError> {
        given.ok_or(ConfigError::Missing(setting.name))
    }

    fn print(_: &Setting, value: &T) -> Option<T> {
        Some(value.clone())
    }
}

/// URLs, comma-separated (blanks dropped); at least one is required.
pub(super) struct Endpoints;

impl Codec<Option<String>, Vec<String>> for Endpoints {
    fn resolve(setting: &Setting, given: Option<String>) -> Result<Vec<String>, ConfigError> {
        let endpoints: Vec<String> = given
            .ok_or(ConfigError::Missing(setting.name))?
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if endpoints.is_empty() {
            return Err(invalid(setting.name, "no endpoint given"));
        }
        Ok(endpoints)
    }

    fn print(_: &Setting, value: &Vec<String>) -> Option<String> {
        Some(value.join(","))
    }
}

/// `ID=HOST:PORT`, repeatable: broker id → the address to reach it at.
pub(super) struct Peers;

/// Broker id → `HOST:PORT`.
type PeerAddresses = BTreeMap<i32, String>;

impl Codec<Vec<String>, PeerAddresses> for Peers {
    /// A bad one is named by its flag (`peer`), not its key: the name it
    /// has always been refused under.
    fn resolve(setting: &Setting, given: Vec<String>) -> Result<PeerAddresses, ConfigError> {
        let key = setting.long();
        let mut peers = BTreeMap::new();
        for p in &given {
            let (id, addr) = p
                .split_once('=')
                .ok_or_else(|| invalid(key, format!("{p:?} is not ID=HOST:PORT")))?;
            let id: i32 = id
                .parse()
                .map_err(|_| invalid(key, format!("{p:?}: bad broker id")))?;
            split_host_port(addr).ok_or_else(|| invalid(key, format!("{p:?}: bad address")))?;
            peers.insert(id, addr.to_string());
        }
        Ok(peers)
    }

    fn print(_: &Setting, value: &BTreeMap<i32, String>) -> Vec<String> {
        value
            .iter()
            .map(|(id, addr)| format!("{id}={addr}"))
            .collect()
    }
}

/// Where a setting is checked, for [`FirstFailure`]:
/// of several bad values the broker names the one checked first. These were
/// checked in this order before the table existed, so they keep it (what a
/// launcher reads for a bad command line stays the same); any other setting is
/// checked after them, in table order.
const CHECKED_FIRST: &[&str] = &[
    "node_id",
    "listen",
    "advertised",
    "data_dir",
    "etcd",
    "peers",
    "lease_ttl_s",
    "min_insync_replicas",
    "flush_messages",
    "hw_checkpoint_interval_ms",
    "replica_lag_time_max_ms",
];

/// `setting`'s place in the check order: its place in [`CHECKED_FIRST`],
/// else after all of those, by its place in `table` (the settings table,
/// `SETTINGS`).
pub(super) fn check_rank(setting: &Setting, table: &[Setting]) -> usize {
    let listed = CHECKED_FIRST.iter().position(|name| *name == setting.name);
    listed.unwrap_or_else(|| {
        let in_table = table.iter().position(|s| s.name == setting.name);
        CHECKED_FIRST.len() + in_table.expect("every setting is a row of the table")
    })
}

/// The error to report when several settings are bad: the one of lowest
/// check rank, so one bad value is always named the same way whatever else
/// is wrong (see [`check_rank`]).
#[derive(Default)]
pub(super) struct FirstFailure(Option<(usize, ConfigError)>);

impl FirstFailure {
    /// The value, or `None` with its error kept if it ranks before any kept.
    pub(super) fn keep<T>(&mut self, rank: usize, result: Result<T, ConfigError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(e) => {
                if self.0.as_ref().is_none_or(|(kept, _)| rank < *kept) {
                    self.0 = Some((rank, e));
                }
                None
            }
        }
    }

    /// The error kept; called only once some setting failed.
    pub(super) fn into_error(self) -> ConfigError {
        match self.0 {
            Some((_, e)) => e,
            None => unreachable!("a setting failed without an error"),
        }
    }
}
