"""The kernel half of `make bench`: run inside ONE VM boot, as root.

    python benchmarks/vm_suite.py --workload bench-out/workload --out bench-out/vm.json

Every tool runs in turn against the same static workload (benchmarks/workload.c)
and is compared with untraced rounds run before, between and after the tools.
A tool counts as live only once all its probes are listed in
/sys/kernel/debug/kprobes/list (entries counted before and after), and it must
leave that list as it found it; an fentry/fexit tool is not listed there, it
is live once its tracing links are (bpftool link list). Only ratios within
this one run mean anything: the VM is emulated (TCG) and shares the host with
other work.

Parts (`--parts`, default all, in this order): warm_up, stats_only,
streaming, startup, live_edit, listing, compare, spans. `compare` alone (after
warm_up, which fills the program cache the ktui tools then load from) is the
rows of issues 13, 14 and 16: fentry vs funccount, fexit vs bpftrace
entry+return, hist() vs argdist and bpftrace, stack(kernel) vs stackcount and
bpftrace, export scraped every second vs stream (and the exporter's RSS):

    --parts warm_up,compare [--compare-rows fentry,export] [--export-mem-seconds 180]

The export row's scraper runs in this suite by default, on the guest's CPU
beside the workload; `make bench` and benchmarks/export_host_scraped.py run
it on the host (benchmarks/host_scrape.py), as a real Prometheus would be
(run 13 on).

`spans` alone is issue 32's rows: a span's cost per pair, by struct request *
over O_DIRECT reads of a loop device against biolatency-bpfcc and a bpftrace
kprobe pair, and by the thread between the read syscall's tracepoints
against a bpftrace tracepoint pair (each tool launched --span-cycles times,
in turned order, untraced rounds after each):

    --parts warm_up,spans [--span-n 5000] [--n 100000] [--span-cycles 3] [--span-tools ...]

`export_hour` (not in the default parts: it takes the hour) is issue 33's
"memory stays flat over an hour of scrapes with keys churning": `ktui
export` of CHURN_SET, scraped every second over HTTP, while `workload
churn` starts short-lived processes (a new pid and task name each) so its
count maps fill within minutes and then drop; every --export-hour-every s
the exporter's RSS and peak, the series of the last scrape, its keys and
dropped hits, and that interval's scrape durations and errors:

    --parts export_hour [--export-hour-seconds 3600] [--export-hour-rate 5]  (no warm_up: the
    set runs in the shipped generic program, nothing to compile)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

KPROBES_LIST = Path("/sys/kernel/debug/kprobes/list")
FILTER_FUNCS = Path("/sys/kernel/debug/tracing/available_filter_functions")
KTUI = str(Path(sys.executable).with_name("ktui"))
# Candidates for the 20-probe startup run; the first 20 the kernel can probe are used.
CANDIDATES = (
    "vfs_read vfs_write vfs_open vfs_getattr vfs_statx vfs_fstat vfs_llseek vfs_fsync "
    "vfs_fsync_range vfs_readv vfs_writev vfs_iter_read vfs_iter_write vfs_unlink vfs_mkdir "
    "vfs_rmdir vfs_rename vfs_create vfs_truncate vfs_fallocate vfs_getxattr vfs_setxattr "
    "vfs_listxattr vfs_statfs vfs_link vfs_symlink vfs_readlink ksys_read ksys_write ksys_lseek "
    "ksys_pread64 ksys_pwrite64 ksys_fallocate ksys_sync ksys_fadvise64_64 ksys_readahead"
).split()
LIVE_TIMEOUT = 150.0
# A kprobe is listed in kprobes/list as soon as its perf event is opened, before
# the BPF program is attached and enabled: the first run counted only 963,149 of
# 1,000,000 reads in ktui's `hits` when the round started at "live". Wait a bit.
ATTACH_GRACE = 2.0
PART_TIMEOUT = 600
# compare runs 15 tools (five bcc compiles among them) and the exporter's memory run
PART_TIMEOUTS = {"compare": 3600, "spans": 3600}
# with --base-tree: warm_up compiles the base's programs too (both variants,
# nothing cached: its program text and so its cache key differ from today's),
# and stats_only runs three more tools (the base's compiled one compiles as it
# starts), each launched, settled, timed and followed by an untraced round:
# 600 s was not made for twelve tools under emulation
BASE_PART_TIMEOUTS = {"warm_up": 1500, "stats_only": 2400}
CASE_TIMEOUT = 200  # seconds: a hung case is abandoned, the suite goes on
EXIT_TIMEOUT = 20.0


COMPARE_ROWS = ("fentry", "fexit", "hist", "stack", "export")
# the compare part's exporters that are scraped every second (the memory run
# follows the first; the unscraped one is what an exporter costs by itself)
SCRAPED_EXPORTS = ("ktui_export", "ktui_export_fetch")
SPAN_ROWS = ("block", "syscall")
# the block span (issue 32): a block request from its start to its end,
# joined by its struct request *, as biolatency-bpfcc pairs them
SPAN_RQ = "io=blk_mq_end_request:c:rq since(blk_mq_start_request:c:rq)"
SPAN_TID = "syscalls/sys_exit_read:t since(syscalls/sys_enter_read:t)"
# the largest `sample:`: at most one event is written, the rest of each
# hit (the start's lookup, the histogram, the counters) is as without it
SAMPLE_MAX = 2**32 - 1
# biolatency-bpfcc reads /proc/kallsyms in Python (get_kprobe_functions)
# before it attaches: past 150 s under emulation on a loaded host
SPAN_LIVE_TIMEOUT = 400.0
HITS_METRIC = re.compile(r"^ktui_probe_hits_total\{[^}]*\} ([0-9.e+]+)$", re.M)
MAP_READ_METRIC = re.compile(r"^ktui_exporter_scrape_duration_seconds ([0-9.e+-]+)$", re.M)
SAMPLE_LINE = re.compile(r"^(\w+)(?:\{([^}]*)\})? (\S+)$", re.M)
PROBE_LABEL = re.compile(r'(?:^|,)probe="([^"]*)"')
# The exporter's hour (issue 33): keys that never stop coming (each process
# of `workload churn` has a pid and a task name never seen before), with
# max_keys small enough that the count maps fill within minutes at a few
# forks a second, so the full-map policy (dropped and counted) and the
# series cap (the top 10 keys exported) are what the hour exercises.
CHURN_SET = """\
name: churn
probes:
  - spec: vfs_read:r
    label: read_by_pid
    count: [pid]
    sum: retval
    max_keys: 1024
  - spec: vfs_read:c
    label: read_by_comm
    count: [comm]
    max_keys: 512
  - spec: vfs_read:c
    label: read_size
    hist: a3
"""


def status_kb(pid: int, *fields: str) -> dict[str, int | None]:
    """Fields of /proc/PID/status in KiB (VmRSS, VmHWM, RssAnon...), or
    counts (Threads); None for each when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return dict.fromkeys(fields)
    out: dict[str, int | None] = {}
    for field in fields:
        m = re.search(rf"^{field}:\s+(\d+)", text, re.M)
        out[field] = int(m.group(1)) if m else None
    return out


def rss_kb(pid: int) -> int | None:
    """The process's resident set now (VmRSS), in KiB."""
    return status_kb(pid, "VmRSS")["VmRSS"]


def forks_since_boot() -> int:
    """Processes made since boot (/proc/stat's `processes`)."""
    m = re.search(r"^processes (\d+)$", Path("/proc/stat").read_text(), re.M)
    return int(m.group(1)) if m else 0


def metric_by_probe(body: str, name: str) -> dict[str, float]:
    """A metric's value by its `probe` label in a scrape's text."""
    out = {}
    for m in SAMPLE_LINE.finditer(body):
        if m.group(1) == name:
            probe = PROBE_LABEL.search(m.group(2) or "")
            out[probe.group(1) if probe else ""] = float(m.group(3))
    return out


def probes_attached(url: str) -> int:
    """The probes a scrape says are attached (0 when nothing answers yet):
    how the exporter's hour sees it live, from what it serves."""
    import urllib.request
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = resp.read().decode()
    except OSError:
        return 0
    return sum(1 for m in SAMPLE_LINE.finditer(body) if m.group(1) == "ktui_probe_state"
               and 'state="attached"' in (m.group(2) or "") and float(m.group(3)) == 1)


