"""One admin step against the cluster, with confluent-kafka's or kafka-python's
admin client, as an operator's tooling would take it.

    admin.py LIBRARY BOOTSTRAP STEP TOPIC [ARG] DEADLINE_S

LIBRARY: confluent-kafka or kafka-python. STEP:
  create TOPIC RF          one partition of RF replicas
  grow TOPIC N             CreatePartitions to N partitions in all
  describe TOPIC           {"partitions": N, "min.insync.replicas": [value, source]}
  set TOPIC N              min.insync.replicas = N (confluent-kafka:
                           IncrementalAlterConfigs SET; kafka-python: AlterConfigs)
  unset TOPIC -            min.insync.replicas back to the broker's
                           (IncrementalAlterConfigs DELETE)
  delete TOPIC -           DeleteTopics
  topics - -               {"topics": [names]}
  produce TOPIC -          one record, acks=all, no retries (kafka-python's producer
                           for both): {"offset": N} or {"error": ERROR_NAME}
Prints one JSON object; exits 0 when the step did what it asked, else 3.
"""

import json
import sys

library, bootstrap, step, topic, arg, deadline_s = sys.argv[1:7]
deadline = float(deadline_s)


def done(result, ok=True):
    print(json.dumps(result), flush=True)
    sys.exit(0 if ok else 3)


if step == "produce":
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(
        bootstrap_servers=bootstrap.split(","), acks="all", retries=0,
        max_block_ms=int(deadline * 1000),
    )
    try:
        meta = producer.send(topic, b"x").get(timeout=deadline)
        done({"offset": meta.offset})
    except KafkaError as e:
        done({"error": type(e).__name__}, False)
    finally:
        producer.close(timeout=5)

if library == "confluent-kafka":
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
        NewPartitions, NewTopic, ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def wait(futures):
        try:
            for f in futures.values():
                f.result(timeout=deadline)
        except KafkaException as e:
            done({"error": e.args[0].name()}, False)

    def alter(op, value):
        entry = ConfigEntry("min.insync.replicas", value, incremental_operation=op)
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        wait(admin.incremental_alter_configs([res]))

    if step == "create":
        wait(admin.create_topics([NewTopic(topic, 1, int(arg))], operation_timeout=deadline))
    elif step == "grow":
        wait(admin.create_partitions([NewPartitions(topic, int(arg))], operation_timeout=deadline))
    elif step == "set":
        alter(AlterConfigOpType.SET, arg)
    elif step == "unset":
        alter(AlterConfigOpType.DELETE, None)
    elif step == "delete":
        wait(admin.delete_topics([topic], operation_timeout=deadline))
    elif step == "topics":
        done({"topics": sorted(admin.list_topics(timeout=deadline).topics)})
    elif step == "describe":
        res = ConfigResource(ResourceType.TOPIC, topic)
        configs = admin.describe_configs([res])[res].result(timeout=deadline)
        entry = configs["min.insync.replicas"]
        meta = admin.list_topics(topic, timeout=deadline).topics[topic]
        done({
            "partitions": len(meta.partitions),
            "min.insync.replicas": [entry.value, ConfigSource(entry.source).name],
        })
    else:
        done({"error": "unknown step " + step}, False)
    done({"done": step})

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import KafkaError

admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","),
                         request_timeout_ms=int(deadline * 1000))


def alter(configs, incremental):
    res = ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)
    result = admin.alter_configs([res], incremental=incremental)
    errors = [
        r for by_name in result.values() for r in by_name.values()
        if getattr(r, "errno", 0)
    ]
    if errors:
        done({"error": type(errors[0]).__name__}, False)


try:
    if step == "create":
        admin.create_topics([NewTopic(topic, 1, int(arg))], timeout_ms=int(deadline * 1000))
    elif step == "grow":
        admin.create_partitions({topic: NewPartitions(int(arg))}, timeout_ms=int(deadline * 1000))
    elif step == "set":
        alter({"min.insync.replicas": arg}, False)
    elif step == "unset":
        alter({"min.insync.replicas": ("DELETE", None)}, True)
    elif step == "delete":
        admin.delete_topics([topic], timeout_ms=int(deadline * 1000))
    elif step == "topics":
        done({"topics": sorted(admin.list_topics())})
    elif step == "describe":
        res = ConfigResource(ConfigResourceType.TOPIC, topic)
        described = admin.describe_configs([res], config_filter="all")
        entry = next(iter(next(iter(described.values())).values()))["min.insync.replicas"]
        parts = admin.describe_topics([topic])[0]["partitions"]
        done({
            "partitions": len(parts),
            "min.insync.replicas": [entry["value"], str(entry.get("config_source"))],
        })
    else:
        done({"error": "unknown step " + step}, False)
except KafkaError as e:
    done({"error": type(e).__name__}, False)
done({"done": step})
