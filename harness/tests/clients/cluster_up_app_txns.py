#!/usr/bin/env python3
"""A transactional application and its read_committed reader, through
`epochal up` (tests/cluster_up_app_txns.rs).

usage: cluster_up_app_txns.py BOOTSTRAP TOPIC TRANSACTIONS DEADLINE_S

A confluent-kafka transactional producer (client id
cluster-up-app-txn-producer) runs TRANSACTIONS transactions of three decimal
values each to partition 0 of TOPIC: every third (the second, the fifth, ...)
is flushed to the broker and aborted, the rest committed; the last one
commits. Then a read_committed consumer (client id cluster-up-app-txn-reader,
subscribed as group app-txn-readers, so it joins and syncs) reads from the
start until it has every committed value and a read comes back empty, and
commits its position. Prints {"committed": [...], "aborted": [...],
"read": [...]} (exit 0), or {"error": ..., "step": ...} (exit 3) at
DEADLINE_S.
"""

import json
import sys
import time

from confluent_kafka import Consumer, Producer

bootstrap, topic = sys.argv[1:3]
transactions = int(sys.argv[3])
deadline = time.monotonic() + float(sys.argv[4])


def left():
    return max(1.0, deadline - time.monotonic())


def fail(step, error):
    print(json.dumps({"error": str(error), "step": step}), flush=True)
    sys.exit(3)


def produce():
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "cluster-up-app-txn-producer",
            "transactional.id": "app-txn",
        }
    )
    producer.init_transactions(left())
    committed, aborted = [], []
    for t in range(transactions):
        values = [str(1000 + 10 * t + i) for i in range(3)]
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v.encode(), partition=0)
        # Flushed first, so the broker holds the records an abort ends.
        producer.flush(left())
        if t % 3 == 1 and t != transactions - 1:
            producer.abort_transaction(left())
            aborted.extend(values)
        else:
            producer.commit_transaction(left())
            committed.extend(values)
    return committed, aborted


def read(committed):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "cluster-up-app-txn-reader",
            "group.id": "app-txn-readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    values = []
    while time.monotonic() < deadline:
        got = [m for m in consumer.consume(num_messages=50, timeout=1.0) if not m.error()]
        values.extend(m.value().decode() for m in got)
        if not got and set(committed) <= set(values):
            break
    else:
        fail("read", f"deadline passed with {len(values)} values read")
    consumer.commit(asynchronous=False)
    consumer.close()
    return values


def main():
    try:
        committed, aborted = produce()
    except Exception as e:  # noqa: BLE001: the answer says what failed
        fail("produce", e)
    values = read(committed)
    print(
        json.dumps({"committed": committed, "aborted": aborted, "read": values}),
        flush=True,
    )


if __name__ == "__main__":
    main()
