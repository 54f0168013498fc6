"""import-mm2: a realistic mm2.properties becomes YAML that means the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from srm.config import SrmConfig, load_config, parse_config
from srm.config.mm2_import import import_mm2
from srm.config.properties import parse_properties
from srm.errors import SrmError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mm2"


def imported() -> tuple[str, list[str]]:
    result = import_mm2((FIXTURES / "mm2.properties").read_text(), "mm2.properties")
    return result.to_yaml("mm2.properties"), result.warnings


def comparable(config: SrmConfig) -> dict[str, object]:
    """Everything that gives the configuration its meaning (not file names or line numbers)."""
    return {
        "clusters": {c.alias: c.model_dump(exclude={"line"}) for c in config.clusters},
        "client_secrets": {
            c.alias: {k: str(v) if isinstance(v, str) else v.get_secret_value() for k, v in c.client.items()}
            for c in config.clusters
        },
        "flows": {f.name: f.settings for f in config.flows},
    }


def test_imported_yaml_validates_and_equals_the_hand_written_equivalent() -> None:
    text, _ = imported()
    config, issues = parse_config(text, "imported.yaml")
    assert not issues, "\n".join(map(str, issues))
    assert config is not None
    expected = load_config(FIXTURES / "expected.yaml")
    assert comparable(config) == comparable(expected)


def test_flows_keep_regexes_and_overrides() -> None:
    config, _ = parse_config(imported()[0], "imported.yaml")
    assert config is not None
    pb = config.flow("primary", "backup").settings
    assert pb.topics == ("orders.*", r"payments\..*", "inventory")
    assert pb.topics_exclude == (r".*\.tmp", r".*[\-\.]internal")
    assert pb.sync_group_offsets_enabled and pb.emit_checkpoints_interval_seconds == 20
    assert pb.replication_factor == 3 and pb.tasks_max == 8  # global level
    assert config.flow("backup", "primary").settings.groups_exclude == ("test-.*", "console-consumer-.*")


def test_secrets_are_not_copied_and_every_unmapped_line_is_reported() -> None:
    text, warnings = imported()
    assert "primary-pass" not in text
    joined = "\n".join(warnings)
    assert "primary-pass" not in joined
    expected = [
        "mm2.properties:9: primary.sasl.jaas.config: secret not copied; set environment variable PRIMARY_SASL_PASSWORD",
        "mm2.properties:12: backup.ssl.truststore.location: librdkafka cannot read JKS/PKCS#12 truststores",
        "mm2.properties:27: backup->primary.groups.blacklist: deprecated MM2 name, written as groups.exclude",
        "mm2.properties:28: backup->primary.producer.acks: per-flow client overrides are not supported",
        "mm2.properties:38: primary.replication.factor: MM2 ignores connector options at cluster level",
        "mm2.properties:41: offset.storage.replication.factor: Kafka Connect worker setting",
        "mm2.properties:42: key.converter: Kafka Connect worker setting",
    ]
    for prefix in expected:
        assert any(w.startswith(prefix) for w in warnings), f"missing warning {prefix!r} in:\n{joined}"
    assert len(warnings) == len(expected)


def test_flows_mm2_does_not_enable_are_imported_disabled() -> None:
    result = import_mm2("clusters=a,b\na.bootstrap.servers=h:1\nb.bootstrap.servers=h:2\na->b.topics=x\n", "m")
    assert result.data["flows"] == [{"source": "a", "target": "b", "topics": ["x"], "enabled": False}]


def test_options_that_follow_another_interval_or_cannot_be_off_are_reported_not_mapped() -> None:
    text = (
        "clusters=a,b\na.bootstrap.servers=h:1\nb.bootstrap.servers=h:2\na->b.enabled=true\n"
        "refresh.groups.interval.seconds=300\nsync.topic.configs.interval.seconds=60\n"
        "a->b.refresh.topics.enabled=false\na->b.sync.group.offsets.interval.seconds=5\nrefresh.groups.enabled=true\n"
    )
    result = import_mm2(text, "mm2.properties")
    assert result.data["flows"] == [{"source": "a", "target": "b", "enabled": True}]
    assert "defaults" not in result.data
    assert [w.split(": ", 2)[2] for w in result.warnings] == [
        "consumer groups are listed afresh by every checkpoint pass, every emit.checkpoints.interval.seconds "
        "here; not mapped",
        "topic configs are synced by every run of the maintenance DAG, every refresh.topics.interval.seconds "
        "here; not mapped",
        "false is not supported: new topics and partitions are always picked up within seconds; choose what is "
        "replicated with topics / topics.exclude (or srm-control topics); not mapped",
        "group offsets are synced right after every checkpoint pass, every emit.checkpoints.interval.seconds "
        "here; not mapped",
    ]
    config, issues = parse_config(result.to_yaml("mm2.properties"), "srm.yaml")
    assert not issues and config is not None


def test_not_an_mm2_file() -> None:
    with pytest.raises(SrmError, match="no 'clusters' property"):
        import_mm2("bootstrap.servers=h:1\n", "producer.properties")


def test_java_properties_syntax() -> None:
    props = parse_properties(
        "# comment\n! also comment\nkey1 = value1\nkey2:value2\nkey3 value3\n"
        "multi = a, \\\n    b\nescaped = c:\\\\temp\\tx\nunicode = caf\\u00e9\nempty=\n"
    )
    assert [(p.key, p.value, p.line) for p in props] == [
        ("key1", "value1", 3),
        ("key2", "value2", 4),
        ("key3", "value3", 5),
        ("multi", "a, b", 6),
        ("escaped", "c:\\temp\tx", 8),
        ("unicode", "café", 9),
        ("empty", "", 10),
    ]


def test_java_properties_edge_cases_as_java_reads_them() -> None:
    """A comment ending in a backslash does not continue (Java continues only key-value lines);
    CRLF line ends count one line each; a key may be escaped and a value may hold separators."""
    props = parse_properties("# ends in \\\r\nafter.comment=1\r\nkey\\ with\\=sep = a=b:c\r\n\r\nlast: x\r\n")
    assert [(p.key, p.value, p.line) for p in props] == [
        ("after.comment", "1", 2),
        ("key with=sep", "a=b:c", 3),
        ("last", "x", 5),
    ]
