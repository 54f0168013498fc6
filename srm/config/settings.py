"""Flow settings: every MirrorMaker 2 option under MM2's name and default, plus this project's own.

The same model validates each level where settings may be written (global ``defaults``, a
cluster's ``source_defaults``/``target_defaults``, a flow), so an error points at the line where
the bad value is; the effective settings of a flow are the levels merged in precedence order
(built-in default < global < source cluster < target cluster < flow) and validated once more
for cross-field rules.
"""

from __future__ import annotations

import contextlib
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

# MM2 defaults (Kafka 4.x MirrorSourceConfig / MirrorCheckpointConfig / DefaultTopicFilter ...).
DEFAULT_TOPICS_EXCLUDE = (r"mm2.*\.internal", r".*\.replica", r"__.*")  # Kafka 4.3.1 DefaultTopicFilter
DEFAULT_GROUPS_EXCLUDE = (r"console-consumer-.*", r"connect-.*", r"__.*")
DEFAULT_CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)
SCHEDULE_PRESETS = ("@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")
# MM2 intervals that are another one's here: the work they time runs as a step of that one's DAG.
# Written with the same value they are honoured; with another value they are refused, since a
# setting accepted and then not followed would mislead.
TIED_INTERVALS = {
    "sync.topic.configs.interval.seconds": (
        "refresh.topics.interval.seconds",
        "topic configs are synced by every run of the maintenance DAG",
    ),
    "sync.topic.acls.interval.seconds": (
        "refresh.topics.interval.seconds",
        "topic ACLs are synced by every run of the maintenance DAG",
    ),
    "refresh.groups.interval.seconds": (
        "emit.checkpoints.interval.seconds",
        "consumer groups are listed afresh by every checkpoint pass",
    ),
    "sync.group.offsets.interval.seconds": (
        "emit.checkpoints.interval.seconds",
        "group offsets are synced right after every checkpoint pass",
    ),
}
# MM2 switches that can only be on here: new topics and partitions are always picked up within
# seconds (the planner), and consumer groups are listed by every checkpoint pass.
ALWAYS_ON = {
    "refresh.topics.enabled": "new topics and partitions are always picked up within seconds; "
    "choose what is replicated with topics / topics.exclude (or srm-control topics)",
    "refresh.groups.enabled": "consumer groups are always listed by each checkpoint pass; "
    "choose which are checkpointed with groups / groups.exclude (or srm-control groups)",
}


def _split_list(value: Any) -> Any:
    """MM2 LIST options: a YAML list, or one string split on commas (``"a, b"``); ``""`` is empty."""
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(",") if item.strip())
    return value


def _check_regexes(patterns: tuple[str, ...]) -> tuple[str, ...]:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regex {pattern!r}: {exc}") from None
    return patterns


RegexList = Annotated[tuple[str, ...], BeforeValidator(_split_list), AfterValidator(_check_regexes)]
Seconds = Annotated[int, Field(ge=1)]
ReplicationFactor = Annotated[int, Field(ge=1, le=32767)]


def _check_schedule(value: str | None) -> str | None:
    if value is None or value in SCHEDULE_PRESETS:
        return value
    from croniter import croniter

    if len(value.split()) != 5 or not croniter.is_valid(value):
        raise ValueError(
            f"schedule {value!r} is neither a 5-field cron expression nor one of {', '.join(SCHEDULE_PRESETS)}"
        )
    return value


def _parse_start(value: Any) -> Any:
    """``earliest``, ``latest`` or an ISO-8601 timestamp (read as UTC when it has no zone)."""
    if isinstance(value, str) and value in ("earliest", "latest"):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = datetime.fromisoformat(value)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    raise ValueError(f"start must be 'earliest', 'latest' or an ISO-8601 timestamp, got {value!r}")


