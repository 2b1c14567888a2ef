//! The generator's side of the transactional producers (transactions.rs
//! keeps their state): a transaction's invoke appends its data batches and
//! reads, its completion appends the markers; reads of committed data stop
//! at the last stable offset. Kept apart from transactions.rs so neither
//! file imports the other's parent (harness/tests/layers/).

use super::transactions::{TXN_POLL_RECORDS_MAX, invoke_of};
use super::{BatchKind, Generator};
use crate::history::{
    Body, Intent, MicroOp, PolledRecord, RecordValue, Txn, TxnPoll, TxnProducer, TxnSend,
};

impl Generator<'_> {
    /// Transactor `t` begins a transaction (transactions.rs): its sends are
    /// appended, its poll reads; the invoke's body.
    pub(super) fn txn_invoke(&mut self, t: usize) -> Body {
        let (serial, intent) = self.transactors.begin();
        let partitions = u64::from(self.spec.partitions);
        let first = self.rng.below(partitions) as usize;
        let second =
            (first + 1 + self.rng.below(partitions.max(2) - 1) as usize) % partitions as usize;
        let read = self.rng.below(partitions) as usize;
        let producer_id = self.transactors.members[t].producer_id;
        let mut ops = Vec::new();
        let mut written = Vec::new();
        for p in [first, second] {
            let value = self.next_value;
            self.next_value += 1;
            let offset =
                self.append_batch(p, &[value], BatchKind::Transactional { producer_id })[0];
            self.transactors
                .wrote(p, offset, serial, !written.contains(&p));
            if !written.contains(&p) {
                written.push(p);
            }
            ops.push(MicroOp::Send(TxnSend {
                partition: self.logs[p].partition.clone(),
                value,
                offset: Some(Some(offset)),
            }));
        }
        let from = self.transactors.members[t].positions[read] as usize;
        let (records, end) = self.read_committed(read, from, TXN_POLL_RECORDS_MAX);
        self.transactors.members[t].positions[read] = end as u64;
        ops.push(MicroOp::Poll(TxnPoll {
            partition: self.logs[read].partition.clone(),
            records: Some(records),
        }));
        let done = Txn {
            transactional_id: format!("txn-{t}"),
            intent,
            ops,
            node: Some(self.brokers[0]),
            group: None,
            offsets: Default::default(),
            producer: Some(TxnProducer {
                id: producer_id,
                epoch: 0,
            }),
            commit_ns: None,
        };
        let invoke = invoke_of(&done);
        self.transactors.members[t].in_flight = Some((serial, written, done));
        Body::Txn(invoke)
    }

    /// Transactor `t`'s transaction ends: a marker in each partition it
    /// wrote; the completion's body.
    pub(super) fn txn_complete(&mut self, t: usize) -> Body {
        let (serial, written, mut done) = self.transactors.members[t]
            .in_flight
            .take()
            .expect("a transactor completes what it invoked");
        let commit = done.intent == Intent::Commit;
        let producer_id = self.transactors.members[t].producer_id;
        // EndTxn goes out just before the answer (the completion's time is
        // its index × 50 µs).
        done.commit_ns = Some((self.history.len() as u64 * 50_000).saturating_sub(25_000));
        for &p in &written {
            self.append_batch(
                p,
                &[],
                BatchKind::Marker {
                    producer_id,
                    commit,
                },
            );
        }
        self.transactors.ended(serial, &written, commit);
        Body::Txn(done)
    }

    /// A read_committed read of partition `p` from offset `from`: at most
    /// `max` records below the last stable offset, none of an aborted or
    /// open transaction, no marker; the records and where it stopped.
    pub(super) fn read_committed(
        &self,
        p: usize,
        from: usize,
        max: usize,
    ) -> (Vec<PolledRecord>, usize) {
        let log = &self.logs[p];
        let stable = self.transactors.stable_offset(p, log.values.len());
        let mut records = Vec::new();
        let mut at = from;
        while at < stable && records.len() < max {
            let value = log.values[at];
            if self.transactors.committed(p, at as i64, value) {
                records.push(PolledRecord(at as i64, RecordValue::Number(value)));
            }
            at += 1;
        }
        (records, at.max(from))
    }
}
