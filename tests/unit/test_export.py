"""`ktui export` on the host: the exposition for a given stats snapshot
(golden text, parsed back with prometheus_client's parser), the log2 slots
as Prometheus buckets, --listen and its errors, and the run loop (scrape,
SIGHUP reload, SIGTERM) on the fake kernel."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ktui.cli import main
from ktui.exits import EXIT_ENVIRONMENT, EXIT_OK
from ktui.exporter import Exporter, Listen, ListenError, open_server, parse_listen, run_export
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import load_probeset
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.prometheus import BUCKET_BOUNDS, ProbeCollector, ProbeView, latency_buckets, seconds_text
from ktui.record.feed import ProbeStats
from ktui.record.histogram import HIST_SLOTS, slot_bounds
from tests.fakekernel import FakeLoader
from tests.waiting import until

GOLDEN = Path(__file__).parent / "golden" / "export.prom"


def snapshot() -> list[ProbeView]:
    hist = [0] * HIST_SLOTS
    hist[0], hist[11], hist[12], hist[64] = 1, 5, 3, 1  # 0 ns, ~1-2 us, ~2-4 us, the last slot
    ret = ProbeStats(1, hits=10, emitted=0, lost=0, hist=tuple(hist), latency_sum_ns=18_446_744_073_709_561_615,
                     errnos=((9, 2), (200, 1)), top_comms=(("dd", 6), ("cat", 3)), missed_returns=4,
                     recursion_misses=1, unpaired=7, entries_unstored=3, nest_dropped=2, errnos_other=5,
                     errno_check="long", top_cgroups_kept=False)  # (as a compiled probe's)
    call = ProbeStats(0, hits=1000, emitted=990, lost=10, top_comms=(("dd", 700),), nest_dropped=6,
                      top_comms_exact=False,
                      top_cgroups=(("system.slice/docker-" + "ab" * 32 + ".scope", 600), ("/", 250)))
    return [ProbeView("reads", "vfs", False, call), ProbeView("read_ret", "vfs", True, ret)]


def exposition(views, top_comms: int = 5) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProbeCollector(lambda: views, top_comms, clock=lambda: 0.0))
    return generate_latest(registry).decode()


def test_exposition_matches_golden_text():
    text = exposition(snapshot())
    if os.environ.get("KTUI_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def parsed(text: str) -> dict:
    """(sample name, frozenset of labels) -> value."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_exposition_parses_back_to_the_snapshot():
    samples = parsed(exposition(snapshot()))
    ret = {("set", "vfs"), ("probe", "read_ret")}
    call = {("set", "vfs"), ("probe", "reads")}
    assert samples["ktui_probe_hits_total", frozenset(call)] == 1000
    assert samples["ktui_probe_events_emitted_total", frozenset(call)] == 990
    assert samples["ktui_probe_events_lost_total", frozenset(call)] == 10
    assert samples["ktui_probe_missed_returns_total", frozenset(ret)] == 4
    assert ("ktui_probe_missed_returns_total", frozenset(call)) not in samples  # a call probe has none
    assert samples["ktui_probe_errno_total", frozenset(ret | {("errno", "EBADF")})] == 2
    assert samples["ktui_probe_errno_total", frozenset(ret | {("errno", "E200")})] == 1
    assert samples["ktui_probe_latency_seconds_count", frozenset(ret)] == 10
    assert samples["ktui_probe_latency_seconds_sum", frozenset(ret)] == pytest.approx(18_446_744_073.709_56)
    buckets = {dict(k)["le"]: v for (name, k), v in samples.items() if name == "ktui_probe_latency_seconds_bucket"}
    assert len(buckets) == HIST_SLOTS + 1  # every slot, and +Inf
    assert buckets["0"] == 1 and buckets["0.000002047"] == 6 and buckets["0.000004095"] == 9
    assert buckets["9223372036.854775807"] == 9 and buckets["18446744073.709551615"] == 10 == buckets["+Inf"]
    assert samples["ktui_probe_comm_hits_total", frozenset(ret | {("comm", "dd")})] == 6
    assert samples["ktui_probe_comm_hits_omitted", frozenset(ret)] == 1  # 10 hits, 9 by the top two
    assert samples["ktui_probe_comm_hits_omitted", frozenset(call)] == 300


