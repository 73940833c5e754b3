"""`ktui export`: a probe set's in-kernel counters as Prometheus metrics.

The HTTP socket is bound first (a port in use or an address this machine
does not have fails before anything is compiled), then the probes are
attached, then /metrics is served from a thread. Each scrape reads the BPF
maps once (pipeline.prometheus); nothing is counted per event in Python.
Events are off (SessionOptions.events): a probe with fetches is counted and
aggregated but writes no record on the generic engine, so an exported set
costs less than a stream of it. On the compiled engine, which has no such
switch, its events are drained and dropped.

Signals: SIGINT and SIGTERM detach every probe and exit 0 (it runs under
systemd); SIGHUP loads the probe set file(s) again and applies the
difference (a probe whose definition changed is removed and added again, so
its counters restart, which Prometheus reads as a counter reset). A file
that does not load keeps the running set and logs one line on stderr.

With `--web-config FILE` (web_config.py): TLS, the handshake in each
connection's own thread, and basic auth on every path. SIGHUP reads that
file again too (certificate rotation): new connections get the new
certificate, every request after it the new users; a file that does not
load keeps the running config and logs one line.

Connections are kept alive, each in its own thread; at most MAX_CONNECTIONS
at once (a new one past it closes the longest idle one, or is refused if
none is idle), counted in the exporter's health metrics.
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import select
import signal
import socket
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Callable, NamedTuple

from ktui.exits import EXIT_ENVIRONMENT, EXIT_OK
from ktui.lang.model import Kind, KtuiError, ProbeSet
from ktui.record.feed import FeedError, ProbeState, ProbeStats

if TYPE_CHECKING:
    from ktui.web_config import WebConfig

DEFAULT_LISTEN = "127.0.0.1:9436"
DRAIN_INTERVAL = 0.1  # seconds: events of probes with fetches are dropped this often
# A counting-only set has nothing to drain: the main loop then sleeps until a
# signal. This bound is only a safety net (a wake-up lost in some corner of
# the platform costs at most this long a wait for SIGTERM or SIGHUP).
IDLE_WAKE = 5.0
# Prometheus keeps its scrape connection open (HTTP/1.1 keep-alive): each
# scrape on it then costs no new connection, no thread and, over TLS, no
# handshake. A connection idle this long is closed (its thread ends); the
# scraper opens another. Longer than any usual scrape interval.
KEEP_ALIVE_IDLE = 300.0
# Connections served at once (each holds a thread while open): Prometheus
# keeps one per scrape target, a few people run curl; 64 is generous for
# that, and bounds the threads a client that opens connections and never
# closes them (or a crowd of scrapers) can make in a process under systemd.
# At the cap a new connection first closes the longest idle one (the
# scraper reconnects); if every one is busy it is closed at once.
MAX_CONNECTIONS = 64
# A request once begun (its first byte in) is read whole and answered within
# this, or its connection is closed: a client that sends a byte and stalls
# would otherwise hold one of MAX_CONNECTIONS busy for KEEP_ALIVE_IDLE, and
# 64 of them would turn every scraper away. Prometheus sends a request in
# one write and reads the answer at once. (Each socket operation gets it.)
REQUEST_TIMEOUT = 10.0

# (the probe set, probe name -> the name of the set it came from)
Loaded = tuple[ProbeSet, dict[str, str]]


class ListenError(Exception):
    """The metrics socket cannot be opened; `code` is the exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Listen:
    host: str
    port: int
    family: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if self.family == socket.AF_INET6 else self.host
        return f"{host}:{self.port}"


def parse_listen(text: str) -> Listen:
    """`ADDR:PORT` (`[ADDR]:PORT` for IPv6), ADDR a numeric IP address.
    Raises ValueError with a one-line reason."""
    if text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if not sep:
            raise ValueError(f"{text!r} is not [ADDR]:PORT")
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise ValueError(f"{text!r} is not ADDR:PORT")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{host!r} is not an IP address (ADDR:PORT, e.g. {DEFAULT_LISTEN})") from None
    if address.version == 6 and not text.startswith("["):
        raise ValueError(f"write an IPv6 address in brackets: [{host}]:{port_text}")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"port {port_text!r} is not a number from 1 to 65535")
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    return Listen(str(address), int(port_text), family)


