//! PostgreSQL on the Docker runtime: the service a system over a database
//! (nisshi) keeps its state in, as a container of the run like etcd.
//!
//! The image is this machine's own server (Debian's package: nothing is
//! pulled), `FROM scratch` with the `postgres` binary, the modules it loads
//! (`lib/`), the files it reads at start (`share/`: time zone sets) and the
//! time zone data, each at its path on the host, and their libraries.
//!
//! The cluster is made on the host, by the same initdb as on the process
//! runtime ([`PostgresPlan::initdb`]), in the run directory; the container
//! mounts it at the same path and runs the server on it as the account that
//! owns it (PostgreSQL refuses root). So the data outlives the container, as
//! a machine's disk outlives its server process, and a run's database can be
//! read afterwards. The server listens on every address inside the
//! container (the brokers reach it through their `b<i>-postgres` links, the
//! proxy dialling `postgres:5432`), and its port is published on 127.0.0.1
//! for the harness's own probe and the system's schema.

use std::io::Write;
use std::path::Path;

use std::time::Duration;

use epochal_faults::signal;

use super::container::{Container, Containers, Spec, free_port};
use super::image;
use crate::runtime::plan::ClusterPlan;
use crate::runtime::postgres::{self, Account, PostgresPlan};
use crate::runtime::{DatabaseState, RuntimeError};
use crate::system::ServiceKind;

/// The port the server listens on inside its container.
pub const POSTGRES_PORT: u16 = 5432;

/// PostgreSQL as a container of the run `containers` makes, initialised on
/// the host and answering a startup as its superuser, with `plan`'s system's
/// schema applied. `owner` (`uid:gid`) runs it when the harness is not root.
pub(super) async fn start(
    containers: &Containers<'_>,
    plan: &ClusterPlan,
    owner: String,
) -> Result<Database, RuntimeError> {
    let bin = postgres::find_binaries()?;
    let image = image::ensure(containers.docker, &image::postgres(&bin)).await?;
    let layout = plan.layout();
    let timeout = plan.config.start_timeout.max(Duration::from_secs(60));
    let data_dir = std::path::absolute(layout.postgres_data())
        .map_err(RuntimeError::io("resolving the PostgreSQL data directory"))?;
    let at = PostgresPlan::new(bin, data_dir.clone(), POSTGRES_PORT, layout.postgres_log())?;
    at.initdb(timeout).await?;
    trust_the_run_network(&data_dir)?;
    let host_port = free_port()?;
    let server = at.server_command();
    // The image's entrypoint is the server: its arguments only.
    let mut cmd: Vec<String> = server
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // After the plan's own `-c`s, so these win: every address of the
    // container (the plan's is loopback only), and no JIT (its LLVM
    // library is not in the image).
    cmd.extend(["-c", "listen_addresses=*", "-c", "jit=off"].map(String::from));
    let user = match &at.account {
        Account::Other { uid, gid, .. } => format!("{uid}:{gid}"),
        Account::Current => owner,
    };
    let mount = data_dir.display().to_string();
    let container = containers
        .create(Spec {
            name: format!("epochal-{}-postgres", containers.run_id),
            alias: ServiceKind::Postgres.name(),
            image: &image,
            cmd,
            env: Vec::new(),
            binds: vec![format!("{mount}:{mount}")],
            publish: vec![(POSTGRES_PORT, host_port)],
            log: layout.postgres_log(),
            user: Some(user),
            tmpfs: Vec::new(),
            working_dir: Some(mount),
        })
        .await?;
    let mut database = Database {
        container,
        address: format!("127.0.0.1:{host_port}"),
        pid: None,
        timeout,
    };
    database.start(containers).await?;
    if let Some(schema) = plan.config.system.schema(ServiceKind::Postgres) {
        postgres::run_script(&database.address, schema, timeout).await?;
    }
    Ok(database)
}

/// The run's PostgreSQL container, for the database faults: paused, resumed
/// and killed as a process tree seen from the host (its server is the
/// container's PID 1, and a kill ends the container), started again by
/// Docker on the same mounted cluster. Removed with the run's containers on
/// every exit path, paused or not (`docker rm -f` kills a stopped tree too).
pub(super) struct Database {
    container: Container,
    /// Where the harness reaches it (its published port).
    address: String,
    /// The server's pid on the host while its container runs.
    pid: Option<i32>,
    timeout: Duration,
}

impl Database {
    pub(super) fn state(&self) -> Result<DatabaseState, RuntimeError> {
        Ok(match self.pid {
            None => DatabaseState::Down,
            Some(pid) if signal::is_stopped(pid)? => DatabaseState::Paused,
            Some(_) => DatabaseState::Running,
        })
    }

    /// Where the harness reaches it: its published port on the host.
    pub(super) fn address(&self) -> String {
        self.address.clone()
    }

    fn server(&self) -> Result<i32, RuntimeError> {
        self.pid.ok_or_else(|| RuntimeError::Postgres {
            at: self.address.clone(),
            detail: "is not running (crashed and not restarted)".into(),
        })
    }

    pub(super) async fn pause(&self) -> Result<(), RuntimeError> {
        postgres::pause_server(self.server()?, self.timeout).await
    }

    pub(super) fn resume(&self) -> Result<(), RuntimeError> {
        postgres::resume_server(self.server()?)
    }

    /// SIGKILL to the tree, then Docker's own record that the container
    /// stopped, so it can be started again.
    pub(super) async fn kill(&mut self, containers: &Containers<'_>) -> Result<(), RuntimeError> {
        let killed = postgres::kill_server(self.server()?, self.timeout).await;
        self.pid = None;
        // The container's end as Docker reports it (its exit code, its
        // output saved): expected here, so only awaited.
        let _ = containers.exited(&self.container).await;
        killed
    }

    /// Docker starts the container again; awaited until the server answers.
    pub(super) async fn start(&mut self, containers: &Containers<'_>) -> Result<(), RuntimeError> {
        if self.pid.is_some() {
            return Err(RuntimeError::Postgres {
                at: self.address.clone(),
                detail: "is already running".into(),
            });
        }
        let pid = containers.start_container(&self.container).await?;
        self.pid = Some(pid);
        let address = &self.address;
        containers
            .await_serving(&self.container, pid, "PostgreSQL answering", || async {
                let attempt = Duration::from_secs(1);
                postgres::postgres_ready(address, attempt).await.is_ok()
            })
            .await
    }
}

/// initdb's trust covers loopback only; the brokers' connections come from
/// the proxy's container on the run's network. The network is the run's
/// own and the server is thrown away with it, as on the process runtime.
fn trust_the_run_network(data_dir: &Path) -> Result<(), RuntimeError> {
    let hba = data_dir.join("pg_hba.conf");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&hba)
        .map_err(RuntimeError::io("opening pg_hba.conf"))?;
    writeln!(file, "host all all 0.0.0.0/0 trust").map_err(RuntimeError::io("writing pg_hba.conf"))
}
