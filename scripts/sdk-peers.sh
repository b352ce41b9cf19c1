#!/usr/bin/env bash
# Install the official bunqueue SDKs that tests/tests/sdk_peers.rs runs as peers.
#
#   scripts/sdk-peers.sh install
#       Idempotent. Makes a Python venv in <repo>/.peers/venv (git-ignored) and installs
#       bunqueue-client==0.1.5 from PyPI into it. Reused when present with the right version.
#   scripts/sdk-peers.sh check
#       Exit 0 if the install is present and the SDK imports.
#
# The Rust SDK (bunqueue-client 0.1.1 from crates.io) needs nothing here: cargo brings it as
# a dev-dependency of tests/.
set -euo pipefail

PY_SDK_VERSION=0.1.5

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$REPO_ROOT/.peers"
VENV="$DIR/venv"
PY="$VENV/bin/python"

die() {
    echo "" >&2
    echo "sdk-peers.sh: ERROR: $*" >&2
    echo "" >&2
    exit 1
}

sdk_version() {
    [[ -x "$PY" ]] || return 0
    "$PY" -c 'import importlib.metadata as m; print(m.version("bunqueue-client"))' 2>/dev/null || true
}

is_installed() {
    [[ "$(sdk_version)" == "$PY_SDK_VERSION" ]] &&
        "$PY" -c 'import bunqueue' 2>/dev/null
}

cmd_install() {
    if is_installed; then
        echo "sdk-peers.sh: already installed in $DIR (bunqueue-client $PY_SDK_VERSION)"
        return 0
    fi
    command -v python3 >/dev/null 2>&1 ||
        die "python3 is not on PATH. Install it (e.g. 'apt-get install -y python3 python3-venv'), then rerun: scripts/sdk-peers.sh install"
    mkdir -p "$DIR"
    if [[ ! -x "$PY" ]]; then
        python3 -m venv "$VENV" ||
            die "'python3 -m venv $VENV' failed (on Debian: apt-get install -y python3-venv)"
    fi
    "$PY" -m pip install --quiet --disable-pip-version-check "bunqueue-client==$PY_SDK_VERSION" ||
        die "'$PY -m pip install bunqueue-client==$PY_SDK_VERSION' failed (see pip output above). Is PyPI reachable?"
    is_installed || die "bunqueue-client $PY_SDK_VERSION did not install into $VENV (found '$(sdk_version)')"
    echo "sdk-peers.sh: OK: bunqueue-client $PY_SDK_VERSION in $VENV"
}

cmd_check() {
    is_installed || die "bunqueue-client $PY_SDK_VERSION not installed in $VENV. Run: scripts/sdk-peers.sh install"
    echo "sdk-peers.sh: OK ($DIR)"
}

case "${1:-}" in
install) cmd_install ;;
check) cmd_check ;;
*)
    echo "usage: $0 install | check" >&2
    exit 2
    ;;
esac