class Connections(NamedTuple):
    """The server's connections: open now (idle of them), and counted since
    it started: refused at the cap, idle ones closed to make room."""

    open: int
    idle: int
    refused: int
    closed_idle: int


def _handler(render: Callable[[], tuple[bytes, str]]):
    class MetricsHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: every reply says its Content-Length
        timeout = KEEP_ALIVE_IDLE  # an idle connection's read ends, quietly

        def handle_one_request(self) -> None:
            # Idle until the next request's first byte (a peek: the request
            # line is still read whole below); from it to the reply, busy:
            # a connection at the cap may then no longer be closed for room.
            try:
                started = self.rfile.peek(1)
            except OSError:  # idle past KEEP_ALIVE_IDLE, a reset
                started = b""
            if not started or not self.server.busy(self.request):  # closed, or closed for room
                self.close_connection = True
                return
            self._bound(REQUEST_TIMEOUT)
            try:
                super().handle_one_request()  # a timeout: closed quietly (log_message)
            finally:
                self._bound(self.timeout)  # idle again: the keep-alive bound
                self.server.idle(self.request)

        def _bound(self, seconds: float) -> None:
            try:
                self.connection.settimeout(seconds)
            except OSError:  # closed meanwhile (to make room): the read ends anyway
                pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            web = self.server.web  # the running web config: a reload applies from the next request
            if web is not None and not web.authorized(self.headers.get("Authorization")):
                self._reply(401, b"unauthorized\n", "text/plain; charset=utf-8",
                            {"WWW-Authenticate": 'Basic realm="ktui"'})
            elif self.path.split("?", 1)[0] == "/metrics":
                body, content_type = render()
                self._reply(200, body, content_type)
            elif self.path == "/":
                self._reply(200, b'<html><body><a href="/metrics">/metrics</a></body></html>\n',
                            "text/html; charset=utf-8")
            else:
                self._reply(404, b"not found\n", "text/plain; charset=utf-8")

        def _reply(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):
                # The scraper gave up first (Prometheus closes at its
                # scrape_timeout, e.g. while a SIGHUP reload holds the set):
                # nobody is left to answer, and it is not ktui's error.
                self.close_connection = True

        def log_message(self, format, *args) -> None:  # noqa: A002 - no line per scrape on stderr
            pass

    return MetricsHandler


