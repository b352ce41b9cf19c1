#!/usr/bin/env bash
# Make sure PostgreSQL 15+ is installed for the fleet tests (tests/tests/fleet.rs), which
# start a throwaway server of their own with initdb/postgres from /usr/lib/postgresql/N/bin.
#
#   scripts/postgres.sh install
#       Idempotent. When /usr/lib/postgresql/15/bin/initdb is missing (and no
#       $AUTOBATCH_PG_BIN is given), runs `apt-get install -y postgresql` (as root, or
#       through sudo). The package's own cluster is not used; the tests never touch it.
#       Fails loudly when it cannot install: the fleet tests are never skipped.
set -euo pipefail

PG_MAJOR=15

die() {
    echo "" >&2
    echo "postgres.sh: ERROR: $*" >&2
    echo "" >&2
    exit 1
}

have_pg() {
    if [[ -n "${AUTOBATCH_PG_BIN:-}" ]]; then
        [[ -x "$AUTOBATCH_PG_BIN/initdb" ]]
        return
    fi
    [[ -x "/usr/lib/postgresql/$PG_MAJOR/bin/initdb" ]] && return 0
    # A newer major version (Debian 13 ships 17) serves as well.
    local d
    for d in /usr/lib/postgresql/*/bin; do
        local v="${d#/usr/lib/postgresql/}"
        v="${v%/bin}"
        [[ "$v" =~ ^[0-9]+$ ]] && ((v >= PG_MAJOR)) && [[ -x "$d/initdb" ]] && return 0
    done
    return 1
}

cmd_install() {
    if have_pg; then
        echo "postgres.sh: PostgreSQL $PG_MAJOR+ present"
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 ||
        die "PostgreSQL $PG_MAJOR+ is missing and apt-get is not available. Install PostgreSQL $PG_MAJOR+ (initdb, postgres, pg_isready, createdb) and point AUTOBATCH_PG_BIN at its bin directory."
    local sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "PostgreSQL is missing; installing it needs root: sudo apt-get install -y postgresql"
        sudo=(sudo)
    fi
    echo "postgres.sh: installing PostgreSQL (apt-get install -y postgresql)"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get install -y --no-install-recommends postgresql ||
        { "${sudo[@]}" apt-get update && "${sudo[@]}" apt-get install -y --no-install-recommends postgresql; } ||
        die "'apt-get install -y postgresql' failed (see above)"
    have_pg || die "postgresql installed, but no /usr/lib/postgresql/N/bin/initdb with N >= $PG_MAJOR"
    echo "postgres.sh: OK"
}

case "${1:-}" in
install) cmd_install ;;
*)
    echo "usage: $0 install" >&2
    exit 2
    ;;
esac