def test_issue_28_counters_and_honesty_marks_are_exported():
    """Unpaired returns, entries not stored, nested hits dropped and errnos
    outside the table as counters; whether top comms are exact and whether
    errnos are checked as gauges (a call probe has no return counters)."""
    void_ret = ProbeView("unlock_ret", "vfs", True, ProbeStats(2, hits=3, errno_check="off: void"))
    samples = parsed(exposition(snapshot() + [void_ret]))
    ret = frozenset({("set", "vfs"), ("probe", "read_ret")})
    call = frozenset({("set", "vfs"), ("probe", "reads")})
    void = frozenset({("set", "vfs"), ("probe", "unlock_ret")})
    assert samples["ktui_probe_unpaired_returns_total", ret] == 7
    assert samples["ktui_probe_entries_unstored_total", ret] == 3
    assert samples["ktui_probe_nested_hits_dropped_total", ret] == 2
    assert samples["ktui_probe_nested_hits_dropped_total", call] == 6
    assert samples["ktui_probe_errno_other_total", ret] == 5
    for name in ("ktui_probe_unpaired_returns_total", "ktui_probe_entries_unstored_total",
                 "ktui_probe_errno_other_total", "ktui_probe_errno_checked"):
        assert (name, call) not in samples
    assert samples["ktui_probe_comm_hits_exact", ret] == 1 and samples["ktui_probe_comm_hits_exact", call] == 0
    assert samples["ktui_probe_errno_checked", ret] == 1 and samples["ktui_probe_errno_checked", void] == 0


def test_top_cgroups_are_labelled_by_their_whole_path_and_the_rest_counted():
    samples = parsed(exposition(snapshot()))
    call = {("set", "vfs"), ("probe", "reads")}
    ret = {("set", "vfs"), ("probe", "read_ret")}
    cgroups = {dict(k)["cgroup"]: v for (name, k), v in samples.items()
               if name == "ktui_probe_cgroup_hits_total" and call <= k}
    # the label is the path, never the dashboard's docker:<12 hex>
    assert cgroups == {"system.slice/docker-" + "ab" * 32 + ".scope": 600, "/": 250}
    assert samples["ktui_probe_cgroup_hits_omitted", frozenset(call)] == 150  # 1000 hits, 850 in the top
    # not kept (a compiled probe): no series at all, rather than a zero that says none
    assert not [k for (name, k) in samples if name.startswith("ktui_probe_cgroup_hits") and ret <= k]
    capped = parsed(exposition(snapshot(), top_comms=1))
    assert [dict(k)["cgroup"] for (name, k) in capped
            if name == "ktui_probe_cgroup_hits_total" and call <= k] == ["system.slice/docker-" + "ab" * 32 + ".scope"]
    assert capped["ktui_probe_cgroup_hits_omitted", frozenset(call)] == 400


def test_top_comms_are_capped_and_the_rest_counted():
    samples = parsed(exposition(snapshot(), top_comms=1))
    ret = {("set", "vfs"), ("probe", "read_ret")}
    comms = [k for (name, k) in samples if name == "ktui_probe_comm_hits_total" and ret <= k]
    assert comms == [frozenset(ret | {("comm", "dd")})]
    assert samples["ktui_probe_comm_hits_omitted", frozenset(ret)] == 4


def test_bucket_bounds_are_the_slot_bounds_exactly():
    for k, le in enumerate(BUCKET_BOUNDS):
        whole, _, frac = le.partition(".")
        assert int(whole) * 10**9 + int(frac.ljust(9, "0") or 0) == slot_bounds(k)[1]
    assert seconds_text(0) == "0" and seconds_text(10**9) == "1" and seconds_text(1023) == "0.000001023"


def test_buckets_are_cumulative_and_the_same_set_every_time():
    hist = [0] * HIST_SLOTS
    hist[3] = 2
    hist[7] = 5
    out = latency_buckets(hist)
    assert [le for le, _ in out] == [*BUCKET_BOUNDS, "+Inf"] == [le for le, _ in latency_buckets(())]
    counts = [n for _, n in out]
    assert counts[:3] == [0, 0, 0] and counts[3:7] == [2] * 4 and counts[7:] == [7] * (HIST_SLOTS - 6)
    # a histogram of the old 64-slot recordings fits the same buckets
    assert [le for le, _ in latency_buckets([1] * 64)] == [le for le, _ in out]


@pytest.mark.parametrize("text, family", [("127.0.0.1:9436", socket.AF_INET), ("0.0.0.0:1", socket.AF_INET),
                                          ("[::1]:9436", socket.AF_INET6)])
def test_listen_parses(text, family):
    listen = parse_listen(text)
    assert listen.family == family and str(listen) == text


@pytest.mark.parametrize("text", ["9436", "localhost:9436", "1.2.3:80", "127.0.0.1:0", "127.0.0.1:65536",
                                  "127.0.0.1:x", "::1:9436", "[::1]9436", ":9436"])
def test_bad_listen_is_one_line_exit_2(text):
    result = CliRunner().invoke(main, ["export", "-e", "vfs_read:c", "--listen", text])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ktui: --listen:"), result.output