def open_server(listen: Listen, render: Callable[[], tuple[bytes, str]],
                web: "WebConfig | None" = None) -> ThreadingHTTPServer:
    """The bound, listening HTTP server (not serving yet), or ListenError.
    `web`: TLS and basic auth (None: plain HTTP, no auth); the server's
    `web` attribute can be swapped while it serves (a SIGHUP reload)."""

    class Server(ThreadingHTTPServer):
        address_family = listen.family
        daemon_threads = True
        # The kernel's queue of connections not accepted yet (socketserver's
        # is 5): past it a burst's SYNs are dropped and retried a second
        # later. The accept loop takes them quickly, served or refused.
        request_queue_size = 128
        web: "WebConfig | None" = None

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            # Every open connection's socket (the TLS one once handed over):
            # since when it is idle (monotonic), None while busy (a request,
            # a TLS handshake). A socket is removed, under the lock, before
            # it is closed: one shut down for room is never a closed one.
            self._conns_lock = threading.Lock()
            self._conns: dict[socket.socket, float | None] = {}
            # Closed for room, their threads not ended yet: they are threads
            # too, so a flood faster than they end is refused, not evicting.
            self._closing: set[socket.socket] = set()
            self._refused = self._closed_idle = 0

        def connections(self) -> Connections:
            with self._conns_lock:
                idle = sum(1 for since in self._conns.values() if since is not None)
                return Connections(len(self._conns), idle, self._refused, self._closed_idle)

        def process_request(self, request, client_address) -> None:
            # The accept loop: it decides at once and never waits on a client.
            if not self._admit(request):
                self.shutdown_request(request)  # closed at once: the client sees it end
                return
            try:
                super().process_request(request, client_address)  # its thread
            except BaseException:
                self._forget(request)
                raise

        def _admit(self, request) -> bool:
            with self._conns_lock:
                if len(self._conns) >= MAX_CONNECTIONS:
                    idle = [(since, sock) for sock, since in self._conns.items() if since is not None]
                    if not idle or len(self._closing) >= MAX_CONNECTIONS:
                        self._refused += 1
                        return False
                    oldest = min(idle, key=lambda pair: pair[0])[1]
                    del self._conns[oldest]
                    self._closing.add(oldest)
                    self._closed_idle += 1
                    try:
                        # Its thread's blocked read ends (EOF) and the thread
                        # with it. socket.socket's shutdown, not SSLSocket's,
                        # which also drops the TLS object that thread reads with.
                        socket.socket.shutdown(oldest, socket.SHUT_RDWR)
                    except OSError:
                        pass  # the client closed it first
                # A new connection is idle until its first byte: a client that
                # connects and says nothing may be closed to make room. TLS:
                # busy through the handshake (finish_request).
                self._conns[request] = time.monotonic()
                return True

        def busy(self, sock) -> bool:
            """Mark a request begun; False if `sock` was closed to make room."""
            with self._conns_lock:
                if sock not in self._conns:
                    return False
                self._conns[sock] = None
                return True

        def idle(self, sock) -> None:
            with self._conns_lock:
                if sock in self._conns:
                    self._conns[sock] = time.monotonic()

        def _forget(self, sock) -> None:
            with self._conns_lock:
                self._conns.pop(sock, None)
                self._closing.discard(sock)

        def finish_request(self, request, client_address) -> None:
            # In the connection's own thread (ThreadingMixIn): the TLS
            # handshake here never holds the accept loop.
            try:
                web = self.web  # the config this connection came under
                if web is None or web.tls is None:
                    return super().finish_request(request, client_address)
                if not self.busy(request):
                    return  # closed to make room before its thread began
                conn = web.handshake(request, client_address[0])
                if conn is None:
                    return
                with self._conns_lock:  # the same connection, now the TLS socket
                    del self._conns[request]
                    self._conns[conn] = time.monotonic()
                try:
                    super().finish_request(conn, client_address)
                finally:
                    self._forget(conn)
                    self.shutdown_request(conn)  # the raw socket was handed over to conn
            finally:
                self._forget(request)  # before process_request_thread closes it

        def handle_error(self, request, client_address) -> None:
            # socketserver prints a traceback to stderr; an exporter under
            # systemd logs one line instead, and keeps serving
            exc = sys.exc_info()[1]
            print(f"ktui: metrics request from {client_address[0]} failed: {exc!r}",
                  file=sys.stderr, flush=True)

    try:
        server = Server((listen.host, listen.port), _handler(render))
    except OSError as exc:
        reasons = {errno.EADDRINUSE: "address already in use",
                   errno.EACCES: "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)",
                   errno.EADDRNOTAVAIL: "no such address on this machine"}
        reason = reasons.get(exc.errno, exc.strerror or str(exc))
        raise ListenError(f"--listen {listen}: {reason}", EXIT_ENVIRONMENT) from None
    server.web = web
    return server


def reload_web(current: "WebConfig") -> "tuple[WebConfig, bool]":
    """(the web config file read again, True), or (`current`, False) and
    one line on stderr when it does not load."""
    from ktui.web_config import load_web_config

    try:
        new = load_web_config(current.source)
    except KtuiError as exc:
        print(f"ktui: reload: {exc}; keeping the running web config", file=sys.stderr, flush=True)
        return current, False
    print(f"ktui: reloaded the web config: {new.summary}", file=sys.stderr, flush=True)
    return new, True


