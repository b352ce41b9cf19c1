#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs the real bunqueue 2.9.5 server
# (bun + bunqueue from the npm registry, into .bunqueue/, reused when present),
# and PostgreSQL 15+ for the fleet tests (apt-get install -y postgresql, only when
# /usr/lib/postgresql/15/bin/initdb is missing), and bunqueue's official Python SDK
# (a venv in .peers/ with bunqueue-client from PyPI, reused when present), then runs every
# test in the workspace.
# Tests start the servers they need on 127.0.0.1 and stop them; nothing is skipped when
# a peer is missing: it fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/bunqueue.sh install
scripts/sdk-peers.sh install
scripts/postgres.sh install
cargo test --workspace "$@"
