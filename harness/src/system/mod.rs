//! A system under test, as data: how its brokers start (a command-line
//! template), the services they need (etcd, PostgreSQL), what the harness may
//! observe besides the Kafka protocol, and how the final state is read. The
//! reference broker is `systems/epochal.toml`; a user describes their own
//! broker in a file of the same shape and passes its path to `--system`.
//!
//! A system file only says what a system *is*; the runtimes decide addresses
//! and the checkers decide what they need ([`Sees`] is what a system lets
//! them see). Nothing here starts anything.

mod database;
#[cfg(test)]
mod database_tests;
mod template;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use database::{DatabaseSpec, Engine};
pub use template::{Template, TemplateError};

use crate::toml_span::TomlErrorAt;

/// The systems shipped with epochal, by name: the file's text, compiled in so
/// the binary needs no checkout to find them.
const BUILT_IN: &[(&str, &str)] = &[
    ("epochal", include_str!("../../../systems/epochal.toml")),
    ("tansu", include_str!("../../../systems/tansu.toml")),
    ("noida", include_str!("../../../systems/noida.toml")),
    ("nisshi", include_str!("../../../systems/nisshi.toml")),
];

/// The system a run uses when none is named: the reference broker.
pub const REFERENCE: &str = "epochal";

/// A system under test (see the module doc).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct System {
    pub name: String,
    pub about: String,
    pub node: NodeSpec,
    #[serde(default, rename = "service")]
    pub services: Vec<ServiceSpec>,
    #[serde(default)]
    pub observe: Observe,
    pub final_state: FinalState,
    #[serde(default)]
    pub claims: Claims,
    #[serde(default)]
    pub client: ClientSpec,
    /// The file as written, kept so a run directory holds the system it ran.
    #[serde(skip)]
    pub text: String,
}

/// How one broker starts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub program: Program,
    pub port: PortMode,
    pub kafka_node_ids: KafkaNodeIds,
    #[serde(default)]
    pub settings: SettingsMode,
    /// The command line after the program; placeholders in [`ARGS_NAMES`].
    pub args: Vec<Template>,
    /// Appended when the node has settings: `{config}` is their file.
    #[serde(default)]
    pub args_with_config: Vec<Template>,
    /// Appended once per other broker: `{peer}` is its number and
    /// `{peer_address}` the link that reaches it. Empty: brokers never dial
    /// one another, and the plan has no broker-to-broker links.
    #[serde(default)]
    pub args_per_peer: Vec<Template>,
    /// Extra environment, values as templates.
    #[serde(default)]
    pub env: BTreeMap<String, Template>,
    /// The working directory the broker starts in (default: the harness's).
    #[serde(default)]
    pub cwd: Option<Template>,
    /// The most brokers one run may start (a single-node system: 1). A
    /// schedule asking more is refused before anything starts, and a
    /// campaign that names no `--brokers` runs no more than this.
    #[serde(default)]
    pub max_brokers: Option<u32>,
}

/// Where a broker's program comes from: in the file, a table with one of
/// `workspace`, `tool` (with `version` and `install`, and for a Python
/// package `installer = "pip"` and `executable`) or `path`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "ProgramTable")]
pub enum Program {
    /// A binary this workspace builds, found beside the harness's own.
    Workspace(String),
    /// A third-party program installed by `ci/tools.sh` under the tools dir
    /// ([`tools_dir`]), at `<tools>/<name>-<version>/bin/<name>`.
    Tool {
        name: String,
        version: String,
        /// The command `ci/tools.sh` runs to install it (with `--root`
        /// added for cargo, inside a fresh venv for pip), shown when it is
        /// missing.
        install: String,
        /// For a Python package (`installer = "pip"`): the file inside the
        /// venv's site-packages that is the program, which `ci/tools.sh`
        /// links as `bin/<name>`. `None`: cargo's `bin/<name>`.
        executable: Option<String>,
    },
    /// A path, or a name looked up on `PATH`.
    Path(PathBuf),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgramTable {
    workspace: Option<String>,
    tool: Option<String>,
    version: Option<String>,
    install: Option<String>,
    #[serde(default)]
    installer: Installer,
    executable: Option<String>,
    path: Option<PathBuf>,
}

/// What installs a tool (`ci/tools.sh` reads the same key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Installer {
    /// `cargo install … --force --root <root>`.
    #[default]
    Cargo,
    /// `pip install …` in a venv at the root; `executable` names the file.
    Pip,
}