class Exporter:
    """The running set: what a scrape shows, and SIGHUP's reload."""

    def __init__(self, session, loaded: Loaded, load: Callable[[], Loaded]) -> None:
        from ktui.pipeline.prometheus import ExporterHealth

        self.session = session
        self.health = ExporterHealth()
        self.probeset, self.sets = loaded
        self.load = load
        # A scrape never sees half a reload, and never waits for one (adding
        # a probe can take seconds: a compile, a verifier): while a reload
        # runs, scrapes get the set as it was when the reload began.
        self._lock = threading.Lock()
        self._frozen = None  # those views, while a reload runs
        self._stopped = False  # the session is closing: scrapes read nothing more

    def stop(self) -> None:
        """Before the session closes: wait for a scrape reading its maps
        (scrapes run in their own threads, which the server's shutdown
        does not wait for; a SIGINT mid-scrape closed the maps under it),
        and let none read them after."""
        with self._lock:
            self._stopped = True

    def emits(self) -> bool:
        """Whether a probe running writes events: then its buffer must be
        drained, or the kernel counts them lost. run_export turns events
        off, so only a probe with fetches on the compiled engine writes any;
        while a probe is still pending or loading it may yet be compiled,
        and the drain keeps its pace until every one is in."""
        if not self.probeset.emits_events:
            return False
        waiting = (ProbeState.PENDING, ProbeState.LOADING)
        if any(st.state in waiting for st in self.session.statuses().values()):
            return True
        return self.session.writes_events()

    def views(self):
        with self._lock:
            if self._stopped:
                return []
            return self._frozen if self._frozen is not None else self._read_views()

    def _read_views(self):
        from ktui.pipeline.prometheus import ProbeView, probe_state, value_shape

        # detail=False: not the distinct lost keys nor the stacks, which no
        # metric carries and whose reads walk whole maps every scrape
        stats = self.session.stats(detail=False).probes
        out = []
        for pid_, st in sorted(self.session.statuses().items()):
            name = st.probe.name
            out.append(ProbeView(
                name=name, set=self.sets.get(name, self.probeset.name),
                is_return=st.probe.kind is Kind.RETURN, timed=st.probe.timed, span=st.probe.since is not None,
                state=probe_state(st),
                stats=stats.get(pid_, ProbeStats(pid_)), **value_shape(st.probe)))
        return out

    def reload(self) -> bool:
        """Load the files again and apply the difference; a file that does
        not load leaves everything as it is (False)."""
        try:
            probeset, sets = self.load()
        except KtuiError as exc:
            print(f"ktui: reload: {exc}; keeping the running probe set", file=sys.stderr, flush=True)
            return False
        with self._lock:
            self._frozen = self._read_views()
        try:
            self._apply(probeset, sets)
        finally:
            with self._lock:
                self._frozen = None
        return True

    def _apply(self, probeset, sets) -> None:
        """Remove what changed or went, add what is new; then the new set is
        the running one. Only the main loop calls this (no two at once)."""
        wanted = {p.name: p for p in probeset.probes}
        running = {st.probe.name: (pid_, st.probe) for pid_, st in self.session.statuses().items()}
        for name, (pid_, probe) in running.items():
            if wanted.get(name) != probe:
                self.session.remove_probe_now(pid_)
        added = 0
        for name, probe in wanted.items():
            if name in running and running[name][1] == probe:
                continue
            try:
                status = self.session.add_probe_now(probe)
            except FeedError as exc:
                print(f"ktui: reload: {name}: {exc}", file=sys.stderr, flush=True)
                continue
            if status.reason:
                print(f"ktui: reload: {name}: {status.reason}", file=sys.stderr, flush=True)
            added += 1
        removed = sum(1 for name, (_, probe) in running.items() if wanted.get(name) != probe)
        with self._lock:
            self.probeset, self.sets = probeset, sets
        print(f"ktui: reloaded: {len(wanted)} probes ({added} added, {removed} removed)",
              file=sys.stderr, flush=True)


