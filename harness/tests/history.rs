//! A history written by the streaming writer reads back identical and valid;
//! each invalid shape is caught on the line it is on.

use epochal::history::{
    Body, HistoryError, HistoryWriter, OpType, Process, ShapeError, read_history,
};
use serde_json::json;

fn body(f: &str, kind: OpType, value: serde_json::Value) -> Body {
    Body::from_value(f, kind, value).unwrap()
}

#[test]
fn written_history_reads_back_valid_and_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let mut w = HistoryWriter::create(&path).unwrap();
    let send = json!({"partition": "t-0", "values": [1], "acks": "all", "node": "b1"});
    let poll = json!({"partition": "t-0", "from_offset": 0, "node": null});
    let mut written = Vec::new();
    written.push(
        w.invoke(
            Process::Client(0),
            body("send", OpType::Invoke, send.clone()),
        )
        .unwrap(),
    );
    let crash = json!({"target": "leader of t-0"});
    written.push(
        w.invoke(Process::Nemesis, body("crash", OpType::Invoke, crash))
            .unwrap(),
    );
    let crashed = json!({"target": "leader of t-0", "nodes": ["b1"]});
    written.push(
        w.append(
            Process::Nemesis,
            OpType::Info,
            body("crash", OpType::Info, crashed),
            None,
        )
        .unwrap(),
    );
    written.push(
        w.append(
            Process::Client(0),
            OpType::Info,
            body("send", OpType::Info, send),
            Some("REQUEST_TIMED_OUT".into()),
        )
        .unwrap(),
    );
    written.push(
        w.invoke(
            Process::Client(1),
            body("poll", OpType::Invoke, poll.clone()),
        )
        .unwrap(),
    );
    written.push(
        w.append(
            Process::Client(1),
            OpType::Fail,
            body("poll", OpType::Fail, poll),
            Some("x".into()),
        )
        .unwrap(),
    );
    // Streamed: every op is on disk before the writer is dropped.
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 6);
    let read = read_history(&path).unwrap();
    assert_eq!(read, written);
    assert!(read.windows(2).all(|p| p[0].time_ns <= p[1].time_ns));
}

#[test]
fn writer_never_overwrites_a_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    std::fs::write(&path, "").unwrap();
    assert!(HistoryWriter::create(&path).is_err());
}

fn line(index: u64, process: &str, kind: &str, f: &str) -> String {
    let value = match f {
        "send" => r#"{"partition":"t-0","values":[1],"acks":"all","node":"b1"}"#,
        "poll" => r#"{"partition":"t-0","from_offset":0,"node":"b1"}"#,
        _ => r#"{"target":"b1"}"#,
    };
    format!(
        r#"{{"index":{index},"time_ns":{index},"process":{process},"type":"{kind}","f":"{f}","value":{value}}}"#
    )
}

fn read(lines: &[String]) -> HistoryError {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = read_history(&path).unwrap_err();
    assert!(err.to_string().contains("h.jsonl:"), "{err}");
    err
}

fn shape(err: &HistoryError) -> &ShapeError {
    match err {
        HistoryError::Shape { source, .. } => source,
        other => panic!("expected a shape error, got {other}"),
    }
}

#[test]
fn double_invoke_is_named_with_its_line() {
    let err = read(&[
        line(0, "0", "invoke", "send"),
        line(1, "1", "invoke", "send"),
        line(2, "0", "invoke", "send"),
    ]);
    assert_eq!(err.line(), Some(3));
    assert!(matches!(
        shape(&err),
        ShapeError::DoubleInvoke { pending: 0, .. }
    ));
}

#[test]
fn completion_without_invoke_is_named_with_its_line() {
    let err = read(&[line(0, "0", "invoke", "send"), line(1, "1", "ok", "send")]);
    assert_eq!(err.line(), Some(2));
    assert!(matches!(
        shape(&err),
        ShapeError::CompletionWithoutInvoke { .. }
    ));
}

#[test]
fn decreasing_index_is_named_with_its_line() {
    let err = read(&[
        line(0, "0", "invoke", "send"),
        line(5, "0", "ok", "send"),
        line(5, "0", "invoke", "send"),
    ]);
    assert_eq!(err.line(), Some(3));
    assert!(matches!(
        shape(&err),
        ShapeError::IndexNotIncreasing {
            index: 5,
            previous: 5
        }
    ));
}

#[test]
fn crashed_process_invoking_again_is_named_with_its_line() {
    let err = read(&[
        line(0, "2", "invoke", "send"),
        line(1, "2", "info", "send"),
        line(2, "\"nemesis\"", "invoke", "heal"),
        line(3, "\"nemesis\"", "info", "heal"),
        line(4, "2", "invoke", "poll"),
    ]);
    assert_eq!(err.line(), Some(5));
    assert!(matches!(
        shape(&err),
        ShapeError::CrashedProcessInvokes { crashed_at: 1, .. }
    ));
}

#[test]
fn a_torn_line_and_an_unknown_field_are_parse_errors_on_their_line() {
    let torn = read(&[line(0, "0", "invoke", "send"), r#"{"index":1,"ti"#.into()]);
    assert_eq!(torn.line(), Some(2));
    assert!(matches!(torn, HistoryError::Parse { .. }));
    let extra = read(&[line(0, "0", "invoke", "send").replace("}", r#","extra":1}"#)]);
    assert_eq!(extra.line(), Some(1));
    assert!(matches!(extra, HistoryError::Parse { .. }));
}
