#!/usr/bin/env python3
"""An application that reads and writes Kafka, run through faults by
`epochal up` and `epochal fault` (tests/cluster_up.rs).

usage: app_through_faults.py BOOTSTRAP TOPIC FINISH_DEADLINE_S

It produces the values app-0, app-1, ... to partition 0 of TOPIC with
acks=all, one every 20 ms, and consumes that partition from its beginning, at
the same time, on one thread (confluent-kafka's callbacks run in poll()).
Every half second it prints one JSON line of progress: {"acked": A,
"consumed": C, "produced": P, "errors": E}, where acked counts the values whose
delivery was acknowledged and consumed the distinct values read back.

When its stdin closes it stops producing, waits for the deliveries still in
flight (at most FINISH_DEADLINE_S), and reads on until it has consumed every
acknowledged value or the deadline passes. Its last line is {"final": true,
"acked": A, "consumed": C, "missing": [first 20], "missing_count": M,
"errors": E, "error_texts": [...], "undelivered": U}; it exits 0 if it had values acknowledged and every one was read back,
else 1. A delivery error (a value given up after message.timeout.ms) is
counted, not a failure: the application was told, as Kafka promises.
"""

import json
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

INTERVAL_S = 0.02
PROGRESS_S = 0.5


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
            acked.add(msg.value().decode())
        else:
            errors.append(str(err))

    # Short request timeouts, so a paused broker's requests are given up and
    # sent again to the new leader within seconds, not librdkafka's 30 s.
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
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
            "group.id": "app-through-faults",
            "enable.auto.commit": False,
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    def consume(timeout_s):
        msg = consumer.poll(timeout_s)
        if msg is not None and msg.error() is None and msg.value() is not None:
            consumed.add(msg.value().decode())

    def progress(**extra):
        line = {
            "acked": len(acked),
            "consumed": len(consumed),
            "produced": produced,
            "errors": len(errors),
        }
        line.update(extra)
        print(json.dumps(line), flush=True)

    produced = 0
    shown = next_at = time.monotonic()
    while not stop.is_set():
        if time.monotonic() >= next_at:
            try:
                producer.produce(
                    topic, value=f"app-{produced}".encode(), partition=0, on_delivery=delivered
                )
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
    missing = sorted(acked - consumed, key=lambda v: int(v.split("-")[1]))
    progress(
        final=True,
        missing=missing[:20],
        missing_count=len(missing),
        undelivered=len(producer),
        error_texts=errors[:10],
    )
    consumer.close()
    sys.exit(0 if acked and not missing else 1)


if __name__ == "__main__":
    main()
