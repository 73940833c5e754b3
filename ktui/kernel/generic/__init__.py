"""The generic engine: one BPF program, built ahead of time, that runs every probe from a plan.

In: bound probes (plan.py turns each into a plan: fetches, filter, record
layout), the program shipped in the package (shipped.py, built by
build_shipped.py), or where a kernel refuses it, a cached or freshly
compiled one (cache.py, loader.py, compile_child.py: the compile helper
process), and a hand-assembled dispatcher per kprobe (dispatch.py) that
counts hits until the program is in. Out: a GenericEngine (engine.py)
whose slots the session attaches through ktui.kernel.attach, whose ring
buffer it reads through ktui.kernel.buffers and whose counters come from
ktui.kernel.maps. program.c is the C; abi.py the layout it shares with
Python.
"""
