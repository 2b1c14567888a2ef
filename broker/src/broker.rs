//! One running broker: opens its storage, registers in etcd under a lease,
//! serves the Kafka protocol, campaigns for controller, runs its followers'
//! fetchers and its leader-side ISR task, and on shutdown writes its checkpoints
//! and clean-shutdown marker and gives its lease back.
//!
//! [`run`] owns the broker's lifetime, from start until the shutdown future
//! resolves. The state it hands the request handlers is
//! [`crate::server::context::Broker`]; the handlers never reach back here.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{BrokerConfig, split_host_port};
use crate::controller::controller::ControllerSettings;
use crate::controller::election;
use crate::controller::metadata_store::{BrokerRegistration, MetadataStore, StoreError};
use crate::controller::session::Session;
use crate::replica::isr;
use crate::replica::manager::ReplicaManager;
use crate::replica::store::{LogConfig, LogManager, StorageError};
use crate::server::context::Broker;
use crate::server::listener;
use crate::state_change_log::{StateChangeLog, StateChangeLogError};
use crate::topic_config::{BrokerDefaults, TopicConfigs, watch_topic_configs};
use crate::transactions;

/// The file a broker writes its bound address to once it is ready.
pub const LISTENING_FILE: &str = "listening";
/// Kafka's log.flush.offset.checkpoint.interval.ms default.
const RECOVERY_POINT_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(60_000);
const FLUSH_CHECK_INTERVAL: Duration = Duration::from_millis(100);
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    #[error(transparent)]
    StateChangeLog(#[from] StateChangeLogError),
    #[error("binding {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("etcd: {0}")]
    Store(#[from] StoreError),
    #[error(
        "etcd at {endpoints} not reachable within {waited_ms} ms ({attempts} attempts; last: {last})"
    )]
    EtcdUnreachable {
        endpoints: String,
        waited_ms: u64,
        attempts: u32,
        last: StoreError,
    },
    #[error("data directory {path} is in use by another broker ({lock} is locked)")]
    Locked { path: String, lock: String },
    #[error("starting the etcd session thread: {0}")]
    SessionThread(std::io::Error),
}

impl BrokerError {
    /// A failure at `path` in the data directory.
    fn data_dir(path: &Path) -> impl FnOnce(std::io::Error) -> BrokerError {
        let path = path.display().to_string();
        move |source| BrokerError::DataDir { path, source }
    }
}

/// Kafka's per-log-directory lock file (`LogManager.lockLogDirs`).
pub const LOCK_FILE: &str = ".lock";

/// Takes the data directory's lock for as long as the returned file is open
/// (the broker's lifetime): an exclusive `flock` on `.lock`, as Kafka's
/// `LogManager` locks each log directory, so a second broker on the same
/// directory stops at start instead of writing over the first. The kernel
/// drops the lock when the process dies, however it dies.
fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File, BrokerError> {
    use std::os::fd::AsRawFd;
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(BrokerError::data_dir(&path))?;
    // SAFETY: flock on a descriptor this function owns; no memory is shared.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let source = std::io::Error::last_os_error();
        return Err(if source.kind() == std::io::ErrorKind::WouldBlock {
            BrokerError::Locked {
                path: data_dir.display().to_string(),
                lock: path.display().to_string(),
            }
        } else {
            BrokerError::data_dir(&path)(source)
        });
    }
    Ok(file)
}

/// Connects to etcd and registers, retrying with a backoff (100 ms doubling
/// to 1 s, each retry logged) until `timeout`: a broker started a moment
/// before etcd serves waits for it, as ZooKeeper-era Kafka waited
/// `zookeeper.connection.timeout.ms`, and one whose etcd never comes exits
/// with an error naming the address.
async fn connect_and_register(
    config: &BrokerConfig,
    registration: BrokerRegistration,
) -> Result<(MetadataStore, Session), BrokerError> {
    let timeout = Duration::from_millis(config.etcd_connect_timeout_ms);
    let started = std::time::Instant::now();
    let mut backoff = Duration::from_millis(100);
    let mut attempts = 0u32;
    // The most telling error seen: a refusal beats "no answer in time".
    let mut last: Option<StoreError> = None;
    loop {
        attempts += 1;
        let attempt = async {
            let store = MetadataStore::connect(&config.etcd).await?;
            let session = Session::open(&store, registration.clone(), config.lease_ttl_s).await?;
            Ok::<_, StoreError>((store, session))
        };
        let left = timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, attempt).await {
            Ok(Ok(connected)) => return Ok(connected),
            Ok(Err(e)) => last = Some(e),
            Err(_) => {
                last.get_or_insert(StoreError::Timeout(left));
            }
        }
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(BrokerError::EtcdUnreachable {
                endpoints: config.etcd.join(","),
                waited_ms: started.elapsed().as_millis() as u64,
                attempts,
                last: last.unwrap_or(StoreError::Timeout(timeout)),
            });
        }
        let pause = backoff.min(left);
        tracing::warn!(
            attempt = attempts,
            etcd = %config.etcd.join(","),
            error = %last.as_ref().map_or_else(String::new, ToString::to_string),
            retry_in_ms = pause.as_millis() as u64,
            "etcd not reachable yet; retrying"
        );
        tokio::time::sleep(pause).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// Start the broker and run it until `shutdown` resolves, then stop cleanly.