class _Signals:
    """Flags only: the main loop acts on them (no lock is taken in a handler).

    The main loop sleeps in select() on a socket that the interpreter's C
    signal handler writes to (signal.set_wakeup_fd), whichever thread the
    kernel hands the signal to. Sleeping in threading.Event.wait, a SIGHUP
    or SIGTERM sometimes waited the whole IDLE_WAKE (5 s) before the
    Python handler ran (seen in most runs of the export tests on a busy
    host)."""

    def __init__(self) -> None:
        self.stop = False
        self.reload = False
        self._old: dict = {}
        self._old_wakeup = -1
        self._wake_r = self._wake_w = None

    def __enter__(self) -> "_Signals":
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._old_wakeup = signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._old[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._old_wakeup)
        self._wake_r.close()
        self._wake_w.close()

    def sleep(self, seconds: float) -> None:
        """Until a signal (its handler has run when this returns: the main
        thread's next bytecode runs it) or `seconds`."""
        select.select([self._wake_r], [], [], seconds)
        try:
            while self._wake_r.recv(256):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _on_signal(self, signum, frame) -> None:
        if signum == signal.SIGHUP:
            self.reload = True
        else:
            self.stop = True


def run_export(loaded: Loaded, load: Callable[[], Loaded], options, listen: Listen, *,
               web: "WebConfig | None" = None, open_feed=None) -> int:
    """`ktui export`. `load` reads the probe set files again (SIGHUP);
    `web`, the web config the caller loaded (None: plain HTTP, no auth), is
    read again from its file then too; `open_feed(ps, options)` as in
    headless.run_stream (tests pass a fake)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

    from ktui.headless import _open_session_or_status
    from ktui.pipeline.prometheus import ProbeCollector

    # Counters only: no probe writes an event nobody reads (a hit of a probe
    # with fetches is counted and aggregated, then its record is not written)
    options = dataclasses.replace(options, events=False)
    registry = CollectorRegistry(auto_describe=False)
    try:
        server = open_server(listen, lambda: (generate_latest(registry), CONTENT_TYPE_LATEST), web)
    except ListenError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return exc.code
    try:
        session = (open_feed or _open_session_or_status)(loaded[0], options)
        if isinstance(session, int):
            return session
        exporter = None
        try:
            with _Signals() as signals:
                exporter = Exporter(session, loaded, load)
                exporter.health.connections = server.connections
                registry.register(ProbeCollector(exporter.views, health=exporter.health))
                threading.Thread(target=server.serve_forever, name="ktui-metrics", daemon=True).start()
                scheme = web.scheme if web is not None else "http"
                settings = f" ({web.summary})" if web is not None else ""
                print(f"ktui: serving metrics on {scheme}://{listen}/metrics{settings}", file=sys.stderr, flush=True)
                while True:
                    if signals.stop:
                        break
                    if signals.reload:
                        signals.reload = False
                        web_ok = True
                        if server.web is not None:  # first: it is quick, the probes may take seconds
                            server.web, web_ok = reload_web(server.web)
                        sets_ok = exporter.reload()
                        exporter.health.reloaded(web_ok and sets_ok)
                    if exporter.emits():
                        session.drain()  # events of probes with fetches: not exported
                        signals.sleep(DRAIN_INTERVAL)
                    else:
                        # Nothing to drain: no wake-ups that would take CPU from
                        # the traced workload (scrapes are served by their thread).
                        signals.sleep(IDLE_WAKE)
                server.shutdown()
        except KeyboardInterrupt:  # a signal in the instant before our handlers
            pass
        finally:
            if exporter is not None:
                exporter.stop()
            session.close()
        print("ktui: probes detached", file=sys.stderr, flush=True)
        return EXIT_OK
    finally:
        server.server_close()
