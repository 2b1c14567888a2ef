//! Flags over the file over defaults: [`ConfigArgs::resolve`] reads the
//! `--config` file (if any), lays the flags over it and checks and defaults
//! every setting (the two passes `declare.rs` makes for the table), and
//! [`BrokerConfig::to_toml`] is the way back, the resolved config as a file
//! that resolves to the same settings.

use std::path::Path;

use super::{BrokerConfig, ConfigArgs, ConfigError};

impl ConfigArgs {
    /// Read the TOML file (if any), lay the flags over it, and check and
    /// default every setting.
    pub fn resolve(self) -> Result<BrokerConfig, ConfigError> {
        let file = match &self.config {
            Some(path) => load_file(path)?,
            None => ConfigArgs::default(),
        };
        self.over(file).validate()
    }
}

impl BrokerConfig {
    /// The resolved settings as a config file: logged at start so a run records
    /// what it used, and readable back through `--config` to the same settings.
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.to_args()).unwrap_or_else(|e| format!("# unprintable config: {e}"))
    }
}

fn load_file(path: &Path) -> Result<ConfigArgs, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| ConfigError::Parse {
        path: path.to_path_buf(),
        source: Box::new(source),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::settings::row;
    use crate::config::{
        DEFAULT_MAX_REQUEST_BYTES, OffsetsCommitAcks, OffsetsLoad, ProducerStateRecovery, SETTINGS,
        SettingKind, Truncation,
    };
    use clap::{Parser, ValueEnum};

    fn args(list: &[&str]) -> ConfigArgs {
        let mut v = vec!["epochal-broker"];
        v.extend_from_slice(list);
        ConfigArgs::try_parse_from(v).unwrap()
    }

    #[test]
    fn flags_override_file_and_defaults_fill_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.toml");
        std::fs::write(
            &file,
            "node_id = 3\ndata_dir = \"/tmp/x\"\netcd = \"http://a:1,http://b:2\"\nlease_ttl_s = 9\n\
             truncation = \"kip-279\"\npeers = [\"2=127.0.0.1:7000\"]\n",
        )
        .unwrap();
        let cfg = args(&[
            "--config",
            file.to_str().unwrap(),
            "--lease-ttl-s",
            "2",
            "--truncation",
            "kip-101",
        ])
        .resolve()
        .unwrap();
        assert_eq!(cfg.node_id, 3);
        assert_eq!(cfg.lease_ttl_s, 2);
        assert_eq!(cfg.etcd, vec!["http://a:1", "http://b:2"]);
        assert_eq!(
            cfg.peers.get(&2).map(String::as_str),
            Some("127.0.0.1:7000")
        );
        assert_eq!(cfg.truncation, Truncation::Kip101);
        assert!(cfg.controller_epoch_fencing);
    }

    #[test]
    fn bool_settings_take_a_value_and_missing_required_keys_are_named() {
        let cfg = resolve_with("--controller-epoch-fencing false --unclean-leader-election true")
            .unwrap();
        assert!(!cfg.controller_epoch_fencing);
        assert!(cfg.unclean_leader_election);
        let err = args(&["--node-id", "1"]).resolve().unwrap_err();
        assert!(matches!(err, ConfigError::Missing("data_dir")), "{err}");
    }

    #[test]
    fn the_printed_config_reads_back_to_the_same_settings() {
        let cfg = args(&[
            "--node-id",
            "2",
            "--data-dir",
            "/d",
            "--etcd",
            "http://e:1,http://f:2",
            "--peer",
            "1=127.0.0.1:9001",
            "--peer",
            "3=127.0.0.1:9003",
            "--truncation",
            "high-watermark",
        ])
        .resolve()
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("printed.toml");
        std::fs::write(&file, cfg.to_toml()).unwrap();
        let back = args(&["--config", file.to_str().unwrap()])
            .resolve()
            .unwrap();
        assert_eq!(back, cfg, "printed:\n{}", cfg.to_toml());
    }

    #[test]
    fn unknown_file_keys_and_zero_ttl_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.toml");
        std::fs::write(&file, "node_id = 1\nbogus = 2\n").unwrap();
        let err = args(&["--config", file.to_str().unwrap()])
            .resolve()
            .unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
        let err = resolve_with("--lease-ttl-s 0").unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    key: "lease_ttl_s",
                    ..
                }
            ),
            "{err}"
        );
    }

    /// The flag parser and the table name the same settings with the same
    /// flags and help, so the table `--list-settings` prints is the one parsed.
    #[test]
    fn every_flag_is_a_row_of_the_settings_table_and_back() {
        use clap::CommandFactory;
        let command = ConfigArgs::command();
        let flags: Vec<(String, String, String)> = command
            .get_arguments()
            .filter(|a| !["list_settings", "help", "version"].contains(&a.get_id().as_str()))
            .map(|a| {
                (
                    a.get_id().to_string(),
                    format!("--{}", a.get_long().unwrap()),
                    a.get_help().map(|h| h.to_string()).unwrap_or_default(),
                )
            })
            .collect();
        let rows: Vec<(String, String, String)> = SETTINGS
            .iter()
            .map(|s| (s.name.into(), s.flag.into(), s.help.into()))
            .collect();
        assert_eq!(flags, rows);
    }

    /// Every row but the flag-only `config` is a key the file accepts and the
    /// printed config carries; and the `truncation` names are the parser's.
    #[test]
    fn the_table_names_the_file_keys_and_the_truncation_values() {
        let cfg = resolve_with("--advertised h:1 --peer 2=h:2 --flush-messages 1").unwrap();
        let printed: toml::Table = toml::from_str(&cfg.to_toml()).unwrap();
        let keys: Vec<&str> = printed.keys().map(String::as_str).collect();
        let mut names: Vec<&str> = SETTINGS
            .iter()
            .map(|s| s.name)
            .filter(|n| *n != "config")
            .collect();
        names.sort_unstable();
        assert_eq!(keys, names);
        assert_eq!(
            row::truncation.kind,
            SettingKind::OneOf(&["high-watermark", "kip-101", "kip-279", "current"])
        );
        for (row, parsed) in [
            (row::truncation, parser_names::<Truncation>()),
            (
                row::producer_state_recovery,
                parser_names::<ProducerStateRecovery>(),
            ),
            (
                row::offsets_commit_acks,
                parser_names::<OffsetsCommitAcks>(),
            ),
            (row::offsets_load, parser_names::<OffsetsLoad>()),
        ] {
            let SettingKind::OneOf(names) = row.kind else {
                unreachable!("{} is not one-of", row.name)
            };
            assert_eq!(parsed, names);
        }
    }

    /// The names clap accepts for `E`'s values.
    fn parser_names<E: ValueEnum>() -> Vec<String> {
        E::value_variants()
            .iter()
            .map(|v| v.to_possible_value().unwrap().get_name().to_string())
            .collect()
    }

    /// The three required settings, then `more` (flags and values split at
    /// spaces), resolved.
    fn resolve_with(more: &str) -> Result<BrokerConfig, ConfigError> {
        let required = ["--node-id", "1", "--data-dir", "/d", "--etcd", "e"];
        let more: Vec<&str> = more.split(' ').filter(|s| !s.is_empty()).collect();
        args(&[&required[..], &more].concat()).resolve()
    }

    /// Of several bad values the error names one, always the same: the first
    /// in the order the broker checked them before the table existed, which
    /// is not the table's order (`value::CHECKED_FIRST`).
    #[test]
    fn of_several_bad_settings_the_one_checked_first_is_named() {
        for (bad, named) in [
            (
                "--flush-messages 0 --min-insync-replicas 0",
                "min_insync_replicas",
            ),
            (
                "--hw-checkpoint-interval-ms 0 --flush-messages 0",
                "flush_messages",
            ),
            (
                "--replica-lag-time-max-ms 0 --hw-checkpoint-interval-ms 0",
                "hw_checkpoint_interval_ms",
            ),
            (
                "--etcd-connect-timeout-ms 0 --replica-lag-time-max-ms 0",
                "replica_lag_time_max_ms",
            ),
            ("--min-insync-replicas 0 --lease-ttl-s 0", "lease_ttl_s"),
            ("--lease-ttl-s 0 --peer x", "peer"),
        ] {
            let err = resolve_with(bad).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { key, .. } if *key == named),
                "{bad}: {err}"
            );
        }
    }

    /// Unset settings take the table's defaults, and a value below a
    /// table minimum is refused naming the setting.
    #[test]
    fn defaults_and_minimums_come_from_the_table() {
        let cfg = resolve_with("").unwrap();
        assert_eq!(cfg.lease_ttl_s, 6);
        assert_eq!(cfg.flush_messages, u64::MAX);
        assert_eq!(cfg.max_request_bytes, DEFAULT_MAX_REQUEST_BYTES);
        assert_eq!(cfg.truncation, Truncation::Current);
        assert_eq!(cfg.producer_state_recovery, ProducerStateRecovery::Current);
        assert_eq!(cfg.listen, "127.0.0.1:9092");
        assert!(cfg.controller_epoch_fencing && !cfg.unclean_leader_election);
        for (flag, key) in [
            ("--min-insync-replicas", "min_insync_replicas"),
            ("--flush-messages", "flush_messages"),
            ("--replica-lag-time-max-ms", "replica_lag_time_max_ms"),
            ("--hw-checkpoint-interval-ms", "hw_checkpoint_interval_ms"),
        ] {
            let err = resolve_with(&format!("{flag} 0")).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { key: k, reason } if *k == key && reason == "must be at least 1"),
                "{err}"
            );
        }
        // A negative id, checked before anything else is (a bad TTL too here).
        let err = args(&["--node-id=-1", "--lease-ttl-s", "0", "--listen", "x"])
            .resolve()
            .unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { key: "node_id", .. }),
            "{err}"
        );
    }
}
