"""Which client settings are secret: one rule, from librdkafka's and the Java clients' own lists,
a name pattern for keys they do not know, and references; `srm-control validate` shows none of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from srm.config import parse_config
from srm.config.secrets import (
    clear_secrets,
    is_secret,
    is_secret_key,
)
from srm.control.cli import main

SCOPES = ("", "producer.", "consumer.", "admin.", "client.")
MASK = "**********"

# Written out, not imported from the module, so a property dropped from its lists fails here.
# Secret keys librdkafka accepts as settings (ssl_key is its internal one, refused as a setting):
RDKAFKA_SECRET = {"ssl.key.password", "ssl.key.pem", "ssl.keystore.password", "sasl.password", "ssl_key"}
RDKAFKA_SECRET |= {f"sasl.oauthbearer.{k}" for k in ("config", "client.secret", "client.credentials.client.secret")}
RDKAFKA_SECRET |= {f"sasl.oauthbearer.assertion.private.key.{k}" for k in ("passphrase", "pem")}
# Secret keys only the Java clients know (validate refuses them, by name and without the value):
JAVA_ONLY_SECRET = {"ssl.keystore.key", "ssl.truststore.password", "sasl.jaas.config"}
SECRET = RDKAFKA_SECRET | JAVA_ONLY_SECRET
# Flagged sensitive upstream, shown here: an identity, certificates, paths.
SHOWN = {"sasl.username", "ssl.ca.pem", "ssl.keystore.certificate.chain", "ssl.truststore.certificates"}
SHOWN |= {"ssl.key.location", "sasl.oauthbearer.assertion.private.key.file"}
PLAIN = (
    *sorted(SHOWN),
    "bootstrap.servers",
    "ssl.ca.location",
    "ssl.endpoint.identification.algorithm",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.keystore.location",
    "security.protocol",
    "sasl.mechanism",
    "client.id",
    "sasl.oauthbearer.client.id",
)


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("key", sorted(SECRET))
def test_every_sensitive_client_property_is_secret(key: str, scope: str) -> None:
    assert is_secret_key(scope + key)
    assert is_secret_key((scope + key).upper())
    assert is_secret(scope + key, "plain")


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("key", PLAIN)
def test_identities_certificates_paths_and_switches_are_not_secret(key: str, scope: str) -> None:
    assert not is_secret_key(scope + key)
    assert not is_secret(scope + key, "plain-value")


@pytest.mark.parametrize(
    "key",
    [
        "sasl.oauthbearer.some.future.passphrase",
        "basic.auth.user.info",
        "schema.registry.basic.auth.user.info",
        "sasl.aws.secret.access.key",
        "sasl.oauthbearer.access.token",
        "my.private.key.material",
        "west.consumer.ssl.keystore.key",
        "sasl.login.credentials",
    ],
)
def test_unknown_keys_that_look_secret_are(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "value",
    ["${env:X}", "${file:p:k}", "${file:/etc/kafka/secrets.properties:password}", "https://${env:IDP_HOST}/token"],
)
@pytest.mark.parametrize("key", ["bootstrap.servers", "sasl.username", "consumer.client.id", "ssl.ca.location"])
def test_a_reference_value_is_secret_whatever_its_key(key: str, value: str) -> None:
    assert not is_secret_key(key)
    assert is_secret(key, value)
    assert not is_secret(key, value.replace("${", "{"))


def test_a_value_held_as_secretstr_stays_secret() -> None:
    assert is_secret("bootstrap.servers", SecretStr("h:1"))


def test_clear_secrets_lists_secret_keys_with_plain_values_only(tmp_path: Path) -> None:
    config, issues = parse_config(
        """
clusters:
  a:
    bootstrap.servers: "h:1"
    client:
      sasl.username: svc
      ssl.key.location: /etc/kafka/client.key
      ssl.ca.location: "${env:CA_PATH}"
      sasl.oauthbearer.assertion.private.key.passphrase: plain-passphrase
      ssl.key.password: "${env:KEY_PASSWORD}"
    consumer: {sasl.password: "pre-${env:P}"}
  b: {bootstrap.servers: "h:2"}
flows:
  - {source: a, target: b}