/// A `program` table that names no one program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    #[error("program: tool {name} needs a version and an install command")]
    ToolIncomplete { name: String },
    #[error(
        "program: tool {name}: installer = \"pip\" needs executable (its file in site-packages), and only pip takes one"
    )]
    Executable { name: String },
    #[error(
        "program: give one of workspace = \"..\", tool = \"..\" (with version and install) or path = \"..\""
    )]
    NotOne,
}

/// A system's program that is not where its file says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramMissing {
    #[error("{} (build the workspace: cargo build --workspace --bins)", path.display())]
    Workspace { path: PathBuf },
    #[error("{name} {version} at {} (install it: bash ci/tools.sh {name}, which runs `{install}`)", path.display())]
    Tool {
        name: String,
        version: String,
        path: PathBuf,
        install: String,
    },
    #[error("{} (not found)", path.display())]
    Path { path: PathBuf },
}

impl TryFrom<ProgramTable> for Program {
    type Error = ProgramError;

    fn try_from(t: ProgramTable) -> Result<Program, ProgramError> {
        let tool_keys = t.version.is_some()
            || t.install.is_some()
            || t.executable.is_some()
            || t.installer != Installer::Cargo;
        match (t.workspace, t.tool, t.path) {
            (Some(name), None, None) if !tool_keys => Ok(Program::Workspace(name)),
            (None, Some(name), None) => match (t.version, t.install) {
                (Some(version), Some(install)) => {
                    if (t.installer == Installer::Pip) != t.executable.is_some() {
                        return Err(ProgramError::Executable { name });
                    }
                    Ok(Program::Tool {
                        name,
                        version,
                        install,
                        executable: t.executable,
                    })
                }
                _ => Err(ProgramError::ToolIncomplete { name }),
            },
            (None, None, Some(path)) if !tool_keys => Ok(Program::Path(path)),
            _ => Err(ProgramError::NotOne),
        }
    }
}

/// How the runtime learns a broker's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortMode {
    /// The broker binds port 0 and writes the address it bound to
    /// `<data_dir>/listening` once it serves.
    Reported,
    /// The runtime picks a free port for `{listen}`; the broker serves once
    /// the port answers a Kafka ApiVersions request.
    Assigned,
}

/// Which Kafka node ids a system's brokers answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KafkaNodeIds {
    /// Broker N is node N, and Metadata names every broker.
    Own,
    /// Every broker answers as the same node (stateless brokers over shared
    /// storage): a client bound to a broker reaches that broker only, and
    /// "the leader" of a partition is whichever broker a client asks.
    Shared,
}

/// What a system does with a schedule's broker settings and failpoints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SettingsMode {
    /// It takes none: a schedule that sets any is refused for it.
    #[default]
    None,
    /// The reference broker's: a TOML file per node (`{config}`).
    ConfigFile,
}

/// A service the brokers need, started by the runtime before them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    pub kind: ServiceKind,
    /// PostgreSQL only: an SQL script (the system's schema) the runtime runs
    /// as the superuser once the server answers, before any broker starts.
    /// Written in the system file itself, so a stored run's `system.toml`
    /// holds the whole system.
    #[serde(default)]
    pub schema: Option<String>,
}

/// The services a runtime knows how to start, check and break. Each broker
/// reaches each through a link of its own (`b1-etcd`, `b1-postgres`), and
/// `{etcd}` / `{postgres}` in a template is that link's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceKind {
    /// One etcd member, its data in memory (runtime/orphans.rs).
    Etcd,
    /// A PostgreSQL server, its data under the run directory.
    Postgres,
}

