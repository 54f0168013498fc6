"""The project image's broker reads KAFKA_* variables as Apache Kafka's image does."""

from __future__ import annotations

from pathlib import Path

import pytest

from srm.devenv.container import BrokerEnvError, kafka, server_properties

ENV = {
    "KAFKA_NODE_ID": "1",
    "KAFKA_PROCESS_ROLES": "broker,controller",
    "KAFKA_LISTENERS": "INTERNAL://:9092,CONTROLLER://:9093",
    "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@kafka-west:9093",
    "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
    "KAFKA_CONFLUENT__SUPPORT__METRICS__ENABLE": "false",
    "KAFKA_LISTENER_NAME_INTERNAL_SSL___ENDPOINT___IDENTIFICATION___ALGORITHM": "",
    "KAFKA_HEAP_OPTS": "-Xmx300m -Xms300m",
    "KAFKA_OPTS": "-Dsrm.test=1",
    "KAFKA_LOG4J_OPTS": "-Dlog4j2.configurationFile=/etc/kafka/log4j2.yaml",
    "CLUSTER_ID": "MHttQGtNVmaUgK5s8G985Q",
    "HOME": "/opt/srm",
}


def test_variables_become_properties_as_in_apache_kafkas_image() -> None:
    props = server_properties(ENV)
    assert props["node.id"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"
    assert props["confluent_support_metrics_enable"] == "false"
    assert props["listener.name.internal.ssl-endpoint-identification-algorithm"] == ""
    assert props["log.dirs"] == "/var/lib/kafka/data"
    assert not {"heap.opts", "opts", "log4j.opts", "cluster.id", "home"} & set(props)


def test_logging_variables_of_other_images_are_refused_by_name() -> None:
    with pytest.raises(BrokerEnvError, match="KAFKA_LOG4J_ROOT_LOGLEVEL is not read"):
        server_properties({**ENV, "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN"})


def test_a_broker_without_its_kraft_settings_is_refused_by_name() -> None:
    with pytest.raises(BrokerEnvError, match="KAFKA_CONTROLLER_QUORUM_VOTERS"):
        server_properties({k: v for k, v in ENV.items() if k != "KAFKA_CONTROLLER_QUORUM_VOTERS"})


def test_an_unformatted_log_dir_needs_a_cluster_id(tmp_path: Path) -> None:
    env = {**ENV, "KAFKA_LOG_DIRS": str(tmp_path / "data")}
    del env["CLUSTER_ID"]
    with pytest.raises(BrokerEnvError, match="CLUSTER_ID is not set"):
        kafka(env, tmp_path / "config")


@pytest.mark.usefixtures("no_jvm")
def test_a_formatted_log_dir_starts_with_the_heap_asked_for(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("node.id=1\n")
    command = kafka({**ENV, "KAFKA_LOG_DIRS": str(tmp_path / "data")}, tmp_path / "config")
    assert command[-2:] == ["kafka.Kafka", str(tmp_path / "config" / "server.properties")]
    assert "-Xmx300m" in command and "-Xms300m" in command and "-Xmx512m" not in command
    jvm = command[: command.index("-cp")]  # JVM options, the user's after the image's own
    assert jvm[-2:] == ["-Dlog4j2.configurationFile=/etc/kafka/log4j2.yaml", "-Dsrm.test=1"]
    written = (tmp_path / "config" / "server.properties").read_text()
    assert "controller.quorum.voters=1@kafka-west:9093\n" in written
