"""The configuration model: defaults, the five precedence levels, loops, secrets."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from srm.config import FlowSettings, SrmConfig, load_config, parse_config
from srm.config.summary import summary_json, summary_lines
from srm.errors import NotConfiguredError, SrmError
from srm.kafka.clients import client_settings

ROOT = Path(__file__).parents[2]
TWO = """
clusters:
  a: {bootstrap.servers: "127.0.0.1:1"}
  b: {bootstrap.servers: "127.0.0.1:2"}
  c: {bootstrap.servers: "127.0.0.1:3"}
"""


def parse(text: str) -> SrmConfig:
    config, issues = parse_config(text, "test.yaml")
    assert not issues, "\n".join(map(str, issues))
    assert config is not None
    return config


def test_shipped_config_is_valid_with_two_local_clusters() -> None:
    config = load_config(ROOT / "conf" / "srm.yaml")
    assert {c.alias for c in config.local_clusters()} >= {"us-west", "us-east"}
    assert config.flow("us-west", "us-east").enabled


def test_mm2_defaults_apply_when_nothing_is_set() -> None:
    s = parse(TWO + "flows:\n  - {source: a, target: b}\n").flow("a", "b").settings
    assert s.topics == (".*",)
    assert s.topics_exclude == (r"mm2.*\.internal", r".*\.replica", r"__.*")  # Kafka 4.3.1
    assert s.groups_exclude == ("console-consumer-.*", "connect-.*", "__.*")
    assert (s.replication_factor, s.offset_lag_max, s.tasks_max) == (2, 100, 1)
    assert (s.emit_heartbeats_interval_seconds, s.emit_checkpoints_interval_seconds) == (1, 60)
    assert (s.refresh_topics_interval_seconds, s.sync_topic_configs_interval_seconds) == (600, 600)
    assert s.sync_group_offsets_enabled is False and s.sync_topic_acls_enabled is True
    assert s.offset_syncs_topic_location == "source" and s.use_defaults_from == "target"
    assert (s.mode, s.start, s.exactly_once, s.on_data_loss) == ("continuous", "earliest", True, "fail")
    assert len(s.config_properties_exclude) == 6


def test_five_levels_of_precedence() -> None:
    config = parse("""
defaults: {replication.factor: 3, offset.lag.max: 10, tasks.max: 4, emit.checkpoints.interval.seconds: 30}
clusters:
  a: {bootstrap.servers: "127.0.0.1:1", source_defaults: {replication.factor: 5, offset.lag.max: 20, tasks.max: 6}}
  b: {bootstrap.servers: "127.0.0.1:2", target_defaults: {replication.factor: 7, offset.lag.max: 30}}
flows:
  - {source: a, target: b, replication.factor: 9}
  - {source: b, target: a}
""")
    ab = config.flow("a", "b").settings
    assert (ab.replication_factor, ab.offset_lag_max, ab.tasks_max, ab.emit_checkpoints_interval_seconds) == (
        9,
        30,
        6,
        30,
    )
    ba = config.flow("b", "a").settings  # b is the source here: only a's target_defaults would apply
    assert (ba.replication_factor, ba.offset_lag_max, ba.tasks_max) == (3, 10, 4)


def test_lists_accept_mm2_comma_strings_and_empty_means_nothing() -> None:
    config = parse(TWO + "flows:\n  - {source: a, target: b, topics: 'orders, payments\\..*', groups: ''}\n")
    s = config.flow("a", "b").settings
    assert s.topics == ("orders", r"payments\..*")
    assert s.groups == ()


def test_start_timestamp_without_zone_is_utc() -> None:
    s = parse(TWO + "flows:\n  - {source: a, target: b, start: '2026-11-01T08:00:00'}\n").flows[0].settings
    assert s.start == datetime(2026, 11, 1, 8, tzinfo=UTC)


def test_scheduled_flow_with_cron() -> None:
    s = parse(TWO + "flows:\n  - {source: a, target: b, mode: scheduled, schedule: '*/15 * * * *'}\n").flows[0].settings
    assert (s.mode, s.schedule) == ("scheduled", "*/15 * * * *")


def test_identity_flows_with_disjoint_topics_are_not_a_loop() -> None:
    config = parse(
        """
defaults: {replication.policy.class: identity}
"""
        + TWO
        + """
flows:
  - {source: a, target: b, topics: [orders]}
  - {source: b, target: a, topics: [payments]}
