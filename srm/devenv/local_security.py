"""A secured local cluster: a throw-away CA, TLS, an authorizer, and SCRAM-SHA-512 or mTLS logins.

``local: {security.protocol: SASL_SSL}`` or ``local: {security.protocol: SSL}`` on a cluster makes
``make kafka-up`` (and the test fixtures) run its broker this way. Everything secret lives under
``<cluster>/security/`` (mode 0700, files 0600):

- ``ca.pem`` / ``ca.key`` — the throw-away CA; clients trust ``ca.pem`` (``ssl.ca.location`` or
  ``ssl.ca.pem``). Its key signs the broker's certificate (SANs 127.0.0.1 and localhost, so
  hostname checks pass) and, for mTLS, client certificates (remove the folder for a new CA).
- ``broker.p12`` — the broker's key and certificate, with a generated store password.

SASL_SSL: SCRAM-SHA-512 is the only mechanism. ``admin.password`` is the SCRAM password of
``admin``, the broker's own super user, written into the metadata log when the storage is formatted
(SCRAM credentials must exist before the broker can authenticate its inter-broker connections).
The cluster's client user (``client.sasl.username`` / ``client.sasl.password``, references
resolved) is created or updated through the Admin API as ``admin`` after every start, so its
password never appears on a command line or in a properties file.

SSL (mTLS): every client presents a certificate the CA signed (``ssl.client.auth=required``); the
principal is the certificate's CN (``User:<CN>``, by ``ssl.principal.mapping.rules``). The client
certificate of ``replicator`` is written as ``client.pem`` / ``client.key``; ``issue_client``
signs one for any other principal. The broker talks to itself with its own certificate
(``User:<host>``).

``StandardAuthorizer`` checks every request; the super users are the broker's own principal, the
client user, and ``ANONYMOUS`` on the loopback-only PLAINTEXT controller listener (the broker's own
connection to its controller).
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

SECURED_PROTOCOLS = ("SASL_SSL", "SSL")
MECHANISM = "SCRAM-SHA-512"
ADMIN = "admin"
# The principal of the client certificate an mTLS local cluster issues (client.pem / client.key).
CERTIFICATE_USER = "replicator"
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
    """The TLS files, the admin login and the server settings of one secured local broker."""

    def __init__(self, home: Path, host: str, protocol: str = "SASL_SSL") -> None:
        if protocol not in SECURED_PROTOCOLS:
            raise LocalClusterError(f"local security.protocol {protocol!r}: expected one of {SECURED_PROTOCOLS}")
        self.folder = home / "security"
        self.host = host
        self.protocol = protocol
        self.ca = self.folder / "ca.pem"
        self.ca_key = self.folder / "ca.key"
        self.keystore = self.folder / "broker.p12"
        self.store_password_file = self.folder / "broker.p12.password"
        self.admin_password_file = self.folder / "admin.password"
        self.client_certificate = self.folder / "client.pem"
        self.client_key = self.folder / "client.key"

    @property
    def mtls(self) -> bool:
        return self.protocol == "SSL"

    def ensure(self) -> None:
        """Create the CA, the broker's keystore and the admin password or client certificate unless they exist."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        if not self.ca.exists() or not self.ca_key.exists():
            self._write_tls()
        if self.mtls and not self.client_certificate.exists():
            certificate, key = self.issue_client(CERTIFICATE_USER)
            write_private(self.client_key, key)
            self.client_certificate.write_text(certificate)
        if not self.mtls and not self.admin_password_file.exists():
            write_private(self.admin_password_file, secrets.token_urlsafe(24))

    def summary(self) -> str:
        """What ``make kafka-up`` prints about the cluster's security."""
        if self.mtls:
            return (
                f", SSL with client certificates (mTLS), CA {self.ca}, client certificate of "
                f"User:{CERTIFICATE_USER} {self.client_certificate} (key {self.client_key})"
            )
        return f", SASL_SSL/SCRAM-SHA-512, CA {self.ca}"

    @property
    def admin_password(self) -> str:
        return self.admin_password_file.read_text().strip()

    def server_properties(self, port: int, controller_port: int, client_user: str) -> dict[str, str]:
        host, listener = self.host, self.protocol
        props = {
            "listeners": f"{listener}://{host}:{port},CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"{listener}://{host}:{port}",
            "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": listener,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.keystore),
            "ssl.keystore.password": self.store_password_file.read_text().strip(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        }
        if self.mtls:
            props |= {
                "ssl.client.auth": "required",
                # User:<CN> rather than the whole distinguished name, as most mTLS deployments map it.
                "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
                "super.users": f"User:{host};User:ANONYMOUS;User:{client_user}",
            }
            return props
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN}" password="{self.admin_password}";'
        )
        return props | {
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": jaas,
            "super.users": f"User:{ADMIN};User:ANONYMOUS;User:{client_user}",
        }

    def format_arguments(self) -> list[str]:
        """StorageTool arguments that put the admin's SCRAM credential into the metadata log."""
        return [] if self.mtls else ["--add-scram", f"{MECHANISM}=[name={ADMIN},password={self.admin_password}]"]

    def admin_settings(self) -> dict[str, Any]:
        """librdkafka settings that log in as the broker's super user (mTLS: the broker's own certificate)."""
        if self.mtls:
            return {
                "security.protocol": "SSL",
                "ssl.ca.location": str(self.ca),
                "ssl.keystore.location": str(self.keystore),
                "ssl.keystore.password": self.store_password_file.read_text().strip(),
            }
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

    def issue_client(self, user: str) -> tuple[str, str]:
        """A client certificate (PEM, with the CA after it) and its unencrypted key (PEM) for ``User:<user>``."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        ca_cert = x509.load_pem_x509_certificate(self.ca.read_bytes())
        ca_key = serialization.load_pem_private_key(self.ca_key.read_bytes(), None)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)])
        certificate = (
            _certificate(subject, ca_cert.subject, key.public_key(), datetime.datetime.now(datetime.UTC))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        chain = certificate.public_bytes(serialization.Encoding.PEM) + self.ca.read_bytes()
        pem_key = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return chain.decode(), pem_key.decode()

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
        pem_ca_key = ca_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        write_private(self.ca_key, pem_ca_key)
        self.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        self.client_certificate.unlink(missing_ok=True)  # signed by the CA this replaces


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
