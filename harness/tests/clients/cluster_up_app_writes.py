#!/usr/bin/env python3
"""An application's text records, produced on command (tests/cluster_up_app_writes.rs).

usage: cluster_up_app_writes.py BOOTSTRAP TOPIC

Reads commands from stdin, one a line, and answers each with one JSON line:
`produce V...` sends each word as a record to partition 0 of TOPIC with
acks=all, no idempotence, and waits for every delivery ({"offsets": [offset
or null per record], "errors": [text or null per record]}). `create` creates
TOPIC (one partition, replication factor 3) and `delete` deletes it, each
waited for ({"error": text or null}). Ends when stdin closes.
"""

import json
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def main():
    bootstrap, topic = sys.argv[1:3]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "cluster-up-app-writer",
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": 0,
            "message.timeout.ms": 8000,
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "cluster-up-app-admin"})
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words in (["create"], ["delete"]):
            if words[0] == "create":
                futures = admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=20)
            else:
                futures = admin.delete_topics([topic], operation_timeout=20)
            try:
                futures[topic].result(30)
                error = None
            except Exception as e:  # the admin client's error, reported
                error = str(e)
            print(json.dumps({"error": error}), flush=True)
            continue
        if not words or words[0] != "produce":
            continue
        values = words[1:]
        offsets = [None] * len(values)
        errors = [None] * len(values)

        def delivered(i):
            def report(err, msg):
                if err is None:
                    offsets[i] = msg.offset()
                else:
                    errors[i] = str(err)

            return report

        for i, value in enumerate(values):
            producer.produce(topic, value=value.encode(), partition=0, on_delivery=delivered(i))
        producer.flush(30)
        print(json.dumps({"offsets": offsets, "errors": errors}), flush=True)


if __name__ == "__main__":
    main()
