"""`ktui export --web-config` serving, on the host: the exporter's whole
loop on the fake kernel behind TLS and basic auth, scraped by a client and
by a real Prometheus (Debian's `prometheus`, as tests/kernel/test_export.py
uses); a silent client does not hold up a scrape; client certificates;
SIGHUP reads the web config again (a new password, a new certificate) and
a broken one keeps the running config. Every wait is a condition with a
deadline."""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from ktui import web_config
from ktui.exits import EXIT_OK
from ktui.exporter import Listen, open_server, run_export
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import load_probeset
from ktui.web_config import load_web_config
from tests.fakekernel import FakeLoader
from tests.pki import Pki, bcrypt_hash, make_pki
from tests.waiting import until

METRICS = 'ktui_probe_hits_total{probe="reads",set="s"}'


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stderr:
    """What the code under test printed on stderr so far (capsys, gathered:
    each readouterr() takes what came since the last)."""

    def __init__(self, capsys) -> None:
        self.capsys = capsys
        self.text = ""

    def __str__(self) -> str:
        self.text += self.capsys.readouterr().err
        return self.text

    def count(self, part: str) -> int:
        return str(self).count(part)


def fetch(port: int, path: str = "/metrics", auth: tuple[str, str] | None = None, ca: Path | None = None,
          cert: tuple[Path, Path] | None = None, tls: bool = True, timeout: float = 5.0) -> tuple[int, str | None, str]:
    """(status, WWW-Authenticate, body) of one GET; a TLS failure raises
    (an OSError: ssl.SSLError, a reset, a closed connection)."""
    if tls:
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
        if cert:
            context.load_cert_chain(str(cert[0]), str(cert[1]))
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=timeout)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("WWW-Authenticate"), response.read().decode()
    finally:
        conn.close()


def write_config(path: Path, pki: Pki, users: dict[str, str], server: tuple[Path, Path] | None = None,
                 extra: str = "") -> Path:
    cert, key = server or pki.server
    path.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n{extra}basic_auth_users:\n"
                    + "".join(f"  {user}: {bcrypt_hash(password)}\n" for user, password in users.items()))
    return path


def export(tmp_path: Path, web, drive) -> None:
    """run_export on the fake kernel (in this, the main thread: it takes
    the signals) while `drive(port)` runs in a thread; SIGTERM when it is
    done, whatever happened; its failure, if any, raised here."""
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nprobes:\n  - spec: vfs_read:c\n    label: reads\n")
    loader = FakeLoader()

    def load():
        ps = load_probeset(str(path), None)
        return ps, {p.name: ps.name for p in ps.probes}

    def open_feed(ps, options):
        session = Session(ps, SessionOptions(log_path=tmp_path / "ktui.log"), loader=loader)
        session.open()
        return session

    port = free_port()
    failed: list[BaseException] = []

    def driver():
        try:
            drive(port)
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            failed.append(exc)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=driver, daemon=True)
    thread.start()
    code = run_export(load(), load, SessionOptions(), Listen("127.0.0.1", port, socket.AF_INET), web=web,
                      open_feed=open_feed)
    thread.join(30)
    if failed:
        raise failed[0]
    assert code == EXIT_OK
    assert loader.attached == {}


