//! Request dispatch: parse the header, check the API key and version against
//! what this broker implements, decode the body, run the handler, encode the
//! response with the header version the API and version call for.
//!
//! The treatment of bad requests follows Kafka's SocketServer: an API key Kafka
//! does not know, an API or version this broker does not implement, or a body
//! that does not decode closes the connection (the client cannot be answered in
//! a format it expects). The one exception is ApiVersions, which KIP-511 lets a
//! client send at a version the broker does not know: it is answered at v0 with
//! UNSUPPORTED_VERSION and the supported ranges, so the client can retry.

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AlterConfigsRequest, ApiKey,
    ApiVersionsRequest, ApiVersionsResponse, CreateAclsRequest, CreatePartitionsRequest,
    CreateTopicsRequest, DeleteAclsRequest, DeleteGroupsRequest, DeleteRecordsRequest,
    DeleteTopicsRequest, DescribeAclsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, EndTxnRequest, FetchRequest, FindCoordinatorRequest, HeartbeatRequest,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest, LeaderAndIsrRequest,
    LeaderAndIsrResponse, LeaveGroupRequest, ListGroupsRequest, ListOffsetsRequest,
    MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
    OffsetForLeaderEpochRequest, ProduceRequest, RequestHeader, ResponseHeader, StopReplicaRequest,
    StopReplicaResponse, SyncGroupRequest, TxnOffsetCommitRequest, UpdateMetadataRequest,
    UpdateMetadataResponse, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::handlers;
use super::handlers::group_deletion as deletion;
use super::handlers::groups as group;
use super::handlers::offsets_for_leader_epoch as leader_epoch;
use super::handlers::produce::ProduceOutcome;
use super::handlers::transactions as txn;
use super::handlers::{
    acls, api_versions, configs, create_partitions, create_topics, delete_records, delete_topics,
    fetch, find_coordinator, init_producer_id, list_offsets, metadata, offset_commit, offset_fetch,
    produce, txn_offset_commit, write_txn_markers,
};
use crate::replica::leader_and_isr::Addressed;
use crate::server::context::Broker;

