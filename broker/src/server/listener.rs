//! Accepts Kafka-protocol connections and reads size-prefixed frames.
//!
//! Each connection is served by its own task, one request at a time, responses
//! in request order (as Kafka's per-connection muting guarantees). A frame that
//! claims a negative size or more than `max_request_bytes`, a frame cut short by
//! the peer, or a request that does not decode closes that connection only, with
//! a warning naming the peer and the reason; no other connection notices.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::dispatch::{self, DispatchError, Reply};
use crate::server::context::Broker;

/// Why a connection was closed: the `reason` of its `closed connection`
/// warning. Each closes that connection only.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("read failed: {0}")]
    Read(#[source] std::io::Error),
    /// A negative size, or one above `--max-request-bytes`: closed before any
    /// body is read, as Kafka's SocketServer does.
    #[error("frame size {size} outside 0..={max} bytes (socket.request.max.bytes)")]
    FrameSize { size: i32, max: u32 },
    /// The peer closed (or failed) mid-frame.
    #[error("frame of {size} bytes cut short: {source}")]
    CutShort {
        size: i32,
        #[source]
        source: std::io::Error,
    },
    #[error("write failed: {0}")]
    Write(#[source] std::io::Error),
    /// A request that cannot be answered in a format the client expects.
    #[error(transparent)]
    Request(#[from] DispatchError),
}

pub async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    stream.set_nodelay(true).ok();
                    let broker = broker.clone();
                    let shutdown = shutdown.clone();
                    tokio::spawn(async move {
                        if let Err(reason) = serve_connection(stream, peer, broker, shutdown).await {
                            tracing::warn!(%peer, %reason, "closed connection");
                        }
                    });
                }
                Err(e) => tracing::warn!(%e, "accept failed"),
            }
        }
    }
}

/// Serve one connection until the peer closes it (Ok) or it must be closed (Err).
async fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ConnectionError> {
    let max = broker.config.max_request_bytes;
    loop {
        let mut size = [0u8; 4];
        tokio::select! {
            _ = shutdown.changed() => return Ok(()),
            r = stream.read_exact(&mut size) => match r {
                Ok(_) => {}
                // A clean close between frames is the normal end of a connection.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(ConnectionError::Read(e)),
            },
        }
        let size = i32::from_be_bytes(size);
        if size < 0 || size as u32 > max {
            return Err(ConnectionError::FrameSize { size, max });
        }
        let mut body = vec![0u8; size as usize];
        stream
            .read_exact(&mut body)
            .await
            .map_err(|source| ConnectionError::CutShort { size, source })?;
        match dispatch::handle(&broker, Bytes::from(body)).await {
            Ok(Reply::Response(resp)) => {
                let mut frame = BytesMut::with_capacity(resp.len() + 4);
                frame.put_i32(resp.len() as i32);
                frame.extend_from_slice(&resp);
                stream
                    .write_all(&frame)
                    .await
                    .map_err(ConnectionError::Write)?;
            }
            Ok(Reply::None) => {}
            Err(e) => {
                tracing::debug!(%peer, "request rejected");
                return Err(e.into());
            }
        }
    }
}
