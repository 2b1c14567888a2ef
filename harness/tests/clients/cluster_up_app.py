#!/usr/bin/env python3
"""An application whose traffic `epochal up` judges (tests/cluster_up_app.rs).

usage: cluster_up_app.py BOOTSTRAP TOPIC FINISH_DEADLINE_S

It produces the values 1000, 1001, ... (decimal text, so the harness's
checkers know each record by its value) to partition 0 of TOPIC with
acks=all, one every 10 ms, and consumes the partition from its beginning at
the same time. Every 200 ms it prints {"acked": A, "consumed": C,
"produced": P, "errors": E}: the values whose delivery was acknowledged, the
distinct values read back.

When its stdin closes it stops producing, waits for the deliveries in flight
(at most FINISH_DEADLINE_S) and reads on until every acknowledged value was
read or the deadline passed, then prints {"final": true, ...,
"missing_count": M} and exits 0 if every acknowledged value was read back.

As consumer group cluster-up-app it commits its position (synchronously)
after every 50 records read and once at the end, then reads the group's
committed offset back ("committed" in the last line).
"""

import json
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

INTERVAL_S = 0.01
PROGRESS_S = 0.2
FIRST_VALUE = 1000


def main():
    bootstrap, topic, deadline_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    stop = threading.Event()

    def watch_stdin():
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    acked, consumed, errors = set(), set(), []

    def delivered(err, msg):
        if err is None:
            acked.add(int(msg.value()))
        else:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "cluster-up-app-producer",
            "acks": "all",
            "linger.ms": 5,
            "request.timeout.ms": 5000,
            "message.timeout.ms": 60000,
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "cluster-up-app-consumer",
            "group.id": "cluster-up-app",
            "enable.auto.commit": False,
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    commits = [0]

    def commit():
        try:
            consumer.commit(asynchronous=False)
            commits[0] += 1
        except Exception as e:  # a commit refused under faults: told, as Kafka promises
            errors.append(f"commit: {e}")

    def consume(timeout_s):
        msg = consumer.poll(timeout_s)
        if msg is not None and msg.error() is None and msg.value() is not None:
            consumed.add(int(msg.value()))
            if len(consumed) % 50 == 0:
                commit()

    produced = 0

    def progress(**extra):
        line = {
            "acked": len(acked),
            "consumed": len(consumed),
            "produced": produced,
            "errors": len(errors),
        }
        line.update(extra)
        print(json.dumps(line), flush=True)

    shown = next_at = time.monotonic()
    while not stop.is_set():
        if time.monotonic() >= next_at:
            try:
                value = str(FIRST_VALUE + produced).encode()
                producer.produce(topic, value=value, partition=0, on_delivery=delivered)
                produced += 1
            except BufferError:
                pass
            next_at = time.monotonic() + INTERVAL_S
        producer.poll(0)
        consume(max(0.0, min(INTERVAL_S, next_at - time.monotonic())))
        if time.monotonic() - shown >= PROGRESS_S:
            progress()
            shown = time.monotonic()

    deadline = time.monotonic() + deadline_s
    while len(producer) > 0 and time.monotonic() < deadline:
        producer.poll(0.1)
        consume(0)
    while not acked <= consumed and time.monotonic() < deadline:
        consume(0.1)
    commit()
    committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    missing = sorted(acked - consumed)
    progress(
        final=True,
        missing=missing[:20],
        missing_count=len(missing),
        error_texts=errors[:10],
        commits=commits[0],
        committed=committed,
    )
    consumer.close()
    sys.exit(0 if acked and not missing else 1)


if __name__ == "__main__":
    main()
