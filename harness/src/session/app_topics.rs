//! The application's topic administration as history ops (app.rs has the
//! rest): each topic a CreateTopics names is a `create-topic`, each one a
//! DeleteTopics names a `delete-topic` (history/life_op.rs) — `ok` when its
//! answer had no error, `info` when the broker answered REQUEST_TIMED_OUT
//! (the controller goes on: KIP-4) or nothing was answered, else `fail`. A
//! topic the application deleted and created again is then known by its
//! lives: its earlier lives' ops are set aside from the final-log rules
//! (checker/earlier_lives.rs), which would otherwise hold a deleted life's
//! records to the last life's log. Creations with `validate_only` create
//! nothing and are no op.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::app_op::{AppOp, node_of, origin};
use crate::history::{Body, LifeOp, LifeStep, OpType};
use crate::reader::app_frames::{Exchange, TopicAdmin};

/// Kafka's REQUEST_TIMED_OUT: the work may still complete.
const REQUEST_TIMED_OUT: i16 = 7;

/// Whether an exchange is the harness's own, not the application's: the
/// run's setup creates the schedule's topics through a client link too, as
/// client `epochal` (run/setup.rs), and the topic-lives client is
/// `epochal-lives`.
fn harness_own(exchange: &Exchange) -> bool {
    exchange
        .client_id
        .as_deref()
        .is_some_and(|id| id == "epochal" || id.starts_with("epochal-"))
}

/// Each topic of a CreateTopics or DeleteTopics (`step`) as a life op;
/// `lives` counts each topic's creations acknowledged so far. The harness's
/// own requests are no op.
pub(super) fn life_ops(
    exchange: &Exchange,
    admin: &TopicAdmin,
    step: LifeStep,
    (invoke_ns, complete_ns): (u64, Option<u64>),
    until_ns: u64,
    lives: &mut BTreeMap<String, u32>,
) -> Vec<AppOp> {
    if admin.validate_only || harness_own(exchange) {
        return Vec::new();
    }
    admin
        .topics
        .iter()
        .map(|topic| {
            let mut app = origin(exchange);
            let answer = admin
                .answered
                .iter()
                .find(|(t, _)| t == topic)
                .map(|(_, code)| *code);
            let (kind, at, error) = match (answer, complete_ns) {
                (Some(0), Some(at)) => (OpType::Ok, at, None),
                (Some(code), Some(at)) => {
                    app.insert("error_code".into(), json!(code));
                    let kind = if code == REQUEST_TIMED_OUT {
                        OpType::Info
                    } else {
                        OpType::Fail
                    };
                    (kind, at, Some(format!("the broker answered error {code}")))
                }
                _ => (
                    OpType::Info,
                    until_ns.max(invoke_ns),
                    Some("no answer recorded".to_owned()),
                ),
            };
            let created = lives.entry(topic.clone()).or_default();
            let life = match step {
                LifeStep::Create => *created + 1,
                _ => *created,
            };
            if step == LifeStep::Create && kind == OpType::Ok {
                *created += 1;
            }
            AppOp {
                invoke_ns,
                complete_ns: at,
                connection: (exchange.proxy.clone(), exchange.connection),
                kind,
                body: Body::Life(Box::new(LifeOp::new(
                    step,
                    topic,
                    life,
                    node_of(&exchange.proxy),
                ))),
                asked: None,
                error,
                app: Value::Object(app),
            }
        })
        .collect()
}