def _check_retry_timeout(value: int) -> int:
    if value == -1 or value >= MIN_RETRY_TIMEOUT_MS:
        return value
    raise ValueError(
        f"errors.retry.timeout must be -1 (wait for good) or at least {MIN_RETRY_TIMEOUT_MS} ms, got {value}: "
        "a broker restart or a leader election takes seconds, and a flow should outlast one"
    )


MIN_RETRY_TIMEOUT_MS = 10_000


class CrossFieldError(ValueError):
    """A rule between settings; ``key`` is the setting whose line the error should point at."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class FlowSettings(BaseModel):
    """Settings of one flow. Field aliases are the names users write (MM2's names where MM2 has them)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=False, use_attribute_docstrings=True)

    # --- this project's own -------------------------------------------------------------------
    enabled: bool = True
    """false: the flow's DAGs are generated paused and its jobs refuse to run."""
    mode: Literal["continuous", "scheduled"] = "continuous"
    """continuous: one long-running job copies as records arrive; scheduled: a job per `schedule` copies what is there
    (available-now) and ends."""
    schedule: Annotated[str | None, AfterValidator(_check_schedule)] = None
    """When a scheduled flow runs: a 5-field cron expression or @hourly/@daily/@weekly/@monthly/@quarterly/@yearly."""
    start: Annotated[Literal["earliest", "latest"] | datetime, BeforeValidator(_parse_start)] = "earliest"
    """Where a partition without progress on the target starts: earliest, latest, or an ISO-8601 timestamp (UTC when it
    has no zone)."""
    exactly_once: bool = True
    """Copy in Kafka transactions with the progress (every record once, only committed data); false: idempotent
    producers, at least once."""
    on_data_loss: Literal["fail", "continue"] = "fail"
    """What a flow does when records it has not copied are gone from the source (retention, deleted records): fail
    naming them, or continue past them (counted as lost)."""
    # How long a fault that looks transient but does not go away (the target unreachable or frozen,
    # NOT_ENOUGH_REPLICAS while its ISR stays short, delivery time-outs again and again) is retried
    # before the flow's task fails, naming what failed and where (srm.replication.outage). Kafka
    # Connect's name; it defaults to 0 there (no retries), here to 5 minutes. -1: wait for good,
    # saying every minute what for.
    errors_retry_timeout_ms: Annotated[int, AfterValidator(_check_retry_timeout)] = Field(
        300_000, alias="errors.retry.timeout"
    )
    """How long a fault that looks transient but lasts (target unreachable or frozen, NOT_ENOUGH_REPLICAS, delivery
    time-outs) is retried before the task fails naming what and where; -1: wait for good, saying every minute what
    for."""
    # Continuous mode: a record is visible on the target when its transaction commits. A copier
    # commits as soon as it has caught up with its partitions (its consumer holds no more
    # records), and at the latest this long after the transaction's first record: under a load
    # it cannot catch up with, this bounds the latency and sets the commit rate.
    transaction_interval_ms: int = Field(100, alias="transaction.interval.ms", ge=10, le=60_000)
    """Continuous mode: a copier commits as soon as it has caught up, and at the latest this long after its
    transaction's first record."""
    # Continuous mode: every commit ends an offset run (a row of the sync history) and writes a
    # commit marker on each partition it touched. Committing as soon as caught up gives the least
    # latency, but at rates where a transaction holds a handful of records per partition the history
    # grows with the commit rate, which the machine's speed sets. Kafka Streams' commit.interval.ms
    # (100 under exactly-once) is the same trade.
    transaction_linger_ms: int = Field(0, alias="transaction.linger.ms", ge=0, le=60_000)
    """Continuous mode: a copier that has caught up commits no sooner than this after its previous commit began
    (0: at once): at most one offset run and commit marker per partition per linger, for up to this much more
    latency. The copier's clients batch for it: its producer holds a partition's records as long (up to 1 s),
    its consumer's fetch waits for a MiB or a tenth of it. Less than transaction.interval.ms."""
    # Continuous mode: how long one Spark task holds its slot's partitions. Copying goes on across
    # leases without a pause; a lease is the unit of planning (new topics, YAML edits without an
    # early end), of metrics rows and of the job's log line. A run's first lease is at most
    # srm.replication.lease.FIRST_LEASE_S (5) long.
    task_lease_seconds: int = Field(30, alias="task.lease.seconds", ge=5, le=3600)
    """Continuous mode: how long one Spark task holds its slot's partitions (the unit of planning, of metrics rows and
    of the job's log line); copying goes on across leases."""
    # Continuous mode: a lease that follows one in which no copier copied a record lasts this long
    # instead (when longer than task.lease.seconds): an idle flow turns its leases over less often.
    # It ends at most task.lease.seconds after a copier writes its first status (records copied
    # again), so metrics rows come as soon after records as with task.lease.seconds.
    task_lease_idle_seconds: int = Field(120, alias="task.lease.idle.seconds", ge=5, le=3600)
    """Continuous mode: how long a lease lasts after one in which nothing was copied (when longer than
    task.lease.seconds); it ends at most task.lease.seconds after records are copied again."""
    # Continuous mode: partitions are placed on the copy slots by their observed load
    # (srm/replication/assignment.py). When the busiest slot carries much more than a new placement
    # would give it, the flow places them again (a new epoch: every copier pauses for a few
    # seconds), at most once in this many seconds. 0: never; partitions keep the slots they got.
    tasks_rebalance_interval_seconds: int = Field(600, alias="tasks.rebalance.interval.seconds", ge=0)
    """Continuous mode: partitions are placed on copy slots by their observed load and placed again (a new epoch) when
    the busiest slot carries much more than a new placement would give it, at most once in this many seconds; 0:
    never."""
    # The Airflow connection whose host is the Spark master of the flow's jobs (DAG tasks;
    # `srm-control run` takes --master). Off this machine the executors run spark.pyspark.python
    # (default python3.<minor> of the driver's version) with the project shipped in an archive.
    spark_connection_id: str = Field("spark_default", alias="spark.connection_id", min_length=1)
    """The Airflow connection whose host is the Spark master of the flow's jobs."""
    spark_pyspark_python: str | None = Field(None, alias="spark.pyspark.python", min_length=1)
    """The executors' Python off this machine (default python3.<minor> of the driver's version)."""

    # --- what is replicated -------------------------------------------------------------------
    topics: RegexList = (".*",)
    """Regexes (full match) of the source topics to replicate; a YAML list or a comma-separated string."""
    topics_exclude: RegexList = Field(DEFAULT_TOPICS_EXCLUDE, alias="topics.exclude")
    """Regexes of source topics never replicated."""
    groups: RegexList = (".*",)
    """Regexes of the consumer groups whose offsets are checkpointed."""
    groups_exclude: RegexList = Field(DEFAULT_GROUPS_EXCLUDE, alias="groups.exclude")
    """Regexes of consumer groups never checkpointed."""
    heartbeats_replication_enabled: bool = Field(True, alias="heartbeats.replication.enabled")
    """Replicate the source's heartbeats topics (upstream hops are visible on the target)."""
    # Prefixless active/active (srm/replication/provenance.py): every record written carries its
    # origin cluster and hop count; a record from the target, or past the hop limit, is not copied.
    provenance_headers_enabled: bool = Field(False, alias="provenance.headers.enabled")
    """Prefixless active/active: every record written carries its origin cluster and hop count; a record from the
    target, or past the hop limit, is not copied."""
    provenance_max_hops: int = Field(1, alias="provenance.max.hops", ge=1, le=100)
    """With provenance headers: the most clusters a record may pass through."""

    # --- naming -------------------------------------------------------------------------------
    replication_policy_class: str = Field("default", alias="replication.policy.class", min_length=1)
    """How remote topics are named: default (`<source>.<topic>`), identity (the same name), or an MM2 class name."""
    replication_policy_separator: str = Field(".", alias="replication.policy.separator", min_length=1)
    """The separator between the source alias and the topic in remote topic names."""
    replication_policy_internal_topic_separator_enabled: bool = Field(
        True, alias="replication.policy.internal.topic.separator.enabled"
    )
    """Use the separator in the names of the internal topics too (MM2's checkpoints and offset-syncs topics)."""

    # --- topics on the target -----------------------------------------------------------------
    replication_factor: ReplicationFactor = Field(2, alias="replication.factor")
    """Replication factor of the remote topics this flow creates (capped at the target's broker count)."""
    heartbeats_topic_replication_factor: ReplicationFactor = Field(3, alias="heartbeats.topic.replication.factor")
    """Replication factor of the heartbeats topic."""
    checkpoints_topic_replication_factor: ReplicationFactor = Field(3, alias="checkpoints.topic.replication.factor")
    """Replication factor of the checkpoints topic."""
    offset_syncs_topic_replication_factor: ReplicationFactor = Field(3, alias="offset-syncs.topic.replication.factor")
    """Replication factor of the offset-syncs topic."""
    offset_syncs_topic_location: Literal["source", "target"] = Field("source", alias="offset-syncs.topic.location")
    """The cluster holding MM2's offset-syncs topic."""
    config_properties_exclude: RegexList = Field(DEFAULT_CONFIG_PROPERTIES_EXCLUDE, alias="config.properties.exclude")
    """Regexes of topic configs never copied to remote topics."""
    use_defaults_from: Literal["target", "source"] = Field("target", alias="use.defaults.from")
    """Whose broker defaults a remote topic's unset configs follow."""

    # --- periodic work ------------------------------------------------------------------------
    emit_heartbeats_enabled: bool = Field(True, alias="emit.heartbeats.enabled")
    """Write heartbeats to the source's heartbeats topic."""
    emit_heartbeats_interval_seconds: Seconds = Field(1, alias="emit.heartbeats.interval.seconds")
    """Seconds between two heartbeats."""
    emit_checkpoints_enabled: bool = Field(True, alias="emit.checkpoints.enabled")
    """Translate the consumer groups' offsets into checkpoints on the target."""
    emit_checkpoints_interval_seconds: Seconds = Field(60, alias="emit.checkpoints.interval.seconds")
    """Seconds between two checkpoint passes."""
    emit_offset_syncs_enabled: bool = Field(True, alias="emit.offset-syncs.enabled")
    """Write MM2's offset syncs (for MM2 tooling; translation here reads the flow's own sync history)."""
    sync_group_offsets_enabled: bool = Field(False, alias="sync.group.offsets.enabled")
    """Commit the translated offsets to the target's consumer groups that have no active members."""
    sync_group_offsets_interval_seconds: Seconds = Field(60, alias="sync.group.offsets.interval.seconds")
    """Must equal emit.checkpoints.interval.seconds: groups are synced right after every checkpoint pass."""
    refresh_topics_enabled: bool = Field(True, alias="refresh.topics.enabled")
    """Only true: new topics and partitions are always picked up within seconds."""
    refresh_topics_interval_seconds: Seconds = Field(600, alias="refresh.topics.interval.seconds")
    """Seconds between two runs of the maintenance DAG (topic configs, partitions, ACLs)."""
    refresh_groups_enabled: bool = Field(True, alias="refresh.groups.enabled")
    """Only true: consumer groups are listed by every checkpoint pass."""
    refresh_groups_interval_seconds: Seconds = Field(600, alias="refresh.groups.interval.seconds")
    """Must equal emit.checkpoints.interval.seconds: groups are listed by every checkpoint pass."""
    sync_topic_configs_enabled: bool = Field(True, alias="sync.topic.configs.enabled")
    """Copy topic configs to the remote topics."""
    sync_topic_configs_interval_seconds: Seconds = Field(600, alias="sync.topic.configs.interval.seconds")
    """Must equal refresh.topics.interval.seconds: configs are synced by every maintenance run."""
    sync_topic_acls_enabled: bool = Field(True, alias="sync.topic.acls.enabled")
    """Copy the source topics' ACLs to the remote topics (READ only, as MM2 does)."""
    sync_topic_acls_interval_seconds: Seconds = Field(600, alias="sync.topic.acls.interval.seconds")
    """Must equal refresh.topics.interval.seconds: ACLs are synced by every maintenance run."""
    offset_lag_max: int = Field(100, alias="offset.lag.max", ge=0)
    """How far behind MM2's offset syncs may fall (MM2's offset-syncs topic only)."""
    tasks_max: int = Field(1, alias="tasks.max", ge=1)
    """Copy slots: Spark tasks copying the flow's partitions at once (and cores of a Spark cluster)."""

    @model_validator(mode="after")
    def _supported(self) -> FlowSettings:
        for name, why in ALWAYS_ON.items():
            if not getattr(self, _field(name)):
                raise CrossFieldError(name, f"{name}: false is not supported: {why}")
        for name, (leader, why) in TIED_INTERVALS.items():
            value, follows = getattr(self, _field(name)), getattr(self, _field(leader))
            if _field(name) in self.model_fields_set and value != follows:
                raise CrossFieldError(
                    name, f"{name} ({value}) cannot differ from {leader} ({follows}): {why}; set {leader} instead"
                )
        if "provenance_max_hops" in self.model_fields_set and not self.provenance_headers_enabled:
            raise CrossFieldError(
                "provenance.max.hops",
                "provenance.max.hops needs provenance.headers.enabled: true (it limits those headers)",
            )
        if self.transaction_linger_ms >= self.transaction_interval_ms:
            raise CrossFieldError(
                "transaction.linger.ms",
                f"transaction.linger.ms ({self.transaction_linger_ms}) must be less than transaction.interval.ms "
                f"({self.transaction_interval_ms}): a transaction commits at the latest transaction.interval.ms "
                "after its first record",
            )
        if self.sync_group_offsets_enabled and not self.emit_checkpoints_enabled:
            raise CrossFieldError(
                "emit.checkpoints.enabled",
                "sync.group.offsets.enabled needs emit.checkpoints.enabled: groups are synced to the "
                "offsets of their checkpoints",
            )
        return self

    @model_validator(mode="after")
    def _schedule_matches_mode(self) -> FlowSettings:
        if self.mode == "scheduled" and self.schedule is None:
            raise CrossFieldError(
                "mode", "mode 'scheduled' needs a schedule (a cron expression or a preset such as @hourly)"
            )
        if self.mode == "continuous" and self.schedule is not None:
            raise CrossFieldError(
                "schedule",
                f"schedule {self.schedule!r} is only used with mode 'scheduled' (mode is 'continuous')",
            )
        return self

    @property
    def longest_lease_seconds(self) -> int:
        """How long a continuous lease can last (an idle one may last longer than task.lease.seconds)."""
        return max(self.task_lease_seconds, self.task_lease_idle_seconds)


def _field(alias: str) -> str:
    """The attribute of FlowSettings a user-facing option name is held in."""
    return next(name for name, field in FlowSettings.model_fields.items() if field.alias == alias)


def option_names() -> list[str]:
    """Every name a settings block accepts, as users write them."""
    return [field.alias or name for name, field in FlowSettings.model_fields.items()]


class PartialSettings(FlowSettings):
    """One level of settings as written; cross-field rules wait until the levels are merged."""

    @model_validator(mode="after")
    def _schedule_matches_mode(self) -> PartialSettings:
        return self

    @model_validator(mode="after")
    def _supported(self) -> PartialSettings:
        return self

    def written(self) -> dict[str, Any]:
        """Only the settings this level sets, by their user-facing names."""
        return self.model_dump(by_alias=True, exclude_unset=True)
