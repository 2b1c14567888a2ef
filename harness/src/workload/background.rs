//! Background clients (`[workload.background]`): producers and consumers that
//! run beside the scripted steps from the moment the cluster is ready until the
//! last step is done, each one request at a time, as Jepsen's workload clients
//! do. Every op goes to the run's one history, stamped under its lock, so the
//! history's order is real-time order across the steps and the workers.
//!
//! A worker finds the partition's leader in etcd (a view at most
//! [`ROUTE_MAX_AGE`] old, shared by the workers), sends through that node's
//! client proxy, and after an ack records the ISR and leader epoch etcd shows
//! in a read begun after the ack, which the lost-write rule
//! holds to account. An `info` (an answer that never came) retires the
//! worker's history process and it goes on as a fresh one, as Jepsen does
//! with a crashed client. Each producer value is written once in the run,
//! counting up from [`Background::FIRST_VALUE`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::client::{Clients, RecordingClient};
use super::send_options::SendOptions;
use super::subscribe::{HEARTBEAT_INTERVAL, Membership, Standing};
use super::txn::{Planned, TxnProducerState};
use crate::history::{Intent, OpType, Poll, WriteError};
use crate::random::SplitMix64;
use crate::schedule::{Background, PartitionRef, Workload};

/// How old etcd's view may be for routing a background request. A send
/// routed by a view this old to a deposed leader fails (NOT_LEADER), as
/// definitely as it would have a moment later; what an ack records is read
/// after it, never from this.
const ROUTE_MAX_AGE: Duration = Duration::from_millis(20);

/// The pause after a membership round that failed, before the next: the
/// Java consumer's retry.backoff.ms default. A coordinator that died is
/// still named by FindCoordinator until its lease lapses, and without it
/// every subscriber asked it again every few milliseconds.
const REJOIN_BACKOFF: Duration = Duration::from_millis(100);

/// What every worker shares.
struct Context {
    partitions: Vec<PartitionRef>,
    options: SendOptions,
    interval: Duration,
    next_value: AtomicI64,
    acked: watch::Sender<u64>,
    /// Commits acknowledged (consumers' and subscribers').
    commits_acked: watch::Sender<u64>,
    /// `[workload.background] commits`.
    commits: bool,
    /// `[workload.background] crash_every`.
    crash_every: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum BackgroundError {
    #[error("background workload: {0}")]
    History(#[from] WriteError),
    #[error("background workload: {0} workers did not stop within {1:?}")]
    Stuck(usize, Duration),
    #[error("background workload: a worker panicked: {0}")]
    Panicked(String),
}

/// What an await counts: the producers' acknowledged sends, or the
/// consumers' acknowledged commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    Writes,
    Commits,
}

impl std::fmt::Display for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Counted::Writes => "writes",
            Counted::Commits => "commits",
        })
    }
}

/// The running workers. Dropping it aborts them; [`Workers::stop`] lets each
/// finish the request it has in flight, so no op is left without a completion.
pub struct Workers {
    stop: watch::Sender<bool>,
    acked: watch::Receiver<u64>,
    commits_acked: watch::Receiver<u64>,
    tasks: JoinSet<Result<(), WriteError>>,
    /// The longest one send may take ([`Clients::send_bound`]).
    send_bound: Duration,
}

impl Workers {
    /// Starts `config`'s workers against a ready cluster.
    pub fn start(
        config: &Background,
        workload: &Workload,
        all_partitions: Vec<PartitionRef>,
        clients: &Clients,
    ) -> Workers {
        let (acked_tx, acked_rx) = watch::channel(0);
        let (commits_tx, commits_rx) = watch::channel(0);
        let (stop_tx, _) = watch::channel(false);
        let context = Arc::new(Context {
            partitions: if config.partitions.is_empty() {
                all_partitions
            } else {
                config.partitions.clone()
            },
            options: SendOptions::of(workload),
            interval: Duration::from_millis(config.interval_ms),
            next_value: AtomicI64::new(Background::FIRST_VALUE),
            acked: acked_tx,
            commits_acked: commits_tx,
            commits: config.commits,
            crash_every: config.crash_every,
        });
        let mut tasks = JoinSet::new();
        for worker in 0..config.producers as usize {
            let worker = Worker::new(context.clone(), clients, worker, stop_tx.subscribe());
            tasks.spawn(worker.produce());
        }
        for worker in 0..config.consumers as usize {
            let group = format!("consumer-{worker}");
            let worker = Worker::new(context.clone(), clients, worker, stop_tx.subscribe());
            tasks.spawn(worker.consume(group));
        }
        let mut send_bound = clients.send_bound();
        for n in 0..config.subscribers as usize {
            let worker = Worker::new(context.clone(), clients, n, stop_tx.subscribe());
            if workload.read_process_write {
                send_bound = send_bound.max(worker.client.txn_bound());
                tasks.spawn(worker.read_process_write(n as u64));
            } else {
                tasks.spawn(worker.subscribe());
            }
        }
        for n in 0..config.transactional as usize {
            let worker = Worker::new(context.clone(), clients, n, stop_tx.subscribe());
            send_bound = send_bound.max(worker.client.txn_bound());
            tasks.spawn(worker.transact(n as u64));
        }
        if config.lives {
            let lives =
                super::lives::Lives::new(clients.client("epochal-lives"), clients.addresses.len());
            tasks.spawn(lives.run(stop_tx.subscribe()));
        }
        Workers {
            stop: stop_tx,
            acked: acked_rx,
            commits_acked: commits_rx,
            tasks,
            send_bound,
        }
    }

