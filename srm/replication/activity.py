"""Does a continuous flow copy again? The driver's view of its copiers during an idle lease.

A lease that follows one in which nothing was copied lasts ``task.lease.idle.seconds`` (see
:mod:`.lease`): an idle flow's leases turn over less often, and each turnover costs the driver a plan,
the source's end offsets, a Spark job and a metrics row per partition. Its metrics rows must still come
as soon after records are copied as with ``task.lease.seconds``, so the driver ends such a lease once
records are copied again. It learns that from the copiers' statuses (:mod:`.status`): a copier writes
one, inside its transaction, as soon as a partition of its lease has copied a record. The driver reads
the status topic only while an idle lease runs, from its end: one partition, whose fetch the broker
holds until a status comes. Heartbeats do not count: the heartbeats DAG writes one a minute to every
flow's source, and would otherwise keep an idle flow on short leases.
"""

from __future__ import annotations

import logging
from typing import Any

from srm.config.model import Cluster, Flow
from srm.kafka import clients
from srm.kafka.internal_topics import status_topic_name
from srm.replication.status import LeaseStatus

log = logging.getLogger(__name__)
# The broker holds a fetch that finds nothing this long; a status ends the wait at once, so this
# only bounds how often an idle lease's reader asks.
HOLD_MS = 5000


class CopyActivity:
    """Statuses written since :meth:`listen`, from the flow's status topic on the target."""

    def __init__(self, target: Cluster, flow: Flow) -> None:
        self.topic = status_topic_name(flow)
        self.policy = flow.policy
        self.target = target
        self._consumer: Any = None
        self.listening = False

    def listen(self) -> None:
        """From the status topic's end (read_committed) on; :meth:`seen` reports what comes."""
        from confluent_kafka import OFFSET_END, TopicPartition

        if self._consumer is None:
            self._consumer = clients.consumer(self.target, "__srm.activity", **{"fetch.wait.max.ms": HOLD_MS})
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_END)])
        self.listening = True

    def seen(self) -> bool:
        """Has a copier written a status of a partition other than a heartbeats topic's since
        :meth:`listen`? (Without waiting.)"""
        if not self.listening:
            return False
        messages = self._consumer.consume(100, 0)
        for message in messages:
            error = message.error()
            if error is None:
                status = LeaseStatus.parse(message.key(), message.value())
                if status is not None and not self.policy.is_heartbeats_topic(status.topic):
                    return True
                continue
            if not error.name().startswith("_"):  # the topic not there (yet), a broker away: the lease runs on
                log.debug("statuses of %s on %s not read: %s", self.topic, self.target.alias, error)
        return False

    def stop(self) -> None:
        """Stop reading (until the next :meth:`listen`)."""
        if self.listening:
            self._consumer.unassign()
            self.listening = False

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self.listening = False