impl ServiceKind {
    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::Etcd => "etcd",
            ServiceKind::Postgres => "postgres",
        }
    }
}

impl fmt::Display for ServiceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the harness may read besides the Kafka protocol.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observe {
    /// The etcd key layout the brokers keep their decisions in; only the
    /// reference broker's (`"epochal"`) is known.
    #[serde(default)]
    pub etcd: Option<EtcdLayout>,
    /// Whether each data dir holds `state-change.log` in the reference
    /// broker's format.
    #[serde(default)]
    pub state_change_log: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EtcdLayout {
    Epochal,
}

/// How the final state is read once the faults are healed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinalState {
    pub read: FinalRead,
    /// Where the system keeps its durable state, when in a database, and
    /// how to list its records (database.rs): read after the run as this
    /// system's replica.
    #[serde(default)]
    pub database: Option<DatabaseSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinalRead {
    /// Every replica's files in Kafka's layout, read from the frozen data
    /// directories by the harness's own reader.
    ReplicaFiles,
    /// Jepsen's final read: ListOffsets and Fetch from the log start on every
    /// partition through a fresh client, stored as Kafka segments.
    Protocol,
}

/// How the harness's own client speaks to the system, where it must differ
/// from its defaults. Each difference is a finding about the system, and
/// the file says which.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// The Fetch version polls and the final read use (default 12).
    pub fetch_version: Option<i16>,
    /// The JoinGroup version subscribed consumers join with (default 4).
    pub join_group_version: Option<i16>,
    /// The least `max_wait_ms` a Fetch (poll or final read) asks for. The
    /// harness's polls never wait for data (0, Kafka's "answer with what
    /// there is"); a system that answers such a Fetch without the
    /// partitions it names gets this wait instead, which bounds how long a
    /// poll at the end of a log takes.
    pub fetch_max_wait_ms: Option<i32>,
}

/// What a system says of itself that changes which of Kafka's excuses a
/// checker may grant it. Only what the harness cannot observe belongs here,
/// and each claim can only take an excuse away, never add one.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// Whether the system may elect a leader that lacks acknowledged writes
    /// (Kafka's unclean leader election, when enabled). `false` for a system
    /// with no leader elections of its own (shared storage): losing an
    /// acks=all write is then never excused by an election the harness
    /// could not see.
    pub unclean_elections: bool,
    /// The broker setting (a schedule's `[cluster.settings]` key) that turns
    /// unclean election on, when the system has one: a run that does not set
    /// it true on some node has unclean election off, and a leader elected
    /// from outside the ISR there excuses nothing (it is itself an anomaly,
    /// `election-outside-isr`). `None`: the harness cannot tell from the
    /// schedule, and only the registrations etcd recorded judge an election.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unclean_election_setting: Option<String>,
    /// Whether the system claims to recover after every fault is healed:
    /// every partition led again with its full ISR, every replica caught up.
    /// With it, a cluster that makes no progress toward that after the final
    /// heal is `no-recovery` (invalid); without it, the run is unknown.
    #[serde(default)]
    pub recovers: bool,
}

impl Default for Claims {
    /// Kafka's: unclean elections are possible (the timeline tells when).
    fn default() -> Self {
        Claims {
            unclean_elections: true,
            unclean_election_setting: None,
            recovers: false,
        }
    }
}

/// What a system lets the checkers see; a checker that needs more reports
/// `not-applicable` with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sees {
    /// Every replica's segments, checkpoints and leader-epoch file.
    pub replica_files: bool,
    /// etcd's revision history of the cluster's decisions.
    pub etcd_timeline: bool,
    /// The brokers' state-change logs.
    pub state_change_log: bool,
    /// The system's database, read after the run (`[final_state] database`).
    #[serde(default)]
    pub database: bool,
}

