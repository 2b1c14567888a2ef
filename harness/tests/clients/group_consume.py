"""Consume a topic as a member of a consumer group with a real Kafka client.

    group_consume.py CLIENT BOOTSTRAP TOPIC GROUP WANT DEADLINE_S

CLIENT is `kafka-python` or `confluent-kafka` (librdkafka). The consumer
`subscribe()`s to TOPIC in GROUP (the coordinator assigns its partitions;
auto commit off, auto.offset.reset=earliest), polls, and commits
synchronously after each poll that returned records, as Jepsen's queue
workload does, until it has read WANT records (never more: each poll asks
for at most what is still wanted) or DEADLINE_S passes. Prints
one JSON line: {"records": [[partition, offset, value], ...], "errors":
[...]}. Exits 0 when it read WANT records, 3 when the deadline passed first.
"""

import json
import sys
import time

from group_consumers import confluent_consumer, kafka_python_consumer

client, bootstrap, topic, group, want, deadline_s = sys.argv[1:7]
want = int(want)
deadline = time.monotonic() + float(deadline_s)
records = []
errors = []


def run_kafka_python():
    consumer = kafka_python_consumer(bootstrap, group)
    consumer.subscribe([topic])
    try:
        while len(records) < want and time.monotonic() < deadline:
            polled = consumer.poll(timeout_ms=500, max_records=want - len(records))
            got = False
            for tp, messages in polled.items():
                for m in messages:
                    records.append([tp.partition, m.offset, m.value.decode()])
                    got = True
            if got:
                try:
                    consumer.commit()
                except Exception as e:  # a commit that fails is retried next poll
                    errors.append(f"commit: {e}")
    finally:
        consumer.close(autocommit=False)


def run_confluent():
    consumer = confluent_consumer(bootstrap, group)
    consumer.subscribe([topic])
    try:
        while len(records) < want and time.monotonic() < deadline:
            polled = consumer.consume(num_messages=min(500, want - len(records)), timeout=0.5)
            got = False
            for m in polled:
                if m.error():
                    errors.append(str(m.error()))
                    continue
                records.append([m.partition(), m.offset(), m.value().decode()])
                got = True
            if got:
                try:
                    consumer.commit(asynchronous=False)
                except Exception as e:
                    errors.append(f"commit: {e}")
    finally:
        consumer.close()


{"kafka-python": run_kafka_python, "confluent-kafka": run_confluent}[client]()
print(json.dumps({"records": records, "errors": errors}), flush=True)
sys.exit(0 if len(records) >= want else 3)
