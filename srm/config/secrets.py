"""Secrets in client settings: which settings are secret, and ``${env:NAME}`` / ``${file:PATH:KEY}`` references.

One rule decides what is secret (:func:`is_secret`): a setting is secret when its key is
(:func:`is_secret_key`) or when its value holds a reference. A secret is held as ``pydantic.SecretStr``
from the moment the YAML is read, so printing the config, a summary, a log line or an API response
shows ``**********``. References are resolved only when a client is built, and an unresolvable one
names the cluster and key, never a value.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from srm.config.properties import properties_value
from srm.errors import SrmError

if TYPE_CHECKING:
    from srm.config.model import Cluster

# librdkafka's sensitive properties: those flagged _RK_SENSITIVE in src/rdkafka_conf.c (v2.15/2.16), which it
# redacts from its own configuration dumps (CONFIGURATION.md does not mark them).
# sasl.oauthbearer.client.credentials.client.secret is librdkafka's alias of sasl.oauthbearer.client.secret.
LIBRDKAFKA_SENSITIVE = frozenset(
    {
        "ssl.key.location",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl_key",
        "ssl.ca.pem",
        "ssl.keystore.password",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.assertion.private.key.file",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.assertion.private.key.pem",
    }
)
# The Java clients' ConfigDef.Type.PASSWORD properties (their values print as [hidden]): those of
# SslConfigs.addClientSslSupport and SaslConfigs.addClientSaslSupport, Apache Kafka 4.1 (KIP-1139 added the
# two OAuth ones). *.private.key.file, sasl.oauthbearer.assertion.file and ...client.credentials.client.id
# are Type.STRING there.
JAVA_CLIENT_PASSWORD = frozenset(
    {
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.assertion.private.key.passphrase",
    }
)
# Flagged above, yet nothing in them opens a door, and they are shown: the user a client logs in as,
# certificates (public by design; a job ships ssl.ca.pem to Spark executors as PEM text), and paths (the
# secret is what the file holds, guarded by its permissions; the path must reach executors as it is).
# Secret all the same when the value is a reference (is_secret).
NOT_SECRET = frozenset(
    {
        "sasl.username",
        "ssl.ca.pem",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "ssl.key.location",
        "sasl.oauthbearer.assertion.private.key.file",
    }
)
SECRET_KEYS = (LIBRDKAFKA_SENSITIVE | JAVA_CLIENT_PASSWORD) - NOT_SECRET
# Keys neither list knows (newer client versions, serializer and Schema Registry settings such as
# basic.auth.user.info): secret when the name says so.
_SECRET_PATTERN = re.compile(
    r"password|passphrase|secret|jaas|token|credential|private\.key|(^|\.)key\.pem$|(^|\.)ssl[._]key$|user\.info"
)
REFERENCE = re.compile(r"\$\{(?P<provider>[a-z]+):(?P<arg>[^}]*)\}")
_PROVIDERS = ("env", "file")


def is_secret_key(key: str) -> bool:
    """True for client settings whose values must never be shown, whatever the value.

    A key may carry a prefix: a scope (``producer.``, ``consumer.``, ``admin.``, ``client.``) or an
    MM2 cluster alias (``west.consumer.``); ``consumer.ssl.keystore.key`` is secret as
    ``ssl.keystore.key`` is.
    """
    name = key.strip().lower()
    if _named(name, NOT_SECRET):
        return False
    return _named(name, SECRET_KEYS) or bool(_SECRET_PATTERN.search(name))


def _named(name: str, keys: frozenset[str]) -> bool:
    return any(name == known or name.endswith("." + known) for known in keys)


def is_secret(key: str, value: object) -> bool:
    """The one rule: true when a client setting ``key: value`` must be shown masked.

    Secret are the keys of :func:`is_secret_key` and, whatever its key, a value holding a
    ``${env:NAME}`` / ``${file:PATH:KEY}`` reference (or a ``${provider:...}`` this project does
    not know yet): what it resolves to is kept outside the YAML for a reason. A value already held
    as ``SecretStr`` stays secret.
    """
    if isinstance(value, SecretStr) or is_secret_key(key):
        return True
    return isinstance(value, str) and REFERENCE.search(value) is not None


def clear_secrets(cluster: Cluster) -> list[str]:
    """Secret client settings of ``cluster`` written as values, not only as references
    (``consumer.sasl.password``, ...): whoever builds its clients receives these values.

    Only the keys of :func:`is_secret_key` can hold one: a setting that :func:`is_secret` calls
    secret for its reference alone has nothing secret left once the references are taken out.
    """
    found = []
    for scope in ("client", "producer", "consumer", "admin"):
        for key, value in getattr(cluster, scope).items():
            plain = value.get_secret_value() if isinstance(value, SecretStr) else value
            if is_secret_key(key) and REFERENCE.sub("", plain).strip():
                found.append(key if scope == "client" else f"{scope}.{key}")
    return found


def check_references(value: str) -> str | None:
    """A problem with the ``${...}`` references in ``value``, or None when they are well formed."""
    for match in REFERENCE.finditer(value):
        provider, arg = match["provider"], match["arg"]
        if provider not in _PROVIDERS:
            return f"unknown reference provider {provider!r} in ${{{provider}:...}} (use env or file)"
        if provider == "env" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", arg):
            return f"${{env:{arg}}} does not name an environment variable"
        if provider == "file" and ":" not in arg:
            return "${file:...} needs a path and a key: ${file:/etc/kafka/secrets.properties:password}"
    return None


def resolve_references(value: str, where: str) -> str:
    """Replace every reference in ``value``; ``where`` (cluster and key) names a failure."""

    def replace(match: re.Match[str]) -> str:
        provider, arg = match["provider"], match["arg"]
        if provider == "env":
            if arg not in os.environ:
                raise SrmError(f"{where}: environment variable {arg} is not set")
            return os.environ[arg]
        path, _, key = arg.rpartition(":")
        return _read_properties_key(Path(path), key, where)

    return REFERENCE.sub(replace, value)


def _read_properties_key(path: Path, key: str, where: str) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SrmError(f"{where}: cannot read secrets file {path}: {exc.strerror}") from None
    value = properties_value(text, key)
    if value is None:
        raise SrmError(f"{where}: secrets file {path} has no key {key!r}")
    return value