impl Sees {
    /// Everything: the reference broker, and a stored run that names no
    /// system (every run before systems were data).
    pub const ALL: Sees = Sees {
        replica_files: true,
        etcd_timeline: true,
        state_change_log: true,
        database: false,
    };
}

/// The placeholders each list of templates may use, beside one per service
/// the system declares.
pub const ARGS_NAMES: &[&str] = &[
    "node",
    "listen",
    "listen_host",
    "listen_port",
    "advertised",
    "data_dir",
    "shared_dir",
    "lease_ttl_s",
];
const CONFIG_NAMES: &[&str] = &["config"];
const PEER_NAMES: &[&str] = &["peer", "peer_address"];

#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {}{message}", file.display(), key.as_ref().map(|k| format!("key `{k}`: ")).unwrap_or_default())]
    Syntax {
        file: PathBuf,
        line: usize,
        key: Option<String>,
        message: String,
    },
    #[error("{}{}: {what}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        file: PathBuf,
        line: Option<usize>,
        what: String,
    },
    #[error("no system named {name:?} (built in: {}; or give a system file's path)", built_in().join(", "))]
    Unknown { name: String },
}

/// The built-in systems' names.
pub fn built_in() -> Vec<&'static str> {
    BUILT_IN.iter().map(|(name, _)| *name).collect()
}

impl System {
    /// The reference broker's system.
    pub fn reference() -> System {
        System::named(REFERENCE).expect("the built-in reference system file parses")
    }