def quantiles(values: list[float]) -> dict[str, float | None]:
    """Median and p99 (nearest rank: of 60 values, the slowest)."""
    v = sorted(values)
    if not v:
        return {"median": None, "p99": None}
    return {"median": v[len(v) // 2], "p99": v[min(len(v) - 1, -(-99 * len(v) // 100) - 1)]}


def folded_total(path: str) -> int | None:
    """The sum of the counts in a folded-stacks file (`a;b;c COUNT` lines)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    return sum(int(line.rsplit(" ", 1)[1]) for line in lines if line.strip())


def bpf_prog_runs() -> dict[int, dict]:
    """Every BPF program's run count and run time (kernel.bpf_stats_enabled=1),
    by id, from bpftool's JSON."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    progs = json.loads(out.stdout or "[]") if out.returncode == 0 else []
    return {p["id"]: {"name": p.get("name", ""), "type": p.get("type"), "run_cnt": p.get("run_cnt", 0),
                      "run_time_ns": p.get("run_time_ns", 0)} for p in progs}


def bpf_runs_between(before: dict, after: dict) -> list[dict]:
    """The programs that ran between two bpf_prog_runs(): runs and ns per run."""
    ran = []
    for pid, p in after.items():
        runs = p["run_cnt"] - before.get(pid, {}).get("run_cnt", 0)
        if runs > 0:
            ns = p["run_time_ns"] - before.get(pid, {}).get("run_time_ns", 0)
            ran.append({"id": pid, "name": p["name"], "type": p["type"], "runs": runs, "ns_per_run": ns / runs})
    return ran


def _picked_rows(picked: str | None, known, flag: str) -> list[str]:
    """The rows a `--...-rows a,b` flag picks (all of `known` without it);
    ValueError naming the flag for a row it does not know."""
    rows = picked.split(",") if picked else list(known)
    unknown = set(rows) - set(known)
    if unknown:
        raise ValueError(f"unknown {flag} {sorted(unknown)}; rows: {','.join(known)}")
    return rows

class Scraper:
    """Scrapes a /metrics URL once a second from a thread, as Prometheus
    does: on one kept-alive connection (a new one after an error). Keeps
    the last ktui_probe_hits_total and body, each scrape's duration (and the
    map read's, as the exporter says it) and size, errors, and the CPU the
    scraper's own thread took (it runs in the same guest as the workload,
    where a real Prometheus would not: its share of a row's slowdown)."""

    def __init__(self, url: str, every: float = 1.0, status: Path | None = None) -> None:
        self.url, self.every = url, every
        self.status = status  # a host's scraper: its summary, written after each scrape (HostScraperView)
        self.hits: float | None = None
        self.durations: list[float] = []
        self.sizes: list[int] = []
        self.map_reads: list[float] = []
        self.errors: list[str] = []
        self.last_body = ""
        self.cpu_s = 0.0  # the scraper thread's own CPU, all scrapes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-scraper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        import http.client
        import urllib.parse
        url = urllib.parse.urlsplit(self.url)
        conn = None
        while not self._stop.is_set():
            t0, cpu0 = time.monotonic(), time.thread_time()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
                conn.request("GET", url.path)
                resp = conn.getresponse()
                body = resp.read().decode()
                if resp.status != 200:
                    raise OSError(f"HTTP {resp.status}")
                self.durations.append(time.monotonic() - t0)
                self.sizes.append(len(body))
                self.last_body = body
                read = MAP_READ_METRIC.search(body)
                if read:
                    self.map_reads.append(float(read.group(1)))
                hits = HITS_METRIC.findall(body)
                if hits:
                    self.hits = sum(float(h) for h in hits)
            except (OSError, http.client.HTTPException) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                if conn is not None:
                    conn.close()
                conn = None
            self.cpu_s += time.thread_time() - cpu0
            if self.status is not None:
                tmp = self.status.with_suffix(".tmp")
                tmp.write_text(json.dumps(self.summary()))
                tmp.replace(self.status)  # whole: the guest never reads half of it
            self._stop.wait(max(0.0, self.every - (time.monotonic() - t0)))
        if conn is not None:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def summary(self) -> dict:
        d = sorted(self.durations)
        return {"scrapes": len(d), "errors": len(self.errors), "first_errors": self.errors[:3],
                "median_s": d[len(d) // 2] if d else None, "max_s": d[-1] if d else None,
                "bytes": self.sizes[-1] if self.sizes else None, "hits_last": self.hits,
                "scraper_cpu_s": round(self.cpu_s, 3)}


class HostScraperView:
    """The host's scraper (benchmarks/host_scrape.py), seen from the
    guest through the status file it rewrites after each scrape in the
    shared tree: the rows' Scraper interface, none of its work on the
    guest's CPU. Its counts are the host's since the VM started: start()
    takes the ones before this tool's exporter answered, and the summary is
    this tool's share."""

    def __init__(self, status: Path) -> None:
        self.status = status
        self._before: dict = {}

    def _now(self) -> dict:
        try:
            return json.loads(self.status.read_text())
        except (OSError, ValueError):  # not written yet, or mid-replace on 9p
            return {}

    def start(self) -> None:
        self._before = self._now()
        # live once two scrapes of this exporter were answered
        deadline = time.monotonic() + 120
        while self._now().get("scrapes", 0) < self._before.get("scrapes", 0) + 2:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the host's scraper got no answer from the exporter: {self._now()}")
            time.sleep(0.5)

    @property
    def hits(self):
        return self._now().get("hits_last")

    def stop(self) -> None:
        pass

    def summary(self) -> dict:
        now = self._now()
        out = dict(now, scrapes=now.get("scrapes", 0) - self._before.get("scrapes", 0),
                   errors=now.get("errors", 0) - self._before.get("errors", 0), scraped_from="host")
        out["scraper_cpu_s"] = None  # the host's, not the guest's: not this row's cost
        return out


def guest_nic_up() -> str:
    """The guest's NIC (QEMU's user network: the guest is 10.0.2.15, the
    host forwards a port to it) up and addressed; its name."""
    nics = sorted(p.name for p in Path("/sys/class/net").iterdir() if (p / "device").exists())
    if not nics:
        raise RuntimeError("no network device in the guest: boot it with the host's hostfwd QEMU options")
    ip = shutil.which("ip") or "/usr/sbin/ip"
    subprocess.run([ip, "link", "set", nics[0], "up"], check=True)
    subprocess.run([ip, "addr", "replace", "10.0.2.15/24", "dev", nics[0]], check=True)
    return nics[0]


def _alarm(signum, frame):
    raise TimeoutError


def kprobe_count() -> int:
    return len(KPROBES_LIST.read_text().splitlines())


def tracing_link_count() -> int:
    """Tracing links (fentry/fexit) in the kernel, from bpftool's JSON. An
    fentry probe is not in kprobes/list: this is how it is seen live and
    gone. bpftool exits 255 when a link vanishes mid-listing: asked again."""
    for _ in range(20):
        out = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True)
        if out.returncode == 0:
            return sum(1 for link in json.loads(out.stdout or "[]") if link.get("type") == "tracing")
        time.sleep(0.1)
    raise RuntimeError(f"bpftool link list kept failing: {out.stderr.strip()}")


def attached_count() -> int:
    """kprobes and tracing links: a set under `attach: auto` goes by fentry
    once the tracing variant is cached (as after the fentry row), by kprobe
    before; either way its probe is seen live and gone."""
    return kprobe_count() + tracing_link_count()


def tracepoint_count() -> int:
    """BPF programs attached to tracepoints (through perf events, or raw),
    from bpftool's JSON (`bpftool perf`): a tracepoint is in neither
    kprobes/list nor the tracing links."""
    for _ in range(20):
        out = subprocess.run(["bpftool", "-j", "perf"], capture_output=True, text=True)
        if out.returncode == 0:
            return sum(1 for a in json.loads(out.stdout or "[]")
                       if a.get("fd_type") in ("tracepoint", "raw_tracepoint"))
        time.sleep(0.1)
    raise RuntimeError(f"bpftool perf kept failing: {out.stderr.strip()}")


def hist_total(text: str) -> int:
    """The counts of a printed log2 histogram summed: bpftrace's `[1K, 2K)
    12 |@@|` lines and bcc's `  1024 -> 2047 : 12 |**|` lines."""
    bt = re.findall(r"^\[[^\]\n]*[\])]\s+(\d+)\s*\|", text, re.M)
    bcc = re.findall(r"^\s*\d+ -> \d+\s*:\s*(\d+)\s*\|", text, re.M)
    return sum(int(x) for x in bt + bcc)


def probeable(names) -> list[str]:
    listed = set()
    for line in FILTER_FUNCS.read_text().splitlines():
        listed.add(line.split()[0])
    return [n for n in names if n in listed]


class Workload:
    """benchmarks/workload.c, started paused so tools can filter on its pid."""

    def __init__(self, binary: str, *args: str) -> None:
        self.proc = subprocess.Popen([binary, *args], stdout=subprocess.PIPE)
        self.pid = self.proc.pid
        line = self.proc.stdout.readline()
        if line != b"ready\n":
            raise RuntimeError(f"workload did not start: {line!r}")

    def round(self) -> int:
        """One timed round (rounds mode): its duration in ns."""
        os.kill(self.pid, signal.SIGUSR1)
        return int(self.proc.stdout.readline())

    def signal(self, sig=signal.SIGUSR1) -> None:
        os.kill(self.pid, sig)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Tool:
    """A tracer under test: launched, watched until live, stopped with SIGINT.

    stdout goes to a file (or /dev/null), or to a pipe read by a thread that
    notes when the first event line arrives and then discards fast."""

    def __init__(self, name: str, argv: list[str], probes: int, *, stdout: str | None = None,
                 watch_events: re.Pattern | None = None, env: dict | None = None,
                 count=kprobe_count) -> None:
        self.name = name
        self.argv = argv
        self.probes = probes
        # what says the tool's probes are in: kprobes/list entries, or
        # tracing links for fentry/fexit (bpftool: polled less often)
        self.count = count
        self.poll = 0.01 if count is kprobe_count else 0.25
        self.base = count()
        self.first_event: float | None = None
        self.err_path = f"/tmp/bench-{name}.err"
        err = open(self.err_path, "wb")
        full_env = {**os.environ, **(env or {})}
        if watch_events is not None:
            out = subprocess.PIPE
        else:
            out = open(stdout or os.devnull, "wb")
        print(f"[vm {time.strftime('%H:%M:%S')}] launch {name}", flush=True)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=out, stderr=err, env=full_env)
        err.close()
        if watch_events is None:
            out.close()
        else:
            self._reader = threading.Thread(target=self._read, args=(watch_events,), daemon=True)
            self._reader.start()
        self.rc: int | None = None
        self.maxrss_kb: int | None = None
        self.cpu_s: float | None = None

    def _read(self, pattern: re.Pattern) -> None:
        fd = self.proc.stdout.fileno()
        pending = b""
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            if self.first_event is None:
                pending += chunk
                if pattern.search(pending):
                    self.first_event = time.monotonic() - self.t0
                    pending = b""
                else:
                    pending = pending[-4096:]

    def wait_live(self, timeout: float = LIVE_TIMEOUT) -> float | None:
        """Seconds from launch until all its probes are in kprobes/list."""
        deadline = self.t0 + timeout
        while time.monotonic() < deadline:
            if self.count() >= self.base + self.probes:
                return time.monotonic() - self.t0
            if self.proc.poll() is not None:
                return None
            time.sleep(self.poll)
        return None

    def cpu_seconds(self) -> float:
        """user + system CPU time of the tool's process and its reaped children."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        return ticks / os.sysconf("SC_CLK_TCK")

    def wait_settled(self, window: float = 0.5, share: float = 0.05, timeout: float = 15.0) -> float:
        """Wait until the tool uses under `share` of a CPU over `window`:
        a tool still importing or compiling after its probes are listed
        would otherwise take CPU from the timed rounds (one host thread runs
        both vCPUs). Returns the seconds waited."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            before = self.cpu_seconds()
            time.sleep(window)
            if self.cpu_seconds() - before < share * window:
                break
        return time.monotonic() - t0

    def wait_first_event(self, timeout: float = 30.0) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.first_event is None:
            if self.proc.poll() is not None:
                break
            time.sleep(0.005)
        return self.first_event

    def stop(self, timeout: float = EXIT_TIMEOUT) -> dict:
        """SIGINT, then reap with wait4 (for peak RSS). Returns what happened."""
        t = time.monotonic()
        self.note_sigint = t  # CLOCK_MONOTONIC: comparable with times in ktui's log
        if self.proc.returncode is None:
            try:
                os.kill(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        exit_s = detached_s = None
        killed = False
        while True:
            if detached_s is None and self.count() <= self.base:
                detached_s = time.monotonic() - t
            if self.proc.returncode is not None:  # it ended before, and wait_live's poll reaped it
                exit_s, self.rc = 0.0, self.proc.returncode
                break
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                exit_s = time.monotonic() - t
                self.rc = os.waitstatus_to_exitcode(status)
                self.maxrss_kb = usage.ru_maxrss
                # The tool's own CPU (all threads): with one host thread for
                # both vCPUs it comes out of the workload's time.
                self.cpu_s = usage.ru_utime + usage.ru_stime
                self.proc.returncode = self.rc
                break
            if time.monotonic() - t > timeout:
                self.proc.kill()
                killed = True
                timeout = float("inf")
            time.sleep(0.005)
        if getattr(self, "_reader", None) is not None:
            self._reader.join(5)
        time.sleep(0.05)
        left = self.count() - self.base
        if detached_s is None and left <= 0:
            detached_s = time.monotonic() - t
        return {"exit_s": exit_s, "detached_s": detached_s, "killed": killed, "rc": self.rc, "maxrss_kb": self.maxrss_kb,
                "cpu_s": self.cpu_s,
                "probes_left": left, "stderr_tail": self.stderr()[-600:]}

    def stderr(self) -> str:
        try:
            return Path(self.err_path).read_text(errors="replace")
        except OSError:
            return ""


def ktui_summary(stderr: str) -> dict:
    """hits/emitted/lost per probe and the event count from ktui's stderr summary."""
    out: dict = {"probes": {}}
    m = re.search(r"^ktui: (\d+) events$", stderr, re.M)
    if m:
        out["events"] = int(m.group(1))
    # the line goes on with missed returns, counted-while-loading, cost and
    # `, via fentry|fexit` where they apply
    for m in re.finditer(r"^ktui:\s+(\S+): hits (\d+), emitted (\d+), lost (\d+)(.*)$", stderr, re.M):
        probe = {"hits": int(m.group(2)), "emitted": int(m.group(3)), "lost": int(m.group(4))}
        via = re.search(r", via (\w+)", m.group(5))
        probe["via"] = via.group(1) if via else "kprobe"
        counted = re.search(r"counted while loading (\d+)", m.group(5))
        if counted:
            probe["counted_only"] = int(counted.group(1))
        out["probes"][m.group(1)] = probe
    return out


def watchdog(suite: "Suite", quiet_s: float = 60.0) -> None:
    """If the suite has said nothing for quiet_s, say where every process waits.

    A case once hung with its alarm never firing: the main thread was stuck in
    the kernel. This thread still runs then, and leaves the evidence."""
    while True:
        time.sleep(10)
        if time.monotonic() - suite.last_note < quiet_s:
            continue
        lines = []
        for proc in sorted(Path("/proc").glob("[0-9]*"), key=lambda p: int(p.name)):
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80]
                if not cmd:
                    continue
                state = (proc / "stat").read_text().split(") ", 1)[1].split()[0]
                wchan = (proc / "wchan").read_text()
                stack = (proc / "stack").read_text().split("\n")[:6] if state == "D" else []
                lines.append(f"  {proc.name} {state} {wchan} {cmd} {' < '.join(s.split(' ')[-1] for s in stack if s)}")
            except OSError:
                continue
        dmesg = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()[-15:]
        print(f"[vm {time.strftime('%H:%M:%S')}] WATCHDOG: quiet for {time.monotonic() - suite.last_note:.0f} s; processes:\n"
              + "\n".join(lines) + "\n  dmesg:\n  " + "\n  ".join(dmesg), flush=True)
        suite.last_note = time.monotonic()


class Suite:
    def __init__(self, args) -> None:
        self.last_note = time.monotonic()
        self.args = args
        self.wl = args.workload
        self.out_dir = Path(args.out).parent
        self.results: dict = {"baselines": [], "stats_only": {}, "streaming": {}, "startup": {},
                              "listing": {}, "compare": {}, "errors": []}
        self.log_path = str(self.out_dir / "ktui-vm.log")
        # The guest's home is read-only: without a writable cache every ktui
        # run would compile the generic program again and measure only the
        # dispatcher's counting. One cache for the run, warmed in warm_up;
        # the cold startup cases give their own empty ones.
        os.environ.setdefault("XDG_CACHE_HOME", tempfile.mkdtemp(prefix="ktui-bench-cache-"))

    def note(self, text: str) -> None:
        self.last_note = time.monotonic()
        print(f"[vm {time.strftime('%H:%M:%S')}] {text}", flush=True)

    def baseline(self, n: int, rounds: int, tag: str) -> list[int]:
        w = Workload(self.wl, "rounds", str(n), str(rounds))
        times = [w.round() for _ in range(rounds)]
        w.stop()
        self.results["baselines"].append({"tag": tag, "n": n, "ns": times})
        self.note(f"baseline {tag}: {[round(t / n) for t in times]} ns/read")
        return times

    def ktui(self, cmd: str, *specs: str, pid: int, extra=(), base: bool = False) -> list[str]:
        """A ktui command line; `base`: the --base-tree's ktui (an older
        revision, for before/after rows), run by the same Python."""
        argv = [sys.executable, "-P", "-m", "ktui"] if base else [KTUI]  # -P: not the checkout's ktui (the cwd)
        argv += [cmd, "--log", self.log_path, "--pid", str(pid)]
        for s in specs:
            argv += ["-e", s]
        return argv + list(extra)

    # ---------------------------------------------------------------- 1
    def stats_only(self) -> None:
        n, rounds = self.args.n, self.args.rounds
        tools = [
            # by kprobe, as funccount and bpftrace's rows: `auto` would take
            # fentry, which kprobes/list (wait_live's count) never shows
            ("ktui_c", lambda p: self.ktui("stream", "vfs_read:c", pid=p,
                                           extra=["--no-stats", "--attach", "kprobe"]), 1),
            ("ktui_r", lambda p: self.ktui("stream", "vfs_read:r", pid=p,
                                           extra=["--no-stats", "--attach", "kprobe"]), 2),
            # the same probes as one compiled program each: what the generic
            # program's interpretation costs per hit is the difference
            ("ktui_c_compiled", lambda p: self.ktui("stream", "vfs_read:c", pid=p,
                                                    extra=["--no-stats", "--engine", "compiled"]), 1),
            ("ktui_r_compiled", lambda p: self.ktui("stream", "vfs_read:r", pid=p,
                                                    extra=["--no-stats", "--engine", "compiled"]), 2),
            ("bpftrace_count", lambda p: ["bpftrace", "-e",
                                          f"kprobe:vfs_read /pid == {p}/ {{ @ = count(); }}"], 1),
            ("bpftrace_count_entry_return", lambda p: [
                "bpftrace", "-e", f"kprobe:vfs_read /pid == {p}/ {{ @a = count(); }} "
                                  f"kretprobe:vfs_read /pid == {p}/ {{ @b = count(); }}"], 2),
            ("funccount", lambda p: ["funccount-bpfcc", "-p", str(p), "vfs_read"], 1),
            ("funclatency", lambda p: ["funclatency-bpfcc", "-p", str(p), "vfs_read"], 2),
            ("ktui_r_fexit", lambda p: self.ktui("stream", "vfs_read:r", pid=p,
                                                 extra=["--no-stats", "--attach", "fentry"]), 2),
        ]
        if self.args.base_tree:
            # the same return probes run by an older revision's ktui (its
            # generic program compiled in warm_up): before/after in one run,
            # each right after today's, so the two see the same host load
            base_tools = {
                "ktui_r": ("ktui_r_base", lambda p: self.ktui("stream", "vfs_read:r", pid=p, base=True,
                                                              extra=["--no-stats", "--attach", "kprobe"]), 2),
                "ktui_r_compiled": ("ktui_r_compiled_base", lambda p: self.ktui(
                    "stream", "vfs_read:r", pid=p, base=True, extra=["--no-stats", "--engine", "compiled"]), 2),
                "ktui_r_fexit": ("ktui_r_fexit_base", lambda p: self.ktui(
                    "stream", "vfs_read:r", pid=p, base=True, extra=["--no-stats", "--attach", "fentry"]), 2),
            }
            # --base-first: the base's probe before today's (a second run so
            # ordered shows whether going first or second in a pair matters)
            pair = (lambda tool, b: (b, tool)) if self.args.base_first else (lambda tool, b: (tool, b))
            tools = [t for tool in tools
                     for t in (pair(tool, base_tools[tool[0]]) if tool[0] in base_tools else (tool,))]
        self.baseline(n, rounds, "stats:before")
        for name, argv_of, k in tools:
            w = Workload(self.wl, "rounds", str(n), str(rounds))
            fexit = "fexit" in name
            tool = Tool(name, argv_of(w.pid), k, env=self.base_env() if name.endswith("_base") else None,
                        count=tracing_link_count if fexit else kprobe_count)
            live = tool.wait_live()
            entry = {"argv": tool.argv, "probes": k, "live_s": live}
            if live is None:
                w.stop()
                entry.update(tool.stop())
                entry["error"] = "never live"
                self.results["stats_only"][name] = entry
                self.note(f"{name}: NEVER LIVE: {entry['stderr_tail']}")
                continue
            time.sleep(ATTACH_GRACE)
            entry["settle_s"] = tool.wait_settled()
            cpu0 = tool.cpu_seconds()
            entry["ns"] = [w.round() for _ in range(rounds)]
            entry["cpu_rounds_s"] = tool.cpu_seconds() - cpu0
            w.stop()
            time.sleep(0.3)
            entry.update(tool.stop())
            if name.startswith("ktui"):
                entry["summary"] = ktui_summary(tool.stderr())
            self.results["stats_only"][name] = entry
            self.note(f"{name}: live {live:.1f}s, settled +{entry['settle_s']:.1f}s, "
                      f"{[round(t / n) for t in entry['ns']]} ns/read, "
                      f"exit {entry['exit_s']:.2f}s, left {entry['probes_left']}")
            self.baseline(n, rounds, f"stats:after {name}")

    # ---------------------------------------------------------------- 2
    def streaming(self) -> None:
        n = self.args.flood
        # The recording goes to the guest's tmpfs while the workload runs: the
        # repo is a 9p share, and 56 MB through it cost the workload time that
        # the other tools' few kilobytes of stdout never paid. Copied out after.
        rec = "/tmp/stream-record.ktrec"
        rec_out = str(self.out_dir / "stream-record.ktrec")
        tools = [
            ("ktui_record", lambda p: self.ktui("record", "vfs_read:c:a3", pid=p, extra=["-o", rec, "--force"]), None),
            ("ktui_stream", lambda p: self.ktui("stream", "vfs_read:c:a3", pid=p, extra=["--no-stats"]), None),
            ("trace_bpfcc", lambda p: ["trace-bpfcc", "-p", str(p), 'vfs_read "%d", arg3'],
             str(self.out_dir / "stream-trace.out")),
            ("bpftrace_printf", lambda p: ["bpftrace", "-e",
                                           f'kprobe:vfs_read /pid == {p}/ {{ printf("%d\\n", arg2); }}'],
             str(self.out_dir / "stream-bpftrace.out")),
        ]
        if self.args.streaming_tools:  # e.g. ktui_record,bpftrace_printf
            wanted = self.args.streaming_tools.split(",")
            tools = [t for t in tools if t[0] in wanted]
        self.baseline(n, 1, "stream:before")
        for name, argv_of, out in tools:
            w = Workload(self.wl, "rounds", str(n), "1")
            tool = Tool(name, argv_of(w.pid), 1, stdout=out)
            live = tool.wait_live()
            entry = {"argv": tool.argv, "generated": n, "live_s": live}
            if live is None:
                w.stop()
                entry.update(tool.stop())
                entry["error"] = "never live"
                self.results["streaming"][name] = entry
                self.note(f"{name}: NEVER LIVE: {entry['stderr_tail']}")
                continue
            time.sleep(ATTACH_GRACE)
            entry["settle_s"] = tool.wait_settled()
            cpu0 = tool.cpu_seconds()
            entry["ns"] = [w.round()]
            w.stop()
            self._settle(out)
            # the flood and the time the tool then takes to catch up
            entry["cpu_rounds_s"] = tool.cpu_seconds() - cpu0
            entry.update(tool.stop())
            err = tool.stderr()
            if name.startswith("ktui"):
                entry["summary"] = ktui_summary(err)
                probe = entry["summary"]["probes"].get("vfs_read:c:a3", {})
                entry["lost"] = probe.get("lost")
                entry["hits"] = probe.get("hits")
                entry["delivered"] = entry["summary"].get("events")
                if name == "ktui_record":
                    shutil.copyfile(rec, rec_out)
                    entry["recording"] = rec_out  # recount on the host: ktui stream --from
            elif name == "trace_bpfcc":
                lines = Path(out).read_bytes().splitlines()
                entry["delivered"] = sum(1 for ln in lines if ln.strip()[:1].isdigit())
                entry["lost"] = sum(int(x) for x in re.findall(r"[Ll]ost (\d+) samples", err))
            else:
                lines = Path(out).read_bytes().splitlines()
                entry["delivered"] = sum(1 for ln in lines if ln.strip().isdigit())
                # bpftrace 0.17 reports "Lost N events" on stdout or stderr.
                text = err + Path(out).read_text(errors="replace")
                entry["lost"] = sum(int(x) for x in re.findall(r"Lost (\d+) events", text))
            self.results["streaming"][name] = entry
            if entry.get("delivered"):
                entry["cpu_us_per_event"] = entry["cpu_rounds_s"] / entry["delivered"] * 1e6
            self.note(f"{name}: cpu {entry['cpu_rounds_s']:.2f} s "
                      f"({entry.get('cpu_us_per_event', float('nan')):.2f} us/event delivered), "
                      f"delivered {entry.get('delivered')} lost {entry.get('lost')} of {n}, "
                      f"{entry['ns'][0] / n:.0f} ns/read, rss {entry['maxrss_kb']} KiB, "
                      f"exit {entry['exit_s']:.2f}s")
            self.baseline(n, 1, f"stream:after {name}")

    def _settle(self, out: str | None) -> None:
        """Let a consumer finish what is already in its buffers before SIGINT."""
        if out is None:
            time.sleep(1.0)
            return
        last, stable_since, deadline = -1, time.monotonic(), time.monotonic() + 15
        while time.monotonic() < deadline:
            size = os.path.getsize(out) if os.path.exists(out) else 0
            if size != last:
                last, stable_since = size, time.monotonic()
            elif time.monotonic() - stable_since > 0.7:
                return
            time.sleep(0.1)

    # ---------------------------------------------------------------- 3 + 4
    def startup(self) -> None:
        funcs = probeable(CANDIDATES)[:20]
        self.results["startup_functions"] = funcs
        if len(funcs) < 20:
            self.results["errors"].append(f"only {len(funcs)} probeable functions: {funcs}")
        ktui_ev = re.compile(rb'^\{.*"type": ?"event"', re.M)
        num_line = re.compile(rb"^-?\d+$", re.M)
        unbuffered = {"PYTHONUNBUFFERED": "1"}
        bt_multi = ",".join(f"kprobe:{f}" for f in funcs)
        fc_regex = "^(" + "|".join(funcs) + ")$"
        # A first start (nothing cached: the generic program is compiled while
        # the probes already count) and a later one (the same cache).
        cold, cold_counts = (tempfile.mkdtemp(prefix="ktui-bench-cache-") for _ in range(2))
        counts = re.compile(rb'"type": "stats".*?"hits": [1-9]')
        cases = [
            ("ktui_cold", 1, lambda p: self.ktui("stream", "vfs_read:c:a3", pid=p, extra=["--no-stats"]),
             ktui_ev, {"XDG_CACHE_HOME": cold}),
            ("ktui_warm", 1, lambda p: self.ktui("stream", "vfs_read:c:a3", pid=p, extra=["--no-stats"]),
             ktui_ev, {"XDG_CACHE_HOME": cold}),
            ("ktui_cold_counts", 1, lambda p: self.ktui("stream", "vfs_read:c:a3", pid=p,
                                                        extra=["--interval", "0.1"]),
             counts, {"XDG_CACHE_HOME": cold_counts}),
            # ktui flushes stdout after every batch: no PYTHONUNBUFFERED needed.
            ("ktui", 1, lambda p: self.ktui("stream", "vfs_read:c:a3", pid=p, extra=["--no-stats"]),
             ktui_ev, {}),
            ("ktui", 20, lambda p: self.ktui("stream", *[f"{f}:c:a1" for f in funcs], pid=p,
                                             extra=["--no-stats"]), ktui_ev, {}),
            ("ktui_record", 1, lambda p: self.ktui("record", "vfs_read:c:a3", pid=p,
                                                   extra=["-o", "/tmp/bench-stop.ktrec", "--force"]), False, {}),
            ("trace_bpfcc", 1, lambda p: ["trace-bpfcc", "-p", str(p), 'vfs_read "%d", arg3'],
             None, unbuffered),
            ("trace_bpfcc", 20, lambda p: ["trace-bpfcc", "-p", str(p), *funcs], None, unbuffered),
            ("funccount", 1, lambda p: ["funccount-bpfcc", "-p", str(p), "vfs_read"], False, {}),
            ("funccount", 20, lambda p: ["funccount-bpfcc", "-p", str(p), "-r", fc_regex], False, {}),
            ("bpftrace", 1, lambda p: ["bpftrace", "-B", "none", "-e",
                                       f'kprobe:vfs_read /pid == {p}/ {{ printf("%d\\n", arg2); }}'],
             num_line, {}),
            ("bpftrace", 20, lambda p: ["bpftrace", "-B", "none", "-e",
                                        f'{bt_multi} /pid == {p}/ {{ printf("%d\\n", arg0); }}'],
             num_line, {}),
        ]
        for name, k, argv_of, pattern, env in cases:
            if self.args.cases and f"{name}:{k}" not in self.args.cases.split(","):
                continue
            signal.signal(signal.SIGALRM, _alarm)
            signal.alarm(CASE_TIMEOUT)
            w = tool = None
            try:
                self._startup_case(name, k, argv_of, pattern, env)
            except TimeoutError:
                self.results["startup"][f"{name}:{k}"] = {"error": f"case took > {CASE_TIMEOUT} s"}
                self.note(f"{name} x{k}: ABANDONED after {CASE_TIMEOUT} s")
            finally:
                signal.alarm(0)

    def _startup_case(self, name, k, argv_of, pattern, env) -> None:
        w = Workload(self.wl, "tick")
        tool = None
        try:
            if pattern is None:  # trace-bpfcc: an event line starts with the pid
                pattern = re.compile(rb"^" + str(w.pid).encode() + rb"\s", re.M)
            # ktui goes by fentry where it can (`auto`): no kprobe to see
            count = attached_count if name.startswith("ktui") else kprobe_count
            tool = Tool(f"{name}-{k}", argv_of(w.pid), k, watch_events=pattern or None, env=env, count=count)
            live = tool.wait_live()
            # a first start compiles the generic program before the first
            # event (47 s alone in one warm-up): wait long enough to see it
            wait = LIVE_TIMEOUT if name.startswith("ktui_cold") else 30.0
            first = tool.wait_first_event(wait) if (pattern and live is not None) else None
            entry = {"argv": tool.argv, "probes": k, "live_s": live, "first_event_s": first}
            w.signal()  # tick -> flood
            time.sleep(1.0)
            entry.update(tool.stop())
            entry["stop_during_flood"] = True
            self.results["startup"][f"{name}:{k}"] = entry
            entry["sigint_at"] = tool.note_sigint
            self.note(f"{name} x{k}: SIGINT at {tool.note_sigint:.3f}, live {live}, first event {first}, exit after SIGINT "
                      f"{entry['exit_s']}, detached after {entry['detached_s']}, probes left "
                      f"{entry['probes_left']}" + ("" if live is not None else f" ERR {entry['stderr_tail']}"))
        finally:
            w.stop()
            if tool is not None and tool.proc.returncode is None:
                tool.proc.kill()

    # ---------------------------------------------------------------- 5
    def live_edit(self) -> None:
        """Probes added, edited and switched in a running session
        (benchmarks/live_edit.py): Enter to attached, and to the first event."""
        out = subprocess.run([sys.executable, "-m", "benchmarks.live_edit"],
                             capture_output=True, text=True, timeout=PART_TIMEOUT,
                             cwd=str(Path(__file__).resolve().parent.parent))
        if out.returncode != 0:
            raise RuntimeError(f"live_edit exit {out.returncode}: {out.stderr[-500:]}")
        self.results["live_edit"] = json.loads(out.stdout)
        self.note(f"live edit: {out.stdout.strip()[:300]}")

    # ---------------------------------------------------------------- 6
    def listing(self) -> None:
        """`ktui list '*'` against `bpftrace -lv 'kfunc:*'`, output to
        /dev/null, alternating, `rounds` times each. ktui cold: an empty
        cache directory (every prototype rendered from BTF); warm: the
        cache that run wrote (what a second run on the same kernel costs)."""
        cache = Path(tempfile.mkdtemp(prefix="ktui-bench-cache-"))
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        res: dict = {"ktui_cold_s": [], "ktui_warm_s": [], "bpftrace_s": []}

        def timed(argv, env=None) -> tuple[float, int]:
            t0 = time.monotonic()
            proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  env=env, timeout=PART_TIMEOUT)
            took = time.monotonic() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"{argv[:3]} exit {proc.returncode}: {proc.stderr[-300:]!r}")
            return took, len(proc.stderr)

        for r in range(self.args.rounds):
            shutil.rmtree(cache / "ktui", ignore_errors=True)
            res["ktui_cold_s"].append(timed([KTUI, "list", "*"], env)[0])
            res["ktui_warm_s"].append(timed([KTUI, "list", "*"], env)[0])
            res["bpftrace_s"].append(timed(["bpftrace", "-lv", "kfunc:*"])[0])
            self.note(f"listing round {r + 1}: ktui cold {res['ktui_cold_s'][-1]:.1f} s, warm "
                      f"{res['ktui_warm_s'][-1]:.1f} s, bpftrace -lv {res['bpftrace_s'][-1]:.1f} s")
        summary = subprocess.run([KTUI, "list", "*"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, env=env).stderr.strip()
        res["ktui_summary"] = summary.splitlines()[-1] if summary else ""
        kfuncs = subprocess.run(["bpftrace", "-l", "kfunc:*"], capture_output=True, text=True).stdout
        res["bpftrace_functions"] = kfuncs.count("\n")
        shutil.rmtree(cache, ignore_errors=True)
        self.results["listing"] = res

    # ---------------------------------------------------------------- 7
    def compare(self) -> None:
        """Issues 13, 14 and 16: fentry/fexit, value histograms, kernel
        stacks and the exporter, each row's tools in turn on the same
        paused workload (`--pid`), like stats_only: `rounds` timed rounds
        of `n` reads, untraced rounds before, between and after.
        `--compare-rows fentry,fexit,hist,stack,export` picks rows."""
        rows = _picked_rows(self.args.compare_rows, COMPARE_ROWS, "--compare-rows")
        work = Path(tempfile.mkdtemp(prefix="ktui-bench-compare-"))
        setfile = work / "bench-export.yaml"
        setfile.write_text("# one counting probe: what `ktui export` and `ktui stream` both run\n"
                           "name: bench\nprobes:\n  - spec: vfs_read:c\n")
        # a probe with a fetch: a stream writes an event a hit, the exporter none
        fetchset = work / "bench-export-fetch.yaml"
        fetchset.write_text("name: bench\nprobes:\n  - spec: vfs_read:c:a3\n")
        host = self.args.export_scraped_from == "host"
        if host and "export" in rows:
            self.note(f"guest NIC {guest_nic_up()} up: the host scrapes the exporter")
        # scraped from the host: on the guest's NIC, which QEMU forwards to;
        # the unscraped exporter on loopback, where the host's scraper cannot reach
        scraped_at = f"{'0.0.0.0' if host else '127.0.0.1'}:{self.args.export_port}"

        def export(fileset: Path, listen: str):
            return lambda p: [KTUI, "export", str(fileset), "--log", self.log_path, "--pid", str(p),
                              "--listen", listen]
        self.folded = str(work / "stacks.folded")
        self.results["compare_meta"] = {"rows": rows, "set": setfile.read_text(), "fetch_set": fetchset.read_text(),
                                        "export_scraped_from": self.args.export_scraped_from,
                                        "export_port": self.args.export_port,
                                        "export_mem_seconds": self.args.export_mem_seconds}

        def stream(*specs: str, extra=()):
            return lambda p: self.ktui("stream", *specs, pid=p, extra=["--no-stats", *extra])

        def tool(*argv: str):
            return lambda p: [a.replace("{P}", str(p)) for a in argv]

        links = tracing_link_count
        table = {
            "fentry": [
                ("ktui_c_fentry", stream("vfs_read:c", extra=["--attach", "fentry"]), 1, links),
                ("ktui_c_kprobe", stream("vfs_read:c", extra=["--attach", "kprobe"]), 1, kprobe_count),
                ("funccount", tool("funccount-bpfcc", "-p", "{P}", "vfs_read"), 1, kprobe_count),
                ("bpftrace_fentry_count", tool("bpftrace", "-e", "kfunc:vfs_read /pid == {P}/ { @ = count(); }"),
                 1, links),
            ],
            "fexit": [
                # fexit and its fentry entry half: two tracing links
                ("ktui_r_fexit", stream("vfs_read:r", extra=["--attach", "fentry"]), 2, links),
                ("ktui_r_kprobe", stream("vfs_read:r", extra=["--attach", "kprobe"]), 2, kprobe_count),
                ("bpftrace_count_entry_return", tool(
                    "bpftrace", "-e", "kprobe:vfs_read /pid == {P}/ { @a = count(); } "
                                      "kretprobe:vfs_read /pid == {P}/ { @b = count(); }"), 2, kprobe_count),
            ],
            "hist": [
                # in the generic program, by kprobe as argdist and bpftrace here, and by fentry
                ("ktui_hist", stream("h=vfs_read:c hist(a3)", extra=["--attach", "kprobe"]), 1, kprobe_count),
                ("ktui_hist_fentry", stream("h=vfs_read:c hist(a3)", extra=["--attach", "fentry"]), 1, links),
                ("argdist_hist", tool("argdist-bpfcc", "-p", "{P}", "-H",
                                      "p::vfs_read(void *a, void *b, u64 c):u64:c"), 1, kprobe_count),
                ("bpftrace_hist", tool("bpftrace", "-e", "kprobe:vfs_read /pid == {P}/ { @ = hist(arg2); }"),
                 1, kprobe_count),
                # the same probe without the aggregation: what hist() itself costs
                ("ktui_c_kprobe", stream("vfs_read:c", extra=["--attach", "kprobe"]), 1, kprobe_count),
            ],
            "stack": [
                ("ktui_stack", stream("s=vfs_read:c stack(kernel)", extra=["--folded", self.folded,
                                                                            "--attach", "kprobe"]),
                 1, kprobe_count),
                ("stackcount", tool("stackcount-bpfcc", "-p", "{P}", "vfs_read"), 1, kprobe_count),
                ("bpftrace_kstack", tool("bpftrace", "-e", "kprobe:vfs_read /pid == {P}/ { @[kstack] = count(); }"),
                 1, kprobe_count),
            ],
            "export": [
                ("ktui_export", export(setfile, scraped_at), 1, attached_count),
                ("ktui_stream_set", lambda p: [KTUI, "stream", str(setfile), "--log", self.log_path,
                                               "--pid", str(p), "--no-stats"], 1, attached_count),
                # the exporter with nobody scraping it: what it costs by itself
                ("ktui_export_unscraped", export(setfile, f"127.0.0.1:{self.args.export_port}"), 1,
                 attached_count),
                # the set with a fetch: the stream writes (and formats) an
                # event a hit, the exporter counts it and writes nothing
                ("ktui_export_fetch", export(fetchset, scraped_at), 1, attached_count),
                ("ktui_stream_fetch", lambda p: [KTUI, "stream", str(fetchset), "--log", self.log_path,
                                                 "--pid", str(p), "--no-stats"], 1, attached_count),
            ],
        }
        self.results.setdefault("compare", {})
        if self.args.bpf_stats:  # slows every BPF program: a run of its own, for the why
            Path("/proc/sys/kernel/bpf_stats_enabled").write_text("1\n")
        try:
            self.baseline(self.args.n, self.args.rounds, "compare:before")
            for row in rows:
                if self._row_n(row) != self.args.n:  # its own untraced rounds before it, of its length
                    self.baseline(self._row_n(row), self.args.rounds, f"compare:before {row}")
                for name, argv_of, k, count in table[row]:
                    if self.args.compare_tools and name not in self.args.compare_tools.split(","):
                        continue
                    self._compare_tool(row, name, argv_of, k, count)
        finally:
            if self.args.bpf_stats:
                Path("/proc/sys/kernel/bpf_stats_enabled").write_text("0\n")

    def _row_n(self, row: str) -> int:
        """Reads a round of `row`: the export row's rounds hold a scrape a
        second only if they last a second or more (--export-n)."""
        return self.args.export_n if row == "export" and self.args.export_n else self.args.n

    def _compare_tool(self, row: str, name: str, argv_of, k: int, count) -> None:
        n, rounds = self._row_n(row), self.args.rounds
        export = name in SCRAPED_EXPORTS
        # the exporter's memory run drives one more round every 10 s
        extra = self.args.export_mem_seconds // 10 + 1 if name == "ktui_export" else 0
        w = Workload(self.wl, "rounds", str(n), str(rounds + extra))
        t = Tool(name, argv_of(w.pid), k, count=count)
        entry: dict = {"row": row, "argv": t.argv, "probes": k,
                       "live_by": {tracing_link_count: "tracing links", attached_count: "kprobes/list and tracing links"}
                       .get(count, "kprobes/list")}
        self.results["compare"][name] = entry
        scraper = None
        try:
            live = entry["live_s"] = t.wait_live()
            if live is None:
                entry["error"] = "never live"
                return
            time.sleep(ATTACH_GRACE)
            if count is kprobe_count:  # [FTRACE] on an entry kprobe: no int3 trap to save
                entry["kprobes_listed"] = KPROBES_LIST.read_text().splitlines()
            entry["settle_s"] = t.wait_settled()
            if export:
                if self.args.export_scraped_from == "host":
                    scraper = HostScraperView(Path(self.args.host_scraper_status))
                else:
                    scraper = Scraper(f"http://127.0.0.1:{self.args.export_port}/metrics")
                scraper.start()
                time.sleep(1.5)  # the first scrapes are in: the rounds see a scraped exporter
                entry["rss_kb_start"] = rss_kb(t.proc.pid)
            cpu0 = t.cpu_seconds()
            progs0 = bpf_prog_runs() if self.args.bpf_stats else None
            entry["ns"] = [w.round() for _ in range(rounds)]
            entry["cpu_rounds_s"] = t.cpu_seconds() - cpu0
            if progs0 is not None:
                # the programs' own run time (not the trap, trampoline or
                # return hook around them): the rest is the mechanism's
                entry["bpf_progs"] = bpf_runs_between(progs0, bpf_prog_runs())
                self.note(f"{name}: programs run {entry['bpf_progs']}")
            if export:
                time.sleep(1.5)  # a scrape after the last round
                entry["rss_kb_after_rounds"] = rss_kb(t.proc.pid)
                entry["hits_after_rounds"] = scraper.hits
                if extra:
                    entry["memory"] = self._export_memory(t, w, scraper, extra, n)
        finally:
            if scraper is not None:
                scraper.stop()
                entry["scrapes"] = scraper.summary()
            w.stop()
            time.sleep(0.3)
            entry.update(t.stop())
            self.note(f"{name}: {self._compare_line(entry, n)}")
        if name.startswith("ktui") and not name.startswith("ktui_export"):
            entry["summary"] = ktui_summary(t.stderr())
            probe = next(iter(entry["summary"]["probes"].values()), {})
            entry["hits"], entry["via"] = probe.get("hits"), probe.get("via")
            entry["expected_hits"] = n * rounds
            if name == "ktui_stack":
                entry["folded_total"] = folded_total(self.folded)
        self.baseline(n, rounds, f"compare:after {name}")

    @staticmethod
    def _compare_line(entry: dict, n: int) -> str:
        if "ns" not in entry:
            return f"ERROR {entry.get('error')}: {entry.get('stderr_tail', '')[-300:]}"
        return (f"live {entry['live_s']:.1f}s, settled +{entry['settle_s']:.1f}s, "
                f"{[round(t / n) for t in entry['ns']]} ns/read, exit {entry.get('exit_s')}, "
                f"left {entry.get('probes_left')}")

    def _export_memory(self, t: "Tool", w: Workload, scraper: "Scraper", extra_rounds: int, n: int) -> dict:
        """The exporter scraped every second for export_mem_seconds, one more
        round of reads every 10 s: its RSS (and the hits it serves) sampled."""
        samples = []
        t0 = time.monotonic()
        done = self.args.rounds
        for _ in range(extra_rounds - 1):
            if time.monotonic() - t0 >= self.args.export_mem_seconds:
                break
            took = w.round()  # the scraped exporter's steady state, first scrapes long past
            done += 1
            time.sleep(max(0.0, 10.0 - (time.monotonic() - t0) % 10.0))
            samples.append([round(time.monotonic() - t0, 1), rss_kb(t.proc.pid), scraper.hits, took])
        time.sleep(1.5)
        return {"seconds": round(time.monotonic() - t0), "rounds_done": done, "reads_done": done * n,
                "hits_served": scraper.hits, "samples": samples}

    # ---------------------------------------------------------------- 9
    def export_hour(self) -> None:
        """Issue 33: the exporter's memory over --export-hour-seconds of
        scrapes (one a second, over HTTP) while the keys churn (CHURN_SET,
        `workload churn RATE`), sampled every --export-hour-every s."""
        secs, every, rate = self.args.export_hour_seconds, self.args.export_hour_every, self.args.export_hour_rate
        work = Path(tempfile.mkdtemp(prefix="ktui-bench-hour-"))
        setfile = work / "churn.yaml"
        setfile.write_text(CHURN_SET)
        url = f"http://127.0.0.1:{self.args.export_port}/metrics"
        out = self.results["export_hour"] = {"set": CHURN_SET, "seconds": secs, "every_s": every,
                                             "forks_per_s": rate, "samples": []}
        t = Tool("ktui_export_hour", [KTUI, "export", str(setfile), "--log", self.log_path,
                                      "--listen", f"127.0.0.1:{self.args.export_port}"],
                 CHURN_SET.count("- spec:"), count=lambda: probes_attached(url))
        churn = scraper = None
        try:
            live = out["live_s"] = t.wait_live()
            if live is None:
                out["error"] = "never live"
                return
            self.note(f"exporter live in {live:.1f} s; {secs} s of scrapes, {rate} forks/s")
            churn = Workload(self.wl, "churn", str(rate))
            scraper = Scraper(url)
            scraper.start()
            t0, forks0, seen = time.monotonic(), forks_since_boot(), (0, 0, 0)
            for k in range(1, secs // every + 1):
                while time.monotonic() < t0 + k * every:
                    # a heartbeat for the watchdog: this thread is waiting, not stuck
                    self.last_note = time.monotonic()
                    time.sleep(min(10.0, max(0.0, t0 + k * every - time.monotonic())))
                sample, seen = self._hour_sample(t, scraper, seen, time.monotonic() - t0, forks0)
                out["samples"].append(sample)
                self.note(f"hour {sample['t_s']:.0f} s: rss {sample['rss_kb']} kB (peak {sample['hwm_kb']}), "
                          f"{sample['series']} series, keys {sample['keys']}, dropped {sample['dropped']}, "
                          f"scrape {sample['scrapes']}x median {sample['scrape_s']['median']}, "
                          f"errors {sample['errors']}")
                Path(self.args.out).write_text(json.dumps(self.results, indent=1))  # an hour: keep what we have
        finally:
            if scraper is not None:
                scraper.stop()
                out["scrapes"] = scraper.summary()
            if churn is not None:
                churn.stop()
            out.update(t.stop())

    @staticmethod
    def _hour_sample(t: Tool, scraper: Scraper, seen: tuple[int, int, int], elapsed: float,
                     forks0: int) -> tuple[dict, tuple[int, int, int]]:
        """One sample of the exporter's hour, and the scraper's counts so
        far (the next sample's interval starts there)."""
        durations, reads, errors = scraper.durations[:], scraper.map_reads[:], scraper.errors[:]
        body = scraper.last_body
        mem = status_kb(t.proc.pid, "VmRSS", "VmHWM", "RssAnon", "Threads")
        try:
            fds = len(os.listdir(f"/proc/{t.proc.pid}/fd"))
        except OSError:
            fds = None
        sample = {
            "t_s": round(elapsed, 1), "rss_kb": mem["VmRSS"], "hwm_kb": mem["VmHWM"], "anon_kb": mem["RssAnon"],
            "threads": mem["Threads"], "fds": fds, "cpu_s": round(t.cpu_seconds(), 2),
            "forks": forks_since_boot() - forks0,
            "series": sum(1 for line in body.splitlines() if line and not line.startswith("#")), "bytes": len(body),
            "keys": metric_by_probe(body, "ktui_probe_keys"),
            "omitted": metric_by_probe(body, "ktui_probe_keys_omitted"),
            "dropped": metric_by_probe(body, "ktui_probe_key_hits_dropped_total"),
            "hits": metric_by_probe(body, "ktui_probe_hits_total"),
            "map_read_errors": metric_by_probe(body, "ktui_exporter_map_read_errors_total").get(""),
            "scrapes": len(durations) - seen[0],
            "scrape_s": quantiles(durations[seen[0]:]), "map_read_s": quantiles(reads[seen[1]:]),
            "errors": len(errors) - seen[2], "first_error": errors[seen[2]] if len(errors) > seen[2] else None,
        }
        return sample, (len(durations), len(reads), len(errors))

    # ---------------------------------------------------------------- 8
    def spans(self) -> None:
        """Issue 32: what a span costs per pair, against bcc's biolatency and
        bpftrace's two-probe scripts, in the same boot.

        block: `--span-n` 4096-byte O_DIRECT reads of a loop device (its
        backing file in a tmpfs: one block request each, nothing else in
        the guest makes any), a span by struct request * (events written,
        as `ktui stream` writes them; and with `sample:` at its largest, the
        histogram only, as biolatency keeps) against biolatency-bpfcc (whose
        Debian 0.26 fails on 6.1: `blk_account_io_done` not traceable) and
        bpftrace's kprobe pair (its `rawtracepoint:` pair by the request,
        newer biolatency's way, needs bpftrace past Debian's 0.17). syscall: `--n` one-byte reads of
        /dev/zero, a span by the thread between the read syscall's
        tracepoints (no fetch: the histogram only) against bpftrace's
        tracepoint pair, both on the workload's pid.

        Each tool is launched `--span-cycles` times, each time for `--span-rounds`
        timed rounds followed by as many untraced ones; the tools' order
        turns by one each cycle, so the host's load falls on each alike."""
        rows = _picked_rows(self.args.span_rows, SPAN_ROWS, "--span-rows")
        work = Path(tempfile.mkdtemp(prefix="ktui-bench-spans-"))
        sampled = work / "span-sampled.yaml"
        sampled.write_text("# the block span, writing (at most) one event: its histogram and counters only\n"
                           f"name: span\nprobes:\n  - spec: {SPAN_RQ.split(' since(')[0]}\n"
                           f"    since: {SPAN_RQ.split(' since(')[1].rstrip(')')}\n"
                           f"    sample: {SAMPLE_MAX}\n")
        bt_rq = ("kprobe:blk_mq_start_request { @s[arg0] = nsecs; } "
                 "kprobe:blk_mq_end_request /@s[arg0]/ { @lat = hist(nsecs - @s[arg0]); delete(@s[arg0]); }")
        bt_tid = ("tracepoint:syscalls:sys_enter_read /pid == {P}/ { @s[tid] = nsecs; } "
                  "tracepoint:syscalls:sys_exit_read /@s[tid]/ { @lat = hist(nsecs - @s[tid]); delete(@s[tid]); }")

        def ktui(*args: str):
            return lambda p: [KTUI, "stream", "--log", self.log_path, "--no-stats",
                              *[a.replace("{P}", str(p)) for a in args]]

        def tool(*argv: str):
            return lambda p: [a.replace("{P}", str(p)) for a in argv]

        # name -> (argv of the pid, probes, how they are seen live, stdout kept)
        table = {
            "block": {
                "ktui_span_rq": (ktui("--attach", "kprobe", "-e", SPAN_RQ), 2, kprobe_count, False),
                # its end by fentry, its start (not a return probe's entry) by kprobe
                "ktui_span_rq_fentry": (ktui("--attach", "fentry", "-e", SPAN_RQ), 2, attached_count, False),
                "ktui_span_rq_sampled": (ktui("--attach", "kprobe", str(sampled)), 2, kprobe_count, False),
                "biolatency": (tool("biolatency-bpfcc"), 2, kprobe_count, True),
                "bpftrace_rq": (tool("bpftrace", "-e", bt_rq), 2, kprobe_count, True),
            },
            "syscall": {
                "ktui_span_tid": (ktui("--pid", "{P}", "-e", SPAN_TID), 2, tracepoint_count, False),
                "bpftrace_tid": (tool("bpftrace", "-e", bt_tid), 2, tracepoint_count, True),
            },
        }
        wanted = self.args.span_tools.split(",") if self.args.span_tools else None
        res = self.results.setdefault("spans", {"runs": [], "bare": []})
        res["params"] = {"block_n": self.args.span_n, "syscall_n": self.args.n, "rounds": self.args.span_rounds,
                         "cycles": self.args.span_cycles, "rows": rows, "sampled_set": sampled.read_text()}
        dev = backing = None
        try:
            if "block" in rows:
                dev, backing = self._loop_device(work)
                res["device"] = dev
            for cycle in range(self.args.span_cycles):
                for row in rows:
                    tools = [t for t in table[row] if wanted is None or t in wanted]
                    k = cycle % len(tools) if tools else 0
                    tools = tools[k:] + tools[:k]  # a different neighbour each cycle
                    args = ("direct", dev, str(self.args.span_n)) if row == "block" else ("rounds", str(self.args.n))
                    self._span_bare(row, args, cycle, "before")
                    for name in tools:
                        self._span_tool(row, name, table[row][name], args, cycle, work)
                        self._span_bare(row, args, cycle, f"after {name}")
        finally:
            if dev is not None:
                subprocess.run(["losetup", "--detach", dev], check=False)
            if backing is not None:
                shutil.rmtree(backing.parent, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)

    def _loop_device(self, work: Path) -> tuple[str, Path]:
        """A 16 MiB loop device over a file in a tmpfs (no block device
        under it: the loop device's requests are the only ones)."""
        subprocess.run(["modprobe", "loop"], check=False, capture_output=True)
        shm = Path("/dev/shm")
        where = shm if shm.is_dir() and os.access(shm, os.W_OK) else work
        backing = Path(tempfile.mkdtemp(prefix="ktui-bench-loop-", dir=where)) / "disk.img"
        with open(backing, "wb") as f:
            f.write(b"\xa5" * (16 << 20))
        dev = subprocess.run(["losetup", "--find", "--show", str(backing)], check=True, capture_output=True,
                             text=True).stdout.strip()
        fs = subprocess.run(["stat", "-f", "-c", "%T", str(backing)], capture_output=True, text=True).stdout.strip()
        self.note(f"spans: {dev} over {backing} ({fs})")
        self.results["spans"]["backing_fs"] = fs
        return dev, backing

    def _span_bare(self, row: str, args: tuple, cycle: int, tag: str) -> None:
        w = Workload(self.wl, *args, str(self.args.span_rounds))
        try:
            times = [w.round() for _ in range(self.args.span_rounds)]
        finally:
            w.stop()
        n = int(args[-1])
        self.results["spans"]["bare"].append({"row": row, "cycle": cycle, "tag": tag, "n": n, "ns": times})
        self.note(f"spans {row} cycle {cycle} bare {tag}: {[round(t / n) for t in times]} ns/op")

    def _span_tool(self, row: str, name: str, spec: tuple, args: tuple, cycle: int, work: Path) -> None:
        argv_of, k, count, keep = spec
        rounds = self.args.span_rounds
        n = int(args[-1])
        w = Workload(self.wl, *args, str(rounds))
        out = str(work / f"{name}-{cycle}.out") if keep else None
        t = Tool(name, argv_of(w.pid), k, count=count, stdout=out)
        entry: dict = {"row": row, "tool": name, "cycle": cycle, "argv": t.argv, "n": n, "probes": k,
                       "expected_pairs": n * rounds}
        self.results["spans"]["runs"].append(entry)
        try:
            live = entry["live_s"] = t.wait_live(SPAN_LIVE_TIMEOUT)
            if live is None:
                entry["error"] = "never live"
                return
            time.sleep(ATTACH_GRACE)
            entry["settle_s"] = t.wait_settled()
            cpu0 = t.cpu_seconds()
            entry["ns"] = [w.round() for _ in range(rounds)]
            entry["cpu_rounds_s"] = t.cpu_seconds() - cpu0
        finally:
            w.stop()
            time.sleep(0.3)
            entry.update(t.stop())
        if name.startswith("ktui"):
            entry["summary"] = ktui_summary(t.stderr())
            probe = next(iter(entry["summary"]["probes"].values()), {})
            entry["pairs"], entry["via"], entry["emitted"] = probe.get("hits"), probe.get("via"), probe.get("emitted")
        elif out is not None:
            # the histogram printed at exit: the pairs it holds
            entry["pairs"] = hist_total(Path(out).read_text(errors="replace"))
        self.note(f"spans {row} cycle {cycle} {name}: " + (
            f"live {entry['live_s']:.1f}s, {[round(x / n) for x in entry['ns']]} ns/op, pairs {entry.get('pairs')} "
            f"of {n * rounds}, exit {entry.get('exit_s')}, left {entry.get('probes_left')}" if "ns" in entry else
            f"ERROR {entry.get('error')}: {entry.get('stderr_tail', '')[-300:]}"))

    def base_env(self) -> dict:
        """The environment that runs the --base-tree's ktui.

        PYTHONSAFEPATH as well as `-P`: the base ktui starts its compile
        helper as `python -m ktui.kernel.generic.compile_child`, which
        without it puts the cwd (this checkout) first on sys.path. The
        helper was then today's, spoke another protocol, and ended with
        status 4 on the base's request: its generic program never compiled
        in the guest. The variable is inherited by every Python the base
        ktui starts."""
        return {"PYTHONPATH": str(Path(self.args.base_tree).resolve()), "PYTHONSAFEPATH": "1"}

    def warm_up(self) -> None:
        """Load bcc, libclang and bpftrace once, so the first measured tool does not
        pay for reading them from the host's shared file system (a cold first
        launch took 80-110 s in the first runs, warm ones 20-50 s)."""
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "from bcc import BPF; "
                        "BPF(text='int f(void *ctx) { return 0; }')"], capture_output=True, timeout=300)
        subprocess.run(["bpftrace", "-e", "BEGIN { exit(); }"], capture_output=True, timeout=300)
        t1 = time.monotonic()
        warm = subprocess.run([sys.executable, "-c", (
            "import os\n"
            "from ktui.kernel.generic.cache import ProgramCache\n"
            "from ktui.kernel.generic.loader import load_generic\n"
            "fd = os.open(os.devnull, os.O_WRONLY)\n"
            "print(load_generic(fd, cache=ProgramCache()).source)\n")],
            capture_output=True, text=True, timeout=PART_TIMEOUT)
        if warm.returncode != 0:
            raise RuntimeError(f"generic program: {warm.stderr[-300:]}")
        self.results["generic_program_first_load_s"] = time.monotonic() - t1
        self.note(f"generic program {warm.stdout.strip()} in {time.monotonic() - t1:.0f} s")
        if self.args.base_tree:
            # the base revision's programs (both variants) into the same cache
            t2 = time.monotonic()
            base = subprocess.run([sys.executable, "-P", "-c", (
                "import os\n"
                "from ktui.kernel.generic.cache import ProgramCache\n"
                "from ktui.kernel.generic.loader import load_generic, tracing_variant\n"
                "fd = os.open(os.devnull, os.O_WRONLY)\n"
                "load_generic(fd, cache=ProgramCache()).close()\n"
                "tracing_variant(fd, cache=ProgramCache())\n")],
                capture_output=True, text=True, timeout=BASE_PART_TIMEOUTS["warm_up"] - 300,
                env={**os.environ, **self.base_env()})
            if base.returncode != 0:
                raise RuntimeError(f"the base tree's generic program: {base.stderr[-300:]}")
            rev = Path(self.args.base_tree).name.removeprefix("base-")
            self.results["base_tree"] = {"rev": rev, "warm_s": time.monotonic() - t2}
            self.note(f"base tree {rev}: programs in the cache in {time.monotonic() - t2:.0f} s")
        self.results["warm_up_s"] = time.monotonic() - t0
        self.note(f"warm-up {self.results['warm_up_s']:.0f} s")

    def run(self) -> dict:
        info = self.results
        info["kernel"] = platform.release()
        info["cpus"] = os.cpu_count()
        info["params"] = {"n": self.args.n, "rounds": self.args.rounds, "flood": self.args.flood}
        info["kprobes_before"] = kprobe_count()
        t0 = time.monotonic()
        timeouts = {**PART_TIMEOUTS, **(BASE_PART_TIMEOUTS if self.args.base_tree else {})}
        for part in self.args.parts.split(","):
            part_alarm = part != "startup"  # startup guards each case itself
            limit = timeouts.get(part, PART_TIMEOUT)
            if part == "export_hour":  # as long as asked, and the exporter's start and stop
                limit = self.args.export_hour_seconds + PART_TIMEOUT
            if part_alarm:
                signal.signal(signal.SIGALRM, _alarm)
                signal.alarm(limit)
            t_part = time.monotonic()
            try:
                getattr(self, part)()
            except TimeoutError:
                info["errors"].append(f"{part}: abandoned after {limit} s")
                self.note(f"{part} ABANDONED after {limit} s")
            except Exception as exc:  # one broken part must not lose the others' numbers
                info["errors"].append(f"{part}: {type(exc).__name__}: {exc}")
                self.note(f"{part} FAILED: {exc!r}")
            finally:
                signal.alarm(0)
            info.setdefault("part_s", {})[part] = round(time.monotonic() - t_part)
            self.note(f"part {part}: {info['part_s'][part]} s (limit {limit} s)")
            Path(self.args.out).write_text(json.dumps(info, indent=1))
        info["kprobes_after"] = kprobe_count()
        info["wall_s"] = time.monotonic() - t0
        Path(self.args.out).write_text(json.dumps(info, indent=1))
        return info


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=100_000, help="reads per round, stats-only part")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--flood", type=int, default=1_000_000, help="reads in the streaming flood")
    ap.add_argument("--streaming-tools", default="",
                    help="streaming tools to run, e.g. ktui_record,bpftrace_printf (default all)")
    ap.add_argument("--cases", default="", help="startup cases to run, e.g. ktui:1,ktui:20 (default all)")
    ap.add_argument("--compare-rows", default="",
                    help=f"rows of the compare part, e.g. fentry,export (default all: {','.join(COMPARE_ROWS)})")
    ap.add_argument("--export-mem-seconds", type=int, default=180,
                    help="compare/export: how long the exporter is scraped afterwards for its memory (0: not)")
    ap.add_argument("--compare-tools", default="", help="compare: only these tools, e.g. ktui_c_fentry,funccount")
    ap.add_argument("--bpf-stats", action="store_true",
                    help="compare: kernel.bpf_stats_enabled=1 and each program's ns per run from bpftool "
                         "(slows every program: for the why, not the slowdowns)")
    ap.add_argument("--export-port", type=int, default=19436, help="compare/export: the exporter's port")
    ap.add_argument("--export-n", type=int, default=0,
                    help="compare/export: reads a round (0: --n); a round must last a second or more to "
                         "hold a scrape a second (run 13: 1000000)")
    ap.add_argument("--export-scraped-from", choices=("guest", "host"), default="guest",
                    help="compare/export: who scrapes the exporter: a thread of this suite, on the guest's "
                         "CPU, or the host (benchmarks/host_scrape.py, through QEMU's hostfwd)")
    ap.add_argument("--host-scraper-status", default=".vmout/host-scraper.json",
                    help="compare/export scraped from the host: the status file its scraper rewrites")
    ap.add_argument("--export-hour-seconds", type=int, default=3600,
                    help="export_hour: how long the exporter is scraped while the keys churn")
    ap.add_argument("--export-hour-every", type=int, default=60, help="export_hour: seconds between samples")
    ap.add_argument("--export-hour-rate", type=int, default=5,
                    help="export_hour: short-lived processes a second (each a new pid and task name)")
    ap.add_argument("--span-rows", default="", help=f"spans: rows to run (default all: {','.join(SPAN_ROWS)})")
    ap.add_argument("--span-tools", default="", help="spans: only these tools, e.g. ktui_span_rq,biolatency")
    ap.add_argument("--span-n", type=int, default=5000, help="spans/block: O_DIRECT reads per round")
    ap.add_argument("--span-rounds", type=int, default=3, help="spans: timed rounds per launch of a tool")
    ap.add_argument("--span-cycles", type=int, default=3,
                    help="spans: how often each tool is launched (its order turned each time)")
    ap.add_argument("--parts", default="warm_up,stats_only,streaming,startup,live_edit,listing,compare,spans")
    ap.add_argument("--base-tree", default="",
                    help="an older revision's tree (bench-out/base-REV): its ktui runs the stats-only "
                         "part's return probes too, for before/after rows")
    ap.add_argument("--base-first", action="store_true",
                    help="with --base-tree: each base tool runs just before today's, not just after")
    suite = Suite(ap.parse_args())
    threading.Thread(target=watchdog, args=(suite,), daemon=True).start()
    suite.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
