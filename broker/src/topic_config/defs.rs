//! The topic configs this broker takes: every one Kafka 3.x documents
//! ("Topic-Level Configs"), under Kafka's names, with the values Kafka's
//! `LogConfig` takes, its defaults, and the broker setting each falls back
//! to (its synonym in DescribeConfigs). Which of them the broker acts on is
//! said in `super` and in the broker's README; the rest are stored and
//! described only.

/// A config's type, as DescribeConfigs v3+ names it (Kafka's `ConfigType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// What values a config takes (Kafka's `ConfigDef` validator for it).
#[derive(Debug, PartialEq, Eq)]
pub enum Values {
    /// `true` or `false`, any case.
    Boolean,
    /// A number of the config's type (INT or LONG) in `min..=max`.
    Number { min: i64, max: i64 },
    /// A DOUBLE in 0..=1.
    Ratio,
    /// Exactly one of these (Kafka's `ValidString`, case-sensitive).
    OneOf(&'static [&'static str]),
    /// A comma-separated list of these (Kafka's `ValidList`).
    ListOf(&'static [&'static str]),
    /// `*`, or a list of `partition:broker` (Kafka's
    /// `ThrottledReplicaListValidator`).
    ThrottledReplicas,
    /// A release's record format version such as `2.8` or `0.10.2-IV0`
    /// (Kafka's `MetadataVersionValidator`).
    FormatVersion,
    /// `false` only: `true` needs what this broker does not have, and is
    /// refused with this reason.
    FalseOnly(&'static str),
}

/// One topic config this broker knows: its name, type, the values it
/// takes, the broker setting that is its default (Kafka's synonym, if it
/// has one), and Kafka's own default.
#[derive(Debug, PartialEq, Eq)]
pub struct TopicConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    pub values: Values,
    pub broker_synonym: Option<&'static str>,
    pub kafka_default: &'static str,
}

pub const CLEANUP_POLICY: &str = "cleanup.policy";
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
pub const SEGMENT_BYTES: &str = "segment.bytes";
pub const UNCLEAN_LEADER_ELECTION: &str = "unclean.leader.election.enable";
pub const FLUSH_MESSAGES: &str = "flush.messages";
pub const FLUSH_MS: &str = "flush.ms";

const LONG_MAX: &str = "9223372036854775807";
const INT_MAX: i64 = i32::MAX as i64;

const fn def(
    name: &'static str,
    kind: ConfigType,
    values: Values,
    broker_synonym: Option<&'static str>,
    kafka_default: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        kind,
        values,
        broker_synonym,
        kafka_default,
    }
}

/// An INT config of at least `min`.
const fn int(
    name: &'static str,
    min: i64,
    synonym: &'static str,
    default: &'static str,
) -> TopicConfigDef {
    let values = Values::Number { min, max: INT_MAX };
    def(name, ConfigType::Int, values, Some(synonym), default)
}

/// A LONG config of at least `min`.
const fn long(
    name: &'static str,
    min: i64,
    synonym: &'static str,
    default: &'static str,
) -> TopicConfigDef {
    let values = Values::Number { min, max: i64::MAX };
    def(name, ConfigType::Long, values, Some(synonym), default)
}

const fn boolean(
    name: &'static str,
    synonym: &'static str,
    default: &'static str,
) -> TopicConfigDef {
    def(
        name,
        ConfigType::Boolean,
        Values::Boolean,
        Some(synonym),
        default,
    )
}