"""
    )
    assert all(f.prefixless for f in config.flows)


def test_identity_loop_over_three_clusters_is_spelled_out() -> None:
    _, issues = parse_config(
        "defaults: {replication.policy.class: identity}\n"
        + TWO
        + """
flows:
  - {source: a, target: b}
  - {source: b, target: c}
  - {source: c, target: a, topics: ['inv.*']}
  - {source: a, target: c, replication.policy.class: default}
""",
        "t.yaml",
    )
    assert len(issues) == 1
    assert "flows a->b and b->c and c->a form a loop of 3 clusters: all admit topic 'inv'" in issues[0].message
    assert "(a:inv -> b:inv -> c:inv -> a:inv -> ...)" in issues[0].message


@pytest.mark.parametrize(
    ("ab", "ba", "topic"),
    [
        (["a.*"], [".*b"], "ab"),  # no literal, no common name: only the regexes' intersection has one
        (["[0-9]+-raw"], ["[5-9]+.*"], "5-raw"),
        (["(x)\\1"], ["xx"], "xx"),  # a back-reference interegular does not model: the literal name
    ],
)
def test_an_identity_loop_is_found_by_the_exact_intersection_of_the_regexes(
    ab: list[str], ba: list[str], topic: str
) -> None:
    flows = f"flows:\n  - {{source: a, target: b, topics: {json.dumps(ab)}}}\n"
    flows += f"  - {{source: b, target: a, topics: {json.dumps(ba)}}}\n"
    _, issues = parse_config("defaults: {replication.policy.class: identity}\n" + TWO + flows, "t.yaml")
    assert len(issues) == 1, issues
    assert f"form a loop: all admit topic {topic!r}" in issues[0].message


def test_flows_whose_regexes_share_no_topic_name_form_no_loop() -> None:
    """orders.eu.* one way, orders.* without orders.eu.* back: no name passes both."""
    flows = (
        "flows:\n  - {source: a, target: b, topics: ['orders\\.eu\\..*']}\n"
        "  - {source: b, target: a, topics: ['orders\\..*'], topics.exclude: ['orders\\.eu\\..*']}\n"
    )
    _, issues = parse_config("defaults: {replication.policy.class: identity}\n" + TWO + flows, "t.yaml")
    assert issues == []
    # without the exclusion, orders.eu.* passes both ways
    both_ways = flows.replace(", topics.exclude: ['orders\\.eu\\..*']", "")
    _, issues = parse_config("defaults: {replication.policy.class: identity}\n" + TWO + both_ways, "t.yaml")
    assert len(issues) == 1 and "all admit topic 'orders.eu.'" in issues[0].message, issues


def test_provenance_headers_make_identity_active_active_safe() -> None:
    identity = "defaults: {replication.policy.class: identity, provenance.headers.enabled: true}\n" + TWO
    config = parse(identity + "flows:\n  - {source: a, target: b}\n  - {source: b, target: a}\n")
    assert all(f.settings.provenance_headers_enabled and f.settings.provenance_max_hops == 1 for f in config.flows)
    # both directions need the headers
    one_way = "defaults: {replication.policy.class: identity}\n" + TWO
    one_way += "flows:\n  - {source: a, target: b, provenance.headers.enabled: true}\n  - {source: b, target: a}\n"
    _, issues = parse_config(one_way, "t.yaml")
    assert len(issues) == 1 and "set provenance.headers.enabled: true on both flows" in issues[0].message


@pytest.mark.parametrize("hops", [1, 3])
def test_no_identity_loop_of_three_clusters_is_safe_even_with_provenance(hops: int) -> None:
    identity = "defaults: {replication.policy.class: identity, provenance.headers.enabled: true, "
    identity += f"provenance.max.hops: {hops}}}\n"
    ring = "flows:\n  - {source: a, target: b}\n  - {source: b, target: c}\n  - {source: c, target: a}\n"
    _, issues = parse_config(identity + TWO + ring, "t.yaml")
    assert len(issues) == 1, issues
    assert "form a loop of 3 clusters: all admit topic" in issues[0].message
    assert "cannot be made safe, not even with provenance headers" in issues[0].message


def test_a_third_prefixless_flow_into_an_active_active_pair_is_refused() -> None:
    identity = "defaults: {replication.policy.class: identity, provenance.headers.enabled: true}\n" + TWO
    pair = "flows:\n  - {source: a, target: b, topics: [orders]}\n  - {source: b, target: a, topics: [orders]}\n"
    _, issues = parse_config(identity + pair + "  - {source: c, target: a, topics: ['ord.*']}\n", "t.yaml")
    assert len(issues) == 1, issues
    assert issues[0].flow == "c->a"
    assert "prefixless flow c->a writes topic 'orders' into a, which a->b and b->a replicate both ways" in (
        issues[0].message
    )
    # another topic, or a flow out of the pair, is fine
    parse(identity + pair + "  - {source: c, target: a, topics: [payments]}\n")
    parse(identity + pair + "  - {source: a, target: c, topics: [orders]}\n")


def test_provenance_headers_on_a_renaming_flow_are_refused() -> None:
    _, issues = parse_config(TWO + "flows:\n  - {source: a, target: b, provenance.headers.enabled: true}\n", "t.yaml")
    assert len(issues) == 1
    assert "flow a->b: provenance.headers.enabled is for prefixless (identity) flows" in issues[0].message
    assert "t.yaml" in str(issues[0])


def test_a_hop_limit_without_provenance_headers_is_refused() -> None:
    _, issues = parse_config(TWO + "flows:\n  - {source: a, target: b, provenance.max.hops: 2}\n", "t.yaml")
    assert len(issues) == 1
    assert "provenance.max.hops needs provenance.headers.enabled: true" in issues[0].message


def test_disabled_flow_breaks_a_loop() -> None:
    parse(
        "defaults: {replication.policy.class: identity}\n"
        + TWO
        + "flows:\n  - {source: a, target: b}\n  - {source: b, target: a, enabled: false}\n"
    )


def test_default_policy_two_way_is_fine() -> None:
    config = parse(TWO + "flows:\n  - {source: a, target: b}\n  - {source: b, target: a}\n")
    assert not any(f.prefixless for f in config.flows)
    assert config.flow("b", "a").policy.format_remote_topic("b", "t") == "b.t"


def test_model_is_frozen() -> None:
    config = parse(TWO + "flows:\n  - {source: a, target: b}\n")
    with pytest.raises(ValidationError):
        config.flows[0].settings.replication_factor = 5  # type: ignore[misc]
    with pytest.raises(ValidationError):
        config.flows = ()  # type: ignore[misc]


def test_lookups_name_what_is_configured() -> None:
    config = parse(TWO + "flows:\n  - {source: a, target: b}\n")
    with pytest.raises(NotConfiguredError, match=r"no flow b->a in test.yaml \(configured: a->b\)"):
        config.flow("b", "a")
    with pytest.raises(NotConfiguredError, match="unknown cluster alias 'z'"):
        config.cluster("z")


SECRET_CONFIG = """
clusters:
  a:
    bootstrap.servers: "127.0.0.1:1"
    client:
      security.protocol: SASL_SSL
      sasl.mechanism: PLAIN
      sasl.username: svc
      sasl.password: hunter2-inline-secret
  b:
    bootstrap.servers: "127.0.0.1:2"
    client: {sasl.username: svc, sasl.password: "${env:SRM_TEST_B_PASSWORD}", sasl.mechanism: PLAIN}