def test_help_warns_that_all_interfaces_reveal_process_names():
    out = CliRunner().invoke(main, ["export", "--help"]).output
    assert "127.0.0.1:9436" in out and "0.0.0.0" in out and "process" in out


def test_port_in_use_is_an_environment_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        listen = Listen("127.0.0.1", busy.getsockname()[1], socket.AF_INET)
        with pytest.raises(ListenError) as err:
            open_server(listen, lambda: (b"", "text/plain"))
    assert err.value.code == EXIT_ENVIRONMENT and "already in use" in str(err.value)


def test_address_not_on_this_machine_is_an_environment_error():
    with pytest.raises(ListenError) as err:
        open_server(Listen("192.0.2.1", 9436, socket.AF_INET), lambda: (b"", "text/plain"))
    assert err.value.code == EXIT_ENVIRONMENT and "no such address" in str(err.value)


def test_run_export_scrapes_reloads_on_sighup_and_stops_on_sigterm(tmp_path, capsys):
    """The whole loop on the fake kernel: a scrape shows the set, SIGHUP
    with a changed file adds its probe, a bad file keeps the set, SIGTERM
    detaches everything and returns 0."""
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nprobes:\n  - spec: vfs_read:c\n    label: reads\n")
    loader = FakeLoader()

    def load():
        ps = load_probeset(str(path), None)
        return ps, {p.name: ps.name for p in ps.probes}

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/metrics"
    seen: dict[str, str] = {}

    def scrape() -> str:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def drive():
        try:
            until(lambda: 'probe="reads"' in scrape(), "the first scrape", timeout=20)
            seen["first"] = scrape()
            path.write_text(path.read_text() + "  - spec: vfs_write:c\n    label: writes\n")
            os.kill(os.getpid(), signal.SIGHUP)
            until(lambda: 'probe="writes"' in scrape(), "the reloaded probe", timeout=20)
            until(lambda: 'ktui_exporter_reloads_total{result="success"} 1.0' in scrape(), "the reload counted",
                  timeout=20)
            seen["after_good"] = scrape()
            path.write_text("name: s\nprobes: [\n")
            os.kill(os.getpid(), signal.SIGHUP)
            until(lambda: "keeping the running" in capsys.readouterr().err, "the reload error", timeout=20)
            until(lambda: 'ktui_exporter_reloads_total{result="failure"} 1.0' in scrape(), "the failure counted",
                  timeout=20)
            seen["after_bad"] = scrape()
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    def open_feed(ps, options):
        session = Session(ps, SessionOptions(log_path=tmp_path / "ktui.log"), loader=loader)
        session.open()
        return session

    threading.Thread(target=drive, daemon=True).start()
    code = run_export(load(), load, SessionOptions(), Listen("127.0.0.1", port, socket.AF_INET),
                      open_feed=open_feed)
    assert code == EXIT_OK
    assert 'ktui_probe_hits_total{probe="reads",set="s"}' in seen["first"]
    assert 'probe="writes"' not in seen["first"]
    for probe in ("reads", "writes"):
        assert f'ktui_probe_attached{{probe="{probe}",set="s"}} 1.0' in seen["after_bad"]
        assert f'ktui_probe_state{{probe="{probe}",set="s",state="attached"}} 1.0' in seen["after_bad"]
    assert "ktui_exporter_last_reload_successful 1.0" in seen["after_good"]
    # a file that did not load: counted, and said until a reload succeeds
    assert 'ktui_exporter_reloads_total{result="success"} 1.0' in seen["after_bad"]
    assert "ktui_exporter_last_reload_successful 0.0" in seen["after_bad"]
    assert "ktui_exporter_scrape_success 1.0" in seen["after_bad"]
    # the server's connections: the scrape's own open, none refused or closed for room
    assert "ktui_exporter_connections_open 1.0" in seen["first"]
    assert "ktui_exporter_connections_refused_total 0.0" in seen["first"]
    assert "ktui_exporter_connections_closed_idle_total 0.0" in seen["first"]
    assert loader.attached == {}  # every probe detached


