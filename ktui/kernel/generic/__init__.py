"""The generic engine: one BPF program, compiled once per kernel and ktui version, that runs every probe from a plan.

In: bound probes (plan.py turns each into a plan: fetches, filter, record
layout), the cached or freshly compiled program (cache.py, loader.py,
compile_child.py: the compile helper process; prebuild.py for a VM's
kernel) and a hand-assembled dispatcher per kprobe (dispatch.py) that
counts hits until the program is in. Out: a GenericEngine (engine.py)
whose slots the session attaches through ktui.kernel.attach, whose ring
buffer it reads through ktui.kernel.buffers and whose counters come from
ktui.kernel.maps. program.c is the C; abi.py the layout it shares with
Python.
"""
