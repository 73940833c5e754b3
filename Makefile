# ktui: the two commands users need (README.md), plus a few for developers.
#   make run    install what is missing, start the dashboard (default probe set)
#   make test   install what is missing, run every test (host + kernel VM)
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# The kernel matrix (6.1 whole, 6.12 a part): scripts/test-kernel.sh.
KERNEL_MAIN ?= $(shell ls /boot/vmlinuz-6.1.*-amd64 2>/dev/null | sort -V | tail -n1 | sed 's|/boot/vmlinuz-||')
KERNEL_NEXT ?= $(shell ls /boot/vmlinuz-6.12.*-amd64 2>/dev/null | sort -V | tail -n1 | sed 's|/boot/vmlinuz-||')
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

# The import contracts first (seconds: a broken layer stops here); then the
# kernel VMs side by side, the host suite in the slot of whichever VM is
# done first (scripts/test-kernel.sh --then): minutes less than host suite
# first, kernels after.
test: install-test
	$(VENV)/bin/lint-imports --no-cache --no-logo
	@test -n "$(KERNEL_MAIN)" || { echo "no 6.1 kernel image in /boot: run scripts/install.sh --test"; exit 1; }
	@bash scripts/test-kernel.sh --then "$(PYTEST_HOST) tests/unit tests/ui" \
		$(KERNEL_MAIN) $(KERNEL_NEXT) -- $(KERNEL_PYTEST_ARGS)

# The import contracts first (pyproject.toml [tool.importlinter]: the layers,
# and no Textual or Rich below the UI), then the host tests.
test-host:
	$(VENV)/bin/lint-imports --no-cache --no-logo
	$(PYTEST_HOST) tests/unit tests/ui

# Every kernel test runs inside a throwaway VM, one boot per kernel, the two
# boots side by side: the matrix and why are in scripts/test-kernel.sh.
test-kernel:
	@test -n "$(KERNEL_MAIN)" || { echo "no 6.1 kernel image in /boot: run scripts/install.sh --test"; exit 1; }
	@bash scripts/test-kernel.sh $(KERNEL_MAIN) $(KERNEL_NEXT) -- $(KERNEL_PYTEST_ARGS)

bench: install-test
	$(PY) -m benchmarks.run

clean:
	rm -rf .vmout bench-out .pytest_cache
