#!/usr/bin/env bash
# Installs what `autobatch-bench --web` needs beyond bun and bunqueue (scripts/bunqueue.sh):
# the HTTP load generator `wrk`, from the OS packages. Idempotent.
#
#   scripts/web-deps.sh          install wrk with apt-get when it is missing
#   scripts/web-deps.sh check    exit 0 if wrk is on PATH
set -euo pipefail

die() {
    echo "web-deps.sh: ERROR: $*" >&2
    exit 1
}

if command -v wrk >/dev/null 2>&1; then
    echo "web-deps.sh: OK: $(command -v wrk)"
    exit 0
fi
[[ "${1:-}" == "check" ]] && die "wrk is not installed. Run: scripts/web-deps.sh"

command -v apt-get >/dev/null 2>&1 ||
    die "wrk is missing and apt-get is not available: install wrk with your OS's package manager"
SUDO=""
if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "wrk is missing; run this script as root (apt-get install -y wrk)"
    SUDO=sudo
fi
echo "web-deps.sh: installing wrk with apt-get"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk
command -v wrk >/dev/null 2>&1 || die "apt-get ran but wrk is still not on PATH"
echo "web-deps.sh: OK: $(command -v wrk)"
