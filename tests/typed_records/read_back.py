"""The independent reader of tests/typed_records.rs: Confluent's Python
client (confluent-kafka from PyPI, with fastavro and protobuf) consumes a
topic Courier wrote and deserializes each value with its own
schema-registry deserializers, asking the registry for the schema by id.

    read_back.py BOOTSTRAP REGISTRY_URL TOPIC avro|protobuf COUNT

Prints one JSON line per record: {"key": ..., "value": {...}}.
"""
import json
import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.json_format import MessageToDict

bootstrap, registry_url, topic, fmt, count = sys.argv[1:6]
count = int(count)


def order_class():
    """courier.test.Order, built at run time from the same declarations as
    tests/typed_records.rs's PROTO (no protoc needed)."""
    f = descriptor_pb2.FileDescriptorProto(
        name="courier_test.proto", package="courier.test", syntax="proto3"
    )
    envelope = f.message_type.add(name="Envelope")
    envelope.field.add(name="note", number=1, type=9, label=1)
    order = f.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=3, label=1)
    order.field.add(name="sku", number=2, type=9, label=1)
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=9, label=1)
    line.field.add(name="qty", number=2, type=5, label=1)
    order.field.add(
        name="lines", number=3, type=11, label=3, type_name=".courier.test.Order.Line"
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("courier.test.Order"))


registry = SchemaRegistryClient({"url": registry_url})
if fmt == "avro":
    deserialize = AvroDeserializer(registry)
    to_dict = lambda v: v
else:
    deserialize = ProtobufDeserializer(order_class(), {"use.deprecated.format": False})
    to_dict = lambda v: MessageToDict(v, preserving_proto_field_name=True)

consumer = Consumer(
    {"bootstrap.servers": bootstrap, "group.id": "courier-typed-records", "enable.auto.commit": False}
)
consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
seen = 0
empty_polls = 0
while seen < count and empty_polls < 60:
    msg = consumer.poll(1.0)
    if msg is None:
        empty_polls += 1
        continue
    if msg.error():
        raise SystemExit(f"consumer error: {msg.error()}")
    value = deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE))
    key = msg.key().decode() if msg.key() is not None else None
    print(json.dumps({"key": key, "value": to_dict(value)}), flush=True)
    seen += 1
consumer.close()
if seen < count:
    raise SystemExit(f"read {seen} of {count} records from {topic}")
