//! The set of proxies one `epochal-proxy` serves, and every change the API makes
//! to them.
//!
//! Each proxy has a configuration (listen, upstream, enabled), an ordered list of
//! toxics, and while enabled a listener and its connections. Toxic changes are
//! published to the running links through a watch channel, so they reach live
//! connections at once; enabling binds, disabling closes the listener and every
//! live connection before the API answers, as Toxiproxy does. All changes go
//! through one lock, so API calls apply one at a time and in order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::TcpListener;
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;
use tracing::info;

use super::connection::Connections;
use super::link::{Chain, ChainToxic};
use super::toxics::ToxicKind;
use super::wire::{ProxyJson, Stream, ToxicJson};

/// Every way an API call fails, with Toxiproxy's message (the API gives each
/// its status code, `api.rs`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    #[error("bad request body: {0}")]
    BadRequestBody(String),
    #[error("missing required field: {0}")]
    MissingField(String),
    #[error("proxy not found")]
    ProxyNotFound,
    #[error("proxy already exists")]
    ProxyAlreadyExists,
    #[error("stream was invalid, can be either upstream or downstream")]
    InvalidStream,
    #[error("invalid toxic type")]
    InvalidToxicType,
    #[error("toxic already exists")]
    ToxicAlreadyExists,
    #[error("toxic not found")]
    ToxicNotFound,
    /// Binding or resolving a listen address failed (Toxiproxy answers 500).
    #[error("{0}")]
    Listen(String),
}

/// A proxy as a create, populate or update request leaves it.
#[derive(Clone, Debug)]
pub(crate) struct ProxySpec {
    pub name: String,
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
}

/// A toxic as a create request leaves it, already validated.
#[derive(Clone, Debug)]
pub(crate) struct ToxicSpec {
    pub name: String,
    pub stream: Stream,
    pub toxicity: f32,
    pub kind: ToxicKind,
}

struct Running {
    listener: JoinHandle<()>,
    connections: Arc<Connections>,
}

struct Proxy {
    name: String,
    /// The bound address once started (so port 0 shows the port it got).
    listen: String,
    upstream: String,
    toxics: Vec<ChainToxic>,
    chain: watch::Sender<Chain>,
    running: Option<Running>,
}

impl Proxy {
    fn new(spec: &ProxySpec) -> Self {
        let (chain, _) = watch::channel(Arc::new(Vec::new()));
        Proxy {
            name: spec.name.clone(),
            listen: spec.listen.clone(),
            upstream: spec.upstream.clone(),
            toxics: Vec::new(),
            chain,
            running: None,
        }
    }

    fn json(&self) -> ProxyJson {
        ProxyJson {
            name: self.name.clone(),
            listen: self.listen.clone(),
            upstream: self.upstream.clone(),
            enabled: self.running.is_some(),
            toxics: self.toxics.iter().map(ChainToxic::json).collect(),
        }
    }

    async fn start(&mut self) -> Result<(), ApiError> {
        if self.running.is_some() {
            return Ok(());
        }
        let listener = TcpListener::bind(&self.listen)
            .await
            .map_err(|error| ApiError::Listen(format!("listen tcp {}: {error}", self.listen)))?;
        if let Ok(bound) = listener.local_addr() {
            self.listen = bound.to_string();
        }
        let connections = Connections::new(&self.name, &self.upstream, self.chain.subscribe());
        let listener = tokio::spawn(Arc::clone(&connections).accept_loop(listener));
        self.running = Some(Running {
            listener,
            connections,
        });
        info!(proxy = %self.name, listen = %self.listen, upstream = %self.upstream, "proxy started");
        Ok(())
    }

    async fn stop(&mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        // Aborting the accept loop drops the listener: new connections are refused
        // from here on.
        running.listener.abort();
        let _ = running.listener.await;
        running.connections.close_all().await;
        info!(proxy = %self.name, "proxy stopped");
    }

    fn publish(&self) {
        self.chain.send_replace(Arc::new(self.toxics.clone()));
    }

    fn toxic_index(&self, name: &str) -> Result<usize, ApiError> {
        self.toxics
            .iter()
            .position(|toxic| toxic.name == name)
            .ok_or(ApiError::ToxicNotFound)
    }

