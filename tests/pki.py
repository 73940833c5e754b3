"""Certificates and bcrypt hashes for the `ktui export --web-config` tests,
made with the openssl command and pyca's bcrypt (at the lowest cost, 4:
a check takes a millisecond instead of ~70)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import bcrypt

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def openssl(*args: str) -> None:
    assert shutil.which("openssl"), "the openssl command is missing (Debian: openssl)"
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def self_signed(directory: Path, name: str, cn: str = "localhost", san: str = "IP:127.0.0.1") -> tuple[Path, Path]:
    """(certificate, key) of a self-signed certificate for 127.0.0.1."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    openssl("req", "-x509", *EC, "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", f"/CN={cn}", "-addext", f"subjectAltName={san}")
    return cert, key


def signed_by(ca: tuple[Path, Path], directory: Path, name: str, cn: str) -> tuple[Path, Path]:
    """(certificate, key) of a client certificate the CA `ca` signs."""
    cert, key, csr, ext = (directory / f"{name}.{x}" for x in ("crt", "key", "csr", "ext"))
    openssl("req", "-new", *EC, "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={cn}")
    ext.write_text("extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
            "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return cert, key


def encrypted_key(directory: Path) -> Path:
    key = directory / "encrypted.key"
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes256",
            "-pass", "pass:secret", "-out", str(key))
    return key


def bcrypt_hash(password: str, rounds: int = 4) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=rounds)).decode()


@dataclass(frozen=True)
class Pki:
    """One directory of files: a server certificate and a second one (a
    rotation), a client CA and a client certificate it signs, a client
    certificate it does not sign, an encrypted key."""

    dir: Path
    server: tuple[Path, Path]
    server2: tuple[Path, Path]
    ca: tuple[Path, Path]
    client: tuple[Path, Path]
    stranger: tuple[Path, Path]
    encrypted: Path


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = self_signed(directory, "ca", cn="ktui test CA", san="DNS:ca.invalid")
    return Pki(directory, self_signed(directory, "server"), self_signed(directory, "server2"), ca,
               signed_by(ca, directory, "client", "prometheus"),
               self_signed(directory, "stranger", cn="stranger", san="DNS:stranger.invalid"),
               encrypted_key(directory))