flows:
  - {source: a, target: b}
"""


def test_secrets_never_appear_in_repr_summary_or_json() -> None:
    config = parse(SECRET_CONFIG)
    assert isinstance(config.cluster("a").client["sasl.password"], SecretStr)
    rendered = [repr(config), str(config), "\n".join(summary_lines(config)), json.dumps(summary_json(config))]
    for text in rendered:
        assert "hunter2-inline-secret" not in text
    assert "sasl.password=**********" in rendered[2]


def test_env_references_resolve_only_when_a_client_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse(SECRET_CONFIG)
    monkeypatch.delenv("SRM_TEST_B_PASSWORD", raising=False)
    with pytest.raises(
        SrmError, match=r"cluster b, sasl\.password: environment variable SRM_TEST_B_PASSWORD is not set"
    ):
        client_settings(config.cluster("b"), "producer")
    monkeypatch.setenv("SRM_TEST_B_PASSWORD", "s3cret-from-env")
    settings = client_settings(config.cluster("b"), "producer", **{"acks": "all"})
    assert settings["sasl.password"] == "s3cret-from-env"
    assert settings["bootstrap.servers"] == "127.0.0.1:2" and settings["acks"] == "all"
    assert "s3cret-from-env" not in repr(config)


def test_file_references_read_a_properties_file(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("# kafka\nb.password = from-file\n")
    config = parse(SECRET_CONFIG.replace("${env:SRM_TEST_B_PASSWORD}", f"${{file:{secrets}:b.password}}"))
    assert client_settings(config.cluster("b"), "admin")["sasl.password"] == "from-file"


@pytest.mark.parametrize(
    "text",
    [
        "b.password: colon-separated\n",  # Java's key: value
        "b.password colon-separated\n",  # and key value
        "# a comment ending in a backslash \\\nb.password=colon-separated\n",  # does not continue
        "b.password=colon-\\\n    separated\n",  # a continued value
        "b.password=wrong\nb.password=colon-separated\n",  # the last one, as Java keeps it
    ],
    ids=["colon", "space", "comment-backslash", "continuation", "last-wins"],
)
def test_file_references_read_the_file_as_java_does(tmp_path: Path, text: str) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text(text)
    config = parse(SECRET_CONFIG.replace("${env:SRM_TEST_B_PASSWORD}", f"${{file:{secrets}:b.password}}"))
    assert client_settings(config.cluster("b"), "admin")["sasl.password"] == "colon-separated"


def test_clients_disable_nagle_as_kafkas_own_clients_do_unless_a_cluster_says_otherwise() -> None:
    config = parse("""
