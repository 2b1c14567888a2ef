//! The proxy's HTTP API bodies for toxics: any bytes a client posts to
//! `POST /proxies/{p}/toxics` (create) and then to
//! `POST /proxies/{p}/toxics/{t}` (update, which merges attributes) go through
//! the real API router in process — Toxiproxy's order of checks, its status
//! codes and error bodies — and get an answer, never a panic. Each toxic the
//! API accepted is then put through the calculations the proxy's links make
//! with it (a latency's delay and its deadline, a slicer's cut, a bandwidth's
//! pacing, a timeout's close time), since a value the API lets in must not
//! panic there either. The client's side (`ToxicJson`) reads the bodies too.
//!
//! The proxy `p` is created disabled, so nothing binds a socket.
#![no_main]
use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use epochal_faults::proxy::{READ_CHUNK_BYTES, ToxicJson, ToxicKind};
use libfuzzer_sys::fuzz_target;
use tokio::time::Instant;
use tower::ServiceExt;

struct World {
    runtime: tokio::runtime::Runtime,
    api: Router,
}

async fn call(api: &Router, method: Method, path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a request");
    let response = api
        .clone()
        .oneshot(request)
        .await
        .expect("the router is infallible");
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("a response body");
    (status, body.to_vec())
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let api = epochal_faults::proxy::api_service();
        let proxy = br#"{"name":"p","upstream":"127.0.0.1:9","enabled":false}"#.to_vec();
        let (status, body) = runtime.block_on(call(&api, Method::POST, "/proxies", proxy));
        assert_eq!(
            status,
            StatusCode::CREATED,
            "{}",
            String::from_utf8_lossy(&body)
        );
        World { runtime, api }
    })
}

/// A toxic name as a path segment: every byte outside [A-Za-z0-9_.-] escaped.
fn path_segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// What the link engine computes from a toxic (faults/src/proxy/link.rs).
fn exercise(kind: &ToxicKind) {
    let now = Instant::now();
    match kind {
        ToxicKind::Latency(latency) => {
            let delay = latency.sample_delay();
            let _ = now + delay + latency.sample_delay();
        }
        ToxicKind::Bandwidth(bandwidth) => {
            for bytes in [0, 1, READ_CHUNK_BYTES] {
                let _ = now + bandwidth.transmit_time(bytes);
            }
            let _ = bandwidth.piece_bytes_max();
        }
        ToxicKind::Timeout(timeout) => {
            if let Some(after) = timeout.closes_after() {
                let _ = now + after;
            }
        }
        ToxicKind::ResetPeer(reset) => {
            let _ = now + reset.delay();
        }
        ToxicKind::SlowClose(slow) => {
            let _ = now + slow.delay();
        }
        ToxicKind::Slicer(slicer) => {
            for len in [0, 1, 100, READ_CHUNK_BYTES] {
                let pieces = slicer.cut(len);
                assert_eq!(pieces.iter().sum::<usize>(), len, "{slicer:?} cut {len}");
                assert!(
                    pieces.iter().all(|p| *p > 0),
                    "{slicer:?} cut {len}: {pieces:?}"
                );
            }
            let _ = now + slicer.gap();
        }
        ToxicKind::LimitData(_) | ToxicKind::Partition(_) => {}
    }
}

fn accepted(status: StatusCode, body: &[u8]) -> Option<ToxicJson> {
    if status != StatusCode::OK {
        return None;
    }
    let toxic: ToxicJson = serde_json::from_slice(body).expect("the API answers a toxic");
    let kind = toxic
        .toxic_kind()
        .expect("the API shows a toxic it accepted");
    exercise(&kind);
    Some(toxic)
}

fuzz_target!(|data: &[u8]| {
    // The client side: a toxic as Toxiproxy (or epochal-proxy) shows it.
    if let Ok(toxic) = serde_json::from_slice::<ToxicJson>(data)
        && let Ok(kind) = toxic.toxic_kind()
    {
        exercise(&kind);
    }
    let world = world();
    world.runtime.block_on(async {
        let api = &world.api;
        let (status, body) = call(api, Method::POST, "/proxies/p/toxics", data.to_vec()).await;
        assert!(
            status.is_client_error() || status == StatusCode::OK,
            "create answered {status}"
        );
        let Some(toxic) = accepted(status, &body) else {
            return;
        };
        let path = format!("/proxies/p/toxics/{}", path_segment(&toxic.name));
        let (status, body) = call(api, Method::POST, &path, data.to_vec()).await;
        assert!(
            status.is_client_error() || status == StatusCode::OK,
            "update answered {status}"
        );
        accepted(status, &body);
        let (status, _) = call(api, Method::GET, "/proxies/p/toxics", Vec::new()).await;
        assert_eq!(status, StatusCode::OK);
        let (status, _) = call(api, Method::DELETE, &path, Vec::new()).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "deleting {:?}", toxic.name);
    });
});
