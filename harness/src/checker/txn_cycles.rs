//! Dependency cycles among committed transactions, after Elle (Kingsbury &
//! Alvaro 2020) over Adya's dependencies, with offsets standing in for
//! Elle's version orders: a partition's log is the order of its writes.
//!
//! - write-write (`ww`): T1's write to a partition is followed in the final
//!   log by T2's, the next committed transactional record of another
//!   transaction there. Only consecutive writers are linked (the transitive
//!   reduction of the log order), so the graph stays linear in the writes.
//! - write-read (`wr`): T2 (a committed transaction) polled a value T1 wrote.
//!
//! The committed transactions are those whose EndTxn(commit) was answered,
//! and those that ended info whose writes the final log holds committed.
//! Strongly connected components are found with Tarjan's algorithm, written
//! iteratively (a run holds 100 000 transactions and more); one cycle is
//! reported per component, with its transactions' history indices and each
//! edge's partition, offsets and values.
//!
//! Kafka does not isolate transactions' writes: two producers' batches
//! interleave in each partition as they arrive, so write-write cycles (G0)
//! and cycles that need a write-write edge to close (G1c through ww) happen
//! without any fault — Jepsen's Redpanda 21.10.1 analysis discusses this
//! ("write cycles" as a property of Kafka's transaction model). They are
//! `write-cycle`, reported and counted, allowed. A cycle of write-read edges
//! alone (`read-cycle`, G1c: circular information flow) is not: T2 reading
//! T1's committed write means T1's commit came before T2's, so such a cycle
//! orders a commit before itself.

use std::collections::{HashMap, HashSet, VecDeque};

use super::evidence::{CycleEdge, DependencyKind, TxnCycle};
use super::index::{EVIDENCE_MAX, RunIndex};
use super::txn_index::{Fate, TxnView};
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence};
use crate::reader::txn::TxnOutcome;
use crate::topic_partition::PartitionRef;

pub const NAME: &str = "txn-cycles";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "Committed transactions never read each other's writes in a cycle: no cycle \
            of write-read dependencies (G1c, circular information flow), which read_committed \
            rules out since a read of a committed write follows its commit. Cycles that need a \
            write-write dependency (G0, or G1c through one) are reported and counted: Kafka \
            does not isolate transactions' writes.",
        source: "KIP-98 (read_committed returns only committed transactions' records); Adya's \
            G0 and G1c; Elle (Kingsbury & Alvaro 2020) for inferring dependencies from a log's \
            order; Jepsen's Redpanda 21.10.1 analysis (circular information flow found; write \
            cycles as a property of Kafka's transaction model).",
        not_checked: "Transactions that aborted, failed, or ended info with no write committed \
            in the final log; reads by plain polls (not transactions); anti-dependencies (rw \
            edges: Kafka promises no serializability); partitions without a final log (their \
            writes add no ww edge). Real-time order between transactions is not an edge.",
        needs: &[],
        check,
    }
}

/// Why an edge exists.
#[derive(Debug, Clone)]
struct Edge<'a> {
    from: u32,
    to: u32,
    kind: DependencyKind,
    partition: &'a PartitionRef,
    offset: i64,
    value: i64,
    then: Option<(i64, i64)>,
}

/// The committed transactions and their dependencies.
struct Graph<'a> {
    /// Vertex → its place in `TxnView::txns`.
    places: Vec<usize>,
    edges: Vec<Edge<'a>>,
}

