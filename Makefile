# ktui: the two commands users need (README.md), plus a few for developers.
#   make run    install what is missing, start the dashboard (default probe set)
#   make test   install what is missing, run every test (host + kernel VM)
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# The kernel matrix: the whole kernel suite on Debian bookworm's stock 6.1,
# and on 6.12 (bookworm backports), whose compiles take twice as long under
# emulation, the pipeline's core tests, the generic engine's, missed returns', each probe's cost, fentry/fexit's, the aggregations' and ktui list's. probesets/memory.yaml names 6.1's
# allocator functions, which 6.10+ renamed (*_noprof): it is 6.1-only.
KERNEL_MAIN ?= $(shell ls /boot/vmlinuz-6.1.*-amd64 2>/dev/null | sort -V | tail -n1 | sed 's|/boot/vmlinuz-||')
KERNEL_NEXT ?= $(shell ls /boot/vmlinuz-6.12.*-amd64 2>/dev/null | sort -V | tail -n1 | sed 's|/boot/vmlinuz-||')
KERNEL_PYTEST := $(PY) -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning
PYTEST_HOST := $(PY) -m pytest -q -p no:cacheprovider

.PHONY: run test test-host test-kernel install install-test bench clean

install:
	@bash scripts/install.sh

install-test:
	@bash scripts/install.sh --test

# On a kernel with kprobes: the dashboard, as root. On a machine like our CI
# (no kprobes, lockdown), ktui says so and runs the dashboard in a VM. One
# install.sh either way (with --vm for the VM rig): two in a row ran pip twice.
run:
	@if [ -e /sys/bus/event_source/devices/kprobe/type ]; then \
		bash scripts/install.sh && exec $(VENV)/bin/ktui $(ARGS); \
	else \
		echo "make run: this kernel has no kprobes; the dashboard will run in a throwaway VM (ktui vm)"; \
		bash scripts/install.sh --vm && exec $(VENV)/bin/ktui vm $(ARGS); \
	fi

test: install-test
	@$(MAKE) --no-print-directory test-host
	@$(MAKE) --no-print-directory test-kernel

# The import contracts first (pyproject.toml [tool.importlinter]: the layers,
# and no Textual or Rich below the UI), then the host tests.
test-host:
	$(VENV)/bin/lint-imports --no-cache --no-logo
	$(PYTEST_HOST) tests/unit tests/ui

# Every kernel test runs inside a throwaway VM (ktui/vm/boot.py, as for `ktui vm`).
VM := $(PY) -m ktui.vm
test-kernel:
	@test -n "$(KERNEL_MAIN)" || { echo "no 6.1 kernel image in /boot: run scripts/install.sh --test"; exit 1; }
	@echo "== kernel tests on $(KERNEL_MAIN) (VM)"
	$(VM) --kernel $(KERNEL_MAIN) -- "$(KERNEL_PYTEST) tests/kernel $(KERNEL_PYTEST_ARGS)"
	@if [ -n "$(KERNEL_NEXT)" ]; then \
		echo "== kernel tests on $(KERNEL_NEXT) (VM)"; \
		$(VM) --kernel $(KERNEL_NEXT) -- "$(KERNEL_PYTEST) tests/kernel/test_pipeline.py tests/kernel/test_generic.py tests/kernel/test_missed_returns.py tests/kernel/test_cost.py tests/kernel/test_fentry.py tests/kernel/test_aggregations.py tests/kernel/test_list.py tests/kernel/test_names.py tests/kernel/test_dashboard_e2e.py::test_find_a_function_and_add_a_probe_by_picking_its_names -k 'not test_pipeline or ((values or toggle or flood or shipped) and not memory)'"; \
	fi

bench: install-test
	$(PY) -m benchmarks.run

clean:
	rm -rf .vmout bench-out .pytest_cache