""",
        "t.yaml",
        check_clients=False,
    )
    assert config is not None and not issues
    assert clear_secrets(config.cluster("a")) == [
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "consumer.sasl.password",
    ]


# --- srm-control validate shows no secret value, in text or JSON -------------------------------

# Every secret-looking key librdkafka accepts as a string (validate asks librdkafka about each
# setting): its secret ones, and its two properties only the name pattern makes secret.
ACCEPTED = sorted(
    RDKAFKA_SECRET - {"ssl_key"}
    | {"sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.client.credentials.client.id"}
)
# Keys librdkafka refuses (the Java clients' own, its internal ssl_key): validate fails on them
# and must still print no value.
REFUSED = sorted(JAVA_ONLY_SECRET | {"ssl_key"})
SHOWN_BY_LIBRDKAFKA = {"ssl.ca.pem": "ca-cert-text", "ssl.key.location": "/etc/kafka/client.key"}


def _config(tmp_path: Path, keys: list[str]) -> tuple[Path, dict[str, str]]:
    values: dict[str, str] = {}
    lines = ["clusters:", "  a:", '    bootstrap.servers: "127.0.0.1:1"']
    for block in ("client", "producer", "consumer", "admin"):
        lines.append(f"    {block}:")
        lines.append("      sasl.username: svc-user")
        lines += [f"      {key}: {value}" for key, value in SHOWN_BY_LIBRDKAFKA.items()]
        for key in keys:
            value = f"s3cr3t-{len(values) + 1:03d}"
            values[f"{block}.{key}"] = value
            lines.append(f'      {key}: "{value}"')
    lines += ['  b: {bootstrap.servers: "127.0.0.1:2"}', "flows:", "  - {source: a, target: b}", ""]
    path = tmp_path / "srm.yaml"
    path.write_text("\n".join(lines))
    return path, values


def _no_value_in(text: str, values: dict[str, str]) -> None:
    assert not re.search(r"s3cr3t-\d", text), text
    for value in values.values():
        assert value not in text


def test_validate_masks_every_secret_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, values = _config(tmp_path, ACCEPTED)
    assert all(is_secret_key(key) for key in ACCEPTED)

    assert main(["validate", "--config", str(config)]) == 0
    captured = capsys.readouterr()
    _no_value_in(captured.out + captured.err, values)
    cluster_line = next(line for line in captured.out.splitlines() if line.strip().startswith("a "))
    for key in ACCEPTED:
        assert f" {key}={MASK}" in cluster_line or f"secrets: {key}={MASK}" in cluster_line, key
    assert cluster_line.count(f"={MASK}") == len(values)
    assert "sasl.username" not in cluster_line  # shown, not listed among the secrets

    assert main(["validate", "--json", "--config", str(config)]) == 0
    captured = capsys.readouterr()
    _no_value_in(captured.out + captured.err, values)
    cluster = json.loads(captured.out)["clusters"][0]
    for block in ("client", "producer", "consumer", "admin"):
        assert cluster[block] == {"sasl.username": "svc-user", **SHOWN_BY_LIBRDKAFKA, **dict.fromkeys(ACCEPTED, MASK)}


def test_validate_refusing_java_only_keys_shows_no_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, values = _config(tmp_path, REFUSED)
    assert all(is_secret_key(key) for key in REFUSED)
    for args in (["validate"], ["validate", "--json"]):
        assert main([*args, "--config", str(config)]) == 1
        captured = capsys.readouterr()
        _no_value_in(captured.out + captured.err, values)
        for key in REFUSED:
            assert f"clusters.a.client.{key}: librdkafka rejects" in captured.err


def test_validate_masks_a_reference_under_any_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "srm.yaml"
    config.write_text(
        "clusters:\n  a:\n    bootstrap.servers: 'h:1'\n    client:\n"
        "      sasl.username: '${env:KAFKA_USER}'\n      ssl.ca.location: '${file:/etc/k.properties:ca}'\n"
        "      client.id: srm\n  b: {bootstrap.servers: 'h:2'}\nflows:\n  - {source: a, target: b}\n"
    )
    assert main(["validate", "--json", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["clusters"][0]["client"] == {
        "sasl.username": MASK,
        "ssl.ca.location": MASK,
        "client.id": "srm",
    }
    assert "KAFKA_USER" not in out and "k.properties" not in out


def test_airflow_masks_what_a_reference_resolves_to(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from srm.kafka.clients import client_settings

    masked: dict[str, str] = {}
    log = types.ModuleType("airflow.sdk.log")
    log.mask_secret = lambda value, name: masked.__setitem__(name, value)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "airflow.sdk", types.ModuleType("airflow.sdk"))
    monkeypatch.setitem(sys.modules, "airflow.sdk.log", log)
    monkeypatch.setenv("SRM_TEST_USER", "svc-from-env")
    config, issues = parse_config(
        "clusters:\n  a:\n    bootstrap.servers: 'h:1'\n    client: {sasl.username: '${env:SRM_TEST_USER}', "
        "sasl.password: pw-1, client.id: srm}\n  b: {bootstrap.servers: 'h:2'}\nflows:\n  - {source: a, target: b}\n",
        "t.yaml",
        check_clients=False,
    )
    assert config is not None and not issues
    client_settings(config.cluster("a"), "admin")
    assert masked == {"sasl.username": "svc-from-env", "sasl.password": "pw-1"}
