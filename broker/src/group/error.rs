//! Every answer the group coordinator refuses a request with, and the one table
//! that maps each to its Kafka error code. Handlers put
//! `error.response_error().code()` in the response and never branch on names.

use kafka_protocol::ResponseError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum GroupError {
    /// An empty group id where the API needs one (Kafka's `isValidGroupId`).
    #[error("the group id is empty")]
    InvalidGroupId,
    /// The session timeout is outside [min, max] of the group config.
    #[error("the session timeout is outside the broker's allowed range")]
    InvalidSessionTimeout,
    /// The protocol type or every offered protocol differs from the group's.
    #[error("the member's protocols do not match the group's")]
    InconsistentGroupProtocol,
    /// KIP-394: a first JoinGroup at v4+ gets an id and must join again with it.
    #[error("join again with the member id this answer carries")]
    MemberIdRequired,
    #[error("the member id is not a member of this group")]
    UnknownMemberId,
    #[error("the generation is not the group's current one")]
    IllegalGeneration,
    #[error("the group is rebalancing; join again")]
    RebalanceInProgress,
    /// Unloading: this broker no longer coordinates the group.
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    /// A parked request lost its answer (the coordinator was dropped).
    #[error("the coordinator is not available")]
    CoordinatorNotAvailable,
    /// KIP-345: the group instance id is held by another member id (a newer
    /// instance of the same static member joined since).
    #[error("another member id now holds this group instance id")]
    FencedInstanceId,
    /// DeleteGroups on a group that is not here.
    #[error("the group does not exist")]
    GroupIdNotFound,
    /// DeleteGroups on a group that still has members.
    #[error("the group still has members")]
    NonEmptyGroup,
}

/// Our error → Kafka's, in one place.
const KAFKA_CODES: &[(GroupError, ResponseError)] = &[
    (GroupError::InvalidGroupId, ResponseError::InvalidGroupId),
    (
        GroupError::InvalidSessionTimeout,
        ResponseError::InvalidSessionTimeout,
    ),
    (
        GroupError::InconsistentGroupProtocol,
        ResponseError::InconsistentGroupProtocol,
    ),
    (
        GroupError::MemberIdRequired,
        ResponseError::MemberIdRequired,
    ),
    (GroupError::UnknownMemberId, ResponseError::UnknownMemberId),
    (
        GroupError::IllegalGeneration,
        ResponseError::IllegalGeneration,
    ),
    (
        GroupError::RebalanceInProgress,
        ResponseError::RebalanceInProgress,
    ),
    (GroupError::NotCoordinator, ResponseError::NotCoordinator),
    (
        GroupError::CoordinatorNotAvailable,
        ResponseError::CoordinatorNotAvailable,
    ),
    (
        GroupError::FencedInstanceId,
        ResponseError::FencedInstanceId,
    ),
    (GroupError::GroupIdNotFound, ResponseError::GroupIdNotFound),
    (GroupError::NonEmptyGroup, ResponseError::NonEmptyGroup),
];

impl GroupError {
    pub fn response_error(self) -> ResponseError {
        KAFKA_CODES
            .iter()
            .find(|(ours, _)| *ours == self)
            .map(|(_, kafka)| *kafka)
            // Unreachable while the table is complete, which a test pins.
            .unwrap_or(ResponseError::UnknownServerError)
    }

    pub fn code(self) -> i16 {
        self.response_error().code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_kafkas_code() {
        // Codes from Kafka's `Errors.java`, written out so a renumbering in
        // the crate cannot slip by.
        let expected = [
            (GroupError::InvalidGroupId, 24),
            (GroupError::InvalidSessionTimeout, 26),
            (GroupError::InconsistentGroupProtocol, 23),
            (GroupError::MemberIdRequired, 79),
            (GroupError::UnknownMemberId, 25),
            (GroupError::IllegalGeneration, 22),
            (GroupError::RebalanceInProgress, 27),
            (GroupError::NotCoordinator, 16),
            (GroupError::CoordinatorNotAvailable, 15),
            (GroupError::FencedInstanceId, 82),
            (GroupError::GroupIdNotFound, 69),
            (GroupError::NonEmptyGroup, 68),
        ];
        assert_eq!(
            expected.len(),
            KAFKA_CODES.len(),
            "a variant is missing here"
        );
        for (error, code) in expected {
            assert_eq!(error.code(), code, "{error:?}");
        }
    }
}
