"""The consumer-group tests' consumers, configured once: a member of GROUP
with auto commit off, auto.offset.reset=earliest, a 10 s session and a
heartbeat every second, from kafka-python or confluent-kafka (librdkafka).
Imported by group_consume.py and group_member.py (a script's own directory
is on Python's path)."""


def kafka_python_consumer(bootstrap, group):
    from kafka import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
    )


def confluent_consumer(bootstrap, group):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
        }
    )
