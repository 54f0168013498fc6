"""Java Kafka client settings (what MM2 users have) -> librdkafka settings (what confluent-kafka takes).

Secrets are never carried over: they become ``${env:<SCOPE>_<KEY>}`` references, and a warning
names the variable to set. What librdkafka cannot do (JKS stores) is reported, not guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from srm.config.librdkafka import setting_problem
from srm.config.properties import Property
from srm.config.secrets import REFERENCE, is_secret_key

Warn = Callable[[Property, str], None]

# Same name and meaning in the Java client and librdkafka.
SAME_NAME = {
    "security.protocol",
    "sasl.mechanism",
    "client.id",
    "sasl.kerberos.service.name",
    "ssl.cipher.suites",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.secret",
}
CLIENT_PREFIXES = ("security.", "sasl.", "ssl.", "client.id")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


class ClientMapper:
    def __init__(self, scope: str, warn: Warn) -> None:
        self.scope = scope
        self.warn = warn

    @staticmethod
    def is_client_setting(name: str) -> bool:
        return name.startswith(CLIENT_PREFIXES)

    def map(self, name: str, prop: Property, out: dict[str, Any]) -> None:
        if name == "sasl.jaas.config":
            self._jaas(prop, out)
        elif name == "ssl.endpoint.identification.algorithm":
            out[name] = prop.value or "none"  # Java: empty string disables hostname checks
        elif name == "ssl.truststore.location":
            self._truststore(prop, out)
        elif name == "ssl.keystore.location":
            self._keystore(prop, out)
        elif name in ("ssl.keystore.password", "ssl.key.password"):
            out[name] = self._secret(name, prop)
        elif name in ("ssl.truststore.password", "ssl.truststore.type", "ssl.keystore.type"):
            self.warn(prop, "not needed by librdkafka (PEM CA file / PKCS#12 keystore); not mapped")
        elif name in SAME_NAME or not self.is_client_setting(name):
            self._checked(name, prop, out)
        else:
            self.warn(prop, "no librdkafka equivalent this project knows; not mapped")

    def _checked(self, name: str, prop: Property, out: dict[str, Any]) -> None:
        value = self._secret(name, prop) if is_secret_key(name) else prop.value
        problem = setting_problem(name, value)
        if problem:
            self.warn(prop, f"{problem}; not mapped")
        else:
            out[name] = value

    def _secret(self, name: str, prop: Property) -> str:
        if REFERENCE.fullmatch(prop.value):
            return prop.value  # ${file:...}/${env:...} already keeps the secret out of the file
        var = re.sub(r"[^A-Z0-9]+", "_", f"{self.scope}_{name}".upper())
        self.warn(prop, f"secret not copied; set environment variable {var} (the YAML reads ${{env:{var}}})")
        return f"${{env:{var}}}"

    def _jaas(self, prop: Property, out: dict[str, Any]) -> None:
        if "PlainLoginModule" not in prop.value and "ScramLoginModule" not in prop.value:
            self.warn(
                prop,
                "only PLAIN and SCRAM JAAS logins map to librdkafka (sasl.username/"
                "sasl.password); configure this login with librdkafka's sasl.* settings",
            )
            return
        options = dict(_JAAS_OPTION.findall(prop.value))
        if "username" in options:
            out["sasl.username"] = options["username"]
        if "password" in options:
            out["sasl.password"] = self._secret("sasl.password", Property(prop.key, options["password"], prop.line))

    def _truststore(self, prop: Property, out: dict[str, Any]) -> None:
        if prop.value.lower().endswith((".pem", ".crt", ".cer")):
            out["ssl.ca.location"] = prop.value
        else:
            self.warn(
                prop,
                "librdkafka cannot read JKS/PKCS#12 truststores: export the CA "
                "certificates to PEM and set client.ssl.ca.location",
            )

    def _keystore(self, prop: Property, out: dict[str, Any]) -> None:
        if prop.value.lower().endswith((".p12", ".pfx")):
            out["ssl.keystore.location"] = prop.value
        else:
            self.warn(
                prop,
                "librdkafka reads PKCS#12 keystores, not JKS: convert it "
                "(keytool -importkeystore -deststoretype PKCS12) and set client.ssl.keystore.location",
            )