def test_a_probes_state_is_what_it_is_doing():
    """ktui_probe_state: a kprobe whose program is still loading already
    counts (its dispatcher does); an fentry probe waiting for its program
    counts nothing yet (issue 33: ktui_probe_attached said 1 for both)."""
    from ktui.pipeline.prometheus import PROBE_STATES, probe_state
    from ktui.record.feed import ProbeState, ProbeStatus

    probe = parse_spec("vfs_read:c:a3")

    def status(state, via=""):
        return ProbeStatus(0, probe, state, via=via)

    assert probe_state(status(ProbeState.LOADING, via="kprobe")) == "counting"
    assert probe_state(status(ProbeState.LOADING, via="fentry")) == "loading"
    assert probe_state(status(ProbeState.ATTACHED, via="fentry")) == "attached"
    assert probe_state(status(ProbeState.FAILED)) == "failed"
    assert probe_state(status(ProbeState.OFF)) == "off"
    assert probe_state(status(ProbeState.PENDING)) == "pending"
    assert set(PROBE_STATES) == {s.value for s in ProbeState} | {"counting"}
    view = ProbeView("p", "s", False, ProbeStats(0), state="loading")
    text = exposition([view])
    for name in PROBE_STATES:  # every state, so a query never misses a 0
        expected = 1.0 if name == "loading" else 0.0
        assert f'ktui_probe_state{{probe="p",set="s",state="{name}"}} {expected}' in text


def test_a_failed_map_read_is_counted_said_once_and_the_scrape_still_answers():
    lines: list[str] = []
    fail = {"on": True}

    def read():
        if fail["on"]:
            raise OSError(9, "Bad file descriptor")
        return snapshot()

    from ktui.pipeline.prometheus import ExporterHealth

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProbeCollector(read, health=ExporterHealth(log=lines.append)))
    for _ in range(3):
        text = generate_latest(registry).decode()
    assert "ktui_exporter_scrape_success 0.0" in text
    assert "ktui_exporter_map_read_errors_total 3.0" in text
    assert "ktui_probe_hits_total" not in text  # no numbers rather than wrong ones
    assert len(lines) == 1 and "Bad file descriptor" in lines[0]  # the same reason: one line
    fail["on"] = False
    text = generate_latest(registry).decode()
    assert "ktui_exporter_scrape_success 1.0" in text and "ktui_probe_hits_total" in text
    assert "ktui_exporter_map_read_errors_total 3.0" in text


def test_a_scrape_during_a_slow_reload_answers_at_once_with_the_set_as_it_was(tmp_path):
    """Adding a probe can take seconds (a compile, the verifier): a scrape
    in the meantime gets the set as it was when the reload began, at once,
    rather than time out; then the reloaded set."""
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nprobes:\n  - spec: vfs_read:c\n    label: reads\n")

    def load():
        ps = load_probeset(str(path), None)
        return ps, {p.name: ps.name for p in ps.probes}

    session = Session(load()[0], SessionOptions(log_path=tmp_path / "ktui.log"), loader=FakeLoader())
    session.open()
    adding, release = threading.Event(), threading.Event()
    add_now = session.add_probe_now

    def slow_add(probe):
        adding.set()
        release.wait(30)
        return add_now(probe)

    session.add_probe_now = slow_add
    exporter = Exporter(session, load(), load)
    path.write_text(path.read_text() + "  - spec: vfs_write:c\n    label: writes\n")
    reload = threading.Thread(target=exporter.reload)
    reload.start()
    try:
        assert adding.wait(10)
        seen = []
        scrape = threading.Thread(target=lambda: seen.append(exporter.views()), daemon=True)
        scrape.start()
        scrape.join(5)
        assert not scrape.is_alive(), "the scrape waited for the reload"
        assert [v.name for v in seen[0]] == ["reads"]
    finally:
        release.set()
        reload.join(10)
    assert [v.name for v in exporter.views()] == ["reads", "writes"]
    session.close()


