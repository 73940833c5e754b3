"""`make bench`: ktui against bcc's tools and bpftrace, reported as ratios.

    .venv/bin/python -m benchmarks.run

1. compiles benchmarks/workload.c (gcc -O2 -static) into bench-out/;
2. boots ONE VM (scripts/vm.sh) running benchmarks/vm_suite.py: startup and
   stop times, stats-only overhead, streaming a flood (every tool in turn on
   the same workload, untraced rounds in between), and `ktui list '*'`
   (cold and warm cache) against `bpftrace -lv 'kfunc:*'`, and the compare
   part: fentry, fexit, hist(), stack(kernel) and `ktui export` against
   funccount, bpftrace, argdist and stackcount; and the spans part: a span's
   cost per pair against biolatency-bpfcc and bpftrace two-probe scripts;
3. on the host: the recording made in the VM is counted again
   (`ktui stream --from`), and the dashboard is run under synthetic floods
   (benchmarks/host_dash.py);
4. prints a table, writes bench-out/results.json and bench-out/results.md.

Knobs (environment): KTUI_BENCH_N (reads per stats-only round, 100000),
KTUI_BENCH_ROUNDS (3), KTUI_BENCH_FLOOD (reads in the streaming flood,
1000000), KTUI_BENCH_RATES (dashboard floods, events/s, "10000,100000,1000000"),
KTUI_BENCH_FLOOD_SECONDS (per rate, 10), KTUI_BENCH_MEM_SECONDS (the memory
run at 100k events/s, 90; 600 for the 10-minute run), KTUI_BENCH_REUSE_VM=1
(skip the VM and reuse bench-out/vm.json), KTUI_BENCH_PARTS (the VM suite's
parts, e.g. "warm_up,compare": only the rows of issues 13, 14 and 16),
KTUI_BENCH_HOST=0 (skip the host part), KTUI_BENCH_EXPORT_MEM_SECONDS (how
long `ktui export` is scraped for its memory after its rounds, 180),
KTUI_BENCH_EXPORT_N (reads a round of the export row, 1000000: a round
must hold a scrape; the row's scraper runs on the host, host_scrape.py),
KTUI_BENCH_BASE=REV (a git revision: its ktui runs the stats-only part's
return probes too, in the same VM, for a before/after row; e.g. the commit
before a change to the kernel side), KTUI_BENCH_BASE_FIRST=1 (each of the
base's tools runs just before today's instead of just after),
KTUI_BENCH_SPAN_N (O_DIRECT reads per round of the spans part's block row,
5000), KTUI_BENCH_SPAN_CYCLES (launches of each spans tool, 3). The spans
part alone, in one boot (about 25 minutes under emulation):

    KTUI_BENCH_PARTS=warm_up,spans KTUI_BENCH_HOST=0 .venv/bin/python -m benchmarks.run
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

from benchmarks.host_scrape import scraped_from_host

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench-out"
PY = sys.executable


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def sh(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, **kw)


def build_workload() -> Path:
    binary = OUT / "workload"
    sh(["gcc", "-O2", "-static", "-o", str(binary), "benchmarks/workload.c"], check=True)
    return binary


def run_vm(binary: Path) -> dict:
    out = OUT / "vm.json"
    if os.environ.get("KTUI_BENCH_REUSE_VM") == "1" and out.exists():
        print(f"bench: reusing {out}")
        return json.loads(out.read_text())
    out.unlink(missing_ok=True)
    cmd = (f"{PY} benchmarks/vm_suite.py --workload {binary.relative_to(ROOT)} "
           f"--out {out.relative_to(ROOT)} --n {env_int('KTUI_BENCH_N', 100_000)} "
           f"--rounds {env_int('KTUI_BENCH_ROUNDS', 3)} --flood {env_int('KTUI_BENCH_FLOOD', 1_000_000)} "
           f"--export-mem-seconds {env_int('KTUI_BENCH_EXPORT_MEM_SECONDS', 180)} "
           f"--export-n {env_int('KTUI_BENCH_EXPORT_N', 1_000_000)} "
           f"--span-n {env_int('KTUI_BENCH_SPAN_N', 5000)} --span-cycles {env_int('KTUI_BENCH_SPAN_CYCLES', 3)}")
    if os.environ.get("KTUI_BENCH_PARTS"):  # e.g. warm_up,compare: only those parts of the VM suite
        cmd += f" --parts {os.environ['KTUI_BENCH_PARTS']}"
    base = base_tree(os.environ.get("KTUI_BENCH_BASE", ""))
    if base is not None:
        cmd += f" --base-tree {base.relative_to(ROOT)}"
        if os.environ.get("KTUI_BENCH_BASE_FIRST") == "1":
            cmd += " --base-first"
    print(f"bench: one VM boot: scripts/vm.sh -- '{cmd}'", flush=True)
    # run 4's parts took 1129 s in the VM; the compare part (run 5) adds about
    # 10 minutes and the exporter's 3-minute memory run
    # scripts/vm.sh runs single-threaded TCG: under the multi-threaded kind the
    # guest oopsed while kprobes went onto a running vfs_read (see there).
    # with a base tree, warm_up and stats_only may each take longer (vm_suite's BASE_PART_TIMEOUTS);
    # the spans part took 25 minutes on a loaded host (run 10)
    env = {**os.environ, "KTUI_VM_TIMEOUT": os.environ.get("KTUI_VM_TIMEOUT", "4200" if base is None else "6300")}
    t0 = time.monotonic()
    # the export row's scraper on the host, as a real Prometheus would be
    # (in the guest it ran on the workload's one emulated CPU: run 13)
    with scraped_from_host(ROOT) as scraping:
        env["KTUI_VM_QEMU_OPTS"] = scraping.qemu_opts
        proc = sh(["scripts/vm.sh", "--", cmd + scraping.suite_args], env=env)
    print(f"bench: VM part took {time.monotonic() - t0:.0f} s (exit {proc.returncode})", flush=True)
    if not out.exists():
        return {"errors": [f"the VM suite wrote no results (exit {proc.returncode})"]}
    data = json.loads(out.read_text())
    data["vm_boot_and_run_s"] = time.monotonic() - t0
    return data


def base_tree(rev: str) -> Path | None:
    """An older revision's tree in bench-out/base-REV (its ktui package
    imported through PYTHONPATH in the VM, beside this tree's), for the
    before/after rows. None without KTUI_BENCH_BASE."""
    if not rev:
        return None
    commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    tree = OUT / f"base-{commit}"
    if not (tree / "ktui").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.Popen(["git", "archive", commit, "ktui"], cwd=ROOT, stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
        archive.wait()
    print(f"bench: base tree {rev} ({commit}) in {tree.relative_to(ROOT)}", flush=True)
    return tree


def count_recording(rec: str) -> int | None:
    """Events in a recording, as `ktui stream --from REC --no-stats | wc -l` minus the summary."""
    path = ROOT / rec
    if not path.exists():
        return None
    proc = subprocess.Popen([str(Path(PY).with_name("ktui")), "stream", "--from", str(path), "--no-stats"],
                            cwd=ROOT, stdout=subprocess.PIPE)
    lines = 0
    while chunk := proc.stdout.read(1 << 20):
        lines += chunk.count(b"\n")
    proc.wait()
    return lines - 1 if proc.returncode == 0 else None


def host_dash(*args: str, timeout: float = 900) -> dict:
    proc = sh([PY, "-m", "benchmarks.host_dash", *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_host(vm: dict) -> dict:
    host: dict = {"floods": {}}
    if os.environ.get("KTUI_BENCH_HOST") == "0":
        return host
    rec = vm.get("streaming", {}).get("ktui_record", {}).get("recording")
    if rec:
        host["recording_events"] = count_recording(rec)
        print(f"bench: recording holds {host['recording_events']} events", flush=True)
        host["ingest"] = host_dash("ingest", "--recording", str(ROOT / rec))
        print(f"bench: ingest {host['ingest']}", flush=True)
    secs = os.environ.get("KTUI_BENCH_FLOOD_SECONDS", "10")
    for rate in os.environ.get("KTUI_BENCH_RATES", "10000,100000,1000000").split(","):
        r = host_dash("flood", "--rate", rate, "--seconds", secs)
        host["floods"][rate] = r
        print(f"bench: dashboard at {rate} ev/s: { {k: v for k, v in r.items() if k != 'rss_samples'} }",
              flush=True)
    proc = sh([PY, "-m", "benchmarks.browse_keys"], capture_output=True, text=True, timeout=600)
    host["browse"] = (json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else
                      {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]})
    print(f"bench: browser keys {host['browse']}", flush=True)
    mem_s = os.environ.get("KTUI_BENCH_MEM_SECONDS", "90")
    host["memory"] = host_dash("flood", "--rate", "100000", "--seconds", mem_s,
                               timeout=float(mem_s) * 3 + 120)
    return host


# ------------------------------------------------------------------ analysis

def per_read(ns_list, n) -> float:
    return median(ns_list) / n


def slowdowns(section: dict, baselines: list, prefix: str) -> dict:
    """Tool's ns/read over the mean of the untraced rounds right before and after it."""
    bl = [b for b in baselines if b["tag"].startswith(prefix)]
    out = {}
    for name, entry in section.items():
        if "ns" not in entry:
            continue
        idx = next((i for i, b in enumerate(bl) if b["tag"] == f"{prefix}after {name}"), None)
        if idx is None or idx == 0:
            continue
        n = bl[idx]["n"]
        base = (per_read(bl[idx - 1]["ns"], n) + per_read(bl[idx]["ns"], n)) / 2
        out[name] = per_read(entry["ns"], n) / base
    return out


