//! A real single-node etcd for tests: on free loopback ports, in a tempdir,
//! killed and reaped when dropped (on panics too). Every wait has a deadline.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

const START_TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);

/// A child process killed and reaped when dropped.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Etcd {
    _child: Reaped,
    pub endpoint: String,
    _dir: TempDir,
}

/// A single-node etcd on free loopback ports with fast elections; a port
/// clash (another process took a probed port) makes etcd exit, and we retry.
pub async fn start_etcd() -> Etcd {
    for _attempt in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let (client, peer) = (free_port(), free_port());
        let log = std::fs::File::create(dir.path().join("etcd.log")).unwrap();
        let url = |p: u16| format!("http://127.0.0.1:{p}");
        let child = Command::new("/usr/bin/etcd")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--name", "n0"])
            .args(["--listen-client-urls", &url(client)])
            .args(["--advertise-client-urls", &url(client)])
            .args(["--listen-peer-urls", &url(peer)])
            .args(["--initial-advertise-peer-urls", &url(peer)])
            .args(["--initial-cluster", &format!("n0={}", url(peer))])
            .args(["--heartbeat-interval", "50", "--election-timeout", "300"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd must be installed at /usr/bin/etcd (Debian: etcd-server)");
        let mut child = Reaped(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(_)) = child.0.try_wait() {
                break; // most likely a port clash: retry on fresh ports
            }
            if etcd_healthy(client).await {
                return Etcd {
                    _child: child,
                    endpoint: url(client),
                    _dir: dir,
                };
            }
            assert!(
                Instant::now() < deadline,
                "etcd not healthy within {START_TIMEOUT:?}; log:\n{}",
                std::fs::read_to_string(dir.path().join("etcd.log")).unwrap_or_default()
            );
            tokio::time::sleep(POLL).await;
        }
    }
    panic!("etcd failed to start 5 times");
}

async fn etcd_healthy(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let probe = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        s.write_all(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .await
            .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        Some(out.contains("\"health\":\"true\""))
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), probe).await,
        Ok(Some(true))
    )
}

/// Assigns topic `t`'s partitions (`{"0":[1,2,3],...}`) the way CreateTopics
/// does (broker/README.md's key layout), through the etcd at `endpoint`.
pub async fn assign_topic_t(endpoint: &str, partitions: &str) {
    let mut client = etcd_client::Client::connect([endpoint], None)
        .await
        .unwrap();
    client
        .put(
            "/epochal/brokers/topics/t",
            format!(r#"{{"partitions":{partitions}}}"#),
            None,
        )
        .await
        .unwrap();
}
