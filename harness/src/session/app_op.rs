//! One op of an application before it is put on a process (app.rs,
//! app_groups.rs make them), and what every such op says of where it came
//! from.

use serde_json::{Value, json};

use crate::history::{Body, OpType};
use crate::node::NodeId;
use crate::reader::app_frames::Exchange;

/// One op of the application: its invoke and completion, not yet on a
/// process.
pub(super) struct AppOp {
    pub invoke_ns: u64,
    pub complete_ns: u64,
    pub connection: (String, u64),
    pub kind: OpType,
    /// The completion's body; the invoke's too unless `asked` says.
    pub body: Body,
    /// The invoke's body, when it must not hold what the answer said.
    pub asked: Option<Body>,
    pub error: Option<String>,
    pub app: Value,
}

/// The node behind a client link (`client-b2`: b2).
pub(super) fn node_of(proxy: &str) -> Option<NodeId> {
    proxy.strip_prefix("client-")?.parse().ok()
}

/// What every app op's `app` says of where it came from.
pub(super) fn origin(exchange: &Exchange) -> serde_json::Map<String, Value> {
    let mut app = serde_json::Map::new();
    app.insert("client_id".into(), json!(exchange.client_id));
    app.insert("proxy".into(), json!(exchange.proxy));
    app.insert("connection".into(), json!(exchange.connection));
    app.insert("correlation_id".into(), json!(exchange.correlation_id));
    app
}
