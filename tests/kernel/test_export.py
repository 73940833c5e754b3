"""`ktui export` scraped by a real Prometheus (Debian's `prometheus`,
installed by scripts/install.sh --test), all inside the guest.

The exporter runs as the systemd unit runs it: as nobody, with exactly the
unit's capabilities. A workload makes a known number of vfs_read calls (and
opens); the test asks Prometheus's HTTP API for the raw samples it scraped
(a range selector, never increase(), which extrapolates) and requires the
counters to have grown by exactly that many, and the latency histogram's
_count by exactly the number of returns. Then SIGHUP: a changed file adds a
probe that shows in the metrics and counts exactly, a bad file keeps the
running set. Then SIGTERM: exit 0 and no kprobe left behind.

The exporter serves over TLS with basic auth (--web-config, a self-signed
certificate): Prometheus scrapes it with the certificate and the password;
a job with a wrong password, and a request with none, are refused."""

from __future__ import annotations

import base64
import json
import shutil
import signal
import socket
import subprocess
import sys
import ssl
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.pki import bcrypt_hash, self_signed

from .conftest import LineReader, kprobe_entries, wait_for
from .test_exit_paths import check_clean

KTUI = [sys.executable, "-m", "ktui"]
READS, BADREADS, OPENS, READS_AFTER_RELOAD = 40, 5, 3, 10
# `sizes` (count(a3) of vfs_write, max_keys 11): size 20+i written i+1
# times. The first 11 sizes fill its map; the 12th (12 writes) and the
# workload's "done\n" (5 bytes) find no room: 13 hits dropped, counted. Of
# the 11 keys kept, the exporter's cap of 10 series per probe leaves out
# the smallest (size 20, 1 write): one key omitted, counted.
WRITE_SIZES = [["write", 20 + i, i + 1] for i in range(12)]
# A sample is stamped with its scrape's start, but its value is whatever the
# exporter answered up to scrape_timeout later (a slower answer is dropped).
# So only a sample older than this at a phase's start shows the state before it.
SCRAPE_TIMEOUT = 1.0
SET = """name: exp
probes:
  - spec: vfs_read:c
    label: calls
  - spec: vfs_read:r
    label: rets
  - spec: kcalls=vfs_read:c:a3
    attach: kprobe
  - spec: bytes=vfs_read:r count(comm) sum(retval) hist(a3)
  - spec: sizes=vfs_write:c count(a3)
    max_keys: 11
"""
SET_WITH_OPENS = SET + """  - spec: do_sys_openat2:c
    label: opens
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, tls: ssl.SSLContext | None = None, password: str | None = None) -> str:
    request = urllib.request.Request(url)
    if password is not None:
        token = base64.b64encode(f"prometheus:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=30, context=tls) as r:
        return r.read().decode()


def web_config(tmp_path) -> tuple[str, ssl.SSLContext]:
    """A web config file (TLS with a self-signed certificate, one user
    `prometheus` whose password is `right`), and a client context that
    trusts that certificate."""
    cert, key = self_signed(tmp_path, "server")
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
                   f"basic_auth_users:\n  prometheus: '{bcrypt_hash('right')}'\n")
    return str(web), ssl.create_default_context(cafile=str(cert))


def scrape_job(name: str, port: int, cert: str, password: str) -> str:
    return (f"  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {cert}\n"
            f"    basic_auth:\n      username: prometheus\n      password: {password}\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")


class Lines(LineReader):
    """A process's stderr (read by conftest's thread, so it never blocks), as text."""

    def has(self, text: str) -> bool:
        return text in str(self)

    def __str__(self) -> str:
        return b"".join(self.lines).decode(errors="replace")


class Prom:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def samples(self, selector: str) -> list[tuple[float, float]]:
        """The raw samples of the one series `selector` picks, oldest first."""
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": f"{selector}[1h]"})
        body = json.loads(get(url))
        assert body["status"] == "success", body
        result = body["data"]["result"]
        if not result:
            return []
        assert len(result) == 1, result
        return [(float(t), float(v)) for t, v in result[0]["values"]]

    def scraped_after(self, selector: str, moment: float) -> list[tuple[float, float]]:
        """The samples once one was scraped after `moment` (the guest's clock)."""
        wait_for(lambda: any(t > moment for t, _ in self.samples(selector)),
                 f"a scrape of {selector} after the workload", timeout=300)
        return self.samples(selector)

    def wait_settled(self, *selectors: str) -> None:
        """Until each selector has a sample whose answer was surely given by now."""
        def settled(selector: str) -> bool:
            try:
                return any(t + SCRAPE_TIMEOUT < time.time() for t, _ in self.samples(selector))
            except OSError:  # not listening yet
                return False
        try:
            wait_for(lambda: all(settled(s) for s in selectors), "a scrape before the workload", timeout=600)
        except BaseException:  # say which series never came (a timeout, or Prometheus gone)
            print("not scraped:", [s for s in selectors if not settled(s)], file=sys.stderr)
            raise


def growth(samples: list[tuple[float, float]], since: float) -> float:
    """Last value minus the last value surely answered before `since`."""
    before = [v for t, v in samples if t + SCRAPE_TIMEOUT < since]
    assert before, f"no sample before the workload: {samples}"
    return samples[-1][1] - before[-1]


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:  # every process this test started, whatever happened
        if p.poll() is None:
            p.kill()
            p.wait()


def test_prometheus_scrapes_a_least_privileged_exporter_exactly_over_tls_through_reloads(
        ktui_for_anyone, workload, procs, tmp_path):
    """As the systemd unit runs it (contrib/export/ktui-export.service): not
    root, with exactly the capabilities the unit grants (read from the unit
    file, so the two cannot drift apart), on Debian's stock kernel
    (kernel.perf_event_paranoid=3). Every probe attaches, by fentry and by
    kprobe; Prometheus scrapes it over TLS with basic auth and reads exact
    counts; SIGHUP reloads; nothing is reported as not permitted; SIGTERM
    detaches everything. One exporter start for all of it: each start
    loads and verifies programs, the dearest part under emulation."""
    from tests.unitfile import capabilities, service_settings

    assert shutil.which("prometheus"), "Debian's prometheus is missing: scripts/install.sh --test"
    caps = ",".join(f"+{c}" for c in sorted(capabilities(service_settings())))
    python, env = ktui_for_anyone("click", "prometheus_client", "bcrypt")  # bcrypt: the web config's users
    home = Path(tempfile.mkdtemp(prefix="ktui-export-"))  # in /tmp: nobody may pass (tmp_path's parent is 0700)
    home.chmod(0o777)
    opened = str(home / "opened")
    w = workload([[["comm", "ktui-exp"], ["read", 7, READS], ["badread", BADREADS], *WRITE_SIZES],
                  [["open", opened]] * OPENS + [["read", 7, READS_AFTER_RELOAD]]])
    set_file = home / "exp.yaml"
    set_file.write_text(SET)
    export_port, prom_port = free_port(), free_port()
    metrics_url = f"https://127.0.0.1:{export_port}/metrics"
    web, tls = web_config(home)
    for path in home.iterdir():  # the set, the certificate, its key and the web config: nobody reads them
        path.chmod(0o644)
    before = len(kprobe_entries())

    def metrics() -> str:
        return get(metrics_url, tls, "right")

    exporter = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", f"--inh-caps=-all,{caps}",
         f"--ambient-caps=-all,{caps}", f"--bounding-set=-all,{caps}", *python,
         "export", str(set_file), "--pid", str(w.pid), "--listen", f"127.0.0.1:{export_port}",
         "--web-config", web, "--log", str(home / "ktui.log")],
        stderr=subprocess.PIPE, env={**env, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache")}, cwd="/")
    procs.append(exporter)
    err = Lines(exporter.stderr)
    wait_for(lambda: err.has("serving metrics") or exporter.poll() is not None, "ktui export as nobody",
             timeout=600)
    assert exporter.poll() is None, str(err)
    if err.has("loading their program"):  # the generic program: events and latencies once it is in
        wait_for(lambda: err.has("probe(s) live") or exporter.poll() is not None, "the program", timeout=900)
    assert 'ktui_probe_hits_total{probe="calls",set="exp"}' in metrics()
    for password in (None, "wrong"):  # no password, a wrong one: refused
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(metrics_url, tls, password)
        assert refused.value.code == 401, password

    config = tmp_path / "prometheus.yml"
    cert = str(home / "server.crt")
    config.write_text("global:\n  scrape_interval: 1s\n"
                      f"  scrape_timeout: {SCRAPE_TIMEOUT:g}s\nscrape_configs:\n"
                      + scrape_job("ktui", export_port, cert, "right")
                      + scrape_job("intruder", export_port, cert, "wrong"))
    prom_proc = subprocess.Popen(["prometheus", f"--config.file={config}",
                                  f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                  f"--web.listen-address=127.0.0.1:{prom_port}"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(prom_proc)
    prom = Prom(prom_port)
    calls = 'ktui_probe_hits_total{probe="calls"}'
    kcalls = 'ktui_probe_hits_total{probe="kcalls"}'
    count = 'ktui_probe_latency_seconds_count{probe="rets"}'
    inf_bucket = 'ktui_probe_latency_seconds_bucket{probe="rets",le="+Inf"}'

    values = 'ktui_probe_value_count{probe="bytes"}'
    prom.wait_settled(calls, kcalls, count, values, 'up{job="intruder"}')
    # Prometheus scrapes with the password; a job with a wrong one gets nothing
    assert prom.samples('up{job="ktui"}')[-1][1] == 1
    assert {v for _, v in prom.samples('up{job="intruder"}')} == {0.0}

    # 1. exact counts through Prometheus, by fentry/fexit and by kprobe
    start = time.time()
    w.run_phase()
    done = time.time()
    assert growth(prom.scraped_after(calls, done), start) == READS + BADREADS
    assert growth(prom.scraped_after(kcalls, done), start) == READS + BADREADS
    # kcalls fetches a3, yet the exporter has no use for its events: none
    # is written (none lost), where a stream of the set writes one a hit
    for events in ("emitted", "lost"):
        written = prom.scraped_after(f'ktui_probe_events_{events}_total{{probe="kcalls"}}', done)
        assert {v for _, v in written} == {0.0}, (events, written)
    assert growth(prom.scraped_after(count, done), start) == READS + BADREADS
    assert growth(prom.scraped_after(inf_bucket, done), start) == READS + BADREADS
    ebadf = prom.scraped_after('ktui_probe_errno_total{probe="rets",errno="EBADF"}', done)
    assert ebadf[-1][1] == BADREADS
    latency_sum = prom.scraped_after('ktui_probe_latency_seconds_sum{probe="rets"}', done)
    assert growth(latency_sum, start) > 0
    # the aggregations of `bytes`: hist(a3) (7 and 13 bytes asked for), by
    # comm the hits and the sum of retval (7 each read; -EBADF, counted, not summed)
    assert growth(prom.scraped_after(values, done), start) == READS + BADREADS
    assert growth(prom.scraped_after('ktui_probe_value_sum{probe="bytes"}', done), start) == 7 * READS + 13 * BADREADS
    assert growth(prom.scraped_after('ktui_probe_value_bucket{probe="bytes",le="7"}', done), start) == READS
    assert growth(prom.scraped_after('ktui_probe_value_bucket{probe="bytes",le="15"}', done),
                  start) == READS + BADREADS
    by_comm = '{probe="bytes",comm="ktui-exp"}'
    assert prom.scraped_after(f"ktui_probe_key_hits_total{by_comm}", done)[-1][1] == READS + BADREADS
    assert prom.scraped_after(f"ktui_probe_key_sum_total{by_comm}", done)[-1][1] == 7 * READS
    # the caps: a full map's hits dropped and counted, a key past the 10
    # series a probe exports counted as omitted
    assert prom.scraped_after('ktui_probe_key_hits_dropped_total{probe="sizes"}', done)[-1][1] == 12 + 1
    assert prom.scraped_after('ktui_probe_keys_omitted{probe="sizes"}', done)[-1][1] == 1
    sizes = sorted(int(float(line.rsplit(" ", 1)[1])) for line in metrics().splitlines()
                   if line.startswith("ktui_probe_key_hits_total{") and 'probe="sizes"' in line)
    assert sizes == list(range(2, 12)), sizes  # sizes 21-30, the ten most written

    # 2. SIGHUP with a changed file: the new probe shows and counts exactly
    set_file.write_text(SET_WITH_OPENS)
    exporter.send_signal(signal.SIGHUP)
    opens = 'ktui_probe_hits_total{probe="opens"}'
    wait_for(lambda: 'probe="opens"' in metrics(), "the reloaded probe", timeout=300)
    prom.wait_settled(opens)
    start2 = time.time()
    w.run_phase()
    done2 = time.time()
    assert growth(prom.scraped_after(opens, done2), start2) == OPENS
    # the unchanged probe kept counting across the reload: no reset
    assert growth(prom.scraped_after(calls, done2), start) == READS + BADREADS + READS_AFTER_RELOAD

    # 3. SIGHUP with a bad file: one line, the running set stays
    set_file.write_text("name: exp\nprobes: [\n")
    exporter.send_signal(signal.SIGHUP)
    wait_for(lambda: err.has("keeping the running probe set"), "the reload error", timeout=300)
    wait_for(lambda: 'ktui_exporter_reloads_total{result="failure"} 1.0' in metrics(), "the failed reload counted",
             timeout=120)
    page = metrics()
    for probe in ("calls", "rets", "kcalls", "bytes", "opens"):
        assert f'ktui_probe_attached{{probe="{probe}",set="exp"}} 1.0' in page, page
        assert f'ktui_probe_state{{probe="{probe}",set="exp",state="attached"}} 1.0' in page, page
    # the exporter's health: one reload took, one did not; the maps read
    assert 'ktui_exporter_reloads_total{result="success"} 1.0' in page, page
    assert "ktui_exporter_last_reload_successful 0.0" in page, page
    assert "ktui_exporter_scrape_success 1.0" in page and "ktui_exporter_map_read_errors_total 0.0" in page

    # 4. SIGTERM: every probe detached, exit 0
    exporter.send_signal(signal.SIGTERM)
    assert exporter.wait(timeout=300) == 0, str(err)
    assert "Traceback" not in str(err), str(err)
    log = (home / "ktui.log").read_text()
    for missing in ("not permitted", "permission denied", "tracefs is closed", "interrupt context not known"):
        assert missing not in log, log
    check_clean(before)
    shutil.rmtree(home)
