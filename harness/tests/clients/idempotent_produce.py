"""Produce COUNT records with a real Kafka client's idempotent producer.

    idempotent_produce.py CLIENT BOOTSTRAP TOPIC COUNT DEADLINE_S

CLIENT is `kafka-python` (its defaults: since 3.0 acks='all' and idempotence
on) or `confluent-kafka` (librdkafka, with enable.idempotence=true). Values
are the decimal numbers 0..COUNT-1, all to partition 0, paced so the run
lasts several seconds and a fault injected meanwhile lands among in-flight
batches. Prints `progress N` (records delivered so far) now and then, and at
the end one JSON line: {"delivered": [...], "errors": [...]}. Exits 0 when
every record got an answer (delivered or failed) before DEADLINE_S, 3 when
the client could not finish within it.
"""

import json
import sys
import threading
import time

client, bootstrap, topic, count, deadline_s = sys.argv[1:6]
count = int(count)
deadline = time.monotonic() + float(deadline_s)

delivered = []
errors = []
lock = threading.Lock()
last_progress = [0]


def progress():
    with lock:
        n = len(delivered)
    if n - last_progress[0] >= 500:
        last_progress[0] = n
        print(f"progress {n}", flush=True)


def pace(i):
    # About 10,000 records in 8 s: a fault has batches in flight to land on.
    if i % 10 == 9:
        time.sleep(0.008)


def run_kafka_python():
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","))

    def ok(value):
        def on_ok(_metadata):
            with lock:
                delivered.append(value)

        return on_ok

    def failed(value):
        def on_err(exc):
            with lock:
                errors.append(f"{value}: {exc!r}")

        return on_err

    for i in range(count):
        future = producer.send(topic, value=str(i).encode(), partition=0)
        future.add_callback(ok(i)).add_errback(failed(i))
        pace(i)
        progress()
    while time.monotonic() < deadline:
        producer.flush(timeout=1)
        progress()
        with lock:
            if len(delivered) + len(errors) >= count:
                break
    producer.close(timeout=5)


def run_confluent():
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
        }
    )

    def report(value):
        def on_delivery(err, _msg):
            with lock:
                if err is None:
                    delivered.append(value)
                else:
                    errors.append(f"{value}: {err}")

        return on_delivery

    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=str(i).encode(), partition=0, on_delivery=report(i))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        pace(i)
        progress()
    while time.monotonic() < deadline:
        if producer.flush(1) == 0:
            break
        progress()


if client == "kafka-python":
    run_kafka_python()
elif client == "confluent-kafka":
    run_confluent()
else:
    sys.exit(f"unknown client {client!r}")

with lock:
    answered = len(delivered) + len(errors)
    print(json.dumps({"delivered": delivered, "errors": errors[:50]}), flush=True)
sys.exit(0 if answered >= count else 3)