/// Every topic config this broker takes, in Kafka's names, sorted. Minimums
/// as Kafka's `LogConfig`: a segment holds at least one record's overhead
/// (14 bytes); -1 means "no limit" for retention, -2 "as retention" for
/// the local retention of tiered storage.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        CLEANUP_POLICY,
        ConfigType::List,
        Values::ListOf(&["compact", "delete"]),
        Some("log.cleanup.policy"),
        "delete",
    ),
    def(
        "compression.type",
        ConfigType::String,
        Values::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        Some("compression.type"),
        "producer",
    ),
    long(
        "delete.retention.ms",
        0,
        "log.cleaner.delete.retention.ms",
        "86400000",
    ),
    long(
        "file.delete.delay.ms",
        0,
        "log.segment.delete.delay.ms",
        "60000",
    ),
    long(FLUSH_MESSAGES, 1, "log.flush.interval.messages", LONG_MAX),
    long(FLUSH_MS, 0, "log.flush.interval.ms", LONG_MAX),
    def(
        "follower.replication.throttled.replicas",
        ConfigType::List,
        Values::ThrottledReplicas,
        None,
        "",
    ),
    int(
        "index.interval.bytes",
        0,
        "log.index.interval.bytes",
        "4096",
    ),
    def(
        "leader.replication.throttled.replicas",
        ConfigType::List,
        Values::ThrottledReplicas,
        None,
        "",
    ),
    long(
        "local.retention.bytes",
        -2,
        "log.local.retention.bytes",
        "-2",
    ),
    long("local.retention.ms", -2, "log.local.retention.ms", "-2"),
    long(
        "max.compaction.lag.ms",
        1,
        "log.cleaner.max.compaction.lag.ms",
        LONG_MAX,
    ),
    int(MAX_MESSAGE_BYTES, 0, "message.max.bytes", "1048588"),
    boolean(
        "message.downconversion.enable",
        "log.message.downconversion.enable",
        "true",
    ),
    def(
        "message.format.version",
        ConfigType::String,
        Values::FormatVersion,
        Some("log.message.format.version"),
        "3.0-IV1",
    ),
    long(
        "message.timestamp.after.max.ms",
        0,
        "log.message.timestamp.after.max.ms",
        LONG_MAX,
    ),
    long(
        "message.timestamp.before.max.ms",
        0,
        "log.message.timestamp.before.max.ms",
        LONG_MAX,
    ),
    long(
        "message.timestamp.difference.max.ms",
        0,
        "log.message.timestamp.difference.max.ms",
        LONG_MAX,
    ),
    def(
        "message.timestamp.type",
        ConfigType::String,
        Values::OneOf(&["CreateTime", "LogAppendTime"]),
        Some("log.message.timestamp.type"),
        "CreateTime",
    ),
    def(
        "min.cleanable.dirty.ratio",
        ConfigType::Double,
        Values::Ratio,
        Some("log.cleaner.min.cleanable.ratio"),
        "0.5",
    ),
    long(
        "min.compaction.lag.ms",
        0,
        "log.cleaner.min.compaction.lag.ms",
        "0",
    ),
    int(MIN_INSYNC_REPLICAS, 1, "min.insync.replicas", "1"),
    boolean("preallocate", "log.preallocate", "false"),
    def(
        "remote.storage.enable",
        ConfigType::Boolean,
        Values::FalseOnly("Tiered Storage functionality is disabled in the broker"),
        None,
        "false",
    ),
    long("retention.bytes", i64::MIN, "log.retention.bytes", "-1"),
    long("retention.ms", -1, "log.retention.ms", "604800000"),
    int(SEGMENT_BYTES, 14, "log.segment.bytes", "1073741824"),
    int(
        "segment.index.bytes",
        4,
        "log.index.size.max.bytes",
        "10485760",
    ),
    long("segment.jitter.ms", 0, "log.roll.jitter.ms", "0"),
    long("segment.ms", 1, "log.roll.ms", "604800000"),
    boolean(
        UNCLEAN_LEADER_ELECTION,
        "unclean.leader.election.enable",
        "false",
    ),
];

/// Why a config was refused: INVALID_CONFIG with this message, as Kafka
/// words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("Unknown topic config name: {0}")]
    Unknown(String),
    #[error("Invalid value {value} for configuration {name}: {why}")]
    Invalid {
        name: String,
        value: String,
        why: String,
    },
    #[error("Null value not supported for topic configs: {0}")]
    Null(String),
}

