//! A subscribed consumer's transaction (Jepsen's read-process-write;
//! KIP-98's `sendOffsetsToTransaction`, KIP-447's group-aware form): a
//! member of a group polls one of its partitions at read_committed, sends
//! fresh values to other partitions and sends the position its poll moved
//! to as its group's offset, all in one transaction of its transactional
//! producer, which commits or aborts. The offsets become the group's
//! committed offsets if and only if the transaction commits: a member that
//! takes the partition up after an abort re-reads what the aborted
//! transaction read, and none of its output is visible to read_committed
//! readers. That atomicity is what exactly-once stream processing rests on.
//!
//! The values sent are fresh (each once in the run, as every background
//! value), not derived from what was read: every checker credits a value to
//! its one writer, and the dependency of the output on the input is carried
//! by the transaction itself (its read, its writes and its offsets commit
//! or abort together), which is what is being tested.
//!
//! The offsets go to the transaction as KIP-447 has them: AddOffsetsToTxn at
//! the transaction coordinator (the group's offsets partition joins the
//! transaction), then TxnOffsetCommit v3 at the group's coordinator with the
//! member's generation and id, so a member fenced by a rebalance cannot
//! commit (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID). The op is recorded with
//! the offsets once TxnOffsetCommit is sent (from then they may be pending
//! in the offsets log); its completion types are workload/txn.rs's: a
//! failure to send the offsets fails the transaction (aborted, one attempt),
//! as any failure before EndTxn(commit).

use std::collections::BTreeMap;

use super::client::RecordingClient;
use super::subscribe::Membership;
use super::txn::{COORDINATOR_RETRIABLE, Planned, Stopped, TxnProducerState, planned_txn};
use crate::history::{Intent, Op, Txn, WriteError};
use crate::kafka_client::{ClientError, TxnMember, TxnOffset};
use crate::schedule::PartitionRef;

impl RecordingClient {
    /// One read-process-write transaction of `member`: a read_committed
    /// poll of `input` from the producer's position in it, a send of each
    /// of `outputs` (partition, fresh value), the position the poll moved
    /// to sent as the group's offset; meant to end as `intent`. Recorded as
    /// one `txn` op with the member's `group`.
    pub async fn read_process_write(
        &mut self,
        state: &mut TxnProducerState,
        member: &Membership,
        input: &PartitionRef,
        outputs: &[(PartitionRef, i64)],
        intent: Intent,
    ) -> Result<Op, WriteError> {
        let mut planned = vec![Planned::Poll(input.clone())];
        planned.extend(outputs.iter().map(|(p, v)| Planned::Send(p.clone(), *v)));
        let txn = planned_txn(state, &planned, intent, Some(member.group.clone()));
        self.record_txn(state, txn, Some(member)).await
    }

    /// Sends the positions `txn`'s polls moved to (the next offset after
    /// the last record each returned) as `member`'s group's offsets: nothing
    /// when no poll returned a record. Sets `txn.offsets` as TxnOffsetCommit
    /// goes out.
    pub(super) async fn send_offsets(
        &mut self,
        state: &mut TxnProducerState,
        txn: &mut Txn,
        member: &Membership,
        deadline: tokio::time::Instant,
    ) -> Result<(), Stopped> {
        let moved: BTreeMap<PartitionRef, i64> = txn
            .polls()
            .filter_map(|poll| {
                let last = poll.records.as_ref()?.last()?;
                Some((poll.partition.clone(), last.offset() + 1))
            })
            .collect();
        if moved.is_empty() {
            return Ok(());
        }
        let producer = state
            .producer
            .ok_or_else(|| Stopped("no producer".into()))?;
        loop {
            let request = self.shared.request_timeout;
            let id = state.transactional_id.clone();
            let result = match self.txn_coordinator(state, deadline).await {
                Ok(client) => {
                    client
                        .add_offsets_to_txn(&id, producer, &member.group, request)
                        .await
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => break,
                Err(e) => self.coordinator_failed(state, e, deadline).await?,
            }
        }
        let offsets: Vec<TxnOffset> = moved
            .iter()
            .map(|(p, &offset)| TxnOffset {
                topic: p.topic.clone(),
                partition: p.wire_partition(),
                offset,
            })
            .collect();
        let as_member = TxnMember {
            generation: member.generation,
            member_id: member.member_id.clone(),
        };
        txn.offsets = moved;
        let mut coordinator = member.coordinator;
        loop {
            let request = self.shared.request_timeout;
            let result = match self.connection(coordinator, request).await {
                Ok(client) => {
                    client
                        .txn_offset_commit(
                            &state.transactional_id,
                            producer,
                            &member.group,
                            Some(&as_member),
                            &offsets,
                            request,
                        )
                        .await
                }
                Err(e) => Err(e),
            };
            let e = match result {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            self.connections.remove(&coordinator);
            // The group's coordinator moving or loading (or the last
            // transaction's offsets still pending) is asked again; anything
            // else (a fenced generation or epoch) ends the transaction.
            let retriable = matches!(&e, ClientError::Broker { code, .. }
                if COORDINATOR_RETRIABLE.contains(code));
            let next = tokio::time::Instant::now() + super::producer::RETRY_BACKOFF;
            if !retriable || next >= deadline {
                return Err(Stopped(format!("TxnOffsetCommit of {}: {e}", member.group)));
            }
            tokio::time::sleep(super::producer::RETRY_BACKOFF).await;
            coordinator = self
                .coordinator(&member.group, coordinator, deadline)
                .await
                .map_err(|e| Stopped(format!("no coordinator of {}: {e}", member.group)))?;
        }
    }
}
