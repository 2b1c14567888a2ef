"""One member of a consumer group, or the producer feeding it, with a real
Kafka client, reporting every step as it happens.

    group_member.py consume CLIENT BOOTSTRAP TOPIC GROUP DEADLINE_S
    group_member.py produce BOOTSTRAP TOPIC PARTITIONS DEADLINE_S

CLIENT is `kafka-python` or `confluent-kafka` (librdkafka). Both roles run
until their standard input closes (the test's signal to stop) or DEADLINE_S
passes, and print one JSON object per line, flushed as it happens:

- consume: `subscribe()`s to TOPIC in GROUP (eager rebalancing, the clients'
  default assignors; auto commit off; auto.offset.reset=earliest), polls, and
  after each poll that returned records commits, synchronously, the offset
  after the last record it returned of each partition, as Jepsen's queue
  workload does. Lines: {"assigned": [p...]}, {"revoked": [p...]},
  {"poll": [[p, offset, value]...]}, {"committed": {p: offset}} (acknowledged),
  {"commit_failed": "..."}, {"poll_failed": "..."} (the client raised out
  of poll(); it polls again); {"closed": true} once it left the group.
- produce: confluent-kafka with acks=all and idempotence, one record every
  5 ms, value "v<N>", to partition N % PARTITIONS. Lines: {"acked": [p,
  offset, value]} per delivery report without error; {"flushed": n} at the
  end with the number still undelivered after a bounded flush.
"""

import json
import sys
import threading
import time

from group_consumers import confluent_consumer, kafka_python_consumer

role = sys.argv[1]
stop = threading.Event()


def watch_stdin():
    sys.stdin.read()
    stop.set()


threading.Thread(target=watch_stdin, daemon=True).start()
lock = threading.Lock()


def emit(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def produce(bootstrap, topic, partitions, deadline):
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "message.timeout.ms": 120000,
        }
    )

    def delivered(err, msg):
        if err is None:
            emit({"acked": [msg.partition(), msg.offset(), msg.value().decode()]})

    n = 0
    while not stop.is_set() and time.monotonic() < deadline:
        value = f"v{n}"
        producer.produce(topic, value=value, partition=n % partitions, on_delivery=delivered)
        n += 1
        producer.poll(0.005)
    left = producer.flush(max(1.0, min(60.0, deadline - time.monotonic())))
    emit({"flushed": left})


def consume_kafka_python(bootstrap, topic, group, deadline):
    from kafka import ConsumerRebalanceListener, TopicPartition
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit({"revoked": sorted(tp.partition for tp in revoked)})

        def on_partitions_assigned(self, assigned):
            emit({"assigned": sorted(tp.partition for tp in assigned)})

    consumer = kafka_python_consumer(bootstrap, group)
    consumer.subscribe([topic], listener=Listener())
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                polled = consumer.poll(timeout_ms=200, max_records=200)
            except KafkaError as e:
                # kafka-python 3 raises a lost connection (e.g. to a broker
                # just killed) out of poll(); an application polls again.
                emit({"poll_failed": repr(e)})
                continue
            records = []
            offsets = {}
            for tp, messages in polled.items():
                for m in messages:
                    records.append([tp.partition, m.offset, m.value.decode()])
                    offsets[tp.partition] = m.offset + 1
            if not records:
                continue
            emit({"poll": records})
            try:
                consumer.commit(
                    {
                        TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                        for p, o in offsets.items()
                    }
                )
                emit({"committed": offsets})
            except Exception as e:  # the next poll's commit covers it
                emit({"commit_failed": repr(e)})
    finally:
        consumer.close(autocommit=False)
    emit({"closed": True})


def consume_confluent(bootstrap, topic, group, deadline):
    from confluent_kafka import KafkaException, TopicPartition

    consumer = confluent_consumer(bootstrap, group)
    consumer.subscribe(
        [topic],
        on_assign=lambda c, ps: emit({"assigned": sorted(p.partition for p in ps)}),
        on_revoke=lambda c, ps: emit({"revoked": sorted(p.partition for p in ps)}),
    )
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            records = []
            offsets = {}
            for m in consumer.consume(num_messages=200, timeout=0.2):
                if m.error():
                    continue  # informational (e.g. partition EOF); not a record
                records.append([m.partition(), m.offset(), m.value().decode()])
                offsets[m.partition()] = m.offset() + 1
            if not records:
                continue
            emit({"poll": records})
            try:
                result = consumer.commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                    asynchronous=False,
                )
                failed = [tp for tp in result if tp.error]
                if failed:
                    emit({"commit_failed": str([str(tp.error) for tp in failed])})
                else:
                    emit({"committed": offsets})
            except KafkaException as e:  # the next poll's commit covers it
                emit({"commit_failed": str(e)})
    finally:
        consumer.close()
    emit({"closed": True})


if role == "produce":
    bootstrap, topic, partitions, deadline_s = sys.argv[2:6]
    produce(bootstrap, topic, int(partitions), time.monotonic() + float(deadline_s))
elif role == "consume":
    client, bootstrap, topic, group, deadline_s = sys.argv[2:7]
    run = {"kafka-python": consume_kafka_python, "confluent-kafka": consume_confluent}[client]
    run(bootstrap, topic, group, time.monotonic() + float(deadline_s))
else:
    sys.exit(f"unknown role {role!r}")
