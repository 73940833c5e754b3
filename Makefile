# ktui: the two commands users need (README.md), plus a few for developers.
#   make run    install what is missing, start the dashboard (default probe set)
#   make test   install what is missing, run every test (host + kernel VM)
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# Kernels the VM suite runs on; the first is Debian bookworm's stock 6.1.
VM_KERNELS ?= $(shell ls /boot/vmlinuz-6.1.*-amd64 2>/dev/null | sort -V | tail -n1 | sed 's|/boot/vmlinuz-||') \
              $(shell ls /boot/vmlinuz-6.12.*-amd64 2>/dev/null | sort -V | tail -n1 | sed 's|/boot/vmlinuz-||')
PYTEST_HOST := $(PY) -m pytest -q -p no:cacheprovider

.PHONY: run test test-host test-kernel install install-test bench clean

install:
	@bash scripts/install.sh

install-test:
	@bash scripts/install.sh --test

# On a kernel with kprobes: the dashboard, as root. On a machine like our CI
# (no kprobes, lockdown), ktui says so and runs the dashboard in a VM.
run: install
	@if [ -e /sys/bus/event_source/devices/kprobe/type ]; then \
		exec $(VENV)/bin/ktui $(ARGS); \
	else \
		echo "make run: this kernel has no kprobes; starting the dashboard in a throwaway VM (ktui vm)"; \
		bash scripts/install.sh --vm && exec $(VENV)/bin/ktui vm $(ARGS); \
	fi

test: install-test
	@$(MAKE) --no-print-directory test-host
	@$(MAKE) --no-print-directory test-kernel

test-host:
	$(PYTEST_HOST) tests/unit tests/ui

# Every kernel test runs inside a throwaway VM per kernel in VM_KERNELS.
test-kernel:
	@set -e; for k in $(VM_KERNELS); do \
		echo "== kernel tests on $$k (VM)"; \
		scripts/vm.sh --kernel $$k -- "$(PY) -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning tests/kernel $(KERNEL_PYTEST_ARGS)"; \
	done

bench: install-test
	$(PY) -m benchmarks.run

clean:
	rm -rf .vmout bench-out .pytest_cache
