"""The project's exception tree: one root, so callers (CLI, tasks) can report any of them cleanly."""

from __future__ import annotations


class SrmError(Exception):
    """Root of every error this project raises on purpose; its message is meant for the user."""


class InvariantError(SrmError):
    """Something this project's own code guarantees did not hold: a bug, named where it showed
    (raised, not asserted: ``python -O`` keeps the check)."""


class ConfigError(SrmError):
    """The YAML configuration is invalid; ``issues`` lists every problem with file, line and key."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(issue) for issue in issues))


class ConfigIssue:
    """One problem in a configuration file: where (file, line, key path) and what."""

    def __init__(self, file: str, line: int | None, key: str, message: str, flow: str | None = None) -> None:
        self.file = file
        self.line = line
        self.key = key
        self.message = message
        self.flow = flow  # the flow the problem breaks, or None when it concerns the whole file

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"

    def __repr__(self) -> str:
        return f"ConfigIssue({self!s})"


class NotConfiguredError(SrmError):
    """A cluster alias or flow that the configuration file does not define."""


class UsageError(SrmError):
    """A request that names too little or too much (CLI flags, REST query parameters)."""


class RecordFormatError(SrmError):
    """Bytes that do not decode as the expected MM2 record (names topic/partition/offset when known)."""


class LocalClusterError(SrmError):
    """A local development cluster cannot be started, stopped or reached."""


class PortInUseError(LocalClusterError):
    """A port a local cluster needs is taken by a process this project did not start."""


class ClusterUnreachableError(SrmError):
    """A Kafka cluster did not answer within the timeout (the message names its bootstrap servers);
    ``cluster`` is its alias (a continuous flow says which cluster it waits for from it)."""

    def __init__(self, message: str, *, cluster: str) -> None:
        super().__init__(message)
        self.cluster = cluster


class ReplicationError(SrmError):
    """Replication of a flow cannot go on; the message names topic/partition/offset and the fix."""


class LastingFaultError(ReplicationError):
    """A fault that retries did not get past within the flow's errors.retry.timeout (what, where, since when),
    or one that no retry can get past. It ends the run, not only the task (Spark does not retry it)."""


class RemoteTopicGoneError(LastingFaultError):
    """A remote topic the flow copies into was deleted from the target under it."""


class DataLossError(ReplicationError):
    """Source records were removed before they were copied and the flow's on_data_loss is 'fail'."""


class TopicConflictError(ReplicationError):
    """A topic exists with settings the flow cannot work with (it is left unchanged)."""


class FlowTakenOverError(ReplicationError):
    """Another run of the same flow claimed it: this run stopped (its writes are fenced)."""

    # The replication job's exit status then: retrying would only take the flow back (the newest
    # run wins), so an Airflow task fails at once and says why.
    EXIT_STATUS = 3
