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
use std::path::{Path, PathBuf};

use super::container::Spec;
use super::container::free_port;
use super::image::{self, ImageSpec};
use super::{DockerRuntime, absolute};
use crate::runtime::RuntimeError;
use crate::runtime::postgres::{self, Account, PgBin, PostgresPlan};
use crate::system::ServiceKind;

/// The port the server listens on inside its container.
pub const POSTGRES_PORT: u16 = 5432;

/// The image of this machine's PostgreSQL server.
pub fn spec(bin: &PgBin) -> ImageSpec {
    // Debian's layout: /usr/lib/postgresql/<major>/{bin,lib}, and the share
    // folder the server finds from its own path, /usr/share/postgresql/<major>.
    let root = bin.postgres.parent().and_then(Path::parent);
    let major = root.and_then(Path::file_name).map(PathBuf::from);
    let mut extra: Vec<PathBuf> = Vec::new();
    if let (Some(root), Some(major)) = (root, major) {
        extra.push(root.join("lib"));
        extra.push(Path::new("/usr/share/postgresql").join(major));
    }
    // The time zone initdb wrote into postgresql.conf (the host's, or UTC),
    // read from the system's data (Debian builds with system tzdata).
    extra.push("/usr/share/zoneinfo".into());
    // Its account by name, should the server look itself up.
    extra.extend(["/etc/passwd", "/etc/group"].map(PathBuf::from));
    extra.retain(|p| p.exists());
    ImageSpec {
        name: "postgres".into(),
        binary: bin.postgres.clone(),
        at: bin.postgres.display().to_string(),
        extra,
    }
}

impl DockerRuntime {
    /// PostgreSQL as a container of the run, initialised on the host and
    /// answering a startup as its superuser, with the system's schema
    /// applied.
    pub(super) async fn start_postgres(&mut self) -> Result<(), RuntimeError> {
        let bin = postgres::find_binaries()?;
        let image = image::ensure(&self.docker, &spec(&bin)).await?;
        let layout = self.cluster.plan.layout();
        let timeout = self
            .cluster
            .plan
            .config
            .start_timeout
            .max(std::time::Duration::from_secs(60));
        let data_dir = absolute(&layout.postgres_data())?;
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
            Account::Current => self.store_owner()?,
        };
        let mount = data_dir.display().to_string();
        let container = self
            .containers()
            .create(Spec {
                name: format!("epochal-{}-postgres", self.run_id),
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
        let pid = self.containers().start_container(&container).await?;
        let address = format!("127.0.0.1:{host_port}");
        self.containers()
            .await_serving(&container, pid, "PostgreSQL answering", || async {
                let attempt = std::time::Duration::from_secs(1);
                postgres::postgres_ready(&address, attempt).await.is_ok()
            })
            .await?;
        if let Some(schema) = self
            .cluster
            .plan
            .config
            .system
            .schema(ServiceKind::Postgres)
        {
            postgres::run_script(&address, schema, timeout).await?;
        }
        Ok(())
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
