//! An application's topic administration: CreateTopics and DeleteTopics,
//! the topics each names and, once answered, each topic's error code. A
//! topic deleted and created again has lives the checkers must tell apart
//! (checker/earlier_lives.rs); these are where the application's lives
//! begin and end.

use bytes::Bytes;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
};
use kafka_protocol::protocol::Decodable;

use super::wire::{DecodeError, decode_response};

/// One CreateTopics or DeleteTopics request.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicAdmin {
    /// The topics named (a DeleteTopics v6 entry naming a topic by id
    /// alone is left out: it names no topic the history knows).
    pub topics: Vec<String>,
    /// (topic, error code), once answered.
    pub answered: Vec<(String, i16)>,
    /// CreateTopics' `validate_only`: nothing was created.
    pub validate_only: bool,
}

pub fn create_request(mut frame: Bytes, version: i16) -> Result<TopicAdmin, DecodeError> {
    let request = CreateTopicsRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    Ok(TopicAdmin {
        topics: request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect(),
        answered: Vec::new(),
        validate_only: request.validate_only,
    })
}

pub fn create_answer(
    admin: &mut TopicAdmin,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: CreateTopicsResponse = decode_response(frame, version)?;
    admin.answered = response
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.error_code))
        .collect();
    Ok(())
}

pub fn delete_request(mut frame: Bytes, version: i16) -> Result<TopicAdmin, DecodeError> {
    let request = DeleteTopicsRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    // Up to v5 a list of names; from v6 (KIP-516) entries of a name or an id.
    let topics = request
        .topic_names
        .iter()
        .map(|n| n.0.to_string())
        .chain(
            request
                .topics
                .iter()
                .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())),
        )
        .collect();
    Ok(TopicAdmin {
        topics,
        answered: Vec::new(),
        validate_only: false,
    })
}

pub fn delete_answer(
    admin: &mut TopicAdmin,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: DeleteTopicsResponse = decode_response(frame, version)?;
    admin.answered = response
        .responses
        .iter()
        .filter_map(|t| Some((t.name.as_ref()?.0.to_string(), t.error_code)))
        .collect();
    Ok(())
}
