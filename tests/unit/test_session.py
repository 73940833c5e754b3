"""kernel.session on a fake kernel side (tests/fakekernel.py): bookkeeping,
and drain/stats racing against probes being removed and added. The same
race against a real kernel: tests/kernel/test_session_race.py."""

from __future__ import annotations

import threading

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.record.feed import FeedError, ProbeState
from tests.fakekernel import FakeLoader

ROUNDS = 150


def session(tmp_path, loader, *specs: str) -> Session:
    ps = ProbeSet("fake", probes=tuple(parse_spec(s) for s in specs))
    return Session(ps, SessionOptions(log_path=tmp_path / "ktui.log"), loader=loader)


def test_open_attaches_and_close_detaches_and_frees_everything(tmp_path):
    loader = FakeLoader()
    with session(tmp_path, loader, "vfs_read:c:a3", "vfs_read:r:retval") as s:
        assert {st.state for st in s.statuses().values()} == {ProbeState.ATTACHED}
        assert len(loader.attached) == 3  # a return probe is an entry and a return
        added = s.add_probe_now(parse_spec("vfs_write:c"))
        assert len(loader.attached) == 4 and len(loader.compiled) == 2
        s.set_enabled_now(added.probe_id, False)
        assert len(loader.attached) == 3
    assert loader.attached == {}
    assert all(bpf.freed for bpf in loader.compiled)


def test_removing_the_last_probe_of_a_unit_frees_it(tmp_path):
    loader = FakeLoader()
    with session(tmp_path, loader, "vfs_read:c") as s:
        added = s.add_probe_now(parse_spec("vfs_write:r"))
        s.remove_probe_now(added.probe_id)
        assert loader.compiled[1].freed and not loader.compiled[0].freed
        assert set(s.stats().probes) == {0}
        with pytest.raises(FeedError):
            s.remove_probe_now(added.probe_id)


def test_drain_and_stats_never_touch_a_freed_unit(tmp_path):
    """The collector drains and reads stats while a worker thread removes
    (and frees) units: hammer both from threads while probes come and go.
    Without the units' locks the fake sees a drain of a closed reader or a
    stats read of a freed program within a few rounds."""
    loader = FakeLoader(per_drain=2)
    failures: list[BaseException] = []
    done = threading.Event()
    calls = {"drain": 0, "stats": 0}

    with session(tmp_path, loader, "vfs_read:c:a3") as s:
        def hammer(name, fn):
            try:
                while not done.is_set():
                    fn()
                    calls[name] += 1
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        threads = [threading.Thread(target=hammer, args=("drain", s.drain)),
                   threading.Thread(target=hammer, args=("stats", s.stats)),
                   threading.Thread(target=hammer, args=("stats", s.stats))]
        for t in threads:
            t.start()
        try:
            for _ in range(ROUNDS):
                if failures:
                    break
                a = s.add_probe_now(parse_spec("vfs_write:c:a3"))
                b = s.add_probe_now(parse_spec("vfs_read:r:retval"))
                s.set_enabled_now(a.probe_id, False)
                s.remove_probe_now(a.probe_id)
                s.remove_probe_now(b.probe_id)
        finally:
            done.set()
            for t in threads:
                t.join()
    assert failures == []
    assert calls["drain"] > ROUNDS and calls["stats"] > ROUNDS  # they really raced
    assert loader.attached == {}
    assert all(bpf.freed for bpf in loader.compiled)
    assert len(loader.compiled) == 1 + 2 * ROUNDS


def test_the_session_binds_names_before_it_compiles(tmp_path):
    """A probe that names parameters reaches codegen bound to the kernel's
    BTF (here a little kernel built in the test); a name the kernel does not
    know is the add's one-line error, and nothing is compiled for it."""
    from ktui.lang.model import positional
    from ktui.lang.spec import parse_probe_text
    from tests.unit.namedkernel import kernel_names

    loader = FakeLoader()
    ps = ProbeSet("fake", probes=(parse_spec("vfs_read:c:count,file->f_pos"),))
    names = kernel_names(tmp_path / "k")
    with Session(ps, SessionOptions(log_path=tmp_path / "ktui.log"), loader=loader, names=names) as s:
        probe = next(iter(s.statuses().values())).probe
        assert [str(positional(f.expr)) for f in probe.fetches] == ["a3", "+32(a1)"]
        assert "+ (32LL)" in loader.compiled[0].text
        compiled = len(loader.compiled)
        with pytest.raises(FeedError, match="no parameter 'cuont' \\(did you mean count\\?\\)"):
            s.add_probe_now(parse_spec("vfs_read:c:cuont"))
        assert len(loader.compiled) == compiled
        added = s.add_probe_now(parse_probe_text("vfs_read:r:retval if count > 4096"))
        assert added.probe.bindings["count"].binding.type == "u64"


def test_the_session_binds_what_a_return_probe_returns(tmp_path):
    """A return probe without names still learns its function's return
    type (errno counting: lang.errnos), at the start and when added."""
    from ktui.lang.errnos import probe_errno_mode
    from tests.unit.namedkernel import kernel_names

    ps = ProbeSet("fake", probes=(parse_spec("vfs_read:r"),))
    names = kernel_names(tmp_path / "k")
    with Session(ps, SessionOptions(log_path=tmp_path / "ktui.log"), loader=FakeLoader(), names=names) as s:
        assert probe_errno_mode(next(iter(s.statuses().values())).probe) == (8, "long")  # ssize_t
        added = s.add_probe_now(parse_spec("take_stats:r"))
        assert probe_errno_mode(added.probe) == (4, "int")