    /// Sends acknowledged so far.
    pub fn acknowledged(&self) -> u64 {
        *self.acked.borrow()
    }

    /// Waits until `more` sends beyond those acknowledged now are; on timeout,
    /// how many were.
    pub async fn await_acknowledged(&mut self, more: u64, timeout: Duration) -> Result<u64, u64> {
        self.await_counted(Counted::Writes, more, timeout).await
    }

    /// Waits until `more` of `counted` beyond those acknowledged now are; on
    /// timeout, how many were.
    pub async fn await_counted(
        &mut self,
        counted: Counted,
        more: u64,
        timeout: Duration,
    ) -> Result<u64, u64> {
        let count = match counted {
            Counted::Writes => &mut self.acked,
            Counted::Commits => &mut self.commits_acked,
        };
        let from = *count.borrow_and_update();
        let target = from + more;
        let reached = matches!(
            tokio::time::timeout(timeout, count.wait_for(|&n| n >= target)).await,
            Ok(Ok(_))
        );
        // Not reached: the deadline passed, or every worker is gone (a history
        // write failed) and no more will come.
        let seen = *count.borrow() - from;
        if reached { Ok(seen) } else { Err(seen) }
    }

    /// Tells every worker to stop and waits for each to finish its request in
    /// flight (bounded by the send's deadline: an idempotent send's retries
    /// included).
    pub async fn stop(mut self) -> Result<(), BackgroundError> {
        let _ = self.stop.send(true);
        let bound = self.send_bound + Duration::from_secs(5);
        let deadline = tokio::time::Instant::now() + bound;
        let mut first_error = None;
        while !self.tasks.is_empty() {
            match tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
                Err(_) => {
                    let stuck = self.tasks.len();
                    self.tasks.abort_all();
                    return Err(BackgroundError::Stuck(stuck, bound));
                }
                Ok(None) => break,
                Ok(Some(Ok(Ok(())))) => {}
                Ok(Some(Ok(Err(e)))) => {
                    first_error.get_or_insert(BackgroundError::History(e));
                }
                Ok(Some(Err(e))) => {
                    first_error.get_or_insert(BackgroundError::Panicked(e.to_string()));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// One worker: its own client (connections, history process) and place in
/// the partitions' round.
struct Worker {
    context: Arc<Context>,
    client: RecordingClient,
    /// The next partition to use (round-robin, starting at the worker's index
    /// so workers spread over partitions).
    turn: usize,
    stop: watch::Receiver<bool>,
    interval: tokio::time::Interval,
}

impl Worker {
    fn new(
        context: Arc<Context>,
        clients: &Clients,
        index: usize,
        stop: watch::Receiver<bool>,
    ) -> Worker {
        let mut interval = tokio::time::interval(context.interval.max(Duration::from_millis(1)));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut client = clients.client("epochal-background");
        // Processes in worker order, whatever order the workers first run in.
        client.process();
        Worker {
            client,
            turn: index,
            stop,
            interval,
            context,
        }
    }

    /// Waits for the next turn; false once the run says stop.
    async fn next_turn(&mut self) -> bool {
        if *self.stop.borrow() {
            return false;
        }
        let stopped = tokio::select! {
            _ = self.stop.wait_for(|&stop| stop) => true,
            _ = self.interval.tick() => false,
        };
        !stopped && !*self.stop.borrow()
    }

    fn partition(&mut self) -> PartitionRef {
        let partitions = &self.context.partitions;
        let p = partitions[self.turn % partitions.len()].clone();
        self.turn += 1;
        p
    }

    /// After an op that found no leader: wait until the next route reads a
    /// newer view (or the run stops). Without it a worker at a 1 ms interval
    /// records a `no leader` failure every millisecond while a partition is
    /// leaderless — a 90 s campaign at `--interval-ms 0` wrote 1.09 M history
    /// lines for 15 k completed ok ops, 0.5 M of them those failures.
    async fn back_off(&mut self) {
        self.back_off_for(ROUTE_MAX_AGE).await;
    }

    /// Waits `pause` (or until the run stops).
    async fn back_off_for(&mut self, pause: Duration) {
        tokio::select! {
            _ = self.stop.wait_for(|&stop| stop) => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }

    /// The partition's leader as etcd named it at most [`ROUTE_MAX_AGE`] ago.
    async fn leader(&mut self, partition: &PartitionRef) -> Option<crate::node::NodeId> {
        self.client.route(partition, ROUTE_MAX_AGE).await
    }

    async fn produce(mut self) -> Result<(), WriteError> {
        let context = self.context.clone();
        while self.next_turn().await {
            let partition = self.partition();
            let v = context.next_value.fetch_add(1, Ordering::Relaxed);
            let node = self.leader(&partition).await;
            let op = self
                .client
                .send(&partition, vec![v], node, context.options.clone())
                .await?;
            if op.kind == OpType::Ok {
                context.acked.send_modify(|n| *n += 1);
            }
            if node.is_none() {
                self.back_off().await;
            }
        }
        Ok(())
    }

    /// A transactional producer: transactions of one to four micro-ops over
    /// the partitions, each a send of a fresh value or a read_committed
    /// poll, one in four meant to abort, drawn from a generator seeded by
    /// the worker's number (the background load is not part of a seed's
    /// plan; this keeps two runs' mixes alike). Committed sends count as
    /// acknowledged writes.
    async fn transact(mut self, index: u64) -> Result<(), WriteError> {
        let context = self.context.clone();
        let mut state = TxnProducerState::new(format!("epochal-txn-{index}"));
        let mut rng = SplitMix64::new(index);
        while self.next_turn().await {
            let partitions = &context.partitions;
            let planned: Vec<Planned> = (0..rng.between(1, 4))
                .map(|_| {
                    let p = partitions[rng.index(partitions.len())].clone();
                    if rng.chance(1, 2) {
                        Planned::Send(p, context.next_value.fetch_add(1, Ordering::Relaxed))
                    } else {
                        Planned::Poll(p)
                    }
                })
                .collect();
            let intent = if rng.chance(1, 4) {
                Intent::Abort
            } else {
                Intent::Commit
            };
            let op = self.client.txn(&mut state, &planned, intent).await?;
            if op.kind == OpType::Ok && intent == Intent::Commit {
                let sends = planned
                    .iter()
                    .filter(|p| matches!(p, Planned::Send(..)))
                    .count() as u64;
                context.acked.send_modify(|n| *n += sends);
            } else if op.kind != OpType::Ok {
                self.back_off().await;
            }
        }
        Ok(())
    }

    /// Polls round-robin; with `commits`, commits each position it moved to
    /// as `group` and every eighth turn reads one back instead.
    async fn consume(mut self, group: String) -> Result<(), WriteError> {
        // Each partition's next offset to read: the consumer's position.
        let mut positions: BTreeMap<PartitionRef, u64> = BTreeMap::new();
        let mut turns = 0u64;
        while self.next_turn().await {
            turns += 1;
            let partition = self.partition();
            let from = positions.get(&partition).copied().unwrap_or(0);
            let node = self.leader(&partition).await;
            if self.context.commits && turns.is_multiple_of(8) {
                let first = node.unwrap_or_else(|| crate::node::NodeId::new(1));
                self.client.committed(&group, &partition, first).await?;
                continue;
            }
            let op = self.client.poll(&partition, from, node).await?;
            if let Some(next) = op.read().and_then(|(_, read)| read.next_offset()) {
                positions.insert(partition.clone(), next);
                if self.context.commits
                    && let Some(first) = node
                {
                    let offset = i64::try_from(next).unwrap_or(i64::MAX);
                    let op = self
                        .client
                        .commit(&group, &partition, offset, first)
                        .await?;
                    if op.kind == OpType::Ok {
                        self.context.commits_acked.send_modify(|n| *n += 1);
                    }
                }
            }
            if node.is_none() {
                self.back_off().await;
            }
        }
        Ok(())
    }

    /// A subscribed consumer (Jepsen's subscribe mode): joins
    /// [`Background::GROUP`], reads each partition it is assigned from the
    /// group's committed offset (the earliest when there is none), commits
    /// after each poll that moved it, heartbeats every
    /// [`HEARTBEAT_INTERVAL`], joins again when the group rebalances, and,
    /// with `crash_every`, crashes now and then and starts over as a new
    /// member. Every position comes from the group at each assignment: a
    /// member keeps nothing across rounds.
    async fn subscribe(mut self) -> Result<(), WriteError> {
        let group = Background::GROUP;
        let partitions = self.context.partitions.clone();
        let crash_every = u64::from(self.context.crash_every);
        let mut member_id = String::new();
        let mut membership: Option<Membership> = None;
        let mut positions: BTreeMap<PartitionRef, u64> = BTreeMap::new();
        let mut last_heartbeat = tokio::time::Instant::now();
        let mut turns = 0u64;
        while self.next_turn().await {
            turns += 1;
            if crash_every > 0 && turns.is_multiple_of(crash_every) {
                self.client.crash(Some(group))?;
                (membership, positions) = (None, BTreeMap::new());
                member_id.clear();
                continue;
            }
            let Some(member) = membership.as_ref() else {
                // The coordinator is asked of a broker that serves now.
                let first = self
                    .leader(&partitions[0])
                    .await
                    .unwrap_or(crate::node::NodeId::new(1));
                let (_, joined) = self
                    .client
                    .rebalance(group, &mut member_id, &partitions, first)
                    .await?;
                positions.clear();
                match joined {
                    Some(m) => {
                        member_id = m.member_id.clone();
                        membership = Some(m);
                        last_heartbeat = tokio::time::Instant::now();
                    }
                    None => {
                        // An answer that never came retired the history's
                        // process, but the consumer keeps its member id and
                        // joins with it again, as the Java consumer does
                        // after a lost connection (only a crash forgets it):
                        // a new id each time would leave the coordinator a
                        // member that never comes back until its session ends.
                        self.back_off_for(REJOIN_BACKOFF).await;
                    }
                }
                continue;
            };
            if last_heartbeat.elapsed() >= HEARTBEAT_INTERVAL {
                last_heartbeat = tokio::time::Instant::now();
                let standing = self.client.heartbeat(member).await;
                if leaves(standing, &mut membership, &mut member_id) {
                    continue;
                }
            }
            let Some(member) = membership.as_ref() else {
                continue;
            };
            let Some(partition) = next_assigned(&mut self.turn, member) else {
                continue;
            };
            let from = match positions.get(&partition) {
                Some(&from) => from,
                None => {
                    // Where the group left the partition: its committed
                    // offset, or the beginning (auto.offset.reset=earliest).
                    let op = self
                        .client
                        .committed(group, &partition, member.coordinator)
                        .await?;
                    match op.body {
                        crate::history::Body::Committed(c) if op.kind == OpType::Ok => {
                            let from = u64::try_from(c.offset.unwrap_or(-1)).unwrap_or(0);
                            positions.insert(partition, from);
                        }
                        _ => self.back_off().await,
                    }
                    continue;
                }
            };
            let node = self.leader(&partition).await;
            let mut poll = Poll::new(partition.clone(), from, node);
            poll.group = Some(group.to_owned());
            let op = self.client.poll_as(poll).await?;
            if let Some(next) = op.read().and_then(|(_, read)| read.next_offset()) {
                positions.insert(partition.clone(), next);
                let offset = i64::try_from(next).unwrap_or(i64::MAX);
                let (op, standing) = self
                    .client
                    .commit_as_member(member, &partition, offset)
                    .await?;
                if op.kind == OpType::Ok {
                    self.context.commits_acked.send_modify(|n| *n += 1);
                }
                if leaves(standing, &mut membership, &mut member_id) {
                    continue;
                }
            }
            if node.is_none() {
                self.back_off().await;
            }
        }
        if let Some(member) = membership {
            self.client.leave(&member).await;
        }
        Ok(())
    }
}

impl Worker {
    /// A subscribed consumer that processes transactionally (`[workload]
    /// read_process_write`; Jepsen's read-process-write, KIP-447): a member
    /// of [`Background::GROUP`] as [`Worker::subscribe`]'s, whose turn is
    /// one `txn` op of its transactional producer — a read_committed poll of
    /// one of its partitions, one to three fresh values sent to other
    /// partitions, the position it read to sent as the group's offset —
    /// one in four meant to abort. It resumes each partition at the group's
    /// stable committed offset (KIP-447's `require_stable`), and after any
    /// transaction that did not commit it forgets every position: what an
    /// aborted transaction read is read again, as an exactly-once processor
    /// rewinds to its committed offsets. Committed sends count as
    /// acknowledged writes and committed offsets as acknowledged commits.
    async fn read_process_write(mut self, index: u64) -> Result<(), WriteError> {
        let group = Background::GROUP;
        let partitions = self.context.partitions.clone();
        let mut state = TxnProducerState::new(format!("epochal-rpw-{index}"));
        let mut rng = SplitMix64::new(index ^ 0x5ee0_0447);
        let mut member_id = String::new();
        let mut membership: Option<Membership> = None;
        let mut last_heartbeat = tokio::time::Instant::now();
        // After a transaction that failed: ask the group at once whether
        // this is still a member (a rebalance fences its offsets).
        let mut recheck = false;
        while self.next_turn().await {
            let Some(member) = membership.as_ref() else {
                let first = self
                    .leader(&partitions[0])
                    .await
                    .unwrap_or(crate::node::NodeId::new(1));
                let (_, joined) = self
                    .client
                    .rebalance(group, &mut member_id, &partitions, first)
                    .await?;
                state.positions.clear();
                match joined {
                    Some(m) => {
                        member_id = m.member_id.clone();
                        membership = Some(m);
                        last_heartbeat = tokio::time::Instant::now();
                    }
                    None => self.back_off_for(REJOIN_BACKOFF).await,
                }
                continue;
            };
            if recheck || last_heartbeat.elapsed() >= HEARTBEAT_INTERVAL {
                (recheck, last_heartbeat) = (false, tokio::time::Instant::now());
                let standing = self.client.heartbeat(member).await;
                if leaves(standing, &mut membership, &mut member_id) {
                    continue;
                }
            }
            let Some(member) = membership.as_ref() else {
                continue;
            };
            let Some(input) = next_assigned(&mut self.turn, member) else {
                continue;
            };
            if let std::collections::btree_map::Entry::Vacant(position) =
                state.positions.entry(input.clone())
            {
                let op = self
                    .client
                    .committed_stable(group, &input, member.coordinator)
                    .await?;
                match op.body {
                    crate::history::Body::Committed(c) if op.kind == OpType::Ok => {
                        position.insert(u64::try_from(c.offset.unwrap_or(-1)).unwrap_or(0));
                    }
                    _ => self.back_off().await,
                }
                continue;
            }
            let others: Vec<&PartitionRef> = partitions.iter().filter(|p| **p != input).collect();
            let outputs: Vec<(PartitionRef, i64)> = (0..rng.between(1, 3))
                .map(|_| {
                    let p = if others.is_empty() {
                        input.clone()
                    } else {
                        others[rng.index(others.len())].clone()
                    };
                    (p, self.context.next_value.fetch_add(1, Ordering::Relaxed))
                })
                .collect();
            let intent = if rng.chance(1, 4) {
                Intent::Abort
            } else {
                Intent::Commit
            };
            let op = self
                .client
                .read_process_write(&mut state, member, &input, &outputs, intent)
                .await?;
            let committed = op.kind == OpType::Ok && intent == Intent::Commit;
            if committed {
                self.context
                    .acked
                    .send_modify(|n| *n += outputs.len() as u64);
                if op.txn().is_some_and(|t| !t.offsets.is_empty()) {
                    self.context.commits_acked.send_modify(|n| *n += 1);
                }
            } else {
                state.positions.clear();
            }
            if op.kind != OpType::Ok {
                recheck = true;
                self.back_off().await;
            }
        }
        if let Some(member) = membership {
            self.client.leave(&member).await;
        }
        Ok(())
    }
}

/// Whether `standing` ends the membership (the consumer must join
/// again); an expelled member joins again as a new one.
fn leaves(standing: Standing, membership: &mut Option<Membership>, member_id: &mut String) -> bool {
    match standing {
        Standing::Member => false,
        Standing::Rejoin | Standing::Lost => {
            *membership = None;
            true
        }
        Standing::Expelled => {
            *membership = None;
            member_id.clear();
            true
        }
    }
}

/// The member's next assigned partition, round robin by `turn` (`None`
/// with nothing assigned).
fn next_assigned(turn: &mut usize, member: &Membership) -> Option<PartitionRef> {
    if member.partitions.is_empty() {
        return None;
    }
    let partition = member.partitions[*turn % member.partitions.len()].clone();
    *turn += 1;
    Some(partition)
}