pub fn definition(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Kafka's record format versions are named by release: `0.8.0` to
/// `0.11.0`, then `1.0` to `3.x`, optionally with an inter-broker protocol
/// step (`-IV1`).
fn is_format_version(value: &str) -> bool {
    let (release, step) = match value.split_once("-IV") {
        Some((release, step)) => (release, Some(step)),
        None => (value, None),
    };
    let numbers: Vec<&str> = release.split('.').collect();
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // Kafka names a release by its first three segments when it begins
    // `0.` and by its first two otherwise, and ignores any after them
    // (`ApiVersion.apply` in 2.x, `MetadataVersion.fromVersionString` in
    // 3.x): `0.10.0.0` is `0.10.0`, `2.8.1` is `2.8`.
    let least = match numbers.first() {
        Some(&"0") => 3,
        Some(&("1" | "2" | "3")) => 2,
        _ => return false,
    };
    numbers.len() >= least && numbers.iter().all(|n| all_digits(n)) && step.is_none_or(all_digits)
}

/// Why `value` is not one `values` takes, if it is not.
fn refusal(def: &TopicConfigDef, value: &str) -> Option<String> {
    let trimmed = value.trim();
    match &def.values {
        Values::Boolean => (!trimmed.eq_ignore_ascii_case("true")
            && !trimmed.eq_ignore_ascii_case("false"))
        .then(|| "Expected value to be either true or false".to_owned()),
        Values::Number { min, max } => {
            let type_name = if def.kind == ConfigType::Int {
                "INT"
            } else {
                "LONG"
            };
            match trimmed.parse::<i64>() {
                Ok(n) if n > *max => Some(format!("Not a number of type {type_name}")),
                Ok(n) if n < *min => Some(format!("Value must be at least {min}")),
                Ok(_) => None,
                Err(_) => Some(format!("Not a number of type {type_name}")),
            }
        }
        Values::Ratio => match trimmed.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => None,
            Ok(_) => Some("Value must be no more than 1 and at least 0".to_owned()),
            Err(_) => Some("Not a number of type DOUBLE".to_owned()),
        },
        Values::OneOf(choices) => (!choices.contains(&trimmed))
            .then(|| format!("String must be one of: {}", choices.join(", "))),
        Values::ListOf(choices) => (!trimmed.split(',').all(|p| choices.contains(&p.trim())))
            .then(|| format!("String must be one of: {}", choices.join(", "))),
        Values::ThrottledReplicas => {
            let pair = |p: &str| {
                let p = p.trim();
                p.is_empty()
                    || p.split_once(':').is_some_and(|(a, b)| {
                        [a, b]
                            .iter()
                            .all(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
                    })
            };
            (trimmed != "*" && !trimmed.split(',').all(pair)).then(|| {
                "must be the literal '*' or a list of replicas in the following format: \
                 [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                    .to_owned()
            })
        }
        Values::FormatVersion => {
            (!is_format_version(trimmed)).then(|| format!("Unknown metadata.version '{trimmed}'"))
        }
        Values::FalseOnly(why) => {
            if trimmed.eq_ignore_ascii_case("false") {
                None
            } else if trimmed.eq_ignore_ascii_case("true") {
                Some((*why).to_owned())
            } else {
                Some("Expected value to be either true or false".to_owned())
            }
        }
    }
}

/// Checks one override as Kafka's `LogConfig.validate` would.
pub fn validate(name: &str, value: &str) -> Result<(), ConfigError> {
    let def = definition(name).ok_or_else(|| ConfigError::Unknown(name.to_owned()))?;
    match refusal(def, value) {
        None => Ok(()),
        Some(why) => Err(ConfigError::Invalid {
            name: name.to_owned(),
            value: value.to_owned(),
            why,
        }),
    }
}

#[cfg(test)]
mod format_version_tests {
    use super::is_format_version;

    /// librdkafka's test 0092 sets `0.10.0.0`, as Kafka's own docs spell
    /// old releases; Kafka reads it as `0.10.0`.
    #[test]
    fn a_release_takes_as_many_segments_as_kafka_reads_and_ignores_the_rest() {
        for ok in [
            "0.10.0.0",
            "0.10.2-IV0",
            "0.11.0",
            "2.8",
            "2.8.1",
            "3.0-IV1",
        ] {
            assert!(is_format_version(ok), "{ok}");
        }
        for bad in ["0.10", "2", "4.0", "2.x", "", "2.8-IVx"] {
            assert!(!is_format_version(bad), "{bad}");
        }
    }
}