class Prometheus:
    """Debian's prometheus, scraping with `scrape_configs` every second."""

    def __init__(self, tmp_path: Path, scrape_configs: str) -> None:
        assert shutil.which("prometheus"), "Debian's prometheus is missing: scripts/install.sh --test"
        self.port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n" + scrape_configs)
        self.proc = subprocess.Popen(["prometheus", f"--config.file={config}",
                                      f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def query(self, expr: str) -> dict[str, float]:
        """The instant vector `expr`, by job."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return {s["metric"].get("job", ""): float(s["value"][1]) for s in body["data"]["result"]}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


# ---------------------------------------------------------------- the exporter


def test_export_over_tls_with_basic_auth_scraped_by_prometheus(pki, tmp_path, capsys):
    web = load_web_config(write_config(tmp_path / "web.yml", pki, {"prometheus": "right"}))
    stderr = Stderr(capsys)

    def drive(port: int) -> None:
        until(lambda: fetch(port, auth=("prometheus", "right"), ca=pki.server[0])[0] == 200, "the first scrape")
        status, _, body = fetch(port, auth=("prometheus", "right"), ca=pki.server[0])
        assert status == 200 and METRICS in body
        for path in ("/metrics", "/", "/nope", "/metrics?x=1"):
            for auth in (None, ("prometheus", "wrong"), ("nobody", "right"), ("", "")):
                status, challenge, body = fetch(port, path, auth=auth, ca=pki.server[0])
                assert (status, challenge) == (401, 'Basic realm="ktui"'), (path, auth)
                assert "ktui_probe" not in body
        # plain HTTP to the TLS port: a 400 that says so, no metrics
        status, _, body = fetch(port, auth=("prometheus", "right"), tls=False)
        assert status == 400 and body == "Client sent an HTTP request to an HTTPS server.\n"
        # a client that does not trust the certificate gets no further
        with pytest.raises(ssl.SSLCertVerificationError):
            fetch(port, auth=("prometheus", "right"))
        until(lambda: stderr.count("ktui: TLS handshake with 127.0.0.1 failed: [SSL: TLSV1_ALERT_UNKNOWN_CA]") == 1,
              "the failed handshake's line")

        target = f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        tls = f"    scheme: https\n    tls_config:\n      ca_file: {pki.server[0]}\n"
        prom = Prometheus(tmp_path, f"  - job_name: ktui\n{tls}    basic_auth:\n      username: prometheus\n"
                                    f"      password: right\n{target}"
                                    f"  - job_name: wrong-password\n{tls}    basic_auth:\n"
                                    f"      username: prometheus\n      password: wrong\n{target}"
                                    f"  - job_name: plain-http\n{target}")
        try:
            until(lambda: prom.query("up") == {"ktui": 1.0, "wrong-password": 0.0, "plain-http": 0.0},
                  "Prometheus scraping: ktui up, the wrong password and plain HTTP down", timeout=120)
            until(lambda: prom.query('ktui_probe_hits_total{probe="reads",set="s"}').keys() == {"ktui"},
                  "a ktui metric in Prometheus", timeout=60)
        finally:
            prom.stop()

    export(tmp_path, web, drive)
    [serving] = [ln for ln in str(stderr).splitlines() if "serving metrics" in ln]
    assert serving.startswith("ktui: serving metrics on https://127.0.0.1:")
    assert serving.endswith("/metrics (TLS 1.2 to 1.3; basic auth for 1 user)")
    assert "HTTP" not in str(stderr).replace(serving, "")  # plain HTTP requests are answered, not logged


def test_sighup_reads_the_web_config_again_and_keeps_it_when_broken(pki, tmp_path, capsys):
    path = write_config(tmp_path / "web.yml", pki, {"prometheus": "old"})
    web = load_web_config(path)
    stderr: list[str] = []

    def err() -> str:
        stderr.append(capsys.readouterr().err)
        return "".join(stderr)

    def drive(port: int) -> None:
        until(lambda: fetch(port, auth=("prometheus", "old"), ca=pki.server[0])[0] == 200, "the first scrape")
        # a new password and a new certificate (a rotation)
        write_config(path, pki, {"prometheus": "new"}, server=pki.server2)
        os.kill(os.getpid(), signal.SIGHUP)
        until(lambda: fetch(port, auth=("prometheus", "new"), ca=pki.server2[0])[0] == 200, "the new config")
        assert fetch(port, auth=("prometheus", "old"), ca=pki.server2[0])[0] == 401
        with pytest.raises(ssl.SSLCertVerificationError):  # the old certificate is no longer served
            fetch(port, auth=("prometheus", "new"), ca=pki.server[0])
        assert "ktui: reloaded the web config: TLS 1.2 to 1.3; basic auth for 1 user" in err()
        # a broken one: one line, and the running config stays
        path.write_text(path.read_text().replace("$2b$", "$9z$"))
        os.kill(os.getpid(), signal.SIGHUP)
        until(lambda: "keeping the running web config" in err(), "the reload error")
        lines = [ln for ln in err().splitlines() if "keeping the running web config" in ln]
        assert lines == [f"ktui: reload: {path}:5:15: basic_auth_users: user 'prometheus': not a bcrypt hash "
                         "(one looks like $2y$10$ and 53 characters: htpasswd -nBC 10 \"\" | tr -d ':\\n'); "
                         "keeping the running web config"]
        status, _, body = fetch(port, auth=("prometheus", "new"), ca=pki.server2[0])
        assert status == 200 and METRICS in body
        assert fetch(port, auth=("prometheus", "old"), ca=pki.server2[0])[0] == 401
        # a certificate that does not load: kept as well
        write_config(path, pki, {"prometheus": "newer"}, server=(pki.server[0], pki.server2[1]))
        os.kill(os.getpid(), signal.SIGHUP)
        until(lambda: "do not load together" in err(), "the second reload error")
        assert fetch(port, auth=("prometheus", "new"), ca=pki.server2[0])[0] == 200

    export(tmp_path, web, drive)


# ---------------------------------------------------------------- the server alone


@pytest.fixture
def serve():
    """serve(web) -> port: open_server with `web`, serving in a thread."""
    servers = []

    def start(web) -> int:
        port = free_port()
        server = open_server(Listen("127.0.0.1", port, socket.AF_INET),
                             lambda: (METRICS.encode() + b" 1.0\n", "text/plain"), web)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # its shutdown waits one poll
        servers.append(server)
        return port

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_silent_client_does_not_hold_up_a_scrape(pki, tmp_path, serve, monkeypatch, capsys):
    stderr = Stderr(capsys)
    """One client connects and says nothing, another sends the first bytes
    of a TLS record and stops: each holds only its own thread, so a scrape
    meanwhile is answered at once; each is let go at the handshake timeout."""
    monkeypatch.setattr(web_config, "HANDSHAKE_TIMEOUT", 6.0)
    port = serve(load_web_config(write_config(tmp_path / "web.yml", pki, {"p": "pw"})))
    silent = socket.create_connection(("127.0.0.1", port))
    stalled = socket.create_connection(("127.0.0.1", port))
    stalled.sendall(b"\x16\x03\x01")  # a handshake record's header, cut short
    try:
        # answered while both are held: a handshake in the accept loop would
        # hold the first scrape until the silent client's timeout (6 s),
        # past this scrape's own (4 s)
        for _ in range(3):
            status, _, body = fetch(port, auth=("p", "pw"), ca=pki.server[0], timeout=4)
            assert status == 200 and METRICS in body
        for sock in (silent, stalled):  # still held open by the server: not yet timed out
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
        for sock in (silent, stalled):  # then let go
            sock.setblocking(True)
            sock.settimeout(20)
            until(lambda s=sock: s.recv(1024) == b"", "the server closing a silent client")
        until(lambda: stderr.count("TLS handshake with 127.0.0.1 failed: no handshake within 6 s") == 2,
              "a line each")
    finally:
        silent.close()
        stalled.close()


def test_client_certificates_required_and_verified(pki, tmp_path, serve, capsys):
    stderr = Stderr(capsys)
    extra = f"  client_ca_file: {pki.ca[0]}\n  client_auth_type: RequireAndVerifyClientCert\n"
    port = serve(load_web_config(write_config(tmp_path / "web.yml", pki, {"p": "pw"}, extra=extra)))
    status, _, body = fetch(port, auth=("p", "pw"), ca=pki.server[0], cert=pki.client)
    assert status == 200 and METRICS in body
    assert fetch(port, auth=("p", "wrong"), ca=pki.server[0], cert=pki.client)[0] == 401  # both are asked
    for cert in (None, pki.stranger):  # no certificate, one the CA did not sign
        with pytest.raises(OSError):
            fetch(port, auth=("p", "pw"), ca=pki.server[0], cert=cert)
    until(lambda: stderr.count("TLS handshake with 127.0.0.1 failed: [SSL: PEER_DID_NOT_RETURN_A_CERTIFICATE]") == 1
          and stderr.count("TLS handshake with 127.0.0.1 failed: [SSL: CERTIFICATE_VERIFY_FAILED]") == 1,
          "a line each")


def test_client_certificates_verified_if_given(pki, tmp_path, serve, capsys):
    stderr = Stderr(capsys)
    extra = f"  client_ca_file: {pki.ca[0]}\n  client_auth_type: VerifyClientCertIfGiven\n"
    port = serve(load_web_config(write_config(tmp_path / "web.yml", pki, {"p": "pw"}, extra=extra)))
    assert fetch(port, auth=("p", "pw"), ca=pki.server[0])[0] == 200
    assert fetch(port, auth=("p", "pw"), ca=pki.server[0], cert=pki.client)[0] == 200
    with pytest.raises(OSError):
        fetch(port, auth=("p", "pw"), ca=pki.server[0], cert=pki.stranger)
    until(lambda: stderr.count("failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed") == 1,
          "the line")


def test_tls13_only_refuses_a_tls12_client(pki, tmp_path, serve, capsys):
    stderr = Stderr(capsys)
    port = serve(load_web_config(write_config(tmp_path / "web.yml", pki, {"p": "pw"},
                                              extra="  min_version: TLS13\n")))
    context = ssl.create_default_context(cafile=str(pki.server[0]))
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises(ssl.SSLError):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            context.wrap_socket(raw, server_hostname="127.0.0.1")
    assert fetch(port, auth=("p", "pw"), ca=pki.server[0])[0] == 200
    until(lambda: stderr.count("[SSL: UNSUPPORTED_PROTOCOL]") == 1, "the line")


def test_basic_auth_over_plain_http(tmp_path, serve):
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  p: {bcrypt_hash('pw')}\n")
    port = serve(load_web_config(path))
    assert fetch(port, tls=False)[:2] == (401, 'Basic realm="ktui"')
    assert fetch(port, auth=("p", "pw"), tls=False)[0] == 200


def test_without_a_web_config_it_is_plain_http_without_auth(serve):
    port = serve(None)
    status, challenge, body = fetch(port, tls=False)
    assert (status, challenge) == (200, None) and METRICS in body


def test_at_the_connection_cap_tls_connections_make_room_or_are_refused(pki, tmp_path, monkeypatch, capsys):
    """Over TLS as over plain HTTP: at MAX_CONNECTIONS a kept-alive
    connection left idle is closed to make room for a new scrape; a
    connection mid-handshake is busy, so with it alone at the cap a new one
    is refused at once (not held until that handshake's timeout)."""
    from ktui import exporter, web_config

    stderr = Stderr(capsys)
    monkeypatch.setattr(exporter, "MAX_CONNECTIONS", 1)
    # the silent client below stays mid-handshake however slow a loaded host
    # makes the test (at 10 s its handshake would time out, logged, and free the slot)
    monkeypatch.setattr(web_config, "HANDSHAKE_TIMEOUT", 300.0)
    server = open_server(Listen("127.0.0.1", 0, socket.AF_INET), lambda: (METRICS.encode() + b" 1.0\n", "text/plain"),
                         load_web_config(write_config(tmp_path / "web.yml", pki, {"p": "pw"})))
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # its shutdown waits one poll
    auth = {"Authorization": "Basic " + base64.b64encode(b"p:pw").decode()}
    kept = http.client.HTTPSConnection("127.0.0.1", port, timeout=10,
                                       context=ssl.create_default_context(cafile=str(pki.server[0])))
    silent = None
    try:
        kept.request("GET", "/metrics", headers=auth)
        assert kept.getresponse().read().decode().startswith(METRICS)
        until(lambda: server.connections().idle == 1, "the kept-alive connection idle")
        assert fetch(port, auth=("p", "pw"), ca=pki.server[0])[0] == 200  # it made room
        kept.sock.settimeout(10)
        try:
            assert kept.sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLEOFError):
            pass  # closed by the server either way
        until(lambda: server.connections().open == 0, "the scrape's connection closed")
        silent = socket.create_connection(("127.0.0.1", port))  # connected, never says hello
        until(lambda: server.connections()[:2] == (1, 0), "the silent connection busy in its handshake")
        with pytest.raises(OSError):  # refused: EOF or a reset in the handshake, within fetch's timeout
            fetch(port, auth=("p", "pw"), ca=pki.server[0], timeout=5)
        assert server.connections().refused == 1
        silent.close()
        until(lambda: server.connections().open == 0, "the silent connection's thread ended")
        assert fetch(port, auth=("p", "pw"), ca=pki.server[0])[0] == 200
        assert server.connections().closed_idle == 1
    finally:
        kept.close()
        if silent is not None:
            silent.close()
        server.shutdown()
        server.server_close()
    assert str(stderr) == ""
