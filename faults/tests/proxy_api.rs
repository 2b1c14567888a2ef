//! The HTTP API answers as Toxiproxy does: routes, JSON fields, status codes and
//! `{"error": ..., "status": ...}` bodies. Raw requests here check the wire; our
//! client is checked against the same server.

use crate::common;

use common::*;
use epochal_faults::proxy::toxics::Latency;
use epochal_faults::proxy::{NewProxy, OnHeal, Stream, ToxicJson, ToxicKind};
use serde_json::{Value, json};

/// One raw request: `(status, parsed JSON body or Null when empty)`.
async fn request(method: reqwest::Method, url: String, body: Option<&str>) -> (u16, Value) {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(DEADLINE)
        .build()
        .unwrap();
    let mut request = http.request(method, url);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    let response = within("API request", request.send())
        .await
        .expect("API answers");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text:?}"))
    };
    (status, body)
}

#[tokio::test]
async fn errors_carry_toxiproxy_status_codes_and_bodies() {
    let (server, _client) = start_server().await;
    let base = format!("http://{}", server.address());
    let upstream = upstream().await;
    let create = json!({"name": "dup", "listen": "127.0.0.1:0",
                        "upstream": upstream.local_addr().unwrap().to_string()})
    .to_string();
    use reqwest::Method;

    let (status, body) = request(Method::GET, format!("{base}/proxies/nope"), None).await;
    assert_eq!(
        (status, body),
        (404, json!({"error": "proxy not found", "status": 404}))
    );

    let (status, body) = request(Method::DELETE, format!("{base}/proxies/nope"), None).await;
    assert_eq!(
        (status, body),
        (404, json!({"error": "proxy not found", "status": 404}))
    );

    let (status, body) = request(Method::POST, format!("{base}/proxies"), Some(&create)).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = request(Method::POST, format!("{base}/proxies"), Some(&create)).await;
    assert_eq!(
        (status, body),
        (409, json!({"error": "proxy already exists", "status": 409}))
    );

    let (status, body) = request(Method::POST, format!("{base}/proxies"), Some("{not json")).await;
    assert_eq!(status, 400);
    assert_eq!(body["status"], 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("bad request body: "),
        "{body}"
    );

    let (status, body) = request(
        Method::POST,
        format!("{base}/proxies"),
        Some(r#"{"name": "x"}"#),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"error": "missing required field: upstream", "status": 400})
        )
    );

    let toxics = format!("{base}/proxies/dup/toxics");
    let (status, body) = request(Method::POST, toxics.clone(), Some("[")).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("bad request body: "),
        "{body}"
    );

    let (status, body) = request(
        Method::POST,
        toxics.clone(),
        Some(r#"{"type": "frobnicate"}"#),
    )
    .await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "invalid toxic type", "status": 400}))
    );

    let (status, body) = request(
        Method::POST,
        toxics.clone(),
        Some(r#"{"type": "latency", "stream": "sideways"}"#),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"error": "stream was invalid, can be either upstream or downstream", "status": 400})
        )
    );

    let latency = r#"{"type": "latency", "attributes": {"latency": 10}}"#;
    let (status, _) = request(Method::POST, toxics.clone(), Some(latency)).await;
    assert_eq!(status, 200);
    let (status, body) = request(Method::POST, toxics.clone(), Some(latency)).await;
    assert_eq!(
        (status, body),
        (409, json!({"error": "toxic already exists", "status": 409}))
    );

    let (status, body) = request(Method::GET, format!("{toxics}/nope"), None).await;
    assert_eq!(
        (status, body),
        (404, json!({"error": "toxic not found", "status": 404}))
    );
    let (status, body) = request(Method::DELETE, format!("{toxics}/nope"), None).await;
    assert_eq!(
        (status, body),
        (404, json!({"error": "toxic not found", "status": 404}))
    );
    let (status, body) = request(Method::GET, format!("{base}/proxies/nope/toxics"), None).await;
    assert_eq!(
        (status, body),
        (404, json!({"error": "proxy not found", "status": 404}))
    );

    server.shutdown().await;
}