clusters:
  a: {bootstrap.servers: "127.0.0.1:1"}
  b: {bootstrap.servers: "127.0.0.1:2", client: {socket.nagle.disable: false}}
flows:
  - {source: a, target: b}
""")
    for role in ("producer", "consumer", "admin"):
        assert client_settings(config.cluster("a"), role)["socket.nagle.disable"] is True
        assert str(client_settings(config.cluster("b"), role)["socket.nagle.disable"]).lower() == "false"


def test_transactional_producers_connect_to_every_broker_unless_a_cluster_says_otherwise() -> None:
    config = parse("""
clusters:
  a: {bootstrap.servers: "127.0.0.1:1"}
  b: {bootstrap.servers: "127.0.0.1:2", producer: {enable.sparse.connections: true}}
flows:
  - {source: a, target: b}
""")
    transactional = {"transactional.id": "srm-replicate.a.b.1.0"}
    assert client_settings(config.cluster("a"), "producer", **transactional)["enable.sparse.connections"] is False
    assert (
        str(client_settings(config.cluster("b"), "producer", **transactional)["enable.sparse.connections"]).lower()
        == "true"
    )
    for role in ("producer", "consumer", "admin"):  # others keep librdkafka's sparse connections
        assert "enable.sparse.connections" not in client_settings(config.cluster("a"), role)
    idempotent = client_settings(config.cluster("a"), "producer", **{"enable.idempotence": True})
    assert "enable.sparse.connections" not in idempotent


def test_airflow_connection_supplies_bootstrap_and_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_EAST",
        json.dumps(
            {
                "conn_type": "kafka",
                "login": "svc",
                "password": "conn-secret",
                "extra": {"bootstrap.servers": "k1:9092,k2:9092", "security.protocol": "SASL_SSL"},
            }
        ),
    )
    config = parse("""
clusters:
  a: {bootstrap.servers: "127.0.0.1:1"}
  b: {connection_id: kafka_east, client: {sasl.mechanism: SCRAM-SHA-512}}
flows:
  - {source: a, target: b}