    /// A built-in system by name, or a system file by path (anything with a
    /// `/` or ending in `.toml`).
    pub fn named(name_or_path: &str) -> Result<System, SystemError> {
        if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            return System::load(Path::new(name_or_path));
        }
        let (name, text) = BUILT_IN
            .iter()
            .find(|(name, _)| *name == name_or_path)
            .ok_or_else(|| SystemError::Unknown {
                name: name_or_path.to_owned(),
            })?;
        System::parse(&PathBuf::from(format!("systems/{name}.toml")), text)
    }

    pub fn load(file: &Path) -> Result<System, SystemError> {
        let text = std::fs::read_to_string(file).map_err(|source| SystemError::Io {
            file: file.to_owned(),
            source,
        })?;
        System::parse(file, &text)
    }

    /// Parses a system file's text; `file` names it in errors.
    pub fn parse(file: &Path, text: &str) -> Result<System, SystemError> {
        let mut system: System = toml::from_str(text).map_err(|e| {
            let at = TomlErrorAt::of(text, &e);
            SystemError::Syntax {
                file: file.to_owned(),
                line: at.line,
                key: at.key,
                message: at.message,
            }
        })?;
        system.text = text.to_owned();
        system.check().map_err(|(key, what)| SystemError::Invalid {
            file: file.to_owned(),
            line: key.and_then(|k| crate::toml_span::key_line(text, k)),
            what,
        })?;
        Ok(system)
    }

    /// What a well-formed file must also be: every placeholder one its list
    /// may use, each service once, and what it observes consistent with its
    /// services. The error names the key to point at.
    fn check(&self) -> Result<(), (Option<&'static str>, String)> {
        let services: Vec<&str> = self.services.iter().map(|s| s.kind.name()).collect();
        let mut seen = BTreeSet::new();
        for name in &services {
            if !seen.insert(*name) {
                return Err((Some("kind"), format!("service {name} is declared twice")));
            }
        }
        if let Some(service) = self
            .services
            .iter()
            .find(|s| s.schema.is_some() && s.kind != ServiceKind::Postgres)
        {
            return Err((
                Some("schema"),
                format!(
                    "service {}: only a postgres service takes a schema",
                    service.kind
                ),
            ));
        }
        let node = &self.node;
        let lists: [(&'static str, &[Template], &[&str]); 4] = [
            ("args", &node.args, &[]),
            ("args_with_config", &node.args_with_config, CONFIG_NAMES),
            ("args_per_peer", &node.args_per_peer, PEER_NAMES),
            ("env", &[], &[]),
        ];
        let env: Vec<Template> = node.env.values().chain(&node.cwd).cloned().collect();
        for (key, templates, extra) in lists {
            let templates = if key == "env" { &env[..] } else { templates };
            for template in templates {
                for name in template.placeholders() {
                    let known = ARGS_NAMES.contains(&name)
                        || extra.contains(&name)
                        || services.contains(&name);
                    if !known {
                        let mut names: Vec<&str> = ARGS_NAMES.to_vec();
                        names.extend(extra);
                        names.extend(&services);
                        return Err((
                            Some(key),
                            format!(
                                "`{template}`: unknown placeholder {{{name}}} in {key} (known here: {})",
                                names.join(", ")
                            ),
                        ));
                    }
                }
            }
        }
        if self.observe.etcd.is_some() && !services.contains(&"etcd") {
            return Err((
                Some("etcd"),
                "observe.etcd needs an etcd service ([[service]] kind = \"etcd\")".into(),
            ));
        }
        if let Some(database) = &self.final_state.database {
            if self.final_state.read != FinalRead::Protocol {
                return Err((
                    Some("database"),
                    "final_state.database needs read = \"protocol\": the database is checked \
                     against the final read over the protocol"
                        .into(),
                ));
            }
            database.check(services.contains(&"postgres"))?;
        }
        if node.settings == SettingsMode::ConfigFile && node.args_with_config.is_empty() {
            return Err((
                Some("settings"),
                "settings = \"config-file\" needs args_with_config to pass {config}".into(),
            ));
        }
        Ok(())
    }

    /// What the checkers may see of a run of this system.
    pub fn sees(&self) -> Sees {
        Sees {
            replica_files: self.final_state.read == FinalRead::ReplicaFiles,
            etcd_timeline: self.observe.etcd.is_some(),
            state_change_log: self.observe.state_change_log,
            database: self.final_state.database.is_some(),
        }
    }

    /// Whether brokers dial one another (and so have links between them).
    pub fn has_peers(&self) -> bool {
        !self.node.args_per_peer.is_empty()
    }

    /// Whether any of the node's templates uses the placeholder `name`.
    pub fn uses(&self, name: &str) -> bool {
        let node = &self.node;
        node.args
            .iter()
            .chain(&node.args_with_config)
            .chain(&node.args_per_peer)
            .chain(node.env.values())
            .chain(&node.cwd)
            .any(|t| t.placeholders().any(|p| p == name))
    }

    /// The SQL script the system's service of `kind` runs first, if any.
    pub fn schema(&self, kind: ServiceKind) -> Option<&str> {
        self.services
            .iter()
            .find(|s| s.kind == kind)
            .and_then(|s| s.schema.as_deref())
    }

    pub fn services(&self) -> impl Iterator<Item = ServiceKind> + '_ {
        self.services.iter().map(|s| s.kind)
    }

    pub fn is_reference(&self) -> bool {
        self.name == REFERENCE
    }
}

/// Where third-party programs are installed: `$EPOCHAL_TOOLS`, else
/// `~/.cache/epochal/tools` (outside any checkout, so a fresh clone on the
/// same machine reuses a build that takes minutes).
pub fn tools_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("EPOCHAL_TOOLS") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/epochal/tools")
}

impl Program {
    /// Where the program is: `bin_dir` holds the workspace's binaries.
    /// `Err` says what is missing and how to get it.
    pub fn resolve(&self, bin_dir: &Path) -> Result<PathBuf, ProgramMissing> {
        match self {
            Program::Workspace(name) => {
                let path = bin_dir.join(name);
                match path.is_file() {
                    true => Ok(path),
                    false => Err(ProgramMissing::Workspace { path }),
                }
            }
            Program::Tool {
                name,
                version,
                install,
                ..
            } => {
                let path = tools_dir().join(format!("{name}-{version}/bin/{name}"));
                match path.is_file() {
                    true => Ok(path),
                    false => Err(ProgramMissing::Tool {
                        name: name.clone(),
                        version: version.clone(),
                        path,
                        install: install.clone(),
                    }),
                }
            }
            Program::Path(path) => {
                find_executable(path).ok_or_else(|| ProgramMissing::Path { path: path.clone() })
            }
        }
    }
}