/// The passes in order: storage (the data directory locked, the logs
/// recovered), the listener bound, registration in etcd, the tasks started,
/// the `listening` file written; then, once `shutdown` resolves, the stop.
pub async fn run(
    config: BrokerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), BrokerError> {
    let data_dir = config.data_dir.clone();
    // Held until `run` returns; nothing below touches the directory first.
    let (_lock, logs, state_changes) = open_storage(&config)?;
    let (listener, bound) = bind(&config.listen).await?;
    let (advertised_host, advertised_port) =
        match config.advertised.as_deref().and_then(split_host_port) {
            Some((h, p)) => (h, p as i32),
            None => (bound.ip().to_string(), bound.port() as i32),
        };
    let registration = BrokerRegistration {
        id: config.node_id,
        host: advertised_host.clone(),
        port: advertised_port,
        incarnation: incarnation(),
    };
    let this_run = registration.incarnation;
    let (store, session) = connect_and_register(&config, registration).await?;
    let session = Arc::new(session);
    let topic_configs = Arc::new(TopicConfigs::new(BrokerDefaults {
        min_insync_replicas: config.min_insync_replicas,
        unclean_leader_election: config.unclean_leader_election,
        segment_bytes: config.segment_bytes,
        flush_messages: config.flush_messages,
        flush_interval_ms: config.flush_interval_ms,
    }));
    let replicas = Arc::new(
        ReplicaManager::new(
            config.node_id,
            config.min_insync_replicas,
            config.truncation,
            logs,
            Some(session.clone()),
        )
        .with_topic_configs(topic_configs)
        .with_incarnation(this_run, config.isr_join_fencing),
    );
    let broker = Arc::new(Broker::new(
        config,
        replicas,
        store.clone(),
        state_changes,
        (advertised_host, advertised_port),
    ));
    let (stop_tx, stop_rx) = watch::channel(false);
    let tasks = start_tasks(&broker, listener, &store, &session, &stop_rx)?;
    write_listening(&data_dir, &format!("{}:{}", bound.ip(), bound.port()))
        .map_err(BrokerError::data_dir(&data_dir))?;
    tracing::info!(%bound, node_id = broker.config.node_id, "broker ready");

    shutdown.await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    broker.fetchers.stop_all();
    for t in tasks {
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, t).await;
    }
    broker.replicas.shutdown()?;
    // Giving the lease back drops our registration (and the controller key, if
    // held) at once instead of after the TTL, like closing a ZooKeeper session.
    if let Err(e) = store.revoke_lease(session.lease().id).await {
        tracing::warn!(%e, "could not revoke the etcd lease");
    }
    tracing::info!("stopped cleanly");
    Ok(())
}

/// The first pass: the data directory created and locked (the lock file is
/// held as long as it is open), a previous run's `listening` file removed,
/// the logs recovered and the state-change log opened.
fn open_storage(
    config: &BrokerConfig,
) -> Result<(std::fs::File, LogManager, StateChangeLog), BrokerError> {
    let data_dir = &config.data_dir;
    std::fs::create_dir_all(data_dir).map_err(BrokerError::data_dir(data_dir))?;
    let lock = lock_data_dir(data_dir)?;
    // A stale address from a previous run must not be mistaken for this one's.
    let _ = std::fs::remove_file(data_dir.join(LISTENING_FILE));
    let logs = LogManager::open(
        data_dir,
        LogConfig {
            segment_bytes: config.segment_bytes,
            flush_messages: config.flush_messages,
            flush_interval_ms: config.flush_interval_ms,
            producer_state_recovery: config.producer_state_recovery,
        },
    )?;
    tracing::info!(
        clean_shutdown = logs.had_clean_shutdown(),
        partitions = logs.partitions().count(),
        "storage opened"
    );
    let state_changes = StateChangeLog::open(data_dir)?;
    Ok((lock, logs, state_changes))
}