/// Every API this broker implements, with the versions it accepts — exactly
/// what ApiVersions advertises.
pub const SUPPORTED_APIS: &[(ApiKey, i16, i16)] = &[
    // v3+ carries record batches v2 only; older versions carry message sets.
    (ApiKey::Produce, 3, 9),
    // v4+ returns record batches v2; v13+ addresses topics by id (KIP-516).
    (ApiKey::Fetch, 4, 13),
    // v0 answers a list of offsets; v1+ one offset.
    (ApiKey::ListOffsets, 1, 7),
    // v10+ carries topic ids; we answer the zero id ("unknown").
    (ApiKey::Metadata, 0, 12),
    (ApiKey::LeaderAndIsr, 0, 4),
    // Topic deletion only: v3+ names each partition's delete flag (KIP-570),
    // which is what this broker's controller sends.
    (ApiKey::StopReplica, 3, 4),
    // v0 answers one offset (KIP-101), v1+ the epoch too (KIP-279), v2+ checks
    // the asker's current leader epoch, v3+ names the replica.
    (ApiKey::OffsetForLeaderEpoch, 0, 4),
    // v5+ groups partitions by topic and lists broker endpoints.
    (ApiKey::UpdateMetadata, 5, 7),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 0, 7),
    // Idempotent and transactional producers (KIP-98). v2+ is flexible
    // (KIP-482), v3+ may name the current id and epoch (KIP-360), v4+ may
    // answer PRODUCER_FENCED (KIP-588); every version answers a
    // non-transactional request alike.
    (ApiKey::InitProducerId, 0, 5),
    // The classic group protocol ([groups]): v4+ FindCoordinator batches
    // keys (KIP-699); OffsetCommit and OffsetFetch stop below v9, JoinGroup
    // and ListGroups below their KIP-848 versions' meanings, which this
    // broker does not implement.
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::OffsetCommit, 0, 8),
    (ApiKey::OffsetFetch, 0, 8),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    // KIP-229; v1 changes only throttling, v2 is flexible (KIP-482).
    (ApiKey::DeleteGroups, 0, 2),
    // KIP-496: one version.
    (ApiKey::OffsetDelete, 0, 0),
    // Topic configs ([clients]): v1+ DescribeConfigs has sources and
    // synonyms (KIP-226), v3+ types and documentation (KIP-569); v2+ of
    // each is only its flexible encoding or throttling behaviour.
    (ApiKey::DescribeConfigs, 0, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::CreatePartitions, 0, 3),
    // v6 may address topics by id; this broker names them (zero ids).
    (ApiKey::DeleteTopics, 0, 6),
    // KIP-107: a partition's log start moved up on its leader. v1 changes
    // only throttling, v2 is flexible (KIP-482).
    (ApiKey::DeleteRecords, 0, 2),
    // ACLs (KIP-140), stored in etcd and never enforced: v1+ has prefixed
    // patterns and MATCH filters (KIP-290), v2+ is flexible, v3 adds the
    // USER resource type (KIP-373).
    (ApiKey::DescribeAcls, 0, 3),
    (ApiKey::CreateAcls, 0, 3),
    (ApiKey::DeleteAcls, 0, 3),
    // v1 asks for an endpoint type (KIP-919); brokers are the one answered.
    (ApiKey::DescribeCluster, 0, 1),
    // Transactions ([transactions]): the coordinator's markers (KIP-98), and
    // a transactional producer's requests to its coordinator. v2+ may answer
    // PRODUCER_FENCED (KIP-588), v3+ is flexible; AddPartitionsToTxn v4 is
    // KIP-890's broker-to-broker form, answered only for its verify-only
    // checks (`transactions::verify`; v5 adds TRANSACTION_ABORTABLE, not
    // offered). EndTxn v4+ is KIP-890 part 2's, not implemented.
    // TxnOffsetCommit v2 adds the leader epoch, v3 the member fields
    // (KIP-447).
    (ApiKey::WriteTxnMarkers, 0, 1),
    (ApiKey::AddPartitionsToTxn, 0, 4),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
];

pub fn supported_versions(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED_APIS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, lo, hi)| (*lo, *hi))
}

/// What to send back on the connection.
pub enum Reply {
    Response(BytesMut),
    /// Produce with acks=0: Kafka sends nothing.
    None,
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("request of {0} bytes is too short for a request header")]
    TooShort(usize),
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("API {key:?} is not implemented by this broker")]
    UnsupportedApi { key: ApiKey },
    #[error("API {key:?} version {version} is not supported (supported {min}..={max})")]
    UnsupportedVersion {
        key: ApiKey,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("malformed request header: {0}")]
    MalformedHeader(#[source] anyhow::Error),
    #[error("malformed {key:?} v{version} request body: {source}")]
    MalformedBody {
        key: ApiKey,
        version: i16,
        #[source]
        source: anyhow::Error,
    },
    #[error("{0}")]
    AcksZeroFailure(String),
    #[error("encoding the {key:?} v{version} response: {source}")]
    Encode {
        key: ApiKey,
        version: i16,
        #[source]
        source: anyhow::Error,
    },
}

fn decode_body<T: Decodable>(
    key: ApiKey,
    version: i16,
    buf: &mut Bytes,
) -> Result<T, DispatchError> {
    T::decode(buf, version).map_err(|source| DispatchError::MalformedBody {
        key,
        version,
        source,
    })
}

fn encode_response<R: Encodable + HeaderVersion>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &R,
) -> Result<Reply, DispatchError> {
    let mut buf = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, R::header_version(version))
        .and_then(|_| response.encode(&mut buf, version))
        .map_err(|source| DispatchError::Encode {
            key,
            version,
            source,
        })?;
    Ok(Reply::Response(buf))
}

