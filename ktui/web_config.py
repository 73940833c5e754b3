"""`ktui export --web-config FILE`: TLS and basic auth, read from a file in
the format of Prometheus' exporter toolkit (the `--web.config.file` of
node_exporter and the other Go exporters), the subset Python's ssl can
honour:

    tls_server_config:
      cert_file: server.crt              # relative paths: from this file's directory
      key_file: server.key
      client_ca_file: clients-ca.crt     # with client_auth_type below
      client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
      min_version: TLS12                 # TLS12 (the default) or TLS13
      max_version: TLS13
    basic_auth_users:
      prometheus: $2y$10$...             # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\\n')

Every other key of the toolkit is refused by name, at file:line:col, with
what to do instead (REFUSED); an unknown key likewise. A file made for
node_exporter either works here or says what it lacks. Everything is
checked at load: the hashes are bcrypt hashes, the certificate and key load
together, the client CA loads. A reload (SIGHUP) that fails keeps the
running config (exporter.py).

Reading reuses the probe sets' YAML reader (lang.yamlnodes): node tree only,
aliases refused, size and depth bounded, every error one line, located.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import socket
import ssl
import struct
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from yaml.nodes import MappingNode, Node, ScalarNode

from ktui.lang.model import KtuiError, ProbeSetError
from ktui.lang.yamlnodes import BOOL, INT, MAP, STR, NodeReader, compose, decode_utf8, describe, read_bounded

WHAT = "a web config"
TOP_KEYS = ("tls_server_config", "basic_auth_users", "http_server_config")
TLS_KEYS = ("cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version")
HTTP_KEYS = ("http2",)
# The toolkit's keys ktui does not do, and what to do instead.
REFUSED = {
    "rate_limit": "not supported by ktui export: rate-limit in a firewall or a reverse proxy",
    "cert": "inline certificates are not supported: put the PEM text in a file and name it in cert_file",
    "key": "inline keys are not supported: put the PEM text in a file and name it in key_file",
    "client_ca": "an inline client CA is not supported: put the PEM text in a file and name it in client_ca_file",
    "cipher_suites": "Go's cipher suite names are not supported: ktui uses OpenSSL's default ciphers "
                     "(TLS 1.3's suites are fixed anyway); remove the key",
    "curve_preferences": "Go's curve names are not supported: ktui uses OpenSSL's default groups; remove the key",
    "prefer_server_cipher_suites": "not supported (Go itself ignores it since Go 1.18); remove the key",
    "client_allowed_sans": "not supported: ktui cannot match client certificate SANs; "
                           "give a client_ca_file whose CA signs only the clients to let in",
    "headers": "extra response headers are not supported by ktui export",
}
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
CLIENT_AUTH_REFUSED = {
    "RequestClientCert": "Python's ssl cannot ask for a client certificate without verifying it; "
                         "use VerifyClientCertIfGiven with client_ca_file",
    "RequireAnyClientCert": "Python's ssl cannot require a client certificate without verifying it; "
                            "use RequireAndVerifyClientCert with client_ca_file",
    "RequireClientCert": "Python's ssl cannot require a client certificate without verifying it; "
                         "use RequireAndVerifyClientCert with client_ca_file",
}
VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
VERSION_TEXT = {"TLS10": "TLS 1.0", "TLS11": "TLS 1.1", "TLS12": "TLS 1.2", "TLS13": "TLS 1.3"}
# $2a$, $2b$ or $2y$ (htpasswd's), a cost of 04..31, then 22 salt and 31 hash characters
BCRYPT_HASH = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}\Z")
BCRYPT_MAX_PASSWORD = 72  # bcrypt reads no further; Go's (the toolkit's) check truncates there too
AUTH_CACHE_SIZE = 100  # (user, password, hash) triples that passed, kept so a scrape costs no bcrypt
HANDSHAKE_TIMEOUT = 10.0  # seconds a connection may take to say hello, finish the handshake, send a request
NOT_TLS_REPLY = (b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 b"Connection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")


class WebConfigError(KtuiError):
    """A web config file is invalid."""


# ---------------------------------------------------------------- basic auth


def basic_credentials(header: str | None) -> tuple[bytes, bytes] | None:
    """(user, password) from an `Authorization: Basic ...` header, or None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = raw.partition(b":")
    return (user, password) if colon else None