@pytest.mark.parametrize("spec, drains", [("vfs_read:c", False), ("vfs_read:c:a3", True)])
def test_export_drains_only_sets_that_emit_and_a_signal_ends_the_wait(tmp_path, spec, drains):
    """A counting-only set has nothing in its buffers: the main loop must not
    wake to drain them (each wake-up is CPU taken from the traced workload;
    run 5 measured the exporter at 4x `stream`'s slowdown). A set with
    fetches is drained, or the kernel would count its events lost. Either
    way SIGTERM ends the wait at once, not after IDLE_WAKE."""
    import ktui.exporter as exporter_mod

    ps = ProbeSet(name="t", probes=(parse_spec(spec),))
    calls = {"drain": 0}

    def open_feed(probeset, options):
        session = Session(probeset, SessionOptions(log_path=tmp_path / "ktui.log"), loader=FakeLoader())
        session.open()
        inner = session.drain

        def drain():
            calls["drain"] += 1
            return inner()

        session.drain = drain
        return session

    code, waited = export_until_sigterm(ps, open_feed, lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert code == EXIT_OK
    assert (calls["drain"] >= 3) if drains else (calls["drain"] == 0), calls
    assert waited < exporter_mod.IDLE_WAKE / 2, f"SIGTERM took {waited:.1f} s to end the loop"


def test_with_events_off_only_a_compiled_probe_with_fetches_gives_a_drain_work():
    """The exporter's loop drains only while Session.writes_events(): the
    generic engine with events off writes none, whatever its probes fetch
    (its plans have no F_EMITS: test_generic_plan); a compiled unit's
    fetching probe still writes (the compiled engine has no switch)."""
    from types import SimpleNamespace

    from ktui.kernel.session.reading import ReadingMixin

    fetching, counting = parse_spec("vfs_read:c:a3"), parse_spec("vfs_read:c")
    engine = SimpleNamespace(events=False, slots={0: SimpleNamespace(probe=fetching)})
    session = ReadingMixin()
    session._units, session._engine = (), engine
    assert not session.writes_events()
    engine.events = True  # the dashboard's and a stream's session
    assert session.writes_events()
    engine.events, engine.slots = True, {0: SimpleNamespace(probe=counting)}
    assert not session.writes_events()
    unit = SimpleNamespace(program=SimpleNamespace(probes=(counting, fetching)), live={0, 1})
    session._units = (unit,)
    assert session.writes_events()
    unit.live = {0}  # the fetching one removed
    assert not session.writes_events()


def export_until_sigterm(ps, open_feed, send) -> tuple[int, float]:
    """run_export of `ps` on a free port; 0.6 s in (its main loop asleep by
    then: a later signal only ends it sooner), `send()` from another thread.
    (run_export's status, seconds from the send to its return)."""
    sent: dict[str, float] = {}

    def stop_later():
        time.sleep(0.6)
        sent["at"] = time.monotonic()
        send()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    threading.Thread(target=stop_later, daemon=True).start()
    code = run_export((ps, {}), lambda: (ps, {}), SessionOptions(), Listen("127.0.0.1", port, socket.AF_INET),
                      open_feed=open_feed)
    return code, time.monotonic() - sent["at"]


def test_a_signal_another_thread_takes_still_ends_the_wait_at_once(tmp_path):
    """The kernel may hand a process's SIGTERM to any of its threads (a
    scrape's, the server's); Python runs the handler in the main thread only
    when that thread runs. Asleep in Event.wait it did not, until IDLE_WAKE
    (5 s): seen as SIGHUP and SIGTERM taking 5 s in most runs of these
    tests on a busy host. Here the signal goes to a thread of its own."""
    import ktui.exporter as exporter_mod

    ps = ProbeSet(name="t", probes=(parse_spec("vfs_read:c"),))

    def open_feed(probeset, options):
        session = Session(probeset, SessionOptions(log_path=tmp_path / "ktui.log"), loader=FakeLoader())
        session.open()
        return session

    # to the sending thread itself: never the main one
    code, waited = export_until_sigterm(ps, open_feed,
                                        lambda: signal.pthread_kill(threading.get_ident(), signal.SIGTERM))
    assert code == EXIT_OK
    assert waited < exporter_mod.IDLE_WAKE / 2, f"SIGTERM took {waited:.1f} s to end the loop"


def test_scrapes_share_a_kept_alive_connection_that_an_idle_spell_closes(monkeypatch, capfd):
    """Prometheus keeps its scrape connection open: a scrape on it needs no
    new connection, no thread, no TLS handshake. One connection answers
    scrape after scrape (and a 404 between them); left idle past
    KEEP_ALIVE_IDLE, the server closes it, quietly."""
    import http.client

    from ktui import exporter

    monkeypatch.setattr(exporter, "KEEP_ALIVE_IDLE", 0.5)
    scrapes = []

    def render():
        scrapes.append(threading.get_ident())
        return b"ktui_up 1\n", "text/plain"

    server = open_server(Listen("127.0.0.1", 0, socket.AF_INET), render)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # its shutdown waits one poll
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        first_socket = None
        for path, status in (("/metrics", 200), ("/nothing", 404), ("/metrics", 200)):
            conn.request("GET", path)
            reply = conn.getresponse()
            body = reply.read()
            assert reply.status == status and reply.version == 11, (path, reply.status, reply.version)
            assert reply.getheader("Connection") != "close"
            first_socket = first_socket or conn.sock
            assert conn.sock is first_socket  # not reconnected
        assert body == b"ktui_up 1\n"
        assert len(scrapes) == 2 and len(set(scrapes)) == 1  # one connection, one thread
        sock = conn.sock
        sock.settimeout(10)
        assert sock.recv(1) == b""  # closed by the server once idle
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
    out, err = capfd.readouterr()
    assert out == "" and err == ""


@contextmanager
def serving_health():
    """An open_server whose pages are the exporter's health, its connection
    counts included (as run_export wires them), serving in a thread."""
    from ktui.pipeline.prometheus import ExporterHealth

    health = ExporterHealth()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProbeCollector(lambda: [], health=health, clock=lambda: 0.0))
    server = open_server(Listen("127.0.0.1", 0, socket.AF_INET),
                         lambda: (generate_latest(registry), "text/plain"))
    health.connections = server.connections
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # its shutdown waits one poll
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def get_page(conn) -> str:
    """One GET /metrics on an http.client connection (kept alive)."""
    conn.request("GET", "/metrics")
    reply = conn.getresponse()
    body = reply.read().decode()
    assert reply.status == 200, reply.status
    return body


