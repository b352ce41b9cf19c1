#!/usr/bin/env bash
# Install and run the real bunqueue server that the integration tests and the
# benchmark talk to.
#
#   scripts/bunqueue.sh install
#       Idempotent. Installs bun@1.4.5 and bunqueue@2.9.5 from the npm registry
#       into <repo>/.bunqueue (git-ignored) and checks that the bun binary runs.
#   scripts/bunqueue.sh check
#       Exit 0 if the install is present, with the right versions, and working.
#   scripts/bunqueue.sh start TCP_PORT HTTP_PORT [extra bunqueue args...]
#       Runs a server in the foreground on 127.0.0.1 with the rate limit lifted.
#       Example: scripts/bunqueue.sh start 6789 6790 --data-path /tmp/bq.db
#
# The install location can be moved with AUTOBATCH_BUNQUEUE_DIR (the Rust test
# harness honours the same variable).
set -euo pipefail

BUN_VERSION=1.4.5
BUNQUEUE_VERSION=2.9.5

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${AUTOBATCH_BUNQUEUE_DIR:-$REPO_ROOT/.bunqueue}"
BUN="$DIR/node_modules/.bin/bun"
CLI="$DIR/node_modules/bunqueue/dist/cli/index.js"

die() {
    echo "" >&2
    echo "bunqueue.sh: ERROR: $*" >&2
    echo "" >&2
    exit 1
}

# Version of an installed npm package, or empty.
pkg_version() {
    local pj="$DIR/node_modules/$1/package.json"
    [[ -f "$pj" ]] || return 0
    # sed instead of node so that `check` works without node too.
    sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pj" | head -n1
}

bun_runs() {
    [[ -x "$BUN" ]] || return 1
    local v
    v="$("$BUN" --version 2>/dev/null)" || return 1
    [[ "$v" == "$BUN_VERSION" ]]
}

is_installed() {
    [[ "$(pkg_version bun)" == "$BUN_VERSION" ]] &&
        [[ "$(pkg_version bunqueue)" == "$BUNQUEUE_VERSION" ]] &&
        [[ -f "$CLI" ]] &&
        bun_runs
}

# bun's npm package ships a placeholder bin/bun.exe that its postinstall
# (node install.js) replaces with the platform binary from @oven/bun-<os>-<arch>.
# If npm skipped that script (--ignore-scripts, an allowScripts policy, ...),
# run it ourselves.
repair_bun() {
    if bun_runs; then return 0; fi
    echo "bunqueue.sh: bun binary does not run yet; running bun's postinstall (node install.js)" >&2
    if command -v node >/dev/null 2>&1 && [[ -f "$DIR/node_modules/bun/install.js" ]]; then
        (cd "$DIR/node_modules/bun" && node install.js) || true
    fi
    bun_runs
}

# tests/peers/*.ts import 'bunqueue/client'; bun resolves it from the importing file's
# directory upwards (NODE_PATH is ignored for ESM), so link tests/peers/node_modules to the
# install. The Rust harness (TsPeer) does the same before every run.
link_peers() {
    local link="$REPO_ROOT/tests/peers/node_modules"
    [[ -d "$REPO_ROOT/tests/peers" ]] || return 0
    if [[ -e "$link" && ! -L "$link" ]]; then
        echo "bunqueue.sh: warning: $link exists and is not a symlink; leaving it alone" >&2
        return 0
    fi
    ln -sfn "$DIR/node_modules" "$link"
}

cmd_install() {
    if is_installed; then
        link_peers
        echo "bunqueue.sh: already installed in $DIR (bun $BUN_VERSION, bunqueue $BUNQUEUE_VERSION)"
        return 0
    fi
    command -v npm >/dev/null 2>&1 ||
        die "npm is not on PATH. Install Node.js + npm (e.g. 'apt-get install -y nodejs npm'), then rerun: scripts/bunqueue.sh install"
    mkdir -p "$DIR"
    echo "bunqueue.sh: installing bun@$BUN_VERSION bunqueue@$BUNQUEUE_VERSION into $DIR"
    if ! npm install --prefix "$DIR" --no-audit --no-fund \
        "bun@$BUN_VERSION" "bunqueue@$BUNQUEUE_VERSION"; then
        die "'npm install --prefix $DIR --no-audit --no-fund bun@$BUN_VERSION bunqueue@$BUNQUEUE_VERSION' failed (see npm output above). Is the npm registry reachable?"
    fi
    [[ "$(pkg_version bun)" == "$BUN_VERSION" ]] ||
        die "expected bun $BUN_VERSION in $DIR/node_modules/bun, found '$(pkg_version bun)'"
    [[ "$(pkg_version bunqueue)" == "$BUNQUEUE_VERSION" ]] ||
        die "expected bunqueue $BUNQUEUE_VERSION in $DIR/node_modules/bunqueue, found '$(pkg_version bunqueue)'"
    [[ -f "$CLI" ]] || die "bunqueue CLI not found at $CLI"
    if ! repair_bun; then
        local out
        out="$("$BUN" --version 2>&1 || true)"
        die "'$BUN --version' does not print $BUN_VERSION (got: '$out'). bun's postinstall could not place the platform binary; check that the @oven/bun-<os>-<arch>@$BUN_VERSION optional dependency installed under $DIR/node_modules/@oven."
    fi
    link_peers
    echo "bunqueue.sh: OK: bun $("$BUN" --version), bunqueue $(pkg_version bunqueue) in $DIR"
}

cmd_check() {
    if is_installed; then
        echo "bunqueue.sh: OK ($DIR)"
    else
        die "bun $BUN_VERSION / bunqueue $BUNQUEUE_VERSION not installed (or not working) in $DIR. Run: scripts/bunqueue.sh install"
    fi
}

cmd_start() {
    [[ $# -ge 2 ]] || die "usage: scripts/bunqueue.sh start TCP_PORT HTTP_PORT [extra bunqueue args...]"
    is_installed || die "bunqueue is not installed in $DIR. Run: scripts/bunqueue.sh install"
    local tcp="$1" http="$2"
    shift 2
    export RATE_LIMIT_MAX_REQUESTS="${RATE_LIMIT_MAX_REQUESTS:-1000000000}"
    exec "$BUN" "$CLI" start --host 127.0.0.1 --tcp-port "$tcp" --http-port "$http" "$@"
}

case "${1:-}" in
install) cmd_install ;;
check) cmd_check ;;
start)
    shift
    cmd_start "$@"
    ;;
*)
    echo "usage: $0 install | check | start TCP_PORT HTTP_PORT [extra args]" >&2
    exit 2
    ;;
esac