class BasicAuth:
    """Checks credentials against the bcrypt hashes.

    A bcrypt check costs ~70 ms at cost 10, so the (user, password, hash)
    triples that passed are remembered (at most AUTH_CACHE_SIZE, the least
    recently used go first), keyed by an HMAC under a key made at start, so
    no password is kept and a lookup reveals nothing an attacker could time.
    A failed check is not remembered: each wrong guess costs its bcrypt.
    An unknown user costs a bcrypt check too, against a decoy hash of the
    highest cost in the file, so the time of a 401 does not tell which user
    names exist. The checks run one at a time (as the toolkit does): a flood
    of wrong passwords takes one CPU from the traced workload, not all; a
    scraper whose credentials are cached never waits for it."""

    def __init__(self, users: dict[bytes, bytes]) -> None:
        self._users = dict(users)
        cost = max(int(stored[4:6]) for stored in users.values())
        self._decoy = b"$2b$%02d$" % cost + b"." * 53  # a well-formed hash no password matches
        self._key = os.urandom(32)
        self._passed: OrderedDict[bytes, None] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._bcrypt_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._users)

    def check(self, header: str | None) -> bool:
        credentials = basic_credentials(header)
        if credentials is None:
            return False
        user, password = credentials
        stored = self._users.get(user)
        if stored is None:
            self._bcrypt(password, self._decoy)  # the same time as a wrong password
            return False
        key = hmac.new(self._key, b"".join(struct.pack(">I", len(part)) + part
                                           for part in (user, password, stored)), hashlib.sha256).digest()
        with self._cache_lock:
            if key in self._passed:
                self._passed.move_to_end(key)
                return True
        if not self._bcrypt(password, stored):
            return False
        with self._cache_lock:
            self._passed[key] = None
            while len(self._passed) > AUTH_CACHE_SIZE:
                self._passed.popitem(last=False)
        return True

    def _bcrypt(self, password: bytes, stored: bytes) -> bool:
        import bcrypt

        with self._bcrypt_lock:
            try:
                # bcrypt.checkpw compares in constant time
                return bcrypt.checkpw(password[:BCRYPT_MAX_PASSWORD], stored)
            except ValueError:  # the library refusing a hash: never a pass
                return False


# ---------------------------------------------------------------- the config


@dataclass(frozen=True)
class WebConfig:
    """What `--web-config FILE` asks for: `tls` (None: plain HTTP), `auth`
    (None: no basic auth) and a one-line summary for the log."""

    source: str
    tls: ssl.SSLContext | None
    auth: BasicAuth | None
    summary: str

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def authorized(self, header: str | None) -> bool:
        """Whether a request with this Authorization header may be answered."""
        return self.auth is None or self.auth.check(header)

    def handshake(self, sock: socket.socket, peer: str) -> ssl.SSLSocket | None:
        """The TLS connection over an accepted socket, or None (closed, plain
        HTTP, a failed or timed-out handshake; logged in one line). Called in
        the connection's own thread: a client that connects and says nothing
        holds its thread, never the accept loop or another scrape."""
        assert self.tls is not None
        sock.settimeout(HANDSHAKE_TIMEOUT)
        try:
            first = sock.recv(1, socket.MSG_PEEK)
            if not first:
                return None  # connected and closed (a port check)
            if first != b"\x16":  # not a TLS handshake record: plain HTTP, most likely
                # Go's server answers so, and logs nothing: the scraper's
                # target page says it (one line a scrape here would be noise)
                sock.sendall(NOT_TLS_REPLY)
                _linger(sock)
                return None
            return self.tls.wrap_socket(sock, server_side=True)
        except OSError as exc:  # ssl.SSLError and socket.timeout are OSErrors
            print(f"ktui: TLS handshake with {peer} failed: {_ssl_reason(exc)}", file=sys.stderr, flush=True)
            return None


def load_web_config(path: str | os.PathLike[str]) -> WebConfig:
    """Read and check the file; raise a KtuiError (`file:line:col: ...`)."""
    source = os.fspath(path)
    try:
        text = decode_utf8(read_bounded(source, WHAT), source, WHAT)
        return _Reader(source).read(compose(text, source, WHAT))
    except ProbeSetError as err:  # what the YAML reader raises, whatever the file
        raise WebConfigError(err.message, source=err.source, line=err.line, col=err.col) from None