def closed_by_server(sock, timeout: float = 10.0) -> bool:
    """Whether the server closed `sock` (EOF or a reset) within `timeout`."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_at_the_connection_cap_the_longest_idle_connection_makes_room(monkeypatch, capfd):
    """Kept-alive connections hold a thread each: at MAX_CONNECTIONS a new
    one closes the connection idle the longest (its scraper reconnects) and
    is served; the others stay. Counted in the health metrics."""
    import http.client

    from ktui import exporter

    monkeypatch.setattr(exporter, "MAX_CONNECTIONS", 2)
    with serving_health() as server:
        port = server.server_address[1]
        first, second, third = (http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(3))
        try:
            get_page(first)
            until(lambda: server.connections().idle == 1, "the first connection idle")
            get_page(second)
            until(lambda: server.connections().idle == 2, "both idle")
            kept = second.sock
            get_page(third)  # served at the cap
            assert closed_by_server(first.sock)  # the one idle the longest
            page = get_page(second)  # still open, on its own connection
            assert second.sock is kept
            assert "ktui_exporter_connections_closed_idle_total 1.0" in page, page
            assert "ktui_exporter_connections_refused_total 0.0" in page
            assert "ktui_exporter_connections_open 2.0" in page
            counts = server.connections()
            assert (counts.open, counts.refused, counts.closed_idle) == (2, 0, 1), counts
        finally:
            for conn in (first, second, third):
                conn.close()
        until(lambda: server.connections().open == 0, "every connection's thread ended")
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # nothing said per connection


def test_at_the_cap_with_every_connection_busy_a_new_one_is_refused_at_once(monkeypatch, capfd):
    """Connections mid-request are not closed for room: a new one is closed
    at once (counted), the accept loop never waits; once a request is
    answered its connection is idle, and the next new one is served."""
    import http.client

    from ktui import exporter

    monkeypatch.setattr(exporter, "REQUEST_TIMEOUT", 300.0)  # mid-request for as long as the test needs
    monkeypatch.setattr(exporter, "MAX_CONNECTIONS", 2)
    with serving_health() as server:
        port = server.server_address[1]
        busy = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(2)]
        try:
            for sock in busy:
                sock.sendall(b"GET /metr")  # a request line, cut short: they hang mid-request
            until(lambda: server.connections()[:2] == (2, 0), "both connections busy")
            for n in (1, 2):
                with socket.create_connection(("127.0.0.1", port), timeout=10) as refused:
                    assert closed_by_server(refused)  # not held until a busy one ends
                assert server.connections().refused == n  # counted before it was closed
            busy[0].sendall(b"ics HTTP/1.1\r\nHost: x\r\n\r\n")  # that request is whole: answered
            reply = b""
            while b"ktui_exporter_connections_refused_total 2.0" not in reply:
                data = busy[0].recv(65536)
                assert data, reply
                reply += data
            until(lambda: server.connections().idle == 1, "the answered connection idle")
            served = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                page = get_page(served)  # it made room
            finally:
                served.close()
            assert "ktui_exporter_connections_closed_idle_total 1.0" in page, page
            assert closed_by_server(busy[0])
        finally:
            for sock in busy:
                sock.close()
    out, err = capfd.readouterr()
    assert out == "" and err == ""

def test_a_request_begun_and_stalled_is_closed_but_an_idle_connection_is_kept(monkeypatch, capfd):
    """A client that sends part of a request and stalls would hold a busy
    connection (one of MAX_CONNECTIONS) for the whole keep-alive bound:
    past REQUEST_TIMEOUT it is closed, quietly. An idle kept-alive
    connection keeps the keep-alive bound: the shorter one is the
    request's alone."""
    import http.client

    from ktui import exporter

    monkeypatch.setattr(exporter, "REQUEST_TIMEOUT", 0.5)
    with serving_health() as server:
        port = server.server_address[1]
        kept = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            get_page(kept)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as stalled:
                stalled.sendall(b"GET /metr")  # and nothing more
                assert closed_by_server(stalled, timeout=60)
            until(lambda: server.connections().open == 1, "the stalled connection gone")
            time.sleep(1.0)  # the kept one idle past REQUEST_TIMEOUT: still open
            assert server.connections().open == 1
            page = get_page(kept)  # the same connection
            assert "ktui_exporter_connections_open 1.0" in page, page
        finally:
            kept.close()
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_a_burst_of_connections_makes_no_more_threads_than_the_cap(monkeypatch):
    """50 connections at once, each hanging mid-request: the server's
    handler threads stay within the cap (and the connections it closed for
    room, while their threads end: at most the cap again), and every
    connection is served, closed for room or refused."""
    from ktui import exporter

    cap, burst = 4, 50
    monkeypatch.setattr(exporter, "REQUEST_TIMEOUT", 300.0)  # mid-request for as long as the test needs
    monkeypatch.setattr(exporter, "MAX_CONNECTIONS", cap)
    with serving_health() as server:
        port = server.server_address[1]
        baseline = threading.active_count()
        peak = {"threads": 0}
        done = threading.Event()

        def watch():
            while not done.is_set():
                peak["threads"] = max(peak["threads"], threading.active_count() - baseline - 1)  # not this one
                time.sleep(0.001)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        clients = []
        try:
            for _ in range(burst):
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                clients.append(sock)
                sock.sendall(b"GET /metr")
            until(lambda: sum(server.connections()[i] for i in (0, 2, 3)) == burst,
                     "every connection served, closed for room or refused")
            counts = server.connections()
            assert counts.open == cap and counts.idle == 0, counts
            until(lambda: threading.active_count() - baseline - 1 <= cap,
                     "only the served connections' threads left")
        finally:
            done.set()
            watcher.join(10)
            for sock in clients:
                sock.close()
        # handler threads: the cap's, and those closed for room while they end
        # (at most the cap again), and one or two in their last instant
        assert peak["threads"] <= 2 * cap + 2, peak
        until(lambda: server.connections().open == 0, "every connection's thread ended")


