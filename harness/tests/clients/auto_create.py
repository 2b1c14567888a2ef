"""Produce one record to a topic that may not exist yet, as an application
would, with confluent-kafka (librdkafka) or kafka-python, and leave creating
it to the broker (Kafka's auto.create.topics.enable).

    auto_create.py produce LIBRARY BOOTSTRAP TOPIC DEADLINE_S
    auto_create.py metadata BOOTSTRAP TOPIC DEADLINE_S

produce: LIBRARY is confluent-kafka or kafka-python; one record (acks=all),
letting the client's Metadata ask for auto-creation (both libraries' producer
default); prints {"partition": P, "offset": N} once it is acknowledged, or
{"error": "..."} and exits 3.
metadata: confluent-kafka's list_topics for TOPIC (a Metadata request that
asks for no creation); prints {"error": NAME or null, "partitions": N}.
"""

import json
import sys
import time


def done(result, ok):
    print(json.dumps(result), flush=True)
    sys.exit(0 if ok else 3)


role = sys.argv[1]

if role == "metadata":
    bootstrap, topic, deadline_s = sys.argv[2:5]
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic, timeout=float(deadline_s)).topics[topic]
    done(
        {
            "error": meta.error.name() if meta.error else None,
            "partitions": len(meta.partitions),
        },
        True,
    )

library, bootstrap, topic, deadline_s = sys.argv[2:6]
deadline = time.monotonic() + float(deadline_s)

if library == "confluent-kafka":
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            # How long librdkafka waits for an unknown topic to appear before
            # failing its records (default 30 s); the broker answers at once.
            "topic.metadata.propagation.max.ms": 5000,
        }
    )
    result = {}

    def delivered(err, msg):
        result.update(
            {"error": err.name()}
            if err
            else {"partition": msg.partition(), "offset": msg.offset()}
        )

    producer.produce(topic, value=b"auto", on_delivery=delivered)
    producer.flush(max(1.0, deadline - time.monotonic()))
    if not result:
        result = {"error": "no delivery report before the deadline"}
    done(result, "offset" in result)

if library == "kafka-python":
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    budget_ms = int(max(1.0, deadline - time.monotonic()) * 1000)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap.split(","), acks="all", max_block_ms=budget_ms
    )
    try:
        meta = producer.send(topic, b"auto").get(timeout=budget_ms / 1000)
    except KafkaError as e:
        done({"error": type(e).__name__ + ": " + str(e)}, False)
    finally:
        producer.close(timeout=5)
    done({"partition": meta.partition, "offset": meta.offset}, True)

done({"error": "unknown library " + library}, False)