impl<'a> Graph<'a> {
    fn of(view: &'a TxnView) -> Graph<'a> {
        // A transaction is committed by its answer, or (info) by its log.
        let logged_committed = |t: &super::txn_index::TxnOp| {
            t.txn.sends().any(|s| {
                view.pid(&s.partition)
                    .and_then(|pid| view.logged(pid, s.value).ok().flatten())
                    .is_some_and(|l| l.outcome == TxnOutcome::Committed)
            })
        };
        let mut vertex: Vec<Option<u32>> = vec![None; view.txns.len()];
        let mut places = Vec::new();
        for (place, t) in view.txns.iter().enumerate() {
            let committed = match t.fate {
                Fate::Committed => true,
                Fate::Indeterminate => logged_committed(t),
                Fate::Aborted | Fate::Failed => false,
            };
            if committed {
                vertex[place] = Some(places.len() as u32);
                places.push(place);
            }
        }
        let mut edges = Vec::new();
        let mut seen: HashSet<(u32, u32, DependencyKind)> = HashSet::new();
        // ww: per partition, committed writes in log order.
        for (pid, written) in view.writers.iter().enumerate() {
            let partition = &view.partitions[pid];
            let mut list: Vec<(i64, u32, i64)> = Vec::with_capacity(written.len());
            for (&value, &(place, _)) in written {
                let Some(v) = vertex[place] else { continue };
                if let Ok(Some(logged)) = view.logged(pid, value)
                    && logged.outcome == TxnOutcome::Committed
                {
                    list.push((logged.offset, v, value));
                }
            }
            list.sort_unstable();
            for pair in list.windows(2) {
                let ((offset, from, value), (then_offset, to, then_value)) = (pair[0], pair[1]);
                if from != to && seen.insert((from, to, DependencyKind::Ww)) {
                    edges.push(Edge {
                        from,
                        to,
                        kind: DependencyKind::Ww,
                        partition,
                        offset,
                        value,
                        then: Some((then_offset, then_value)),
                    });
                }
            }
        }
        // wr: a committed transaction's reads of committed transactions' writes.
        for read in &view.reads {
            let Some(to) = read.txn.and_then(|place| vertex[place]) else {
                continue;
            };
            for record in read.records {
                let Some(value) = record.value().as_number() else {
                    continue;
                };
                let Some(&(place, _)) = view.writers[read.pid].get(&value) else {
                    continue;
                };
                let Some(from) = vertex[place] else { continue };
                if from != to && seen.insert((from, to, DependencyKind::Wr)) {
                    edges.push(Edge {
                        from,
                        to,
                        kind: DependencyKind::Wr,
                        partition: read.partition,
                        offset: record.offset(),
                        value,
                        then: None,
                    });
                }
            }
        }
        Graph { places, edges }
    }

    /// Adjacency over the edges `keep` admits: per vertex, (to, edge).
    fn adjacency(&self, keep: impl Fn(&Edge) -> bool) -> Vec<Vec<(u32, u32)>> {
        let mut adjacency = vec![Vec::new(); self.places.len()];
        for (e, edge) in self.edges.iter().enumerate() {
            if keep(edge) {
                adjacency[edge.from as usize].push((edge.to, e as u32));
            }
        }
        adjacency
    }
}

/// Tarjan's strongly connected components, with an explicit stack (no
/// recursion: a component may hold every transaction of the run). Returns
/// each vertex's component, and the components of more than one vertex.
pub(crate) fn components(adjacency: &[Vec<(u32, u32)>]) -> (Vec<u32>, Vec<Vec<u32>>) {
    const UNSEEN: u32 = u32::MAX;
    let n = adjacency.len();
    let mut order = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut component = vec![UNSEEN; n];
    let mut found = Vec::new();
    let mut next = 0u32;
    let mut components = 0u32;
    // The call stack: a vertex and how many of its edges it has followed.
    let mut calls: Vec<(u32, usize)> = Vec::new();
    for root in 0..n as u32 {
        if order[root as usize] != UNSEEN {
            continue;
        }
        macro_rules! visit {
            ($v:expr) => {{
                let v: u32 = $v;
                order[v as usize] = next;
                low[v as usize] = next;
                next += 1;
                stack.push(v);
                on_stack[v as usize] = true;
                calls.push((v, 0));
            }};
        }
        visit!(root);
        while let Some(&(v, followed)) = calls.last() {
            let vi = v as usize;
            if let Some(&(w, _)) = adjacency[vi].get(followed) {
                calls.last_mut().expect("a call is on the stack").1 += 1;
                let wi = w as usize;
                if order[wi] == UNSEEN {
                    visit!(w);
                } else if on_stack[wi] {
                    low[vi] = low[vi].min(order[wi]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                let pi = parent as usize;
                low[pi] = low[pi].min(low[vi]);
            }
            if low[vi] == order[vi] {
                let mut members = Vec::new();
                loop {
                    let w = stack.pop().expect("v is on the stack");
                    on_stack[w as usize] = false;
                    component[w as usize] = components;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                if members.len() > 1 {
                    found.push(members);
                }
                components += 1;
            }
        }
    }
    (component, found)
}

/// One cycle through `start` inside its component: a breadth-first search
/// along edges that stay in the component, back to `start`. Returns the
/// edges, in cycle order.
pub(crate) fn cycle_through(
    start: u32,
    adjacency: &[Vec<(u32, u32)>],
    component: &[u32],
    edge_ends: impl Fn(u32) -> (u32, u32),
) -> Vec<u32> {
    let home = component[start as usize];
    let mut parent: HashMap<u32, u32> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &(w, e) in &adjacency[v as usize] {
            if component[w as usize] != home {
                continue;
            }
            if w == start {
                // Back home: walk the parents from v to start.
                let mut path = vec![e];
                let mut at = v;
                while at != start {
                    let edge = parent[&at];
                    path.push(edge);
                    at = edge_ends(edge).0;
                }
                path.reverse();
                return path;
            }
            if w != start && !parent.contains_key(&w) {
                parent.insert(w, e);
                queue.push_back(w);
            }
        }
    }
    Vec::new()
}

fn check(index: &RunIndex) -> CheckOutcome {
    let view = index.txns();
    let graph = Graph::of(view);
    let mut evidence = Vec::new();
    let mut allowed = Vec::new();
    let ends = |e: u32| {
        let edge = &graph.edges[e as usize];
        (edge.from, edge.to)
    };
    // Read cycles: components of the write-read graph alone.
    let reads = graph.adjacency(|e| e.kind == DependencyKind::Wr);
    let (component, found) = components(&reads);
    let read_cycles = found.len();
    for members in found.iter().take(EVIDENCE_MAX) {
        let path = cycle_through(members[0], &reads, &component, ends);
        evidence.push(cycle_evidence(
            Anomaly::ReadCycle,
            "G1c",
            view,
            &graph,
            &path,
            members.len(),
        ));
    }
    // Write cycles: components of the whole graph whose cycle needs a ww edge.
    let all = graph.adjacency(|_| true);
    let (component, found) = components(&all);
    let mut write_cycles = 0u64;
    for members in &found {
        let path = cycle_through(members[0], &all, &component, ends);
        let ww = path
            .iter()
            .filter(|&&e| graph.edges[e as usize].kind == DependencyKind::Ww)
            .count();
        if ww == 0 {
            continue;
        }
        write_cycles += 1;
        if allowed.len() < EVIDENCE_MAX {
            let label = if ww == path.len() {
                "G0"
            } else {
                "G1c through ww"
            };
            allowed.push(cycle_evidence(
                Anomaly::WriteCycle,
                label,
                view,
                &graph,
                &path,
                members.len(),
            ));
        }
    }
    let ww_edges = graph
        .edges
        .iter()
        .filter(|e| e.kind == DependencyKind::Ww)
        .count();
    let mut result = CheckResult::fold(
        NAME,
        evidence,
        |_| {
            format!(
                "{read_cycles} cycle(s) of write-read dependencies among committed transactions"
            )
        },
        None,
        || {
            format!(
                "{} committed transaction(s), {} dependencies: no read cycle; {write_cycles} \
                 write cycle(s) (allowed)",
                graph.places.len(),
                graph.edges.len()
            )
        },
    );
    result.evidence.extend(allowed);
    Ok(result
        .with_count("committed-transactions", graph.places.len() as u64)
        .with_count("ww-edges", ww_edges as u64)
        .with_count("wr-edges", (graph.edges.len() - ww_edges) as u64)
        .with_count("read-cycles", read_cycles as u64)
        .with_count("write-cycles", write_cycles))
}

/// The evidence of one cycle (`path`: its edges in order).
fn cycle_evidence(
    anomaly: Anomaly,
    label: &str,
    view: &TxnView,
    graph: &Graph,
    path: &[u32],
    component_size: usize,
) -> Evidence {
    let txn = |v: u32| &view.txns[graph.places[v as usize]];
    let edges: Vec<CycleEdge> = path
        .iter()
        .map(|&e| {
            let edge = &graph.edges[e as usize];
            CycleEdge {
                from: txn(edge.from).index(),
                kind: edge.kind,
                offset: edge.offset,
                partition: edge.partition.clone(),
                then_offset: edge.then.map(|(o, _)| o),
                then_value: edge.then.map(|(_, v)| v),
                to: txn(edge.to).index(),
                value: edge.value,
            }
        })
        .collect();
    let steps: Vec<String> = path
        .iter()
        .map(|&e| {
            let edge = &graph.edges[e as usize];
            let why = match (edge.kind, edge.then) {
                (DependencyKind::Ww, Some((then_offset, then_value))) => format!(
                    "ww: wrote {} at {}-{}, next {} at {then_offset}",
                    edge.value, edge.partition, edge.offset, then_value
                ),
                _ => format!(
                    "wr: {} at {}-{} read",
                    edge.value, edge.partition, edge.offset
                ),
            };
            format!(
                "#{} -[{why}]-> #{}",
                txn(edge.from).index(),
                txn(edge.to).index()
            )
        })
        .collect();
    Evidence::new(
        anomaly,
        format!(
            "{label} cycle of {} committed transactions: {}",
            path.len(),
            steps.join(", ")
        ),
        TxnCycle {
            component_size,
            ops: edges.iter().map(|e| e.from).collect(),
            edges,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(n: usize, edges: &[(u32, u32)]) -> Vec<Vec<(u32, u32)>> {
        let mut adjacency = vec![Vec::new(); n];
        for (e, &(from, to)) in edges.iter().enumerate() {
            adjacency[from as usize].push((to, e as u32));
        }
        adjacency
    }

    #[test]
    fn components_and_a_cycle_in_each() {
        let edges = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 3), (5, 5)];
        let adjacency = graph(6, &edges);
        let (component, found) = components(&adjacency);
        let mut sizes: Vec<usize> = found.iter().map(Vec::len).collect();
        sizes.sort();
        assert_eq!(sizes, vec![2, 3]);
        for members in &found {
            let path = cycle_through(members[0], &adjacency, &component, |e| edges[e as usize]);
            assert_eq!(path.len(), members.len());
            // Each edge starts where the one before it ended, and it closes.
            for pair in path.windows(2) {
                assert_eq!(edges[pair[0] as usize].1, edges[pair[1] as usize].0);
            }
            assert_eq!(
                edges[path[path.len() - 1] as usize].1,
                edges[path[0] as usize].0
            );
        }
    }

    #[test]
    fn a_long_chain_closed_into_one_cycle_needs_no_recursion() {
        let n = 200_000u32;
        let edges: Vec<(u32, u32)> = (0..n).map(|v| (v, (v + 1) % n)).collect();
        let adjacency = graph(n as usize, &edges);
        let (component, found) = components(&adjacency);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].len(), n as usize);
        let path = cycle_through(0, &adjacency, &component, |e| edges[e as usize]);
        assert_eq!(path.len(), n as usize);
    }
}