def added_ns(section: dict, baselines: list, prefix: str, name: str) -> float | None:
    """ns a tool adds to a read: its median round's ns/read minus the mean
    of the untraced rounds' medians right before and after it."""
    bl = [b for b in baselines if b["tag"].startswith(prefix)]
    idx = next((i for i, b in enumerate(bl) if b["tag"] == f"{prefix}after {name}"), None)
    entry = section.get(name, {})
    if "ns" not in entry or not idx:
        return None
    n = bl[idx]["n"]
    return per_read(entry["ns"], n) - (per_read(bl[idx - 1]["ns"], n) + per_read(bl[idx]["ns"], n)) / 2


def fastest_slowdowns(section: dict, baselines: list, prefix: str) -> dict:
    """The fastest round of a tool over the fastest untraced round just
    before and after it: the least disturbed of each, on a busy host."""
    bl = [b for b in baselines if b["tag"].startswith(prefix)]
    out = {}
    for name, entry in section.items():
        idx = next((i for i, b in enumerate(bl) if b["tag"] == f"{prefix}after {name}"), None)
        if "ns" not in entry or not idx:
            continue
        out[name] = min(entry["ns"]) / min(bl[idx - 1]["ns"] + bl[idx]["ns"])
    return out


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def analyse(vm: dict, host: dict) -> dict:
    res: dict = {"rows": [], "goals": []}
    bl = vm.get("baselines", [])
    stats = vm.get("stats_only", {})
    stream = vm.get("streaming", {})
    start = vm.get("startup", {})
    sd = slowdowns(stats, bl, "stats:")
    ss = slowdowns(stream, bl, "stream:")
    res["slowdown_stats"], res["slowdown_stream"] = sd, ss
    for prefix in ("stats:", "stream:"):
        meds = [per_read(b["ns"], b["n"]) for b in bl if b["tag"].startswith(prefix)]
        if meds:
            res[f"baseline_spread_{prefix[:-1]}"] = max(meds) / min(meds)
            res[f"baseline_ns_per_read_{prefix[:-1]}"] = median(meds)

    def row(part, what, value, fmt="{:.2f}", note=""):
        res["rows"].append({"part": part, "what": what,
                            "value": None if value is None else float(value),
                            "text": "n/a" if value is None else fmt.format(value), "note": note})

    def goal(name, met, detail):
        res["goals"].append({"goal": name, "met": met, "detail": detail})

    for name in stats:
        e = stats[name]
        hits = next(iter(e.get("summary", {}).get("probes", {}).values()), {}).get("hits")
        row("1 stats-only", f"{name} CPU s during the timed rounds", e.get("cpu_rounds_s"), "{:.2f}",
            f"launch to exit {e['cpu_s']:.1f} s" if e.get("cpu_s") is not None else "")
        row("1 stats-only", f"slowdown {name}", sd.get(name), "{:.2f}x",
            f"hits {hits} (expected {vm['params']['n'] * vm['params']['rounds']})" if hits is not None else
            e.get("error", ""))
    r = ratio(sd.get("ktui_c"), sd.get("funccount"))
    row("1 stats-only", "ktui c / funccount-bpfcc", r)
    goal("stats-only c probe slowdown <= funccount-bpfcc's", None if r is None else r <= 1.0,
         f"ratio {r:.2f}" if r else "not measured")
    base = vm.get("base_tree")
    if base:
        for now, before in (("ktui_r", "ktui_r_base"), ("ktui_r_compiled", "ktui_r_compiled_base"),
                            ("ktui_r_fexit", "ktui_r_fexit_base")):
            rb = ratio(sd.get(now), sd.get(before))
            row("1 stats-only", f"{now} now / at {base['rev']}", rb, "{:.2f}",
                f"slowdown now {sd.get(now) or 0:.2f}x, at {base['rev']} {sd.get(before) or 0:.2f}x (same run)")
            # what the probe adds to a read, in ns: less swayed than a ratio
            # when the untraced rounds around a tool moved
            add = {k: added_ns(stats, bl, "stats:", k) for k in (now, before)}
            row("1 stats-only", f"{now} ns added per read, now / at {base['rev']}", ratio(add[now], add[before]),
                "{:.2f}", f"now {add[now] or 0:.0f} ns, at {base['rev']} {add[before] or 0:.0f} ns "
                          "(median round minus the mean of the untraced medians either side)")
    r2 = ratio(sd.get("ktui_r"), sd.get("bpftrace_count_entry_return"))
    r3 = ratio(sd.get("ktui_r"), sd.get("funclatency"))
    row("1 stats-only", "ktui r+hist / bpftrace entry+return count", r2)
    row("1 stats-only", "ktui r+hist / funclatency-bpfcc", r3)
    goal("r probe + histogram <= bpftrace entry+return counting", None if r2 is None else r2 <= 1.0,
         f"ratio {r2:.2f}" if r2 else "not measured")
    goal("r probe + histogram far below funclatency-bpfcc (< 0.5x of its slowdown)",
         None if r3 is None else r3 < 0.5, f"ratio {r3:.2f}" if r3 else "not measured")

    n = vm.get("params", {}).get("flood")
    for name, e in stream.items():
        d, lost = e.get("delivered"), e.get("lost")
        if name == "ktui_record" and host.get("recording_events") is not None:
            e["delivered_summary"] = d
            d = e["delivered"] = host["recording_events"]
        share = ratio(d, n)
        row("2 streaming", f"{name} delivered share", share, "{:.1%}",
            f"delivered {d} + lost {lost} = {None if d is None or lost is None else d + lost} of {n}")
        if e.get("hits") is not None:
            row("2 streaming", f"{name} delivered / its probe's hits", ratio(d, e["hits"]), "{:.3%}",
                f"delivered {d} + lost {lost} vs hits {e['hits']} (reads seen by the probe)")
        row("2 streaming", f"{name} slowdown", ss.get(name), "{:.2f}x")
        row("2 streaming", f"{name} CPU s during the flood and its catch-up", e.get("cpu_rounds_s"), "{:.2f}",
            f"launch to exit {e['cpu_s']:.1f} s" if e.get("cpu_s") is not None else "")
        row("2 streaming", f"{name} CPU us per delivered event", e.get("cpu_us_per_event"), "{:.2f}",
            "its own CPU (reader, decoding, writing) over what it delivered")
        row("2 streaming", f"{name} peak RSS MiB", None if e.get("maxrss_kb") is None else e["maxrss_kb"] / 1024,
            "{:.0f}")
    kr = stream.get("ktui_record", {})
    d, lost = kr.get("delivered"), kr.get("lost")
    goal("ktui record delivers >= 99% of the flood", None if d is None else d >= 0.99 * n,
         f"{d} of {n}" if d is not None else "not measured")
    goal("delivered + lost == generated exactly", None if d is None or lost is None else d + lost == n,
         f"{d} + {lost} = {None if d is None or lost is None else d + lost} vs {n} generated; "
         f"ktui's probe counted {kr.get('hits')} hits" if d is not None else "not measured")
    r = ratio(ss.get("ktui_record"), ss.get("bpftrace_printf"))
    row("2 streaming", "ktui record slowdown / bpftrace printf", r)
    goal("ktui record slowdown <= bpftrace printf's", None if r is None else r <= 1.0,
         f"ratio {r:.2f}" if r else "not measured")
    us = kr.get("cpu_us_per_event")
    goal("ktui record's reader at most 0.5 us of CPU per event (issue 13)", None if us is None else us <= 0.5,
         f"{us:.2f} us per event, file writing included" if us is not None else "not measured")
    rss_k = [stream.get(k, {}).get("maxrss_kb") for k in ("ktui_record", "ktui_stream")]
    rss_t = stream.get("trace_bpfcc", {}).get("maxrss_kb")
    if rss_t and all(rss_k):
        goal("headless peak RSS below trace-bpfcc's", max(rss_k) < rss_t,
             f"ktui record {rss_k[0] / 1024:.0f} MiB, stream {rss_k[1] / 1024:.0f} MiB, "
             f"trace-bpfcc {rss_t / 1024:.0f} MiB")

    def st(key, field):
        return start.get(key, {}).get(field)

    for key in start:
        row("3 startup", f"{key} launch->live s", st(key, "live_s"))
        if st(key, "first_event_s") is not None:
            row("3 startup", f"{key} launch->first event s", st(key, "first_event_s"))
        row("4 stop", f"{key} SIGINT->exit s (flood)", st(key, "exit_s"), "{:.2f}",
            f"probes left {st(key, 'probes_left')}")
    r = ratio(st("ktui:1", "live_s"), st("funccount:1", "live_s"))
    row("3 startup", "ktui 1 probe live / funccount-bpfcc", r)
    for tool in ("trace_bpfcc", "bpftrace"):
        row("3 startup", f"ktui 1 probe live / {tool}", ratio(st("ktui:1", "live_s"), st(f"{tool}:1", "live_s")))
    goal("1 probe live no later than funccount-bpfcc", None if r is None else r <= 1.0,
         f"ratio {r:.2f}" if r else "not measured")
    r = ratio(st("ktui:20", "live_s"), st("ktui:1", "live_s"))
    row("3 startup", "ktui 20 probes / 1 probe (live)", r)
    goal("20 probes live within 1.5x of 1 probe", None if r is None else r <= 1.5,
         f"ratio {r:.2f}" if r else "not measured")
    stops = {k: (st(k, "exit_s"), st(k, "probes_left")) for k in start if k.startswith("ktui")}
    stops.update({f"stream:{k}": (v.get("exit_s"), v.get("probes_left"))
                  for k, v in stream.items() if k.startswith("ktui")})
    ok = bool(stops) and all(e is not None and e <= 2.0 and left == 0 for e, left in stops.values())
    goal("first SIGINT during a flood -> exit within 2 s, every probe detached", ok if stops else None,
         ", ".join(f"{k}: {e if e is None else round(e, 2)} s, {left} left" for k, (e, left) in stops.items()))

    # the generic engine (#11): first and later starts, counts, live edits
    cold, warm = st("ktui_cold:1", "first_event_s"), st("ktui_warm:1", "first_event_s")
    bt_live = st("bpftrace:1", "live_s")
    fc_live = st("funccount:1", "live_s")
    r = ratio(st("ktui_cold:1", "live_s"), fc_live)
    row("3 startup", "ktui first start (no cache) live / funccount-bpfcc", r)
    goal("first start of a set live no later than funccount-bpfcc", None if r is None else r <= 1.0,
         f"ktui {st('ktui_cold:1', 'live_s')} s (first event {cold} s), funccount {fc_live} s"
         if r is not None else "not measured")
    r = ratio(st("ktui_warm:1", "live_s"), bt_live)
    row("3 startup", "ktui later start (cache) live / bpftrace", r)
    row("3 startup", "ktui later start first event / bpftrace first event",
        ratio(warm, st("bpftrace:1", "first_event_s")))
    goal("later start live within 1.5x of bpftrace's launch-to-live", None if r is None else r <= 1.5,
         f"ktui {st('ktui_warm:1', 'live_s')} s (first event {warm} s), bpftrace {bt_live} s"
         if r is not None else "not measured")
    counts = st("ktui_cold_counts:1", "first_event_s")
    r = ratio(counts, bt_live)
    row("3 startup", "ktui first counts on stdout (no cache) / bpftrace live", r, "{:.2f}",
        f"first stats line with hits after {counts} s")
    goal("hit counts no later than bpftrace's launch-to-live, while the program still loads",
         None if r is None else r <= 1.0, f"ratio {r:.2f}" if r is not None else "not measured")
    for kind in ("c", "r"):
        r = ratio(sd.get(f"ktui_{kind}"), sd.get(f"ktui_{kind}_compiled"))
        row("1 stats-only", f"ktui {kind}: generic / compiled slowdown (interpretation per hit)", r)
    edit = vm.get("live_edit", {})
    gen = edit.get("generic", {})
    worst = None
    for op in ("add", "edit", "toggle"):
        att = [e["attached_s"] for e in gen.get(op, [])]
        ev = [e["first_event_s"] for e in gen.get(op, []) if e["first_event_s"] is not None]
        if att:
            row("5 live edit", f"{op}: Enter -> attached, median (max) s", median(att), "{:.3f}",
                f"max {max(att):.3f} s over {len(att)}")
            worst = max(worst or 0, max(att))
        if ev:
            row("5 live edit", f"{op}: Enter -> first event, median (max) s", median(ev), "{:.3f}",
                f"max {max(ev):.3f} s; {len(gen[op]) - len(ev)} without an event")
    comp = [e["attached_s"] for e in edit.get("compiled", {}).get("add", [])]
    if comp:
        row("5 live edit", "add with engine=compiled: Enter -> attached s", median(comp), "{:.1f}")
    goal("a probe added, edited or switched live in under 1 s (Enter to attached)",
         None if worst is None else worst < 1.0,
         f"worst {worst:.3f} s; bcc imported: {edit.get('bcc_imported_by_generic')}"
         if worst is not None else "not measured")

    ls = vm.get("listing", {})
    if ls.get("bpftrace_s"):
        cold, warm, bt = (median(ls[k]) if ls.get(k) else None
                          for k in ("ktui_cold_s", "ktui_warm_s", "bpftrace_s"))
        row("6 listing", "ktui list '*', cold cache, s", cold, "{:.1f}", ls.get("ktui_summary", ""))
        row("6 listing", "ktui list '*', warm cache, s", warm, "{:.1f}")
        row("6 listing", "bpftrace -lv 'kfunc:*', s", bt, "{:.1f}",
            f"{ls.get('bpftrace_functions')} kfuncs")
        row("6 listing", "ktui list cold / bpftrace -lv", ratio(cold, bt))
        row("6 listing", "ktui list warm / bpftrace -lv", ratio(warm, bt))
        r = ratio(warm, bt)
        goal("ktui list '*' no slower than bpftrace -lv 'kfunc:*' (second run, cache)",
             None if r is None else r <= 1.0,
             f"warm {warm:.1f} s, cold {cold:.1f} s, bpftrace {bt:.1f} s (medians of "
             f"{len(ls['bpftrace_s'])})" if r is not None else "not measured")

    res["slowdown_compare"] = analyse_compare(vm, row, goal)
    res["span_costs"] = analyse_spans(vm, row, goal)

    ing = host.get("ingest", {})
    for part in ("collector", "dashboard"):
        if isinstance(ing.get(part), dict):
            row("5 host", f"replay ingest, {part} (events/s)", ing[part].get("rate"), "{:,.0f}")
    for rate, f in host.get("floods", {}).items():
        if "error" in f:
            row("5 host", f"dashboard {rate} ev/s", None, note=f["error"])
            continue
        row("5 host", f"dashboard {rate} ev/s: key latency median ms", f["key_ms_median"], "{:.0f}",
            f"p95 {f['key_ms_p95']:.0f}, max {f['key_ms_max']:.0f}, until idle {f['key_idle_ms_median']:.0f}")
        row("5 host", f"dashboard {rate} ev/s: peak RSS MiB", f["peak_rss_kb"] / 1024, "{:.0f}",
            f"achieved {f['achieved_rate']:,.0f} ev/s, CPU {f['cpu_share']:.0%} of a core")
    b = host.get("browse", {})
    if "error" in b:
        row("5 host", "function browser keystroke", None, note=b["error"])
    elif b:
        for part in ("matcher", "handler", "screen", "floor"):
            row("5 host", f"browser keystroke, {b['names']:,} names: {part} p50 ms", b[part]["p50_ms"],
                "{:.1f}", f"p99 {b[part]['p99_ms']:.1f}, max {b[part]['max_ms']:.1f}, {b[part]['keys']} keys")
        goal("browser keystroke -> updated list < 100 ms (60k names, host)",
             b["handler"]["p99_ms"] < 100 and b["screen"]["p50_ms"] - b["floor"]["p50_ms"] < 100,
             f"handler p99 {b['handler']['p99_ms']:.0f} ms; key to painted p50 "
             f"{b['screen']['p50_ms']:.0f} ms against a plain Input's {b['floor']['p50_ms']:.0f} ms")
    f = host.get("floods", {}).get("100000")
    if f and "error" not in f:
        goal("dashboard key latency < 100 ms at 100k ev/s", f["key_ms_median"] < 100,
             f"median {f['key_ms_median']:.0f} ms, p95 {f['key_ms_p95']:.0f} ms")
        goal("dashboard RSS < 250 MB at 100k ev/s", f["peak_rss_kb"] * 1024 < 250e6,
             f"{f['peak_rss_kb'] / 1024:.0f} MiB")
    m = host.get("memory", {})
    samples = m.get("rss_samples") or []
    if len(samples) >= 6:
        # Textual's caches fill during the first half (bounded LRUs): compare
        # the start of the second half with the end of the run.
        k = max(1, len(samples) // 6)
        half = len(samples) // 2
        early = median(s[1] for s in samples[half:half + k])
        late = median(s[1] for s in samples[-k:])
        growth = late / early - 1
        row("5 host", f"memory over {m['seconds']} s at 100k ev/s: growth", growth, "{:+.1%}",
            f"{early / 1024:.0f} -> {late / 1024:.0f} MiB, peak {m['peak_rss_kb'] / 1024:.0f} MiB")
        goal("memory flat (< 10% RSS growth over the second half)", growth < 0.10,
             f"{growth:+.1%} over the second half of {m['seconds']} s")
    return res


# the compare part (issues 13, 14 and 16): row -> (tool, what it is measured against, goal ratio, goal text)
COMPARE_GOALS = (
    ("fentry", "ktui_c_fentry", ("funccount",), 0.8,
     "c probe via fentry <= 0.8x funccount-bpfcc's slowdown (issue 13)"),
    ("fentry", "ktui_c_kprobe", ("funccount",), 1.0,
     "a counting c probe via kprobe no slower than funccount-bpfcc (issue 30)"),
    ("fentry", "ktui_c_fentry", ("bpftrace_fentry_count",), 1.0,
     "a counting c probe via fentry no slower than bpftrace kfunc (fentry) count() (issue 30)"),
    ("fexit", "ktui_r_fexit", ("bpftrace_count_entry_return",), 1.0,
     "r probe + latency histogram via fexit below bpftrace kprobe+kretprobe counting (issue 13)"),
    ("hist", "ktui_hist", ("argdist_hist", "bpftrace_hist"), 1.0,
     "hist(a3) no slower than argdist-bpfcc -H or bpftrace hist(arg2) (issue 14)"),
    ("stack", "ktui_stack", ("stackcount", "bpftrace_kstack"), 1.0,
     "stack(kernel) no slower than stackcount-bpfcc or bpftrace @[kstack] = count() (issue 14)"),
    ("export", "ktui_export", ("ktui_stream_set",), 1.0,
     "ktui export scraped every second no slower than ktui stream --no-stats of the same set (issue 16)"),
    ("export", "ktui_export_fetch", ("ktui_stream_fetch",), 1.0,
     "ktui export of a set with a fetch, scraped every second, below ktui stream --no-stats of it (issue 33)"),
)


def analyse_compare(vm: dict, row, goal) -> dict:
    """Rows and goals of the compare part; returns its slowdowns."""
    comp = vm.get("compare", {})
    if not comp:
        return {}
    bl = vm.get("baselines", [])
    sd = slowdowns(comp, bl, "compare:")
    fast = fastest_slowdowns(comp, bl, "compare:")
    meds = [per_read(b["ns"], b["n"]) for b in bl if b["tag"].startswith("compare:")]
    for name, e in comp.items():
        n = next((b["n"] for b in bl if b["tag"] == f"compare:after {name}"), None)
        note = e.get("error", "")
        if e.get("hits") is not None:
            note = f"hits {e['hits']} of {e.get('expected_hits')} reads, via {e.get('via')}"
        row(f"7 compare/{e.get('row')}", f"{name} ns/read (median)",
            per_read(e["ns"], n) if "ns" in e and n else None, "{:.0f}", note)
        row(f"7 compare/{e.get('row')}", f"{name} slowdown", sd.get(name), "{:.2f}x",
            f"live after {e['live_s']:.1f} s ({e.get('live_by')})" if e.get("live_s") else "")
        if "ns" in e and name in fast:
            row(f"7 compare/{e.get('row')}", f"{name} slowdown, fastest round over fastest baselines",
                fast[name], "{:.2f}x", "less sensitive to the host's other load than the medians")
        for p in e.get("bpf_progs", []):  # --bpf-stats runs: the programs' own time per run
            row(f"7 compare/{e.get('row')}", f"{name}: BPF program {p['name']} ({p['type']}) ns per run",
                p["ns_per_run"], "{:.0f}", f"{p['runs']} runs")
    if meds:
        row("7 compare", "untraced baselines ns/read: min / max", min(meds), "{:.0f}",
            f"max {max(meds):.0f} over {len(meds)} baselines (spread {max(meds) / min(meds):.2f}x)")
    for rname, mine, others, limit, text in COMPARE_GOALS:
        if mine not in comp:
            continue
        ratios = {o: ratio(sd.get(mine), sd.get(o)) for o in others}
        for o, r in ratios.items():
            row(f"7 compare/{rname}", f"{mine} / {o} slowdown", r, "{:.2f}", f"goal <= {limit}")
        known = [r for r in ratios.values() if r is not None]
        goal(text, None if len(known) < len(others) else all(r <= limit for r in known),
             ", ".join(f"{mine} / {o} = {'n/a' if r is None else f'{r:.2f}'}" for o, r in ratios.items()))
    for name, e in comp.items():
        if name.startswith("ktui") and e.get("expected_hits") is not None:
            goal(f"{name}: hits == reads", e.get("hits") == e["expected_hits"],
                 f"{e.get('hits')} of {e['expected_hits']}")
    st = comp.get("ktui_stack", {})
    if "folded_total" in st:
        goal("ktui_stack: stacks counted == reads (folded file at exit)",
             st["folded_total"] == st.get("expected_hits"), f"{st['folded_total']} of {st.get('expected_hits')}")
    ex = comp.get("ktui_export", {})
    if ex.get("rss_kb_start"):
        scr = ex.get("scrapes", {})
        row("7 compare/export", "ktui_export RSS MiB at start / after the rounds", ex["rss_kb_start"] / 1024,
            "{:.1f}", f"after {ex.get('rss_kb_after_rounds', 0) / 1024:.1f} MiB; {scr.get('scrapes')} scrapes, "
            f"median {1000 * (scr.get('median_s') or 0):.0f} ms, {scr.get('errors')} errors")
        mem = ex.get("memory", {})
        samples = mem.get("samples") or []
        if samples:
            first, last = samples[0][1], samples[-1][1]
            row("7 compare/export", f"ktui_export RSS over {mem['seconds']} s scraped every second",
                ratio(last, first) - 1, "{:+.1%}", f"{first / 1024:.1f} -> {last / 1024:.1f} MiB, peak "
                f"{max(s[1] for s in samples) / 1024:.1f} MiB; hits served {mem.get('hits_served')} of "
                f"{mem.get('reads_done')} reads")
            took = [x[3] for x in samples if len(x) > 3]
            if took:  # one round every 10 s while scraped: the exporter's steady state
                row("7 compare/export", "ktui_export ns/read in the memory run's rounds (median)",
                    median(took) / (mem["reads_done"] // mem["rounds_done"]), "{:.0f}",
                    f"{len(took)} rounds, scraped every second")
            goal("exporter memory flat while scraped every second (< 5% RSS growth)", last / first - 1 < 0.05,
                 f"{first / 1024:.1f} -> {last / 1024:.1f} MiB over {mem['seconds']} s")
            goal("exporter's hits == reads (scraped)", mem.get("hits_served") == mem.get("reads_done"),
                 f"{mem.get('hits_served')} of {mem.get('reads_done')}")
    return sd


# the spans part (issue 32): (row, ktui's tool, the tools it is measured against)
SPAN_RATIOS = (
    ("block", "ktui_span_rq", ("biolatency", "bpftrace_rq")),
    ("block", "ktui_span_rq_fentry", ("biolatency", "bpftrace_rq")),
    ("block", "ktui_span_rq_sampled", ("biolatency", "bpftrace_rq")),
    ("syscall", "ktui_span_tid", ("bpftrace_tid",)),
)


def span_costs(spans: dict) -> dict:
    """ns each spans tool adds per pair, per launch: its median round's ns
    per op minus the mean of the untraced medians just before and after it
    (the same row and cycle), then the median over its launches. By tool:
    {"row", "added_ns": [per launch], "median_ns", "pairs", "expected_pairs",
    "errors"}."""
    out: dict = {}
    bare = spans.get("bare", [])
    for run in spans.get("runs", []):
        tool = out.setdefault(run["tool"], {"row": run["row"], "added_ns": [], "pairs": 0,
                                            "expected_pairs": 0, "errors": []})
        if "ns" not in run:
            tool["errors"].append(run.get("error", "no rounds"))
            continue
        seq = [b for b in bare if b["row"] == run["row"] and b["cycle"] == run["cycle"]]
        idx = next((i for i, b in enumerate(seq) if b["tag"] == f"after {run['tool']}"), None)
        if not idx:
            tool["errors"].append(f"cycle {run['cycle']}: no untraced rounds around it")
            continue
        around = [per_read(b["ns"], b["n"]) for b in seq[idx - 1:idx + 1]]
        tool["added_ns"].append(per_read(run["ns"], run["n"]) - sum(around) / 2)
        tool["pairs"] += run.get("pairs") or 0
        tool["expected_pairs"] += run["expected_pairs"]
    for tool in out.values():
        tool["median_ns"] = median(tool["added_ns"]) if tool["added_ns"] else None
    return out


def analyse_spans(vm: dict, row, goal) -> dict:
    """Rows of the spans part: ns added per pair, and ktui's over the others'."""
    spans = vm.get("spans", {})
    if not spans.get("runs"):
        return {}
    costs = span_costs(spans)
    for rname in ("block", "syscall"):
        meds = [per_read(b["ns"], b["n"]) for b in spans.get("bare", []) if b["row"] == rname]
        if meds:
            row(f"8 spans/{rname}", "untraced ns per op: min / max", min(meds), "{:.0f}",
                f"max {max(meds):.0f} over {len(meds)} (spread {max(meds) / min(meds):.2f}x)")
    for name, c in costs.items():
        per = ", ".join(f"{x:.0f}" for x in c["added_ns"])
        row(f"8 spans/{c['row']}", f"{name} ns added per pair (median of launches)", c["median_ns"], "{:.0f}",
            f"launches: {per}; pairs seen {c['pairs']} of {c['expected_pairs']}"
            + (f"; {'; '.join(c['errors'])}" if c["errors"] else ""))
    measured = []
    for rname, mine, others in SPAN_RATIOS:
        if mine not in costs:
            continue
        for o in others:
            r = ratio(costs[mine]["median_ns"], costs.get(o, {}).get("median_ns"))
            row(f"8 spans/{rname}", f"{mine} / {o} ns added per pair", r, "{:.2f}")
            if r is not None:
                measured.append(f"{mine} / {o} = {r:.2f}")
    goal("a span's cost per pair measured against biolatency-bpfcc and a bpftrace two-probe script, "
         "same run (issue 32)", bool(measured) or None, ", ".join(measured) or "not measured")
    return costs


def render(res: dict, meta: dict) -> str:
    lines = ["| part | measurement | value | note |", "|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['part']} | {r['what']} | {r['text']} | {r['note']} |")
    lines += ["", "| goal | met | measured |", "|---|---|---|"]
    for g in res["goals"]:
        met = {True: "yes", False: "**no**", None: "not measured"}[g["met"]]
        lines.append(f"| {g['goal']} | {met} | {g['detail']} |")
    lines += ["", "```", json.dumps(meta, indent=1), "```"]
    return "\n".join(lines) + "\n"


def reanalyse() -> int:
    """KTUI_BENCH_ANALYSE_ONLY=1: redo the tables from bench-out/results.json."""
    data = json.loads((OUT / "results.json").read_text())
    res = analyse(data["vm"], data["host"])
    data["analysis"] = res
    (OUT / "results.json").write_text(json.dumps(data, indent=1, default=str))
    md = render(res, data["meta"])
    (OUT / "results.md").write_text(md)
    print(md)
    return 0


def main() -> int:
    if os.environ.get("KTUI_BENCH_ANALYSE_ONLY") == "1":
        return reanalyse()
    t0 = time.monotonic()
    OUT.mkdir(exist_ok=True)
    binary = build_workload()
    vm = run_vm(binary)
    host = run_host(vm)
    res = analyse(vm, host)
    meta = {"host_kernel": platform.release(), "host_cpus": os.cpu_count(),
            "vm_kernel": vm.get("kernel"), "vm_cpus": vm.get("cpus"), "params": vm.get("params"),
            "startup_functions": vm.get("startup_functions"),
            "baseline_ns_per_read": {k: res.get(f"baseline_ns_per_read_{k}") for k in ("stats", "stream")},
            "baseline_spread": {k: res.get(f"baseline_spread_{k}") for k in ("stats", "stream")},
            "errors": vm.get("errors", []), "wall_s": round(time.monotonic() - t0)}
    (OUT / "results.json").write_text(json.dumps({"meta": meta, "analysis": res, "vm": vm, "host": host},
                                                 indent=1, default=str))
    md = render(res, meta)
    (OUT / "results.md").write_text(md)
    print(md)
    print(f"bench: wrote {OUT / 'results.json'} and {OUT / 'results.md'} in {meta['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