#[tokio::test]
async fn proxies_and_toxics_show_toxiproxy_fields() {
    let (server, _client) = start_server().await;
    let base = format!("http://{}", server.address());
    let upstream = upstream().await;
    let upstream_address = upstream.local_addr().unwrap().to_string();
    use reqwest::Method;

    let create =
        json!({"name": "db", "listen": "127.0.0.1:0", "upstream": upstream_address}).to_string();
    let (status, proxy) = request(Method::POST, format!("{base}/proxies"), Some(&create)).await;
    assert_eq!(status, 201);
    let listen = proxy["listen"].as_str().unwrap().to_owned();
    assert!(
        !listen.ends_with(":0"),
        "port 0 is replaced by the port bound: {listen}"
    );
    assert_eq!(
        proxy,
        json!({"name": "db", "listen": listen, "upstream": upstream_address, "enabled": true, "toxics": []})
    );

    // Toxic defaults: stream downstream, toxicity 1, name <type>_<stream>.
    let (status, toxic) = request(
        Method::POST,
        format!("{base}/proxies/db/toxics"),
        Some(r#"{"type": "latency", "attributes": {"latency": 25}}"#),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        toxic,
        json!({"name": "latency_downstream", "type": "latency", "stream": "downstream",
               "toxicity": 1.0, "attributes": {"latency": 25, "jitter": 0}})
    );

    // An update merges attributes and keeps what it does not name.
    let (status, toxic) = request(
        Method::PATCH,
        format!("{base}/proxies/db/toxics/latency_downstream"),
        Some(r#"{"attributes": {"jitter": 5}}"#),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(toxic["attributes"], json!({"latency": 25, "jitter": 5}));
    assert_eq!(toxic["toxicity"], 1.0);

    let (_, all) = request(Method::GET, format!("{base}/proxies"), None).await;
    assert_eq!(all["db"]["toxics"][0]["name"], "latency_downstream");

    // Disable through the deprecated POST form the old clients use.
    let (status, proxy) = request(
        Method::POST,
        format!("{base}/proxies/db"),
        Some(r#"{"enabled": false}"#),
    )
    .await;
    assert_eq!((status, proxy["enabled"].clone()), (200, json!(false)));
    assert_eq!(proxy["listen"], listen.as_str());

    let (status, body) = request(Method::POST, format!("{base}/reset"), None).await;
    assert_eq!((status, body), (204, Value::Null));
    let (_, proxy) = request(Method::GET, format!("{base}/proxies/db"), None).await;
    assert_eq!(proxy["enabled"], true);
    assert_eq!(proxy["toxics"], json!([]));

    let (status, version) = request(Method::GET, format!("{base}/version"), None).await;
    assert_eq!(status, 200);
    assert!(version["version"].is_string());

    let (status, _) = request(Method::DELETE, format!("{base}/proxies/db"), None).await;
    assert_eq!(status, 204);
    let (_, all) = request(Method::GET, format!("{base}/proxies"), None).await;
    assert_eq!(all, json!({}));
    server.shutdown().await;
}

#[tokio::test]
async fn populate_creates_keeps_and_replaces() {
    let (server, _client) = start_server().await;
    let base = format!("http://{}", server.address());
    let upstream = upstream().await;
    let upstream_address = upstream.local_addr().unwrap().to_string();
    use reqwest::Method;

    let batch =
        json!([{"name": "a", "upstream": upstream_address, "listen": "127.0.0.1:0"}]).to_string();
    let (status, body) = request(Method::POST, format!("{base}/populate"), Some(&batch)).await;
    assert_eq!(status, 201);
    let listen = body["proxies"][0]["listen"].as_str().unwrap().to_owned();

    // The same proxy again, at its bound address: left alone, toxics included.
    request(
        Method::POST,
        format!("{base}/proxies/a/toxics"),
        Some(r#"{"type": "timeout"}"#),
    )
    .await;
    let same = json!([{"name": "a", "upstream": upstream_address, "listen": listen}]).to_string();
    let (status, body) = request(Method::POST, format!("{base}/populate"), Some(&same)).await;
    assert_eq!(status, 201);
    assert_eq!(body["proxies"][0]["toxics"][0]["type"], "timeout");

    let missing = json!([{"name": "b"}]).to_string();
    let (status, body) = request(Method::POST, format!("{base}/populate"), Some(&missing)).await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"error": "missing required field: upstream at proxy 1", "status": 400})
        )
    );
    server.shutdown().await;
}

#[tokio::test]
async fn our_client_round_trips_every_call() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let upstream_address = upstream.local_addr().unwrap().to_string();

    assert!(!client.version().await.unwrap().is_empty());
    let proxy = client
        .create_proxy(&NewProxy::new(
            "b1-b2",
            "127.0.0.1:0",
            upstream_address.clone(),
        ))
        .await
        .unwrap();
    assert_eq!(client.proxy("b1-b2").await.unwrap(), proxy);
    let error = client
        .create_proxy(&NewProxy::new(
            "b1-b2",
            "127.0.0.1:0",
            upstream_address.clone(),
        ))
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(409), "{error}");
    assert_eq!(client.proxy("nope").await.unwrap_err().status(), Some(404));

    let latency = ToxicKind::Latency(Latency {
        latency: 5,
        jitter: 1,
    });
    let added = client
        .add_toxic(
            "b1-b2",
            &ToxicJson::new(Stream::Upstream, &latency).with_toxicity(0.5),
        )
        .await
        .unwrap();
    assert_eq!(added.name, "latency_upstream");
    assert_eq!(added.toxic_kind().unwrap(), latency);
    let slower = ToxicKind::Latency(Latency {
        latency: 9,
        jitter: 0,
    });
    let updated = client
        .update_toxic("b1-b2", "latency_upstream", &slower, 1.0)
        .await
        .unwrap();
    assert_eq!(
        (updated.toxic_kind().unwrap(), updated.toxicity),
        (slower, 1.0)
    );
    let cut = client
        .partition("b1-b2", Stream::Downstream, OnHeal::Reset)
        .await
        .unwrap();
    assert_eq!(cut.attributes, json!({"on_heal": "reset"}));
    assert_eq!(client.toxics("b1-b2").await.unwrap().len(), 2);
    client.heal("b1-b2", Stream::Downstream).await.unwrap();
    assert_eq!(
        client
            .toxic("b1-b2", "partition_downstream")
            .await
            .unwrap_err()
            .status(),
        Some(404)
    );

    assert!(!client.set_enabled("b1-b2", false).await.unwrap().enabled);
    client.reset().await.unwrap();
    let proxy = client.proxy("b1-b2").await.unwrap();
    assert!(proxy.enabled && proxy.toxics.is_empty());

    let populated = client
        .populate(&[NewProxy::new("b2-b1", "127.0.0.1:0", upstream_address)])
        .await
        .unwrap();
    assert_eq!(populated[0].name, "b2-b1");
    assert_eq!(client.proxies().await.unwrap().len(), 2);
    client.delete_proxy("b2-b1").await.unwrap();
    assert_eq!(client.proxies().await.unwrap().len(), 1);
    server.shutdown().await;
}