@pytest.mark.parametrize("fails", [False, True])
def test_a_scraper_that_gives_up_or_a_failing_read_is_no_traceback(capfd, fails):
    """Prometheus closes a scrape at its scrape_timeout (seen in the VM while a
    SIGHUP reload held the set): the reply then meets a closed socket. That,
    and a render that raises, must not print socketserver's traceback on the
    exporter's stderr; the server keeps serving the next scrape."""
    gone = threading.Event()
    rendering = threading.Event()
    calls = {"n": 0}

    def render():
        calls["n"] += 1
        if calls["n"] == 1:
            rendering.set()
            gone.wait(10)  # the client has closed before the reply
            if fails:
                raise RuntimeError("map read failed")
            return b"x" * 1_000_000, "text/plain"
        return b"ok\n", "text/plain"

    server = open_server(Listen("127.0.0.1", 0, socket.AF_INET), render)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # its shutdown waits one poll
    try:
        with socket.create_connection(("127.0.0.1", port)) as c:
            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            # closed only once the server has read the request: a reset that
            # came first (a loaded machine) failed the read, not the reply, and
            # the next scrape got the first one's answer
            assert rendering.wait(10), "the server never read the first scrape"
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        gone.set()  # closed with a reset: the reply's writes fail
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert r.read() == b"ok\n"
    finally:
        server.shutdown()
        server.server_close()
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    if fails:
        assert err.count("\n") == 1 and "map read failed" in err, err
    else:  # a scraper that went away is not worth a line
        assert err == "", err


def aggregation_views() -> list[ProbeView]:
    """Probes with hist, count by comm with a signed sum, count by two keys
    of which one has no label name, and an unsigned sum without keys."""
    from ktui.lang.probeset import loads_probeset
    from ktui.pipeline.prometheus import value_shape

    ps = loads_probeset("name: agg\nprobes:\n"
                        "  - spec: bytes=vfs_read:r count(comm) sum(retval) hist(a3)\n"
                        "  - spec: sizes=vfs_read:c count(a3, +0(a4):s64) max_keys(64)\n"
                        "  - spec: total=vfs_read:c sum(a3)\n")
    hist = [0] * HIST_SLOTS
    hist[1], hist[3], hist[13] = 4, 2, 1  # 1; 4..7; 4096..8191
    top = tuple(((f"c{i}",), 20 - i, 100 * (20 - i)) for i in range(12))[:10]
    stats = {
        "bytes": ProbeStats(0, hits=300, value_hist=tuple(hist), value_hist_sum=4 + 10 + 4096,
                            top_values=((("dd",), 5, 900),) + top, value_keys=13),
        "sizes": ProbeStats(1, hits=40, top_values=(((7, -1), 30, 0), ((4096, 0), 6, 0)), value_keys=2,
                            values_dropped=4),
        "total": ProbeStats(2, hits=3, top_values=(((), 3, 12),), value_keys=1),
    }
    return [ProbeView(p.name, "agg", p.kind.name == "RETURN", stats[p.name], **value_shape(p))
            for p in ps.probes]


