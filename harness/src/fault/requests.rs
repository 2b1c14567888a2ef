//! The request faults: the requests of one Kafka API on one link held,
//! delayed, dropped or duplicated by the link's proxy (its `kafka_requests`
//! toxic; schedule/requests.rs) until `release-requests` of that link and
//! API, or a `heal`. A campaign acts on its clients' requests to a node, of
//! an API drawn from [`CAMPAIGN_APIS`]; none is in a default mix.

use epochal_faults::proxy::toxics::RequestAction;
use kafka_protocol::messages::ApiKey;

use super::spec::{Dated, Draw, Ends, Fires, Mix, Needs, Role, Shade, Spec, Undo};
use crate::random::SplitMix64;
use crate::schedule::{Api, DelayedRequests, Fault, Requests, Sender, Target};

/// A request fault by `action`, drawn as `draw`.
const fn requests(
    name: &'static str,
    is: fn(&Fault) -> bool,
    action: RequestAction,
    draw: fn(&mut SplitMix64, Target) -> Fault,
) -> Spec {
    Spec {
        name,
        role: Role::Requests,
        is,
        fires: Fires::Requests(action),
        dated: Dated::Not,
        undo: Undo::Release,
        ends: Ends::Nothing,
        draw: Draw::AnyNode(draw),
        needs: Needs::Nothing,
        mix: Mix::Named,
        excuse: None,
        shade: Shade::Plain,
    }
}

/// Held, with everything behind them on their connection, until released.
pub const HOLD_REQUESTS: Spec = requests(
    "hold-requests",
    |f| matches!(f, Fault::HoldRequests(_)),
    RequestAction::Hold,
    |random, to| Fault::HoldRequests(clients_to(random, to)),
);

/// Each waits `ms` from when the proxy read it (a campaign draws 50 ms to
/// 2 s).
pub const DELAY_REQUESTS: Spec = requests(
    "delay-requests",
    |f| matches!(f, Fault::DelayRequests(_)),
    RequestAction::Delay,
    |random, to| {
        let r = clients_to(random, to);
        Fault::DelayRequests(DelayedRequests {
            from: r.from,
            to: r.to,
            api: r.api,
            ms: random.between(50, 2_000),
        })
    },
);

/// Each removed: the broker never sees it.
pub const DROP_REQUESTS: Spec = requests(
    "drop-requests",
    |f| matches!(f, Fault::DropRequests(_)),
    RequestAction::Drop,
    |random, to| Fault::DropRequests(clients_to(random, to)),
);

/// Each reaches the broker twice; the client sees one answer.
pub const DUPLICATE_REQUESTS: Spec = requests(
    "duplicate-requests",
    |f| matches!(f, Fault::DuplicateRequests(_)),
    RequestAction::Duplicate,
    |random, to| Fault::DuplicateRequests(clients_to(random, to)),
);

/// The request fault on that link and API ended; held requests are
/// delivered in order.
pub const RELEASE_REQUESTS: Spec = Spec::undo(
    "release-requests",
    |f| matches!(f, Fault::ReleaseRequests(_)),
    Fires::Release,
    Ends::Requests,
);

/// The APIs a campaign's request faults pick from, each with its weight:
/// the data path, and the transactional requests whose order KIP-890 and
/// KAFKA-17754 are about. Produce weighs most: a transaction's produce held
/// or delayed past its request timeout, its transaction aborted meanwhile,
/// then delivered, is the late write behind KAFKA-14402's hanging
/// transaction and KIP-890's write absorbed into the producer's next
/// transaction; with the six drawn evenly a 60 s transactional campaign
/// held Produce about once (seeds 21..24: 0, 0, 1, 0), and the pre-KIP-890
/// setting went undetected on fresh seeds. EndTxn and AddPartitionsToTxn
/// (KAFKA-17754's delayed EndTxn, KAFKA-6119's lapsed add) come next.
const CAMPAIGN_APIS: &[(ApiKey, u64)] = &[
    (ApiKey::Produce, 4),
    (ApiKey::Fetch, 1),
    (ApiKey::InitProducerId, 1),
    (ApiKey::AddPartitionsToTxn, 2),
    (ApiKey::AddOffsetsToTxn, 1),
    (ApiKey::EndTxn, 2),
];

/// The clients' requests to `to` of an API drawn from [`CAMPAIGN_APIS`] by
/// weight: the workload's requests are what a campaign can act on by API (a
/// broker's own requests to another are its replication's, which the
/// network faults already cut).
fn clients_to(random: &mut SplitMix64, to: Target) -> Requests {
    let total: u64 = CAMPAIGN_APIS.iter().map(|(_, w)| w).sum();
    let mut draw = random.next_u64() % total;
    let api = CAMPAIGN_APIS
        .iter()
        .find(|(_, w)| {
            let hit = draw < *w;
            draw = draw.saturating_sub(*w);
            hit
        })
        .map_or(ApiKey::Produce, |(api, _)| *api);
    Requests {
        from: Sender::Clients,
        to,
        api: Api(api),
    }
}