    fn remove_all_toxics(&mut self) {
        if self.toxics.is_empty() {
            return;
        }
        for toxic in self.toxics.drain(..) {
            info!(proxy = %self.name, toxic = %toxic.name, "toxic removed");
        }
        self.publish();
    }
}

#[derive(Default)]
pub(crate) struct Collection {
    proxies: Mutex<BTreeMap<String, Proxy>>,
    next_toxic_id: AtomicU64,
}

impl Collection {
    pub async fn list(&self) -> BTreeMap<String, ProxyJson> {
        let proxies = self.proxies.lock().await;
        proxies
            .iter()
            .map(|(name, proxy)| (name.clone(), proxy.json()))
            .collect()
    }

    pub async fn get(&self, name: &str) -> Result<ProxyJson, ApiError> {
        let proxies = self.proxies.lock().await;
        proxies
            .get(name)
            .map(Proxy::json)
            .ok_or(ApiError::ProxyNotFound)
    }

    pub async fn create(&self, spec: ProxySpec) -> Result<ProxyJson, ApiError> {
        let mut proxies = self.proxies.lock().await;
        if proxies.contains_key(&spec.name) {
            return Err(ApiError::ProxyAlreadyExists);
        }
        let mut proxy = Proxy::new(&spec);
        if spec.enabled {
            proxy.start().await?;
        }
        let shown = proxy.json();
        proxies.insert(spec.name, proxy);
        Ok(shown)
    }

    /// Creates or replaces each proxy in turn. A proxy whose listen address and
    /// upstream match an existing one is left as it is, toxics included; one that
    /// differs replaces it. On an error, returns the proxies handled before it.
    pub async fn populate(&self, specs: Vec<ProxySpec>) -> (Vec<ProxyJson>, Option<ApiError>) {
        let mut proxies = self.proxies.lock().await;
        let mut shown = Vec::new();
        for spec in specs {
            if let Some(existing) = proxies.get_mut(&spec.name) {
                match same_address(&existing.listen, &spec.listen).await {
                    Ok(true) if existing.upstream == spec.upstream => {
                        shown.push(existing.json());
                        continue;
                    }
                    Ok(_) => existing.stop().await,
                    Err(error) => return (shown, Some(error)),
                }
                proxies.remove(&spec.name);
            }
            let mut proxy = Proxy::new(&spec);
            if spec.enabled
                && let Err(error) = proxy.start().await
            {
                return (shown, Some(error));
            }
            shown.push(proxy.json());
            proxies.insert(spec.name, proxy);
        }
        (shown, None)
    }

