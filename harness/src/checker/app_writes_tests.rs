//! The app-writes checker on a synthetic run's real logs, with an
//! application's sends added to its history: held records, a record the
//! final log holds other bytes for, one past its end, and acks=1.

use serde_json::{Value, json};

use super::*;
use crate::checker::synthetic::{SyntheticSpec, synthetic_run};
use crate::checker::{RunData, Verdict};
use crate::history::{AppSent, Body};
use crate::node::NodeId;

/// An application's send of `values` (kept forms) acknowledged at `base`,
/// invoke then ok, after the run's last op.
fn app_send(run: &mut RunData, acks: Acks, base: i64, values: Vec<Value>) -> u64 {
    let index = run.history.last().map_or(0, |op| op.index + 1);
    let send = Send {
        partition: PartitionRef::new("t", 0),
        values: Vec::new(),
        acks,
        node: Some(NodeId::new(1)),
        producer: None,
        acked: None,
        app: Some(Box::new(AppSent {
            client_id: Some("orders-producer".into()),
            values,
            base_offset: Some(base),
        })),
    };
    let acked = Acked {
        offsets: Some(Vec::new()),
        isr: Some(vec![1, 2, 3]),
        leader_epoch: Some(i32::MAX),
    };
    let process = Process::Client(9_999);
    let op = |index, kind, send| Op {
        index,
        time_ns: index,
        process,
        kind,
        body: Body::Send(send),
        error: None,
    };
    run.history.push(op(index, OpType::Invoke, send.clone()));
    run.history.push(op(
        index + 1,
        OpType::Ok,
        Send {
            acked: Some(acked),
            ..send
        },
    ));
    index + 1
}

/// The kept forms of t-0's first `n` records on b1, and its log end.
fn first_records(run: &RunData, n: usize) -> (Vec<Value>, i64) {
    let replica = run.replicas[&NodeId::new(1)].replica("t", 0).unwrap();
    let kept = replica
        .records()
        .take(n)
        .map(|(_, r)| kept_form(r.value.as_ref().map(|v| v.as_bytes())))
        .collect();
    (kept, replica.log_end_offset)
}

#[test]
fn app_writes_holds_an_application_record_to_its_offset_and_bytes() {
    let mut run = synthetic_run(&SyntheticSpec::with_ops(400));
    let (kept, log_end) = first_records(&run, 2);
    app_send(&mut run, Acks::All, 0, kept.clone());
    // The same bytes twice at two offsets: values need not be unique.
    app_send(&mut run, Acks::All, 0, vec![kept[0].clone()]);
    assert!(judges(run.history.last().unwrap()));
    let result = checker().check_run(&run).unwrap();
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(result.counts["checked"], 3);

    // Other bytes at offset 1, and a record past the log's end.
    let other = app_send(&mut run, Acks::All, 1, vec![json!("not what it holds")]);
    let past = app_send(&mut run, Acks::All, log_end, vec![json!("never written")]);
    // acks=1 records not held are counted, not judged.
    app_send(&mut run, Acks::Leader, log_end + 5, vec![json!("x")]);
    let result = checker().check_run(&run).unwrap();
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.counts["lost-acks-all"], 2);
    assert_eq!(result.counts["not-held-acks-1"], 1);
    let details: Vec<Value> = result.evidence.iter().map(|e| e.details.json()).collect();
    assert!(
        result
            .evidence
            .iter()
            .all(|e| e.anomaly == Anomaly::AppWriteLost),
        "{details:?}"
    );
    assert_eq!(details[0]["history_index"], json!(other));
    assert_eq!(details[0]["acked_offset"], json!(1));
    assert_eq!(details[0]["final_log_held"], kept[1]);
    assert_eq!(details[0]["client_id"], json!("orders-producer"));
    assert_eq!(details[1]["history_index"], json!(past));
    assert_eq!(details[1]["final_log_held"], Value::Null);
    assert!(result.evidence[0].summary.contains("orders-producer"));
}

#[test]
fn app_writes_reads_the_app_object_of_a_stored_send() {
    let line = json!({"partition": "t-0", "values": [], "acks": "all", "node": "b1",
        "offsets": [], "isr": [1], "leader_epoch": 2,
        "app": {"client_id": "c", "proxy": "client-b1", "values": ["a", "a"], "base_offset": 7}});
    let body = Body::from_value("send", OpType::Ok, line).unwrap();
    let Body::Send(send) = body else {
        panic!("a send")
    };
    let app = send.app.unwrap();
    assert_eq!((app.base_offset, app.values.len()), (Some(7), 2));
    // Never written back: a harness send's line is as it was.
    let written = serde_json::to_value(Send {
        app: Some(app),
        ..send
    })
    .unwrap();
    assert!(written.get("app").is_none(), "{written}");
}

#[test]
fn app_writes_kept_forms_are_text_when_short_else_length_and_hash() {
    assert_eq!(kept_form(Some(b"order-1")), json!("order-1"));
    assert_eq!(kept_form(None), Value::Null);
    let long = [b'x'; 65];
    let kept = kept_form(Some(&long));
    assert!(
        kept.as_str().unwrap().starts_with("65 bytes, fnv1a "),
        "{kept}"
    );
    assert_eq!(kept, kept_form(Some(&long)));
    assert_ne!(kept_form(Some(&[0xff])), kept_form(Some(&[0xfe])));
}
