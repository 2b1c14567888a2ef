"""Transactions through a real client (KIP-98): a transactional producer
commits, aborts and commits again; a read_committed consumer reads.

    transactions.py LIB produce BOOTSTRAP TOPIC TRANSACTIONAL_ID PREFIX DEADLINE_S
    transactions.py LIB read BOOTSTRAP TOPIC COUNT DEADLINE_S
    transactions.py LIB offsets BOOTSTRAP TOPIC TRANSACTIONAL_ID GROUP DEADLINE_S

LIB is `confluent` (confluent-kafka, librdkafka) or `kafka-python` (>= 2.2).

produce: init_transactions; a transaction of PREFIX-1 and PREFIX-2 to
partition 0, committed; one of PREFIX-aborted, aborted; one of PREFIX-3,
committed; the aborted transaction's records are flushed to the broker
before the abort. Prints {"committed": [...], "aborted": [...]} (exit 0), or
{"error": "...", "step": "..."} (exit 3).
read: a read_committed consumer assigned partition 0 from offset 0 reads
COUNT records; prints {"values": [...]} (exit 0), or what it had at
DEADLINE_S (exit 3). An aborted record precedes the last committed one, so
a consumer that delivered it would have COUNT values before the last.
offsets: a consume-transform-produce step twice (KIP-98's
send_offsets_to_transaction): a transaction sending GROUP's offset 5 of
partition 0 with one record, committed; then one sending offset 7, aborted.
After each, a consumer of GROUP reads the group's committed offset. Prints
{"after_commit": N, "after_abort": M} (exit 0), or an error (exit 3).
"""

import json
import signal
import sys
import time

lib, role, bootstrap, topic = sys.argv[1:5]
deadline = time.monotonic() + float(sys.argv[-1])


def finish(result, ok):
    print(json.dumps(result), flush=True)
    sys.exit(0 if ok else 3)


def overdue(signum, frame):
    # kafka-python's commit_transaction and abort_transaction wait without a
    # bound: the script's own deadline ends them.
    print(json.dumps({"error": "deadline passed", "step": "any"}), flush=True)
    sys.exit(3)


signal.signal(signal.SIGALRM, overdue)
signal.alarm(int(float(sys.argv[-1])) + 5)


def left():
    return max(1.0, deadline - time.monotonic())


def confluent_produce(transactional_id, batches):
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id}
    )
    yield "init_transactions", lambda: producer.init_transactions(left())
    for values, commit in batches:
        yield "begin_transaction", producer.begin_transaction
        for v in values:
            yield "produce", lambda v=v: producer.produce(topic, value=v, partition=0)
        if commit:
            yield "commit_transaction", lambda: producer.commit_transaction(left())
        else:
            # Flushed first, so the broker holds the records the abort ends
            # (an abort alone may drop records the client has not sent).
            yield "flush", lambda: producer.flush(left())
            yield "abort_transaction", lambda: producer.abort_transaction(left())


def kafka_python_produce(transactional_id, batches):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap.split(","), transactional_id=transactional_id
    )
    yield "init_transactions", producer.init_transactions
    for values, commit in batches:
        yield "begin_transaction", producer.begin_transaction
        for v in values:
            yield "send", lambda v=v: producer.send(topic, value=v.encode(), partition=0)
        if commit:
            yield "commit_transaction", producer.commit_transaction
        else:
            yield "flush", lambda: producer.flush(timeout=left())
            yield "abort_transaction", producer.abort_transaction
    yield "close", lambda: producer.close(timeout=left())


def confluent_read(count):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "transactions-read",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    while len(values) < count and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=10, timeout=0.5):
            if not m.error():
                values.append(m.value().decode())
    consumer.close()
    return values


def kafka_python_read(count):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    values = []
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value.decode() for r in records)
    consumer.close()
    return values


def confluent_offsets(transactional_id, group, results):
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id}
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )

    def committed():
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=left())
        return tp.offset

    yield "init_transactions", lambda: producer.init_transactions(left())
    for offset, commit, key in [(5, True, "after_commit"), (7, False, "after_abort")]:
        yield "begin_transaction", producer.begin_transaction
        yield "produce", lambda: producer.produce(topic, value=f"o{offset}", partition=0)
        yield "send_offsets_to_transaction", lambda offset=offset: producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, offset)], consumer.consumer_group_metadata(), left()
        )
        if commit:
            yield "commit_transaction", lambda: producer.commit_transaction(left())
        else:
            yield "abort_transaction", lambda: producer.abort_transaction(left())
        yield "committed", lambda key=key: results.__setitem__(key, committed())


def kafka_python_offsets(transactional_id, group, results):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    producer = KafkaProducer(
        bootstrap_servers=bootstrap.split(","), transactional_id=transactional_id
    )
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    tp = TopicPartition(topic, 0)
    yield "init_transactions", producer.init_transactions
    for offset, commit, key in [(5, True, "after_commit"), (7, False, "after_abort")]:
        yield "begin_transaction", producer.begin_transaction
        yield "send", lambda offset=offset: producer.send(topic, value=f"o{offset}".encode(), partition=0)
        yield "send_offsets_to_transaction", lambda offset=offset: producer.send_offsets_to_transaction(
            {tp: OffsetAndMetadata(offset, "", -1)}, group
        )
        if commit:
            yield "commit_transaction", producer.commit_transaction
        else:
            yield "abort_transaction", producer.abort_transaction
        yield "committed", lambda key=key: results.__setitem__(key, consumer.committed(tp))
    yield "close", lambda: producer.close(timeout=left())


if role == "offsets":
    transactional_id, group = sys.argv[5:7]
    results = {}
    steps = {"confluent": confluent_offsets, "kafka-python": kafka_python_offsets}[lib]
    for step, call in steps(transactional_id, group, results):
        try:
            call()
        except Exception as e:  # the client's own error, reported as data
            finish({"error": repr(e), "step": step, "results": results}, False)
    finish(results, True)

if role == "produce":
    transactional_id, prefix = sys.argv[5:7]
    batches = [
        ([f"{prefix}-1", f"{prefix}-2"], True),
        ([f"{prefix}-aborted"], False),
        ([f"{prefix}-3"], True),
    ]
    steps = {"confluent": confluent_produce, "kafka-python": kafka_python_produce}[lib]
    for step, call in steps(transactional_id, batches):
        try:
            call()
        except Exception as e:  # the client's own error, reported as data
            finish({"error": repr(e), "step": step}, False)
    finish(
        {
            "committed": [v for values, commit in batches if commit for v in values],
            "aborted": [v for values, commit in batches if not commit for v in values],
        },
        True,
    )

count = int(sys.argv[5])
read = {"confluent": confluent_read, "kafka-python": kafka_python_read}[lib]
values = read(count)
finish({"values": values}, len(values) >= count)
