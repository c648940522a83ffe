"""A throw-away CA and a server certificate for 127.0.0.1, generated once per process."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tau_testing.sim.cluster import SimCluster

_LOCK = threading.Lock()
_MATERIAL: dict[str, Any] = {}


def _generate() -> dict[str, Any]:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tau-sim-ca")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tau-sim-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.DNSName("kubernetes"), x509.DNSName("kubernetes.default"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    directory = Path(tempfile.mkdtemp(prefix="tau-sim-tls-"))
    os.chmod(directory, 0o700)
    pem = serialization.Encoding.PEM
    ca_pem = ca_cert.public_bytes(pem)
    (directory / "ca.crt").write_bytes(ca_pem)
    (directory / "server.crt").write_bytes(cert.public_bytes(pem))
    key_path = directory / "server.key"
    fd = os.open(str(key_path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return {"dir": directory, "ca": ca_pem}


def make_certificates(cluster: SimCluster) -> dict[str, Any]:
    """uvicorn SSL options; sets ``cluster.ca_path`` and ``cluster.ca_data``."""
    with _LOCK:
        if not _MATERIAL:
            _MATERIAL.update(_generate())
    directory: Path = _MATERIAL["dir"]
    cluster.ca_path = directory / "ca.crt"
    cluster.ca_data = _MATERIAL["ca"]
    return {"ssl_certfile": str(directory / "server.crt"), "ssl_keyfile": str(directory / "server.key")}