def test_every_aggregation_is_exported_with_its_keys_as_labels():
    samples = parsed(exposition(aggregation_views()))
    base = {"bytes": frozenset({("set", "agg"), ("probe", "bytes")}),
            "sizes": frozenset({("set", "agg"), ("probe", "sizes")}),
            "total": frozenset({("set", "agg"), ("probe", "total")})}
    # hist(a3): buckets at exact integer bounds, the kernel's sum
    buckets = {dict(k)["le"]: v for (name, k), v in samples.items()
               if name == "ktui_probe_value_bucket" and frozenset(kv for kv in k if kv[0] != "le") == base["bytes"]}
    assert len(buckets) == HIST_SLOTS + 1
    assert buckets["0"] == 0 and buckets["1"] == 4 and buckets["3"] == 4 and buckets["7"] == 6
    assert buckets["4095"] == 6 and buckets["8191"] == 7 == buckets["+Inf"]
    assert samples["ktui_probe_value_sum", base["bytes"]] == 4 + 10 + 4096
    assert samples["ktui_probe_value_count", base["bytes"]] == 7
    assert ("ktui_probe_value_count", base["sizes"]) not in samples  # no hist there
    # count(comm) sum(retval): hits and the sum by comm
    assert samples["ktui_probe_key_hits_total", base["bytes"] | {("comm", "dd")}] == 5
    assert samples["ktui_probe_key_sum_total", base["bytes"] | {("comm", "dd")}] == 900
    assert ("ktui_probe_key_sum_total", base["sizes"] | {("a3", "7"), ("key2", "-1")}) not in samples  # no sum
    # at most 10 series; the rest counted as omitted keys
    assert sum(1 for name, k in samples if name == "ktui_probe_key_hits_total" and k >= base["bytes"]) == 10
    assert samples["ktui_probe_keys", base["bytes"]] == 13
    assert samples["ktui_probe_keys_omitted", base["bytes"]] == 3
    # two keys, the second no label name: key2
    assert samples["ktui_probe_key_hits_total", base["sizes"] | {("a3", "7"), ("key2", "-1")}] == 30
    assert samples["ktui_probe_key_hits_dropped_total", base["sizes"]] == 4
    # sum(a3) without keys: one series of no key label, an unsigned counter
    assert samples["ktui_probe_key_sum_total", base["total"]] == 12
    assert samples["ktui_probe_key_hits_total", base["total"]] == 3


def test_key_label_names():
    from ktui.pipeline.prometheus import key_labels

    assert key_labels(["comm", "a3"]) == ("comm", "a3")
    assert key_labels(["+0(a4):s64", "size", "probe", "__x", "comm", "comm"]) == (
        "key1", "size", "key3", "key4", "comm", "key6")


def test_a_signal_during_a_scrape_closes_the_session_only_after_it(tmp_path, capfd):
    """Scrapes run in the server's threads, which its shutdown does not
    wait for: a SIGINT in the middle of a scrape closed the maps it was
    reading (`a scrape could not read the maps: ... Bad file descriptor`,
    the hour-long run). The session closes once the scrape is done."""
    ps = ProbeSet(name="t", probes=(parse_spec("vfs_read:c"),))
    order: list[str] = []
    reading, release = threading.Event(), threading.Event()

    def open_feed(probeset, options):
        session = Session(probeset, SessionOptions(log_path=tmp_path / "ktui.log"), loader=FakeLoader())
        session.open()
        stats, close = session.stats, session.close

        def slow_stats(detail=True):
            if not reading.is_set():
                reading.set()
                release.wait(30)  # the scrape is reading the maps
            snap = stats(detail=detail)
            order.append("read")
            return snap

        def closing():
            order.append("close")
            return close()

        session.stats, session.close = slow_stats, closing
        return session

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def scrape_then_signal():
        scrape = threading.Thread(target=lambda: urllib.request.urlopen(
            f"http://127.0.0.1:{port}/metrics", timeout=30).read(), daemon=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the server is up once the port answers
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        scrape.start()
        # signalled whatever came of the scrape: run_export must return (a
        # scrape that never read would fail the test below, not hang it)
        order.append("scraping" if reading.wait(30) else "no scrape read the maps")
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # the main loop has seen the signal and stops: the scrape still reads
        release.set()

    threading.Thread(target=scrape_then_signal, daemon=True).start()
    code = run_export((ps, {}), lambda: (ps, {}), SessionOptions(), Listen("127.0.0.1", port, socket.AF_INET),
                      open_feed=open_feed)
    assert code == EXIT_OK
    assert order[:3] == ["scraping", "read", "close"], order
    assert "could not read the maps" not in capfd.readouterr().err