class _Reader(NodeReader):
    def read(self, root: Node | None) -> WebConfig:
        if root is None or self.is_null(root):  # an empty file: the toolkit serves plain HTTP
            return WebConfig(self.source, None, None, "no TLS; no basic auth")
        if not isinstance(root, MappingNode):
            self.check_tag(root, "")
            self.fail(root, f"a web config is a mapping (tls_server_config:, basic_auth_users:), got {describe(root)}")
        items = self.items(root, TOP_KEYS, "web config", "")
        tls = auth = None
        parts = []
        if "http_server_config" in items:
            self.http_server_config(items["http_server_config"][1])
        if "tls_server_config" in items and not self._empty(items["tls_server_config"][1]):
            tls, described = self.tls_server_config(items["tls_server_config"][1])
            parts.append(described)
        else:
            parts.append("no TLS")
        if "basic_auth_users" in items and not self._empty(items["basic_auth_users"][1]):
            auth = BasicAuth(self.users(items["basic_auth_users"][1]))
            parts.append(f"basic auth for {len(auth)} user{'s' if len(auth) != 1 else ''}"
                         + ("" if tls else ", passwords in the clear"))
        else:
            parts.append("no basic auth")
        return WebConfig(self.source, tls, auth, "; ".join(parts))

    # -- structure

    def items(self, node: Node, allowed: tuple[str, ...], what: str,
              prefix: str) -> dict[str, tuple[Node, Node]]:
        """`mapping`, with the toolkit's keys ktui does not do refused by
        name (in file order with the unknown ones)."""
        self.check_tag(node, prefix)
        if not isinstance(node, MappingNode) or node.tag != MAP:
            self.fail(node, f"expected a mapping, got {describe(node)}", prefix)
        for key_node, _ in node.value:
            key = key_node.value if isinstance(key_node, ScalarNode) else None
            if key in REFUSED:
                self.fail(key_node, f"{key}: {REFUSED[key]}", prefix)
            if key not in allowed:
                break  # mapping() says it is unknown
        return self.mapping(node, allowed, what, prefix)

    def _empty(self, node: Node) -> bool:
        return self.is_null(node) or (isinstance(node, MappingNode) and node.tag == MAP and not node.value)

    def http_server_config(self, node: Node) -> None:
        """Only `http2: false`, which is what ktui serves: HTTP/1.1."""
        if self.is_null(node):
            return
        prefix = "http_server_config: "
        items = self.items(node, HTTP_KEYS, "http_server_config", prefix)
        if "http2" in items and self.boolean(items["http2"][1], "http2", prefix):
            self.fail(items["http2"][1], "http2: true: ktui export serves HTTP/1.1 only, which "
                      "Prometheus scrapes; write http2: false or remove the key", prefix)

    # -- TLS

    def tls_server_config(self, node: Node) -> tuple[ssl.SSLContext, str]:
        prefix = "tls_server_config: "
        items = self.items(node, TLS_KEYS, "tls_server_config", prefix)
        for required in ("cert_file", "key_file"):
            if required not in items:
                self.fail(node, f"missing key '{required}' (TLS needs a certificate and its key)", prefix)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        low, high = "TLS12", "TLS13"
        if "min_version" in items:
            low = self.version(items["min_version"][1], "min_version", prefix, context)
        if "max_version" in items:
            high = self.version(items["max_version"][1], "max_version", prefix, context)
        if VERSIONS[low] > VERSIONS[high]:
            self.fail(items["min_version"][1], f"min_version {low} is above max_version {high}", prefix)
        context.minimum_version, context.maximum_version = VERSIONS[low], VERSIONS[high]
        context.set_alpn_protocols(["http/1.1"])

        cert_node, key_node = items["cert_file"][1], items["key_file"][1]
        cert = self.pem_file(cert_node, "cert_file", prefix, b"-----BEGIN CERTIFICATE-----", "a PEM certificate")
        key = self.pem_file(key_node, "key_file", prefix, b"PRIVATE KEY-----", "a PEM private key")
        try:
            context.load_cert_chain(cert, key, password=_no_password)
        except _EncryptedKey:
            self.fail(key_node, f"key_file: {key}: the key is encrypted; ktui needs it unencrypted "
                      "(as the exporter toolkit does)", prefix)
        except (ssl.SSLError, OSError) as exc:
            self.fail(key_node, f"cert_file and key_file do not load together: {_ssl_reason(exc)}", prefix)

        mode_name = "NoClientCert"
        if "client_auth_type" in items:
            mode_node = items["client_auth_type"][1]
            mode_name = self.string(mode_node, "client_auth_type", prefix)
            if mode_name in CLIENT_AUTH_REFUSED:
                self.fail(mode_node, f"client_auth_type {mode_name}: {CLIENT_AUTH_REFUSED[mode_name]}", prefix)
            if mode_name == "":
                mode_name = "NoClientCert"  # the toolkit's default
            if mode_name not in CLIENT_AUTH:
                self.fail(mode_node, f"client_auth_type: unknown value {mode_name[:40]!r}; expected one of: "
                          + ", ".join([*CLIENT_AUTH, *CLIENT_AUTH_REFUSED][:5]), prefix)
        context.verify_mode = CLIENT_AUTH[mode_name]
        described = (f"{VERSION_TEXT[low]} to {VERSION_TEXT[high][4:]}" if low != high
                     else f"{VERSION_TEXT[low]} only")  # "TLS 1.2 to 1.3", "TLS 1.3 only"
        if "client_ca_file" in items:
            ca_node = items["client_ca_file"][1]
            if mode_name == "NoClientCert":
                self.fail(ca_node, "client_ca_file is set but client_auth_type is NoClientCert: "
                          "write client_auth_type: RequireAndVerifyClientCert (or VerifyClientCertIfGiven)", prefix)
            ca = self.pem_file(ca_node, "client_ca_file", prefix, b"-----BEGIN CERTIFICATE-----", "a PEM certificate")
            try:
                context.load_verify_locations(cafile=ca)
            except (ssl.SSLError, OSError) as exc:
                self.fail(ca_node, f"client_ca_file: {ca}: does not load: {_ssl_reason(exc)}", prefix)
            described += (", client certificates required" if mode_name == "RequireAndVerifyClientCert"
                          else ", client certificates verified if given")
        elif mode_name != "NoClientCert":
            self.fail(items["client_auth_type"][1], f"client_auth_type {mode_name} needs client_ca_file "
                      "(the CA that signs the client certificates)", prefix)
        return context, described

    def version(self, node: Node, what: str, prefix: str, context: ssl.SSLContext) -> str:
        name = self.string(node, what, prefix)
        if name not in VERSIONS:
            self.fail(node, f"{what}: unknown TLS version {name[:40]!r}; expected one of: " + ", ".join(VERSIONS),
                      prefix)
        if VERSIONS[name] < ssl.TLSVersion.TLSv1_2 and ssl.OPENSSL_VERSION_INFO >= (3,) and context.security_level > 0:
            # OpenSSL 3 speaks TLS 1.0 and 1.1 only at security level 0:
            # accepting the key would promise clients a version they cannot get
            self.fail(node, f"{what} {name}: {ssl.OPENSSL_VERSION} does not speak {VERSION_TEXT[name]} at its "
                      f"security level ({context.security_level}); use TLS12 or TLS13", prefix)
        return name

    def pem_file(self, node: Node, what: str, prefix: str, marker: bytes, kind: str) -> str:
        """The path (relative ones from the web config's directory, as the
        toolkit does), checked to be a readable file holding `kind`."""
        text = self.string(node, what, prefix)
        if not text:
            self.fail(node, f"{what}: empty", prefix)
        path = os.path.join(os.path.dirname(self.source), text)
        try:
            data = read_bounded(path, kind)
        except KtuiError as exc:
            self.fail(node, f"{what}: {exc}", prefix)
        if marker not in data:
            self.fail(node, f"{what}: {path}: not {kind}", prefix)
        return path

    # -- basic auth

    def users(self, node: Node) -> dict[bytes, bytes]:
        prefix = "basic_auth_users: "
        self.check_tag(node, prefix)
        if not isinstance(node, MappingNode) or node.tag != MAP:
            self.fail(node, f"expected a mapping of user names to bcrypt hashes, got {describe(node)}", prefix)
        users: dict[bytes, bytes] = {}
        lines: dict[bytes, int] = {}
        for key_node, value_node in node.value:
            self.check_tag(key_node, prefix)
            if not isinstance(key_node, ScalarNode) or key_node.tag not in (STR, INT, BOOL):
                self.fail(key_node, f"a user name is a string, got {describe(key_node)}", prefix)
            name = key_node.value
            user = name.encode()
            if user in users:
                self.fail(key_node, f"duplicate user '{name[:40]}' (first given on line {lines[user]})", prefix)
            if ":" in name:
                self.fail(key_node, f"user '{name[:40]}': a basic auth user name cannot contain ':'", prefix)
            what = f"user '{name[:40]}'"
            stored = self.string(value_node, what, prefix) if not self.is_null(value_node) else ""
            if not BCRYPT_HASH.match(stored):
                self.fail(value_node, f"{what}: not a bcrypt hash (one looks like $2y$10$ and 53 characters: "
                          "htpasswd -nBC 10 \"\" | tr -d ':\\n')", prefix)
            users[user] = stored.encode()
            lines[user] = key_node.start_mark.line + 1
        return users


def _linger(sock: socket.socket) -> None:
    """Half-close, then read what the client sent until it closes (a second
    at most): closing with its request unread would reset the connection,
    and the client could lose the 400 before reading it."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(1.0)
        for _ in range(16):
            if not sock.recv(4096):
                return
    except OSError:  # gone, or slow to close: it has its answer either way
        pass


class _EncryptedKey(Exception):
    pass


def _no_password() -> bytes:
    """load_cert_chain's password callback: without one, OpenSSL would ask
    on the terminal for an encrypted key's pass phrase."""
    raise _EncryptedKey


def _ssl_reason(exc: OSError) -> str:
    """An ssl/socket error in one line, without OpenSSL's source position."""
    if isinstance(exc, TimeoutError):
        return f"no handshake within {HANDSHAKE_TIMEOUT:g} s"
    text = exc.strerror if isinstance(exc.strerror, str) and not isinstance(exc, ssl.SSLError) else str(exc)
    return re.sub(r"\s*\(_ssl\.c:\d+\)", "", text or type(exc).__name__)
