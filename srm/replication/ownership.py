"""Who owns a flow: one run at a time copies it, and a run that lost the flow can no longer write.

Each flow has an *ownership* record in ``srm-owners.internal`` on its target (compacted, one
partition, key ``<source>-><target>``, JSON value). A run starts by claiming the flow:

1. its owner producer (transactional id ``srm-replicate.<source>.<target>.owner``) initialises,
   which fences the owner producer of any earlier run;
2. it reads the latest record: the previous epoch E and its slot count (``tasks.max``);
3. it writes epoch E+1, listing the earlier epochs whose copy producers may still be alive;
4. it fences those producers: ``init_transactions`` on each of their transactional ids
   (``srm-replicate.<source>.<target>.<epoch>.<slot>`` and the same with ``.alt``) aborts their
   open transaction and makes every later commit of theirs fail;
5. it writes epoch E+1 again, with nothing left to fence.

A copy task initialises its producer, then reads the record: an epoch other than its own means
another run (or this run with another ``tasks.max``) owns the flow, and the task stops before it
copies. Either the task's producer was initialised before step 4 and is fenced, or after it and
then its read sees step 3: no two epochs ever commit progress of the same partition, whatever
their ``tasks.max`` or topic lists. Kafka Connect fences the zombie tasks of exactly-once source
connectors (MirrorMaker 2's among them) the same way (KIP-618).

The newest run wins, as with Kafka's own transactional ids: it takes the flow over, and the
earlier run stops with a message naming the new owner. The same record ends a lease early (a
higher ``lease``) and parks a run's copy tasks when it stops (``state: stopped``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from collections.abc import Collection, Iterable
from concurrent import futures
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from srm.config.model import Cluster, Flow
from srm.errors import FlowTakenOverError, InvariantError, RecordFormatError, SrmError
from srm.kafka import clients
from srm.kafka.hanging import end_hanging
from srm.kafka.internal_topics import OWNERS_TOPIC, history_topic_name, progress_topic_name
from srm.kafka.partitions import assign_partitions, read_to_end
from srm.replication.job import CopyJob, copy_transactional_ids
from srm.replication.kafka_errors import FENCED, kafka_error, transactional_prefix
from srm.replication.left_open import end_fenced_left_open

log = logging.getLogger("srm.replicate")

RUNNING, STOPPED = "running", "stopped"
TXN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Ownership:
    """The latest ownership record of a flow."""

    flow: str
    epoch: int
    run: str  # id of the run (one srm-control/Airflow/spark-submit invocation)
    owner: str  # who started it, for people: "srm-control run on host h (pid 7)", an Airflow task
    tasks: int  # slots (tasks.max) of this epoch
    mode: str
    since: str  # when this epoch began (ISO 8601, UTC)
    lease: int = 0  # a record with a higher lease ends the lease the copy tasks are in
    state: str = RUNNING
    unfenced: tuple[tuple[int, int], ...] = ()  # (epoch, slots) whose copy producers may be alive

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, value: bytes, where: str) -> Ownership:
        try:
            data = json.loads(value)
            data["unfenced"] = tuple((int(e), int(n)) for e, n in data.get("unfenced", []))
            return cls(**data)
        except (ValueError, TypeError, KeyError) as exc:
            raise RecordFormatError(f"{where}: not an ownership record ({exc})") from None

    def describe(self) -> str:
        return f"run {self.run} ({self.owner}; epoch {self.epoch}, tasks.max {self.tasks}, since {self.since})"


def owners_key(flow: Flow) -> bytes:
    return f"{flow.source}->{flow.target}".encode()


def owner_transactional_id(flow: Flow) -> str:
    return f"{transactional_prefix(flow.source, flow.target)}owner"


def describe_invoker() -> str:
    """Who runs this job, for the message another run shows when it takes the flow over."""
    dag, task = os.environ.get("AIRFLOW_CTX_DAG_ID"), os.environ.get("AIRFLOW_CTX_TASK_ID")
    where = f"on host {socket.gethostname()} (pid {os.getpid()})"
    if dag and task:
        run = os.environ.get("AIRFLOW_CTX_DAG_RUN_ID", "?")
        return f"Airflow task {dag}.{task}, run {run}, try {os.environ.get('AIRFLOW_CTX_TRY_NUMBER', '?')} {where}"
    return f"{os.environ.get('SRM_RUN_BY', 'spark-submit')} {where}"


def latest_ownership(
    consumer: Any, flow: Flow, start: int | None = None, *, timeout_s: float = 120.0
) -> tuple[Ownership | None, int]:
    """The latest record of ``flow`` from ``start`` (or the beginning) to the end of the topic, and
    the offset after the last record read. ``consumer`` reads committed records and reports EOF."""
    found, end = None, start or 0
    key = owners_key(flow)
    for message in read_to_end(consumer, OWNERS_TOPIC, 0, start=start, timeout_s=timeout_s):
        end = message.offset() + 1
        if message.key() == key and message.value() is not None:
            found = Ownership.from_json(message.value(), f"{OWNERS_TOPIC}[0]@{message.offset()}")
    return found, end


# The consumer of a copier's OwnerTail stays assigned as long as the copier runs. The broker holds
# each fetch until a record comes (fetch.min.bytes 1) or 500 ms pass, so a new ownership record
# reaches the copier at the latest 0.5 s after it is committed, well within the 10 s a plan change
# has, and an idle tail costs the target broker 2 empty fetches a second instead of up to 100, per
# copier, for as long as the flow runs.
OWNERS_TAIL_READER = {"fetch.wait.max.ms": 500}


class OwnerTail:
    """A copy task's running view of its flow's ownership records, from ``start`` on (non-blocking)."""

    def __init__(self, consumer: Any, flow: Flow, start: int) -> None:
        from confluent_kafka import TopicPartition

        self.consumer = consumer
        self.key = owners_key(flow)
        assign_partitions(consumer, [TopicPartition(OWNERS_TOPIC, 0, start)])

    def poll(self) -> Ownership | None:
        """The newest record of the flow written since the last call, if any."""
        found = None
        for message in self.consumer.consume(100, 0):
            if message.error() is None and message.key() == self.key and message.value() is not None:
                found = Ownership.from_json(message.value(), f"{OWNERS_TOPIC}[0]@{message.offset()}")
        return found

    def close(self) -> None:
        self.consumer.unassign()


def taken_over(flow: Flow, mine: Ownership | int, other: Ownership) -> FlowTakenOverError:
    epoch = mine if isinstance(mine, int) else mine.epoch
    return FlowTakenOverError(
        f"flow {flow.name} was taken over by {other.describe()}: this run (epoch {epoch}) stopped. Its "
        "open transactions were aborted, so nothing is lost or copied twice; stop one of the two runs "
        "(an Airflow DAG and srm-control run, or two DAG runs) to keep this from happening again"
    )


def fence_producers(target: Cluster, transactional_ids: list[str]) -> None:
    """Initialise a producer with each id: its open transaction is aborted, its old instance fenced."""
    from confluent_kafka import KafkaException

    def fence(transactional_id: str) -> None:
        producer = clients.producer(target, **{"transactional.id": transactional_id})
        try:
            producer.init_transactions(TXN_TIMEOUT_S)
            clients.close_producer(producer)  # nothing in flight: it closes at once
        except KafkaException as exc:
            clients.abandon_producer(producer)
            detail = exc.args[0].str() if exc.args else str(exc)
            raise SrmError(
                f"cannot fence the transactional id {transactional_id!r} on {target.alias} ({target.describe()}): "
                f"{detail}. {target.principal()} needs WRITE on TRANSACTIONAL_ID {transactional_id!r} (or PREFIXED "
                "'srm-replicate.<source>.<target>.' for all of the flow's)"
            ) from None

    if not transactional_ids:
        return
    with futures.ThreadPoolExecutor(max_workers=min(8, len(transactional_ids))) as pool:
        list(pool.map(fence, transactional_ids))


def fence_others(job: CopyJob) -> None:
    """A transaction left open holds a copier's read of the progress: a copier of another slot that died
    with its Python worker (killed, out of memory) keeps it open for transaction.timeout.ms, and
    the slot's next copier, which would abort it, waits for this lease to end. Its producers
    fenced, the transaction is aborted now. A live copier fenced by mistake (its transaction
    held that long by an outage) fails its task, which Spark runs again.

    A transaction Kafka left open on the progress or history topic is ended too
    (:func:`end_hanging_transactions`), this epoch's as well: its other slots' producers are fenced
    above, and one of this slot's ids left open by the copier before this one (its producers were
    started after it) ends with no later transaction of that copier. Ending it fences this copier's
    producers as well: it fails at its next transaction and Spark runs the task again, which reads
    the progress at once. Spared, such a transaction held every copier of the epoch for good (each
    read waits for it, and no copier gets to a transaction), until the run failed and the next run's
    epoch ended it."""
    ids = job.others_transactional_ids
    slot = f"slot {job.slot} of flow {job.flow.name}"
    if ids:
        log.warning(
            "%s: a transaction left open holds the read of the progress; fencing the producers of the "
            "other %d slot(s) of epoch %d (a copier that died with its worker leaves its transaction open)",
            *(slot, job.slots - 1, job.epoch),
        )
        try:
            fence_producers(job.target, ids)
        except SrmError as exc:  # the read goes on waiting, up to the transaction's time-out
            log.warning("%s: %s", slot, exc)
    epoch = epochs_transactional_ids(job.flow, [(job.epoch, job.slots)])
    end_hanging_transactions(job.target, job.flow, ending=epoch)


def live_transactional_ids(consumer: Any, flow: Flow) -> set[str]:
    """The copy producers' transactional ids that may be alive (:func:`live_epochs`)."""
    latest, _ = latest_ownership(consumer, flow, timeout_s=30.0)
    return set(epochs_transactional_ids(flow, live_epochs(latest)))