    /// Applies `listen`, `upstream` and `enabled`: a new address restarts the proxy
    /// (dropping its connections), `enabled` starts or stops it.
    pub async fn update(
        &self,
        name: &str,
        listen: Option<String>,
        upstream: Option<String>,
        enabled: Option<bool>,
    ) -> Result<ProxyJson, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let proxy = proxies.get_mut(name).ok_or(ApiError::ProxyNotFound)?;
        let was_enabled = proxy.running.is_some();
        let listen = listen.unwrap_or_else(|| proxy.listen.clone());
        let upstream = upstream.unwrap_or_else(|| proxy.upstream.clone());
        let moved = !same_address(&proxy.listen, &listen).await? || upstream != proxy.upstream;
        if moved {
            proxy.stop().await;
            proxy.listen = listen;
            proxy.upstream = upstream;
        }
        let enabled = enabled.unwrap_or(was_enabled);
        if enabled {
            proxy.start().await?;
        } else {
            proxy.stop().await;
        }
        Ok(proxy.json())
    }

    pub async fn delete(&self, name: &str) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        let mut proxy = proxies.remove(name).ok_or(ApiError::ProxyNotFound)?;
        proxy.stop().await;
        info!(proxy = %name, "proxy deleted");
        Ok(())
    }

    pub async fn toxics(&self, name: &str) -> Result<Vec<ToxicJson>, ApiError> {
        Ok(self.get(name).await?.toxics)
    }

    pub async fn toxic(&self, name: &str, toxic: &str) -> Result<ToxicJson, ApiError> {
        let proxies = self.proxies.lock().await;
        let proxy = proxies.get(name).ok_or(ApiError::ProxyNotFound)?;
        Ok(proxy.toxics[proxy.toxic_index(toxic)?].json())
    }

    /// Checks only the proxy and the name; the API validated the rest.
    pub async fn contains_toxic(&self, name: &str, toxic: &str) -> Result<bool, ApiError> {
        let proxies = self.proxies.lock().await;
        let proxy = proxies.get(name).ok_or(ApiError::ProxyNotFound)?;
        Ok(proxy.toxic_index(toxic).is_ok())
    }

    pub async fn add_toxic(&self, name: &str, spec: ToxicSpec) -> Result<ToxicJson, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let proxy = proxies.get_mut(name).ok_or(ApiError::ProxyNotFound)?;
        if proxy.toxic_index(&spec.name).is_ok() {
            return Err(ApiError::ToxicAlreadyExists);
        }
        let toxic = ChainToxic {
            id: self.next_toxic_id.fetch_add(1, Ordering::Relaxed),
            revision: 0,
            name: spec.name,
            stream: spec.stream,
            toxicity: spec.toxicity,
            kind: spec.kind,
        };
        let shown = toxic.json();
        info!(proxy = %proxy.name, toxic = %shown.name, r#type = %shown.kind, stream = %shown.stream,
              toxicity = shown.toxicity, attributes = %shown.attributes, "toxic added");
        proxy.toxics.push(toxic);
        proxy.publish();
        Ok(shown)
    }

    /// Merges `attributes` into the toxic's and sets `toxicity` if given.
    pub async fn update_toxic(
        &self,
        name: &str,
        toxic: &str,
        attributes: Option<serde_json::Value>,
        toxicity: Option<f32>,
    ) -> Result<ToxicJson, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let proxy = proxies.get_mut(name).ok_or(ApiError::ProxyNotFound)?;
        let index = proxy.toxic_index(toxic)?;
        let current = &proxy.toxics[index];
        let kind = match &attributes {
            Some(changes) => current
                .kind
                .with_changes(changes)
                .map_err(|error| ApiError::BadRequestBody(error.to_string()))?,
            None => current.kind.clone(),
        };
        let updated = ChainToxic {
            revision: current.revision + 1,
            toxicity: toxicity.unwrap_or(current.toxicity),
            kind,
            ..current.clone()
        };
        let shown = updated.json();
        info!(proxy = %proxy.name, toxic = %shown.name, toxicity = shown.toxicity,
              attributes = %shown.attributes, "toxic updated");
        proxy.toxics[index] = updated;
        proxy.publish();
        Ok(shown)
    }

    pub async fn remove_toxic(&self, name: &str, toxic: &str) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        let proxy = proxies.get_mut(name).ok_or(ApiError::ProxyNotFound)?;
        let index = proxy.toxic_index(toxic)?;
        proxy.toxics.remove(index);
        info!(proxy = %proxy.name, toxic = %toxic, "toxic removed");
        proxy.publish();
        Ok(())
    }

    /// Enables every proxy and removes every toxic.
    pub async fn reset(&self) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        for proxy in proxies.values_mut() {
            proxy.start().await?;
            proxy.remove_all_toxics();
        }
        Ok(())
    }

    /// Stops every proxy, closing listeners and connections.
    pub async fn shutdown(&self) {
        let mut proxies = self.proxies.lock().await;
        for proxy in proxies.values_mut() {
            proxy.stop().await;
        }
    }

    /// Best effort for a server dropped without [`Collection::shutdown`]: aborts
    /// every listener and connection task so their sockets close.
    pub fn abort_all(&self) {
        if let Ok(proxies) = self.proxies.try_lock() {
            for proxy in proxies.values() {
                if let Some(running) = &proxy.running {
                    running.listener.abort();
                    running.connections.abort_all();
                }
            }
        }
    }
}

/// Whether `requested` names the address `current` shows. Toxiproxy compares the
/// resolved request with the bound address, so port 0 never matches.
async fn same_address(current: &str, requested: &str) -> Result<bool, ApiError> {
    if current == requested {
        return Ok(true);
    }
    let resolved = tokio::net::lookup_host(requested)
        .await
        .map_err(|error| ApiError::Listen(format!("resolve {requested}: {error}")))?
        .next();
    Ok(resolved.is_some_and(|address| address.to_string() == current))
}
