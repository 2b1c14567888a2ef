//! A minimal Kafka-protocol client for the broker's own outgoing requests (the
//! controller's LeaderAndIsr and UpdateMetadata, followers' Fetch and
//! OffsetsForLeaderEpoch): one TCP
//! connection, one request in flight, every call bounded by a timeout.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A topic's name as the protocol's messages carry it.
pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("i/o with {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("encoding or decoding: {0}")]
    Codec(#[source] anyhow::Error),
    /// A response frame claiming a size no broker sends: not a broker.
    #[error("encoding or decoding: response size {len} outside 0..={MAX_RESPONSE_BYTES}")]
    ResponseSize { len: i32 },
    #[error("response correlation id {got}, expected {expected}")]
    Correlation { got: i32, expected: i32 },
}

/// Largest response frame accepted.
const MAX_RESPONSE_BYTES: i32 = 256 * 1024 * 1024;

pub struct Connection {
    addr: String,
    stream: TcpStream,
    client_id: String,
    next_correlation_id: i32,
    timeout: Duration,
}

impl Connection {
    pub async fn connect(
        addr: &str,
        client_id: &str,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError::Timeout(timeout))?
            .map_err(|source| ClientError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        stream.set_nodelay(true).ok();
        Ok(Self {
            addr: addr.to_string(),
            stream,
            client_id: client_id.to_string(),
            next_correlation_id: 1,
            timeout,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Send one request at `version` and wait for its response.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .and_then(|_| request.encode(&mut body, version))
            .map_err(ClientError::Codec)?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        let timeout = self.timeout;
        let mut response = tokio::time::timeout(timeout, self.round_trip(&frame))
            .await
            .map_err(|_| ClientError::Timeout(timeout))??;
        let header = ResponseHeader::decode(&mut response, R::Response::header_version(version))
            .map_err(ClientError::Codec)?;
        if header.correlation_id != correlation_id {
            return Err(ClientError::Correlation {
                got: header.correlation_id,
                expected: correlation_id,
            });
        }
        R::Response::decode(&mut response, version).map_err(ClientError::Codec)
    }

    async fn round_trip(&mut self, frame: &[u8]) -> Result<Bytes, ClientError> {
        let addr = &self.addr;
        let io = |source| ClientError::Io {
            addr: addr.clone(),
            source,
        };
        self.stream.write_all(frame).await.map_err(io)?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).await.map_err(io)?;
        let len = (&len[..]).get_i32();
        // A response is bounded like a request: a peer claiming more is not a broker.
        if !(0..=MAX_RESPONSE_BYTES).contains(&len) {
            return Err(ClientError::ResponseSize { len });
        }
        let mut buf = vec![0u8; len as usize];
        self.stream.read_exact(&mut buf).await.map_err(io)?;
        Ok(Bytes::from(buf))
    }
}