/// The listener on `listen`, and the address it is bound to (port 0 picks one).
async fn bind(listen: &str) -> Result<(TcpListener, SocketAddr), BrokerError> {
    let bind_error = |source| BrokerError::Bind {
        addr: listen.to_string(),
        source,
    };
    let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    Ok((listener, bound))
}

/// Everything the broker runs until it stops: the listener, the session's
/// heartbeat (on a thread of its own), the controller election, the storage
/// maintenance, the watch of topic configs and the leader's ISR task.
fn start_tasks(
    broker: &Arc<Broker>,
    listener: TcpListener,
    store: &MetadataStore,
    session: &Arc<Session>,
    stop_rx: &watch::Receiver<bool>,
) -> Result<Vec<JoinHandle<()>>, BrokerError> {
    let mut tasks = Vec::new();
    tasks.push(tokio::spawn(listener::serve(
        listener,
        broker.clone(),
        stop_rx.clone(),
    )));
    {
        // The heartbeat on a thread and connection of its own, so disk work on
        // the runtime's workers cannot hold it (Session::keep_alive_on_own_thread).
        let stopped = session
            .clone()
            .keep_alive_on_own_thread(broker.config.etcd.clone(), stop_rx.clone())
            .map_err(BrokerError::SessionThread)?;
        tasks.push(tokio::spawn(async move {
            let _ = stopped.await;
        }));
    }
    let settings = Arc::new(ControllerSettings {
        node_id: broker.config.node_id,
        peers: broker.config.peers.clone(),
        controller_epoch_fencing: broker.config.controller_epoch_fencing,
        broker_epoch_fencing: broker.config.broker_epoch_fencing,
        unclean_leader_election: broker.config.unclean_leader_election,
    });
    tasks.push(tokio::spawn(election::run(
        store.clone(),
        settings,
        session.clone(),
        stop_rx.clone(),
    )));
    tasks.push(tokio::spawn(maintenance(broker.clone(), stop_rx.clone())));
    if let Some(jobs) = broker.transactions.take_marker_jobs() {
        tasks.push(tokio::spawn(transactions::markers::run(
            broker.clone(),
            jobs,
            stop_rx.clone(),
        )));
    }
    tasks.push(tokio::spawn(watch_topic_configs(
        store.clone(),
        broker.replicas.topic_configs().clone(),
        stop_rx.clone(),
    )));
    tasks.push(tokio::spawn(isr::run(
        broker.replicas.clone(),
        store.clone(),
        Duration::from_millis(broker.config.replica_lag_time_max_ms),
        stop_rx.clone(),
    )));
    Ok(tasks)
}

/// Periodic storage work: time-based flushes and the two checkpoints.
async fn maintenance(broker: Arc<Broker>, mut stop: watch::Receiver<bool>) {
    // Followers checkpoint their HW only this often, as Kafka does: the delay is
    // what makes KIP-101 scenario 1 reproducible.
    let hw_interval = Duration::from_millis(broker.config.hw_checkpoint_interval_ms);
    let mut last_hw = tokio::time::Instant::now();
    let mut last_recovery = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(FLUSH_CHECK_INTERVAL) => {}
        }
        if let Err(e) = broker.replicas.flush_if_due() {
            tracing::error!(%e, "time-based flush failed");
        }
        if last_hw.elapsed() >= hw_interval {
            last_hw = tokio::time::Instant::now();
            if let Err(e) = broker.replicas.checkpoint_high_watermarks() {
                tracing::error!(%e, "high-watermark checkpoint failed");
            }
        }
        if last_recovery.elapsed() >= RECOVERY_POINT_CHECKPOINT_INTERVAL {
            last_recovery = tokio::time::Instant::now();
            if let Err(e) = broker.replicas.checkpoint_recovery_points() {
                tracing::error!(%e, "recovery-point checkpoint failed");
            }
        }
    }
}

/// Write the bound address atomically (temp file, rename) so a launcher never
/// reads half of it.
fn write_listening(data_dir: &Path, addr: &str) -> std::io::Result<()> {
    let tmp = data_dir.join(format!("{LISTENING_FILE}.tmp"));
    std::fs::write(&tmp, format!("{addr}\n"))?;
    std::fs::rename(tmp, data_dir.join(LISTENING_FILE))
}

/// Distinguishes this run of the broker from an earlier run with the same id.
fn incarnation() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ ((std::process::id() as u64) << 32)
}