/// `name` itself if it has a directory part, else the first match on `PATH`.
pub fn find_executable(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.is_file().then(|| name.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_system_parses_and_the_reference_sees_everything() {
        for name in built_in() {
            let system = System::named(name).unwrap();
            assert_eq!(system.name, name);
        }
        let reference = System::reference();
        assert_eq!(reference.sees(), Sees::ALL);
        assert!(reference.has_peers());
        assert_eq!(
            reference.services().collect::<Vec<_>>(),
            [ServiceKind::Etcd]
        );
    }

    #[test]
    fn an_unknown_placeholder_names_the_file_line_and_the_known_names() {
        let text = System::reference().text.replace(
            "\"--etcd\", \"http://{etcd}\"",
            "\"--etcd\", \"http://{etc}\"",
        );
        let err = System::parse(Path::new("mine.toml"), &text).unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("mine.toml:"), "{message}");
        assert!(
            message.contains("unknown placeholder {etc} in args"),
            "{message}"
        );
        assert!(message.contains("etcd"), "{message}");
    }

    #[test]
    fn a_typo_in_a_key_is_a_syntax_error_at_its_line() {
        let text = System::reference()
            .text
            .replace("kafka_node_ids", "kafka_node_id");
        let err = System::parse(Path::new("mine.toml"), &text).unwrap_err();
        let line = text
            .lines()
            .position(|l| l.starts_with("kafka_node_id ="))
            .unwrap()
            + 1;
        assert!(
            err.to_string().starts_with(&format!("mine.toml:{line}: ")),
            "{err}"
        );
    }

    /// noida is installed by pip and runs one node; a pip tool must name its
    /// executable, and only a pip tool may.
    #[test]
    fn a_pip_tool_names_its_executable_and_a_single_node_system_says_so() {
        let noida = System::named("noida").unwrap();
        assert_eq!(noida.node.max_brokers, Some(1));
        assert!(matches!(
            &noida.node.program,
            Program::Tool {
                executable: Some(_),
                ..
            }
        ));
        let without = noida
            .text
            .replace(", executable = \"noida_db/noida-db\"", "");
        assert_ne!(without, noida.text);
        let err = System::parse(Path::new("mine.toml"), &without).unwrap_err();
        assert!(err.to_string().contains("needs executable"), "{err}");
        let cargo_with = System::named("tansu").unwrap().text.replace(
            "install = \"cargo install",
            "executable = \"x\", install = \"cargo install",
        );
        let err = System::parse(Path::new("mine.toml"), &cargo_with).unwrap_err();
        assert!(err.to_string().contains("only pip takes one"), "{err}");
    }

    #[test]
    fn an_unknown_name_lists_the_built_in_systems() {
        let err = System::named("kafka").unwrap_err();
        assert_eq!(
            err.to_string(),
            "no system named \"kafka\" (built in: epochal, tansu, noida, nisshi; or give a system file's path)"
        );
    }

    /// nisshi's PostgreSQL service carries its schema, which only a
    /// postgres service may.
    #[test]
    fn a_postgres_service_carries_the_schema_and_no_other_service_may() {
        let nisshi = System::named("nisshi").unwrap();
        let schema = nisshi.schema(ServiceKind::Postgres).unwrap();
        assert!(schema.contains("create table record ("), "{schema}");
        assert_eq!(nisshi.schema(ServiceKind::Etcd), None);
        let on_etcd = nisshi
            .text
            .replace("kind = \"postgres\"", "kind = \"etcd\"");
        let err = System::parse(Path::new("mine.toml"), &on_etcd).unwrap_err();
        assert!(
            err.to_string()
                .contains("service etcd: only a postgres service takes a schema"),
            "{err}"
        );
    }
}
