#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs the real bunqueue 2.9.5 server
# (bun + bunqueue from the npm registry, into .bunqueue/, reused when present),
# then runs every test in the workspace. Tests start the servers they need on
# 127.0.0.1 and stop them; nothing is skipped when a peer is missing: it fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/bunqueue.sh install
cargo test --workspace "$@"
