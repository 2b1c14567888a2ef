//! Whether a started etcd serves: the one probe both runtimes poll after
//! starting it, each under its own deadline. It asks etcd only that it answer
//! a read; what the cluster's state in etcd means is observe/'s to judge.

use std::time::Duration;

/// Whether etcd at `endpoint` answers a read within half a second; a runtime
/// polls this, under its own deadline, after starting etcd.
pub async fn etcd_healthy(endpoint: &str) -> bool {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_millis(500))
        .with_timeout(Duration::from_millis(500));
    match etcd_client::Client::connect([endpoint], Some(options)).await {
        Ok(mut client) => client.get("/epochal/health-probe", None).await.is_ok(),
        Err(_) => false,
    }
}
