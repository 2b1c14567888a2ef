"""Produce or read records whose key is null and one of whose header values
is null, with confluent-kafka (librdkafka), as Kafka's record format allows.

    null_fields.py produce BOOTSTRAP TOPIC VALUE DEADLINE_S
    null_fields.py read BOOTSTRAP TOPIC COUNT DEADLINE_S

produce: one record to partition 0 (acks=all, idempotent): key null, value
VALUE, headers h = null and k = "x"; prints {"offset": N} once it is
acknowledged, or {"error": "..."} and exits 3.
read: assigns partition 0 from offset 0 and reads COUNT records; prints
{"records": [{"offset", "key", "value", "headers": [[name, value|null]...]}]}
(exit 0), or what it had at DEADLINE_S (exit 3).
"""

import json
import sys
import time

role, bootstrap, topic, arg, deadline_s = sys.argv[1:6]
deadline = time.monotonic() + float(deadline_s)


def text(b):
    return None if b is None else b.decode()


if role == "produce":
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
    )
    result = {}

    def delivered(err, msg):
        result.update({"error": str(err)} if err else {"offset": msg.offset()})

    producer.produce(
        topic, value=arg, key=None, partition=0, headers=[("h", None), ("k", b"x")],
        on_delivery=delivered,
    )
    producer.flush(max(1.0, deadline - time.monotonic()))
    print(json.dumps(result or {"error": "no delivery report before the deadline"}), flush=True)
    sys.exit(0 if "offset" in result else 3)

from confluent_kafka import Consumer, TopicPartition

consumer = Consumer(
    {"bootstrap.servers": bootstrap, "group.id": "null-fields", "enable.auto.commit": False}
)
consumer.assign([TopicPartition(topic, 0, 0)])
records = []
while len(records) < int(arg) and time.monotonic() < deadline:
    for m in consumer.consume(num_messages=10, timeout=0.5):
        if m.error():
            continue
        records.append(
            {
                "offset": m.offset(),
                "key": text(m.key()),
                "value": text(m.value()),
                "headers": [[name, text(value)] for name, value in (m.headers() or [])],
            }
        )
consumer.close()
print(json.dumps({"records": records}), flush=True)
sys.exit(0 if len(records) >= int(arg) else 3)