""")
    assert config.cluster("b").describe() == "Airflow connection 'kafka_east'"
    settings = client_settings(config.cluster("b"), "consumer")
    assert settings["bootstrap.servers"] == "k1:9092,k2:9092"
    assert (settings["sasl.username"], settings["sasl.password"]) == ("svc", "conn-secret")
    assert settings["security.protocol"] == "SASL_SSL" and settings["sasl.mechanism"] == "SCRAM-SHA-512"


def test_flow_settings_alone_validate_cross_field_rules() -> None:
    with pytest.raises(ValidationError, match="needs a schedule"):
        FlowSettings.model_validate({"mode": "scheduled"})


def test_a_rotated_file_secret_changes_the_clusters_settings_digest_which_never_holds_it(tmp_path: Path) -> None:
    from srm.kafka.clients import settings_digest

    secrets = tmp_path / "secrets.properties"
    secrets.write_text("b.password = 0a1b2c\n")  # hex, as a digest is: it could show in one
    config = parse(SECRET_CONFIG.replace("${env:SRM_TEST_B_PASSWORD}", f"${{file:{secrets}:b.password}}"))
    before = settings_digest(config.cluster("b"))
    assert settings_digest(config.cluster("b")) == before, "the same settings, the same digest"
    secrets.write_text("b.password = 3d4e5f\n")
    after = settings_digest(config.cluster("b"))
    assert after != before and len(after) == 16
    assert "0a1b2c" not in before and "3d4e5f" not in after


def test_a_settings_watch_names_the_clusters_whose_settings_resolve_differently_since_the_last_look(
    tmp_path: Path,
) -> None:
    from srm.kafka.clients import SettingsWatch

    secrets = tmp_path / "secrets.properties"
    secrets.write_text("b.password = before\n")
    config = parse(SECRET_CONFIG.replace("${env:SRM_TEST_B_PASSWORD}", f"${{file:{secrets}:b.password}}"))
    a, b = config.cluster("a"), config.cluster("b")
    watch = SettingsWatch(a, b)
    assert watch.changed(a, b) == []
    secrets.write_text("b.password = after\n")
    assert watch.changed(a, b) == ["b"]
    assert watch.changed(a, b) == ["b"], "until the new clients are built"
    watch.accept()
    assert watch.changed(a, b) == []
    secrets.unlink()  # a secret being rewritten: the current clients stay
    assert watch.changed(a, b) == []
    secrets.write_text("b.password = after\n")
    moved = config.cluster("a").model_copy(update={"bootstrap_servers": "127.0.0.1:9"})
    assert watch.changed(moved, b) == ["a"], "a new bootstrap list"


def issues_of_one_flow_setting(key: str, value: int) -> list[str]:
    """The config issues of one flow a -> b that sets ``key`` on line 7 of test.yaml."""
    text = f"""clusters:
  a: {{bootstrap.servers: "127.0.0.1:1"}}
  b: {{bootstrap.servers: "127.0.0.1:2"}}
flows:
  - source: a
    target: b
    {key}: {value}
"""
    _, issues = parse_config(text, "test.yaml")
    return [str(i) for i in issues]


@pytest.mark.parametrize("value", [0, 5_000, -2])
def test_a_retry_bound_shorter_than_a_broker_restart_is_refused_with_its_line(value: int) -> None:
    issues = issues_of_one_flow_setting("errors.retry.timeout", value)
    wanted = "errors.retry.timeout must be -1 (wait for good) or at least 10000 ms"
    assert any(wanted in i and "test.yaml:7" in i for i in issues), issues


@pytest.mark.parametrize("linger", [100, 250])
def test_a_linger_not_below_the_transaction_interval_is_refused_with_its_line(linger: int) -> None:
    issues = issues_of_one_flow_setting("transaction.linger.ms", linger)
    wanted = f"transaction.linger.ms ({linger}) must be less than transaction.interval.ms (100)"
    assert any(wanted in i and "test.yaml:7" in i for i in issues), issues
    assert FlowSettings.model_validate({"transaction.linger.ms": 99}).transaction_linger_ms == 99


def test_a_merge_key_with_an_override_takes_the_override_and_is_no_duplicate() -> None:
    """``<<: *anchor`` then a key of the anchor: the override wins (YAML's merge-key rule); of two
    merged maps the first listed wins; a key written twice in the mapping itself stays a duplicate."""
    config = parse("""
clusters:
  a: &secure {bootstrap.servers: "127.0.0.1:1", client: {security.protocol: SSL}}
  b: &plain {bootstrap.servers: "127.0.0.1:9", client: {security.protocol: PLAINTEXT}}
  c:
    <<: [*secure, *plain]
    bootstrap.servers: "127.0.0.1:3"
flows:
  - {source: a, target: c}
""")
    c = config.cluster("c")
    assert c.bootstrap_servers == "127.0.0.1:3"
    assert c.client["security.protocol"] == "SSL"
    _, issues = parse_config(
        'clusters:\n  a: {bootstrap.servers: "h:1"}\n  b:\n    bootstrap.servers: "h:2"\n    bootstrap.servers: "h:3"\n'
        "flows:\n  - {source: a, target: b}\n",
        "t.yaml",
    )
    assert [str(i) for i in issues] == [
        "t.yaml:5: clusters.b.bootstrap.servers: duplicate key (first defined on line 4)"
    ]