/// A request as its frame decodes, before anything acts on it: the parse is
/// apart from the effects so it can be driven on its own (the `fuzz/`
/// crate's `broker_request` target feeds it arbitrary frames).
#[derive(Debug)]
pub enum Request {
    ApiVersions(ApiVersionsRequest),
    /// ApiVersions at a version this broker does not know (KIP-511): answered
    /// at v0 with UNSUPPORTED_VERSION, not by closing the connection.
    ApiVersionsUnsupported,
    Metadata(MetadataRequest),
    CreateTopics(CreateTopicsRequest),
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    LeaderAndIsr(LeaderAndIsrRequest),
    UpdateMetadata(UpdateMetadataRequest),
    StopReplica(StopReplicaRequest),
    InitProducerId(InitProducerIdRequest),
    FindCoordinator(FindCoordinatorRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    JoinGroup(JoinGroupRequest),
    SyncGroup(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
    OffsetDelete(OffsetDeleteRequest),
    DescribeConfigs(DescribeConfigsRequest),
    AlterConfigs(AlterConfigsRequest),
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    CreatePartitions(CreatePartitionsRequest),
    DeleteTopics(DeleteTopicsRequest),
    DeleteRecords(DeleteRecordsRequest),
    CreateAcls(CreateAclsRequest),
    DescribeAcls(DescribeAclsRequest),
    DeleteAcls(DeleteAclsRequest),
    DescribeCluster(DescribeClusterRequest),
    WriteTxnMarkers(WriteTxnMarkersRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
}

/// A decoded request with what its response needs.
#[derive(Debug)]
pub struct Decoded {
    pub key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    /// The client's id from the header (empty when it sent none).
    pub client_id: String,
    pub request: Request,
}

/// Parses a frame (without its length prefix): the header, the API key and
/// version against what this broker implements, and the body. Never panics;
/// every way a frame can be wrong is a [`DispatchError`].
pub fn decode(mut frame: Bytes) -> Result<Decoded, DispatchError> {
    if frame.len() < 4 {
        return Err(DispatchError::TooShort(frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| DispatchError::UnknownApi(raw_key))?;
    let header_version = if version < 0 {
        1
    } else {
        key.request_header_version(version)
    };
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(DispatchError::MalformedHeader)?;
    let correlation_id = header.correlation_id;
    let client_id = header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    let Some((min, max)) = supported_versions(key) else {
        return Err(DispatchError::UnsupportedApi { key });
    };
    let decoded = |request| Decoded {
        key,
        version,
        correlation_id,
        client_id: client_id.clone(),
        request,
    };
    if version < min || version > max {
        if key == ApiKey::ApiVersions {
            return Ok(decoded(Request::ApiVersionsUnsupported));
        }
        return Err(DispatchError::UnsupportedVersion {
            key,
            version,
            min,
            max,
        });
    }
    let body = &mut frame;
    let request = match key {
        ApiKey::ApiVersions => Request::ApiVersions(decode_body(key, version, body)?),
        ApiKey::Metadata => Request::Metadata(decode_body(key, version, body)?),
        ApiKey::CreateTopics => Request::CreateTopics(decode_body(key, version, body)?),
        ApiKey::Produce => Request::Produce(decode_body(key, version, body)?),
        ApiKey::Fetch => Request::Fetch(decode_body(key, version, body)?),
        ApiKey::ListOffsets => Request::ListOffsets(decode_body(key, version, body)?),
        ApiKey::OffsetForLeaderEpoch => {
            Request::OffsetForLeaderEpoch(decode_body(key, version, body)?)
        }
        ApiKey::LeaderAndIsr => Request::LeaderAndIsr(decode_body(key, version, body)?),
        ApiKey::UpdateMetadata => Request::UpdateMetadata(decode_body(key, version, body)?),
        ApiKey::StopReplica => Request::StopReplica(decode_body(key, version, body)?),
        ApiKey::InitProducerId => Request::InitProducerId(decode_body(key, version, body)?),
        ApiKey::FindCoordinator => Request::FindCoordinator(decode_body(key, version, body)?),
        ApiKey::OffsetCommit => Request::OffsetCommit(decode_body(key, version, body)?),
        ApiKey::OffsetFetch => Request::OffsetFetch(decode_body(key, version, body)?),
        ApiKey::JoinGroup => Request::JoinGroup(decode_body(key, version, body)?),
        ApiKey::SyncGroup => Request::SyncGroup(decode_body(key, version, body)?),
        ApiKey::Heartbeat => Request::Heartbeat(decode_body(key, version, body)?),
        ApiKey::LeaveGroup => Request::LeaveGroup(decode_body(key, version, body)?),
        ApiKey::DescribeGroups => Request::DescribeGroups(decode_body(key, version, body)?),
        ApiKey::ListGroups => Request::ListGroups(decode_body(key, version, body)?),
        ApiKey::DeleteGroups => Request::DeleteGroups(decode_body(key, version, body)?),
        ApiKey::OffsetDelete => Request::OffsetDelete(decode_body(key, version, body)?),
        ApiKey::DescribeConfigs => Request::DescribeConfigs(decode_body(key, version, body)?),
        ApiKey::AlterConfigs => Request::AlterConfigs(decode_body(key, version, body)?),
        ApiKey::IncrementalAlterConfigs => {
            Request::IncrementalAlterConfigs(decode_body(key, version, body)?)
        }
        ApiKey::CreatePartitions => Request::CreatePartitions(decode_body(key, version, body)?),
        ApiKey::DeleteTopics => Request::DeleteTopics(decode_body(key, version, body)?),
        ApiKey::DeleteRecords => Request::DeleteRecords(decode_body(key, version, body)?),
        ApiKey::CreateAcls => Request::CreateAcls(decode_body(key, version, body)?),
        ApiKey::DescribeAcls => Request::DescribeAcls(decode_body(key, version, body)?),
        ApiKey::DeleteAcls => Request::DeleteAcls(decode_body(key, version, body)?),
        ApiKey::DescribeCluster => Request::DescribeCluster(decode_body(key, version, body)?),
        ApiKey::WriteTxnMarkers => Request::WriteTxnMarkers(decode_body(key, version, body)?),
        ApiKey::AddPartitionsToTxn => Request::AddPartitionsToTxn(decode_body(key, version, body)?),
        ApiKey::AddOffsetsToTxn => Request::AddOffsetsToTxn(decode_body(key, version, body)?),
        ApiKey::EndTxn => Request::EndTxn(decode_body(key, version, body)?),
        ApiKey::TxnOffsetCommit => Request::TxnOffsetCommit(decode_body(key, version, body)?),
        _ => return Err(DispatchError::UnsupportedApi { key }),
    };
    Ok(decoded(request))
}

pub async fn handle(broker: &Broker, frame: Bytes) -> Result<Reply, DispatchError> {
    let Decoded {
        key,
        version,
        correlation_id: cid,
        client_id,
        request,
    } = decode(frame)?;
    tracing::trace!(?key, version, cid, "request");
    // Every answer goes back at the request's version with its correlation id;
    // a macro, since each API's response is its own type.
    macro_rules! respond {
        ($response:expr) => {
            encode_response(key, version, cid, &$response)
        };
    }
    // Each handler is given the parts of the broker it touches (parts.rs).
    let (replicas, store, cache) = (&broker.replicas, &broker.store, &broker.metadata);
    let (offsets, groups) = (&broker.offsets, &broker.groups);
    match request {
        Request::ApiVersionsUnsupported => {
            let mut resp = api_versions::response(SUPPORTED_APIS);
            resp.error_code = ResponseError::UnsupportedVersion.code();
            encode_response::<ApiVersionsResponse>(key, 0, cid, &resp)
        }
        Request::ApiVersions(_) => respond!(api_versions::response(SUPPORTED_APIS)),
        Request::Metadata(req) => {
            let (me, creation) = (broker.advertised(), broker.auto_topic_creation());
            respond!(metadata::handle(cache, &me, creation.as_ref(), req, version).await)
        }
        Request::CreateTopics(req) => {
            respond!(create_topics::handle(&broker.topic_creation(), req, version).await)
        }
        Request::Produce(req) => match produce::handle(broker, req).await {
            ProduceOutcome::Respond(resp) => respond!(resp),
            ProduceOutcome::Silent => Ok(Reply::None),
            ProduceOutcome::Close(why) => Err(DispatchError::AcksZeroFailure(why)),
        },
        Request::Fetch(req) => {
            respond!(fetch::handle(replicas, cache, req, version, &client_id).await)
        }
        Request::ListOffsets(req) => respond!(list_offsets::handle(replicas, req, version)),
        Request::OffsetForLeaderEpoch(req) => respond!(leader_epoch::answer(replicas, req)),
        Request::LeaderAndIsr(req) => respond!(leader_and_isr(broker, req).await),
        Request::UpdateMetadata(req) => respond!(update_metadata(broker, req).await),
        Request::StopReplica(req) => respond!(stop_replica(broker, req).await),
        Request::InitProducerId(req) => {
            respond!(init_producer_id::handle(broker, req, version).await)
        }
        Request::FindCoordinator(req) => {
            let lookup = broker.coordinator_lookup();
            respond!(find_coordinator::handle(&lookup, req, version).await)
        }
        Request::OffsetCommit(req) => {
            respond!(offset_commit::handle(&broker.group_writes(), req, version).await)
        }
        Request::OffsetFetch(req) => respond!(offset_fetch::handle(offsets, req, version)),
        Request::JoinGroup(req) => {
            respond!(group::join(offsets, groups, req, version, &client_id).await)
        }
        Request::SyncGroup(req) => respond!(group::sync(offsets, groups, req, version).await),
        Request::Heartbeat(req) => respond!(group::heartbeat(offsets, groups, req)),
        Request::LeaveGroup(req) => respond!(group::leave(offsets, groups, req, version)),
        Request::DescribeGroups(req) => {
            respond!(group::describe(offsets, groups, req, version))
        }
        Request::ListGroups(req) => respond!(group::list(offsets, groups, req)),
        Request::DeleteGroups(req) => {
            respond!(deletion::delete_groups(&broker.group_writes(), req).await)
        }
        Request::OffsetDelete(req) => {
            respond!(deletion::offset_delete(&broker.group_writes(), req).await)
        }
        Request::DescribeConfigs(req) => {
            let (config, topic_configs) = (&broker.config, replicas.topic_configs());
            respond!(configs::describe(config, store, topic_configs, req, version).await)
        }
        Request::AlterConfigs(req) => {
            respond!(configs::alter(broker.config.node_id, store, req).await)
        }
        Request::IncrementalAlterConfigs(req) => {
            respond!(configs::incremental_alter(broker.config.node_id, store, req).await)
        }
        Request::CreatePartitions(req) => {
            respond!(create_partitions::handle(store, cache, req).await)
        }
        Request::DeleteTopics(req) => {
            respond!(delete_topics::handle(store, cache, req, version).await)
        }
        Request::DeleteRecords(req) => respond!(delete_records::handle(replicas, req).await),
        Request::CreateAcls(req) => respond!(acls::create(store, req, version).await),
        Request::DescribeAcls(req) => respond!(acls::describe(store, req, version).await),
        Request::DeleteAcls(req) => respond!(acls::delete(store, req, version).await),
        Request::WriteTxnMarkers(req) => {
            respond!(write_txn_markers::handle(replicas, offsets, req).await)
        }
        Request::AddPartitionsToTxn(req) if version >= 4 => {
            respond!(crate::transactions::verify::answer_verify_only(broker, req))
        }
        Request::AddPartitionsToTxn(req) => {
            respond!(txn::add_partitions(broker, req, version).await)
        }
        Request::AddOffsetsToTxn(req) => {
            respond!(txn::add_offsets(broker, offsets, req, version).await)
        }
        Request::EndTxn(req) => respond!(txn::end(broker, req, version).await),
        Request::TxnOffsetCommit(req) => {
            respond!(txn_offset_commit::handle(&broker.group_writes(), req, version).await)
        }
        Request::DescribeCluster(req) => {
            let mut resp = metadata::describe_cluster(cache, &broker.advertised());
            resp.endpoint_type = req.endpoint_type;
            respond!(resp)
        }
    }
}

/// LeaderAndIsr: the broker-epoch check, then the configs of every topic it
/// names read before any partition of it is applied (a new topic's configs
/// before its first append, topic_config.rs), then the request itself.
async fn leader_and_isr(broker: &Broker, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse {
    let refused = broker_epoch_refusal(broker, req.broker_epoch).await;
    let topics: Vec<String> = req
        .topic_states
        .iter()
        .map(|t| t.topic_name.to_string())
        .chain(
            req.ungrouped_partition_states
                .iter()
                .map(|p| p.topic_name.to_string()),
        )
        .collect();
    broker
        .replicas
        .topic_configs()
        .ensure_read(&broker.store, topics)
        .await;
    handlers::leader_and_isr::handle(&broker.control(), &broker.coordinators(), req, refused)
}

/// UpdateMetadata: the broker-epoch check, then the request itself.
async fn update_metadata(broker: &Broker, req: UpdateMetadataRequest) -> UpdateMetadataResponse {
    let refused = broker_epoch_refusal(broker, req.broker_epoch).await;
    handlers::update_metadata::handle(&broker.control(), &broker.metadata, req, refused)
}

/// StopReplica: the broker-epoch check, then the request itself.
async fn stop_replica(broker: &Broker, req: StopReplicaRequest) -> StopReplicaResponse {
    let refused = broker_epoch_refusal(broker, req.broker_epoch).await;
    handlers::stop_replica::handle(&broker.control(), req, refused)
}

/// KIP-380's broker-epoch check on a control request (Kafka 2.2,
/// `KafkaApis.isBrokerEpochStale`): why it is refused whole with
/// STALE_BROKER_EPOCH, or `None` to go on to the controller-epoch check.
/// Nothing is refused without `--broker-epoch-fencing` (before KIP-380).
///
/// Addressed to an older registration than this broker's: the controller had
/// not yet seen this broker register again (it resends the whole state once it
/// does), or the request was never meant for this process — a controller still
/// retrying a broker that died, whose port the OS gave to this one (found under
/// ci/stress.sh: a gate broker restarted on such a port applied another test
/// cluster's leader for an epoch its own etcd never held). Applying it would
/// also raise the controller epoch this broker holds, fencing its own
/// controller.
///
/// Addressed to a newer one the session never switched to: etcd is asked which
/// registration this broker holds. The one addressed (the put's answer never
/// reached the session) is applied under the current lease; any other is not
/// this broker's, and is refused like an older one. Kafka refuses only older
/// epochs; a request from another cluster can name a newer one as easily.
async fn broker_epoch_refusal(broker: &Broker, requested: i64) -> Option<String> {
    let fencing = broker.config.broker_epoch_fencing;
    let refusal = |ours: i64, held: &str| {
        format!(
            "STALE_BROKER_EPOCH: addressed to broker epoch {requested}, this broker's is {ours}{held}"
        )
    };
    match broker.replicas.registration_addressed(requested).await {
        Addressed::Ours => None,
        _ if !fencing => None,
        Addressed::Older { ours } => Some(refusal(ours, "")),
        Addressed::Unreached { ours } => {
            match broker.store.broker_epoch(broker.config.node_id).await {
                Ok(Some(held)) if held == requested => {
                    tracing::warn!(
                        broker_epoch = requested,
                        ours,
                        "control request for a registration the session has not switched to; \
                     applying under the current lease"
                    );
                    None
                }
                Ok(held) => Some(refusal(
                    ours,
                    &format!(
                        " (etcd holds {})",
                        held.map_or("none".into(), |h| h.to_string())
                    ),
                )),
                Err(e) => {
                    tracing::warn!(
                        broker_epoch = requested,
                        ours,
                        %e,
                        "could not read this broker's registration; applying under the current lease"
                    );
                    None
                }
            }
        }
    }
}
