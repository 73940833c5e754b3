#!/usr/bin/env bash
# Build the generic program's shipped objects (ktui/kernel/generic/shipped/),
# after any change to program.c, abi.py or the C they paste in; --check
# compares a fresh build with them instead (make test's host suite does:
# tests/unit/test_shipped.py). As root, with bcc and Debian's 6.1 headers
# (scripts/install.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m ktui.kernel.generic.build_shipped "$@"