def live_epochs(latest: Ownership | None) -> list[tuple[int, int]]:
    """(epoch, slots) of the copy producers that may be alive, by the flow's latest ownership record:
    the latest epoch's while its run has not stopped, and the epochs not fenced yet."""
    if latest is None:
        return []
    return [*latest.unfenced, *([(latest.epoch, latest.tasks)] if latest.state == RUNNING else [])]


def epochs_transactional_ids(flow: Flow, epochs: Iterable[tuple[int, int]]) -> list[str]:
    """The copy producers' transactional ids of ``epochs`` ((epoch, slots) each)."""
    return [tid for epoch, n in epochs for slot in range(n) for tid in copy_transactional_ids(flow, epoch, slot)]


def end_hanging_transactions(target: Cluster, flow: Flow, *, ending: Collection[str] = ()) -> None:
    """A transaction its coordinator completed without writing its marker to the progress or the
    history topic (it found the partition without a leader) holds every read of it for good
    (:mod:`srm.kafka.transactions`): the transactional id of a copy slot no longer alive ends it,
    committed or aborted as its coordinator decided. One of a live slot ends with that slot's next
    transaction, which writes to both topics; ``ending``: ids of live slots whose transactions are
    ended all the same (a copier's read held by its own epoch's, :func:`fence_others`)."""
    consumer = clients.reader(target, "__srm.owners")
    admin = clients.admin_client(target)
    prefix = transactional_prefix(flow.source, flow.target)
    try:
        live = live_transactional_ids(consumer, flow) - set(ending)
        for topic in (progress_topic_name(flow), history_topic_name(flow)):
            try:
                end_hanging(target, admin, consumer, (topic, 0), prefix, spare=live)
            except SrmError as exc:  # the read goes on waiting, and fails naming the partition
                log.warning("flow %s: %s", flow.name, exc)
    finally:
        consumer.close()


