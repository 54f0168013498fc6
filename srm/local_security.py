"""A secured local cluster: SASL_SSL with SCRAM-SHA-512, a throw-away CA and an authorizer.

``local: {security.protocol: SASL_SSL}`` on a cluster makes ``make kafka-up`` (and the test
fixtures) run its broker this way. Everything secret lives under ``<cluster>/security/`` (mode 0700):

- ``ca.pem`` — the throw-away CA's certificate; clients trust it (``ssl.ca.location``/``ssl.ca.pem``).
  Its key signs the broker's certificate (SANs 127.0.0.1 and localhost, so hostname checks pass)
  and is then dropped: nothing else is ever signed (remove the folder for a new CA).
- ``broker.p12`` — the broker's key and certificate, with a generated store password.
- ``admin.password`` — the SCRAM password of ``admin``, the broker's own super user. It is
  written into the metadata log when the storage is formatted (SCRAM credentials must exist
  before the broker can authenticate its own inter-broker connections).

The cluster's client user (``client.sasl.username`` / ``client.sasl.password``, references
resolved) is created or updated through the Admin API as ``admin`` after every start, so its
password never appears on a command line or in a properties file. ``StandardAuthorizer`` checks
every request; the super users are ``admin``, the client user, and ``ANONYMOUS`` on the
loopback-only PLAINTEXT controller listener (the broker's own connection to its controller).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from srm.config.model import Cluster
from srm.config.secrets import resolve_references
from srm.errors import LocalClusterError

MECHANISM = "SCRAM-SHA-512"
ADMIN = "admin"
# Long enough for a development machine; the files are recreated when the folder is removed.
CERT_DAYS = 3650
# SCRAM iterations: Kafka's minimum is 4096; more only slows every login of a dev cluster.
SCRAM_ITERATIONS = 8192


def client_login(cluster: Cluster) -> tuple[str, str]:
    """The SCRAM user and password of ``cluster``'s client settings (references resolved)."""
    return client_setting(cluster, "sasl.username"), client_setting(cluster, "sasl.password")


def client_setting(cluster: Cluster, key: str) -> str:
    value = cluster.client.get(key)
    if value is None:
        raise LocalClusterError(
            f"cluster {cluster.alias}: a SASL_SSL local cluster needs client.{key} (its client user)"
        )
    plain = value.get_secret_value() if isinstance(value, SecretStr) else value
    return resolve_references(plain, f"cluster {cluster.alias} client.{key}")


class BrokerSecurity:
    """The TLS files, the admin login and the server settings of one SASL_SSL local broker."""

    def __init__(self, home: Path, host: str) -> None:
        self.folder = home / "security"
        self.host = host
        self.ca = self.folder / "ca.pem"
        self.keystore = self.folder / "broker.p12"
        self.store_password_file = self.folder / "broker.p12.password"
        self.admin_password_file = self.folder / "admin.password"

    def ensure(self) -> None:
        """Create the CA, the broker's keystore and the admin password unless they exist."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        if not self.ca.exists():
            self._write_tls()
        if not self.admin_password_file.exists():
            write_private(self.admin_password_file, secrets.token_urlsafe(24))

    @property
    def admin_password(self) -> str:
        return self.admin_password_file.read_text().strip()

    def server_properties(self, port: int, controller_port: int, client_user: str) -> dict[str, str]:
        host = self.host
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN}" password="{self.admin_password}";'
        )
        return {
            "listeners": f"SASL_SSL://{host}:{port},CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"SASL_SSL://{host}:{port}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": jaas,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.keystore),
            "ssl.keystore.password": self.store_password_file.read_text().strip(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN};User:ANONYMOUS;User:{client_user}",
        }

    def format_arguments(self) -> list[str]:
        """StorageTool arguments that put the admin's SCRAM credential into the metadata log."""
        return ["--add-scram", f"{MECHANISM}=[name={ADMIN},password={self.admin_password}]"]

    def admin_settings(self) -> dict[str, Any]:
        """librdkafka settings that log in as the broker's super user."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": ADMIN,
            "sasl.password": self.admin_password,
            "ssl.ca.location": str(self.ca),
        }

    def upsert_user(self, bootstrap: str, user: str, password: str, alias: str) -> None:
        """Create ``user`` or set its password, as ``admin``."""
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        admin = AdminClient({"bootstrap.servers": bootstrap, **self.admin_settings()})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
        upsertion = UserScramCredentialUpsertion(user, info, password.encode())
        for future in admin.alter_user_scram_credentials([upsertion], request_timeout=30).values():
            try:
                future.result()
            except Exception as exc:  # librdkafka's KafkaException, or a timeout
                raise LocalClusterError(f"cluster {alias}: creating SCRAM user {user!r} failed: {exc}") from None

    def _write_tls(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import pkcs12
        from cryptography.x509.oid import NameOID

        now = datetime.datetime.now(datetime.UTC)
        ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "srm local CA")])
        ca_cert = (
            _certificate(ca_name, ca_name, ca_key.public_key(), now)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        if self.host not in ("localhost", "127.0.0.1"):
            names.append(x509.DNSName(self.host))
        broker_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.host)])
        broker_cert = (
            _certificate(broker_name, ca_name, key.public_key(), now)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        store_password = secrets.token_urlsafe(18)
        keystore = pkcs12.serialize_key_and_certificates(
            b"broker", key, broker_cert, [ca_cert], serialization.BestAvailableEncryption(store_password.encode())
        )
        write_private(self.store_password_file, store_password)
        write_private(self.keystore, keystore)
        self.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))


def _certificate(subject: Any, issuer: Any, public_key: Any, now: datetime.datetime) -> Any:
    from cryptography import x509

    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
    )


def write_private(path: Path, content: str | bytes) -> None:
    """Write ``path`` readable by this user only (mode 0600 from its creation)."""
    data = content.encode() if isinstance(content, str) else content
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)