def test_the_compile_helper_starts_before_the_first_probe_and_is_left_out(tmp_path):
    """ktui's compile helper is started before anything is attached, so its
    pid is among ktui's own from the first hit (issue 28); without a
    generic engine it is not needed, and compiled programs leave ktui out."""
    import os

    calls = []

    class Helper:
        pid = 4242

        def close(self):
            calls.append("helper closed")

    class Loader(FakeLoader):
        def compile_helper(self, log_fd, cache_dir, use_cache, tracing, *, func_arg_helpers):
            calls.append(("helper", bool(self.attached)))
            return Helper()

        def generic_engine(self, *, exclude_pids, pid, comm, features):
            calls.append(("engine", exclude_pids, bool(self.attached)))
            return None

    loader = Loader()
    with session(tmp_path, loader, "vfs_read:c:a3"):
        pass
    assert calls[:2] == [("helper", False), ("engine", (os.getpid(), 4242), False)]
    assert "helper closed" in calls
    text = loader.compiled[0].text
    assert f"(pid_tgid >> 32) == {os.getpid()}U" in text and "4242" not in text


def test_a_session_closed_during_the_background_compile_leaves_it_its_helper(tmp_path):
    """An `auto` probe counts by kprobe while the fentry/fexit variant
    compiles in the background for later starts. A session that ends
    meanwhile (a short `stream --duration`) must not take the compile
    helper from under that compile: the compile finishes and fills the
    cache, and the helper is stopped after it, not before (CI on 6.1 saw
    "the variant did not compile: ... the session has ended")."""
    entered, asked, calls = threading.Event(), threading.Event(), []

    class Helper:
        pid = 4242

        def compile(self, text, key):
            calls.append("compiled")
            return "the tracing variant"

        def close(self):
            calls.append("helper closed")

    class Loader(FakeLoader):
        def tracing_variant(self, log_fd, cache_dir, use_cache, compiler=None, *, func_arg_helpers):
            entered.set()
            assert asked.wait(10)  # the session closes between the claim and the compile request
            return compiler("text", "key")

    s = session(tmp_path, Loader(), "vfs_read:c:a3")
    s.open()
    s._helper = Helper()  # the fake has no generic engine, which would start it
    compiling = threading.Thread(target=s._compile_tracing_variant)
    compiling.start()
    assert entered.wait(10)
    s.close()
    assert calls == []  # the helper outlives the session while the compile needs it
    asked.set()
    compiling.join(10)
    assert calls == ["compiled", "helper closed"]
    assert "fentry/fexit variant compiled and cached" in (tmp_path / "ktui.log").read_text()


def test_drain_capacity_is_the_smallest_buffer_that_says(tmp_path):
    """What the collector paces a flood by (drain_pacing): the fewest records
    any live unit's buffer holds; None while no reader can say."""
    loader = FakeLoader()
    with session(tmp_path, loader, "vfs_read:c:a3") as s:
        assert s.drain_capacity() is None  # the fake readers cannot say
        added = s.add_probe_now(parse_spec("vfs_write:c:a3"))
        first, second = s._units
        first.reader.capacity = lambda: 131_072
        assert s.drain_capacity() == 131_072
        second.reader.capacity = lambda: 4_096
        assert s.drain_capacity() == 4_096
        s.remove_probe_now(added.probe_id)  # its unit is freed: no longer counts
        assert s.drain_capacity() == 131_072


def test_the_session_goes_by_the_kernels_probed_features(tmp_path):
    """The buffer and the engine come from the kernel's features (probed,
    kernel/machine/features), never its version; how they were had, and what could
    not be checked, is in the log."""
    from ktui.kernel.machine.features import Finding, given
    from ktui.lang.model import KtuiError

    loader = FakeLoader()
    loader.kernel_features = given(ringbuf=False, kprobe_cookie=None)
    loader.kernel_features.findings["kprobe_cookie"] = Finding(None, "bpf(2) not permitted")
    with session(tmp_path, loader, "vfs_read:c") as s:
        assert s.buffer == "perf" and s.features is loader.kernel_features
    log = (tmp_path / "ktui.log").read_text()
    assert "ktui: kernel features: given" in log
    assert "ktui: kernel feature kprobe_cookie not checked: bpf(2) not permitted" in log
    ps = ProbeSet("fake", probes=(parse_spec("vfs_read:c"),))
    forced = Session(ps, SessionOptions(log_path=tmp_path / "ktui.log", engine="generic", buffer="ringbuf"),
                     loader=loader)
    with pytest.raises(KtuiError, match="needs attach cookies on kprobe links, and on this kernel they "
                                        "could not be checked: bpf\\(2\\) not permitted"):
        forced.open()


def test_a_tracefs_closed_to_ktui_leaves_return_probes_to_the_pmu_and_says_why(tmp_path):
    """Run with capabilities, not as root, ktui may not read tracefs (mode
    0700): its return probes then go by the kprobe PMU, and the log says
    what is missing (this was a traceback)."""
    class Closed(FakeLoader):
        def return_events(self):
            raise PermissionError(13, "Permission denied", "/sys/kernel/tracing/kprobe_events")

    loader = Closed()
    with session(tmp_path, loader, "vfs_read:r:retval") as s:
        assert {st.state for st in s.statuses().values()} == {ProbeState.ATTACHED}
    log = (tmp_path / "ktui.log").read_text()
    assert "tracefs is closed to this process (it needs root or CAP_DAC_OVERRIDE)" in log
