#!/usr/bin/env python3
"""A consumer group's offsets, committed on command (tests/cluster_up_app_commits.rs).

usage: cluster_up_app_commits.py BOOTSTRAP TOPIC GROUP

Reads commands from stdin, one a line, and answers each with one JSON line:
`commit N` commits offset N of partition 0 of TOPIC for GROUP (synchronously;
{"commit": N, "error": null or its text}); `committed` reads the group's
committed offset of that partition back ({"committed": offset or null,
"error": ...}). It assigns the partition itself, so its commits carry no
generation. Ends when stdin closes.
"""

import json
import sys

from confluent_kafka import Consumer, TopicPartition


def main():
    bootstrap, topic, group = sys.argv[1:4]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "cluster-up-app-committer",
            "group.id": group,
            "enable.auto.commit": False,
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "commit":
            offset = int(words[1])
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
                print(json.dumps({"commit": offset, "error": None}), flush=True)
            except Exception as e:  # noqa: BLE001: the answer says what failed
                print(json.dumps({"commit": offset, "error": str(e)}), flush=True)
        elif words[0] == "committed":
            try:
                got = consumer.committed([partition], timeout=30)[0]
                print(json.dumps({"committed": got.offset, "error": None}), flush=True)
            except Exception as e:  # noqa: BLE001
                print(json.dumps({"committed": None, "error": str(e)}), flush=True)
    consumer.close()


if __name__ == "__main__":
    main()
