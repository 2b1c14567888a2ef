//! The workload client against scripted fake brokers: what it makes of a
//! wrong correlation id, an oversized frame, a silent peer and a closed one.
//! Each fake reads one request frame and answers as its script says.

use std::time::Duration;

use epochal::kafka_client::{ClientError, KafkaClient};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const DEADLINE: Duration = Duration::from_millis(500);

enum Script {
    /// Answer with this correlation id and an empty body.
    Answer { correlation_id: i32 },
    /// Answer with a size prefix and nothing else.
    SizePrefix(i32),
    /// Read the request, then say nothing (keep the connection open).
    Silent,
    /// Read the request, then close.
    Close,
}

/// A one-connection fake broker; returns its address.
async fn fake_broker(script: Script) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let size = s.read_i32().await.unwrap();
        let mut body = vec![0u8; size as usize];
        s.read_exact(&mut body).await.unwrap();
        match script {
            Script::Answer { correlation_id } => {
                s.write_i32(4).await.unwrap();
                s.write_i32(correlation_id).await.unwrap();
            }
            Script::SizePrefix(size) => s.write_i32(size).await.unwrap(),
            Script::Silent => {
                // Hold the connection until the client gives up on it.
                let mut rest = Vec::new();
                let _ = s.read_to_end(&mut rest).await;
            }
            Script::Close => drop(s),
        }
    });
    addr
}

async fn connect(script: Script) -> ClientError {
    let addr = fake_broker(script).await;
    KafkaClient::connect(&addr, "epochal-test", DEADLINE)
        .await
        .expect_err("the fake broker never completes a handshake")
}

#[tokio::test]
async fn a_response_to_another_request_is_a_protocol_violation() {
    // The first request (ApiVersions) carries correlation id 0.
    let err = connect(Script::Answer { correlation_id: 7 }).await;
    assert!(
        matches!(&err, ClientError::Protocol(m) if m.contains("correlation id 7")),
        "{err}"
    );
}

#[tokio::test]
async fn an_oversized_or_negative_frame_is_refused_before_reading_it() {
    for size in [i32::MAX, -1] {
        let err = connect(Script::SizePrefix(size)).await;
        assert!(
            matches!(&err, ClientError::Protocol(m) if m.contains("limit")),
            "{size}: {err}"
        );
    }
}

#[tokio::test]
async fn a_silent_peer_is_a_timeout_and_a_closing_one_a_dropped_connection() {
    let err = connect(Script::Silent).await;
    assert!(
        matches!(err, ClientError::Timeout { deadline_ms: 500 }),
        "{err}"
    );
    let err = connect(Script::Close).await;
    assert!(matches!(err, ClientError::Dropped(_)), "{err}");
}

#[tokio::test]
async fn nothing_listening_is_a_refusal() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let err = KafkaClient::connect(&addr, "epochal-test", DEADLINE)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Refused { .. }), "{err}");
}
