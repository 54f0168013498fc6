"""Kafka's own exactly-once pattern, as small as it gets: the floor any transactional copier meets.

    .venv/bin/python -m bench.textbook_copier --config conf/srm.yaml --topic T --remote R --partitions N

Consume-transform-produce as Kafka documents it: a read_committed consumer of the source topic's
partitions, and transactional producers on the target that write each record to the same
partition of ``--remote`` (key, value, headers, CreateTime kept) and put the consumer's positions in
the same transaction (``send_offsets_to_transaction``), committed as soon as the consumer holds
nothing more. Two producers take turns, as a slot's do in ours (with one, every transaction's first
records wait out the coordinator's CONCURRENT_TRANSACTIONS backoff: p50 59 ms here).

No Spark, no history, no progress topic, no ownership, no recovery: it copies from offset 0 until
SIGTERM, after which it prints how many transactions it committed, and fails on the first error.
It is not a replicator; ``bench.eos_floor`` runs it to measure what Kafka transactions alone cost
in latency on the same brokers as MirrorMaker 2.
"""

from __future__ import annotations

import argparse
import signal
import threading
import uuid
from pathlib import Path
from types import FrameType

from confluent_kafka import KafkaException, TopicPartition

from bench.latency import clusters
from srm.kafka import clients
from srm.kafka.topics import ensure_topic

TIMEOUT_S = 30.0
CONSUME_BATCH = 10_000
DONE_LINE = "{} transaction(s) committed"


def copy(config: str, topic: str, remote: str, partitions: int, stop: threading.Event) -> int:
    """Copy until ``stop`` is set (between two transactions: none is left open); the transactions committed."""
    source, target = clusters(Path(config))
    ensure_topic(clients.admin_client(target), remote, partitions)
    consumer = clients.consumer(source, f"textbook-{uuid.uuid4().hex[:8]}", **{"fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    producers = []
    for turn in range(2):
        producer = clients.producer(target, **{"transactional.id": f"{remote}-{turn}", "linger.ms": 5})
        producer.init_transactions(TIMEOUT_S)
        producers.append(producer)
    group = consumer.consumer_group_metadata()
    turn = committed = 0
    while not stop.is_set():
        messages = consumer.consume(CONSUME_BATCH, 0)
        if not messages:
            first = consumer.poll(0.05)
            if first is None:
                continue
            messages = [first, *consumer.consume(CONSUME_BATCH, 0)]
        producer = producers[turn]
        producer.begin_transaction()
        positions: dict[int, int] = {}
        for message in messages:
            if message.error() is not None:
                raise KafkaException(message.error())
            partition = message.partition()
            producer.produce(
                remote,
                message.value(),
                message.key(),
                partition=partition,
                timestamp=message.timestamp()[1],
                headers=message.headers(),
            )
            positions[partition] = message.offset() + 1
        # Committed under the remote topic's name: Kafka 4's group coordinator refuses offsets of a
        # topic its cluster does not have, and only their place in the transaction matters here.
        offsets = [TopicPartition(remote, p, offset) for p, offset in positions.items()]
        producer.send_offsets_to_transaction(offsets, group, TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
        committed += 1
        turn = 1 - turn
    consumer.close()
    return committed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--topic", required=True, help="the source topic")
    parser.add_argument("--remote", required=True, help="the target topic (created with --partitions if missing)")
    parser.add_argument("--partitions", type=int, required=True)
    args = parser.parse_args()
    stop = threading.Event()

    def stopping(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    committed = copy(args.config, args.topic, args.remote, args.partitions, stop)
    print(DONE_LINE.format(committed), flush=True)


if __name__ == "__main__":
    main()