class FlowOwner:
    """The driver's side of ownership: claim the flow, end leases, stop, notice a takeover."""

    def __init__(self, target: Cluster, flow: Flow, invoker: str | None = None) -> None:
        self.target = target
        self.flow = flow
        self.invoker = invoker or describe_invoker()
        self.run = uuid.uuid4().hex[:12]
        self.current: Ownership | None = None
        self.offset = 0  # offset of this run's latest record: copy tasks read the topic from here
        self._producer: Any = None
        self._consumer = clients.reader(target, "__srm.owners")
        self._tail = 0

    def claim(self, tasks: int, mode: str, *, reason: str | None = None) -> Ownership:
        """Make this run the owner with ``tasks`` slots, fencing every earlier epoch's producers.
        ``reason``: why this run begins a new epoch with the same tasks (said in the log).

        A run that owns the flow begins a new epoch only while it still does: if another run took
        the flow over meanwhile, FlowTakenOverError, before this run's producer fences anything."""
        if self.current is not None:
            latest, self._tail = latest_ownership(self._consumer, self.flow, self._tail, timeout_s=10.0)
            if latest is not None and (latest.run != self.run or latest.epoch != self.current.epoch):
                raise taken_over(self.flow, self.current, latest)
        self._producer = self._new_producer()
        previous, self._tail = latest_ownership(self._consumer, self.flow)
        since = datetime.now(UTC).isoformat(timespec="seconds")
        if previous is None:  # the flow's first run: no earlier producer to fence
            unfenced: tuple[tuple[int, int], ...] = ()
            epoch = 1
        else:
            unfenced = (*previous.unfenced, (previous.epoch, previous.tasks))
            epoch = previous.epoch + 1
        record = Ownership(self.flow.name, epoch, self.run, self.invoker, tasks, mode, since, unfenced=unfenced)
        self._write(record)
        ids = epochs_transactional_ids(self.flow, unfenced)
        fence_producers(self.target, ids)
        end_fenced_left_open(self.target, self.flow, ids)
        self._write(replace(record, unfenced=()))
        self._log_claim(previous, record, len(ids), reason)
        return record

    def _log_claim(self, previous: Ownership | None, record: Ownership, fenced: int, reason: str | None) -> None:
        if previous is not None and previous.run == self.run and reason is not None:
            log.info(
                "flow %s: %s; epoch %d begins (%d producer(s) of epoch %d fenced)",
                *(self.flow.name, reason, record.epoch, fenced, previous.epoch),
            )
        elif previous is not None and previous.run == self.run:
            log.info(
                "flow %s: tasks.max %d -> %d, epoch %d begins (%d producer(s) of epoch %d fenced)",
                *(self.flow.name, previous.tasks, record.tasks, record.epoch, fenced, previous.epoch),
            )
        elif previous is not None and previous.state == RUNNING:
            log.warning(
                "flow %s: run %s (epoch %d) takes over from %s, which had not stopped; %d producer(s) fenced",
                *(self.flow.name, self.run, record.epoch, previous.describe(), fenced),
            )
        else:
            log.info("flow %s: run %s owns epoch %d (%s)", self.flow.name, self.run, record.epoch, self.invoker)

    def end_lease(self, lease: int) -> None:
        """Copy tasks of ``lease`` return now (they keep copying until the next lease renews them)."""
        if self.current is None:
            raise InvariantError(f"flow {self.flow.name}: a lease ends before this run claimed the flow")
        self._write(replace(self.current, lease=lease + 1))

    def stop(self, timeout_s: float = TXN_TIMEOUT_S) -> None:
        """Copy tasks commit what they hold and stop copying."""
        if self.current is not None and self.current.state != STOPPED:
            self._write(replace(self.current, state=STOPPED), timeout_s)
            log.info("flow %s: run %s (epoch %d) stopped", self.flow.name, self.run, self.current.epoch)

    def check(self) -> None:
        """Raise FlowTakenOverError if a newer record of the flow belongs to another epoch (the
        copy tasks find out by themselves too; an unreachable target is no reason to stop)."""
        try:
            latest, self._tail = latest_ownership(self._consumer, self.flow, self._tail, timeout_s=10.0)
        except SrmError as exc:
            log.debug("flow %s: ownership not checked: %s", self.flow.name, exc)
            return
        if latest is not None and self.current is not None and latest.epoch != self.current.epoch:
            raise taken_over(self.flow, self.current, latest)

    def use_target(self, target: Cluster) -> None:
        """Clients built from the target's new settings (the flow's run goes on with its epoch: the
        new producer has the owner's transactional id, and takes over from the old one)."""
        producer = self._new_producer(target) if self._producer is not None else None  # may fail: nothing changed
        self.target = target
        old, self._consumer = self._consumer, clients.reader(target, "__srm.owners")
        old.close()
        if producer is not None:
            self._producer = producer

    def close(self) -> None:
        self._consumer.close()

    # --- writing ------------------------------------------------------------------------------
    def _new_producer(self, target: Cluster | None = None) -> Any:
        from confluent_kafka import KafkaException

        on = target or self.target
        producer = clients.producer(on, **{"transactional.id": owner_transactional_id(self.flow)})
        try:
            producer.init_transactions(TXN_TIMEOUT_S)
        except KafkaException as exc:
            raise self._error(exc, "claiming") from None
        return producer

    def _write(self, record: Ownership, timeout_s: float = TXN_TIMEOUT_S) -> None:
        """One transaction holding ``record``: fails (and names the new owner) once fenced."""
        from confluent_kafka import KafkaException

        delivered: list[int] = []
        try:
            self._producer.begin_transaction()
            self._producer.produce(
                OWNERS_TOPIC,
                key=owners_key(self.flow),
                value=record.to_json(),
                partition=0,
                on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None else None,
            )
            self._producer.commit_transaction(timeout_s)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if error is not None and error.name() in FENCED:
                latest, _ = latest_ownership(self._consumer, self.flow, self._tail)
                if latest is not None and latest.run != self.run:
                    raise taken_over(self.flow, record, latest) from None
            raise self._error(exc, "writing the ownership record") from None
        self.current = record
        self.offset = delivered[0] if delivered else self.offset

    def _error(self, exc: Exception, doing: str) -> SrmError:
        error = kafka_error(exc)
        detail = error.str() if hasattr(error, "str") else str(error)
        return SrmError(
            f"flow {self.flow.name}: {doing} on {self.target.alias} ({self.target.describe()}) failed: {detail}. "
            f"{self.target.principal()} needs WRITE on TRANSACTIONAL_ID PREFIXED "
            f"{transactional_prefix(self.flow.source, self.flow.target)!r} and READ and WRITE on TOPIC {OWNERS_TOPIC!r}"
        )
