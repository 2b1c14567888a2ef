//! The real `epochal-broker` binary as a child process on a port it picks
//! itself (`--listen 127.0.0.1:0`); its address is read from `<data>/listening`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct BrokerProcess {
    child: Option<Child>,
    pub node_id: i32,
    pub data_dir: PathBuf,
    pub addr: String,
    args: Vec<String>,
    /// Extra environment (e.g. `EPOCHAL_FAILPOINTS`), kept across restarts.
    env: Vec<(String, String)>,
    log_path: PathBuf,
}

impl BrokerProcess {
    pub fn start(node_id: i32, etcd: &str, data_dir: &Path, extra: &[&str]) -> BrokerProcess {
        Self::start_with_env(node_id, etcd, data_dir, extra, &[])
    }

    /// [`BrokerProcess::start`] with extra environment variables.
    pub fn start_with_env(
        node_id: i32,
        etcd: &str,
        data_dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> BrokerProcess {
        let mut args: Vec<String> = vec![
            "--node-id".into(),
            node_id.to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--etcd".into(),
            etcd.to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let log_path = data_dir.with_extension("log");
        let mut b = BrokerProcess {
            child: None,
            node_id,
            data_dir: data_dir.to_path_buf(),
            addr: String::new(),
            args,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            log_path,
        };
        b.spawn();
        b
    }

    /// Start with exactly `args` (for a broker configured through `--config`).
    pub fn start_with_args(node_id: i32, data_dir: &Path, args: &[&str]) -> BrokerProcess {
        let mut b = BrokerProcess {
            child: None,
            node_id,
            data_dir: data_dir.to_path_buf(),
            addr: String::new(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            log_path: data_dir.with_extension("log"),
        };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        let _ = std::fs::remove_file(self.data_dir.join("listening"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_epochal-broker"))
            .args(&self.args)
            .env("RUST_LOG", "info")
            .env_remove("EPOCHAL_FAILPOINTS")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn epochal-broker");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(text) = std::fs::read_to_string(self.data_dir.join("listening")) {
                self.addr = text.trim().to_string();
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "broker {} exited during start ({status}); log:\n{}",
                    self.node_id,
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "broker {} wrote no listening file in 20 s; log:\n{}",
                self.node_id,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The process state letter from /proc (R, S, T = stopped, …).
    pub fn proc_state(&self) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        // `pid (comm) S …`: the state follows the last ')'.
        stat.rsplit_once(')')?.1.trim_start().chars().next()
    }

    /// Send a signal to the running broker.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid() as i32), signal).unwrap();
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait (bounded) for a clean exit; returns whether it exited 0.
    pub fn terminate(&mut self, timeout: Duration) -> bool {
        let Some(mut c) = self.child.take() else {
            return false;
        };
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                return status.success();
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}
