//! A throwaway single-node etcd on free loopback ports with fast elections.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub struct Etcd {
    child: Child,
    pub endpoint: String,
    /// Holds etcd's data directory until the guard drops.
    _dir: TempDir,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_millis(200),
    ) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_millis(500))).ok();
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.contains("\"health\":\"true\"")
}

impl Etcd {
    /// Start etcd; a port clash (another process took a port between our probe
    /// and etcd's bind) makes etcd exit, and we retry on fresh ports.
    pub fn start() -> Etcd {
        for _attempt in 0..5 {
            if let Some(etcd) = Self::try_start(free_port()) {
                return etcd;
            }
        }
        panic!("etcd failed to start 5 times");
    }

    /// Start etcd serving clients on `client` (a port the caller chose, e.g.
    /// one a broker already dials); `None` if etcd exited at start (the port
    /// was taken).
    pub fn try_start(client: u16) -> Option<Etcd> {
        {
            let dir = tempfile::tempdir().unwrap();
            let peer = free_port();
            let log = std::fs::File::create(dir.path().join("etcd.log")).unwrap();
            let mut child = Command::new("etcd")
                .args([
                    "--name",
                    "n0",
                    "--data-dir",
                    dir.path().join("data").to_str().unwrap(),
                    "--listen-client-urls",
                    &format!("http://127.0.0.1:{client}"),
                    "--advertise-client-urls",
                    &format!("http://127.0.0.1:{client}"),
                    "--listen-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                    "--initial-cluster",
                    &format!("n0=http://127.0.0.1:{peer}"),
                    "--heartbeat-interval",
                    "50",
                    "--election-timeout",
                    "300",
                ])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("etcd must be installed (Debian: etcd-server)");
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    return None; // exited: most likely a port clash
                }
                if healthy(client) {
                    return Some(Etcd {
                        child,
                        endpoint: format!("http://127.0.0.1:{client}"),
                        _dir: dir,
                    });
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "etcd did not become healthy within 15 s; log in {:?}",
                        dir.keep()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Run `f` with a fresh connection of etcd's own client; None if it
    /// cannot connect or `f` gives None.
    fn with_client<T>(
        &self,
        f: impl AsyncFnOnce(&mut etcd_client::Client) -> Option<T>,
    ) -> Option<T> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut client = etcd_client::Client::connect([self.endpoint.as_str()], None)
                .await
                .ok()?;
            f(&mut client).await
        })
    }

    /// Read one key's value with etcd's own client.
    pub fn get(&self, key: &str) -> Option<String> {
        self.with_client(async |client| {
            let resp = client.get(key, None).await.ok()?;
            resp.kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
        })
    }

    /// Every value `key` has held since it was last created, oldest first,
    /// read back through etcd's revisions (nothing in a test compacts them).
    /// A poll sees only the value of the moment; this also sees a state that
    /// a later write replaced before the poll came round.
    pub fn history(&self, key: &str) -> Vec<String> {
        self.with_client(async |client| {
            let mut values = Vec::new();
            let mut at = None;
            loop {
                let options = at.map(|r| etcd_client::GetOptions::new().with_revision(r));
                let Ok(resp) = client.get(key, options).await else {
                    break;
                };
                let Some(kv) = resp.kvs().first() else { break };
                values.push(String::from_utf8_lossy(kv.value()).into_owned());
                // Version 1 is the value the key was created with.
                if kv.version() <= 1 {
                    break;
                }
                at = Some(kv.mod_revision() - 1);
            }
            values.reverse();
            Some(values)
        })
        .unwrap_or_default()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
