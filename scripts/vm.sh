#!/usr/bin/env bash
# Run a command as root inside a throwaway VM booting a stock Debian kernel.
#
#   scripts/vm.sh [--kernel VERSION] [--shell] -- COMMAND...
#
# A thin wrapper: the VM is booted by ktui/vm/boot.py (`python -m ktui.vm`,
# whose docstring lists the options and the KTUI_VM_* variables), the same
# code `ktui vm` uses. COMMAND runs from the repo root with the checkout's
# .venv first on PATH; its exit status is this script's.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${KTUI_PYTHON:-$repo/.venv/bin/python}"
[ -x "$python" ] || { echo "vm: no $python (run scripts/install.sh --test)" >&2; exit 2; }
cd "$repo"
exec "$python" -m ktui.vm "$@"
