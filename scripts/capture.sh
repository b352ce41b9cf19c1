#!/usr/bin/env bash
# Captures golden vectors: runs one script from tests/peers/captures/ (bunqueue's own TS
# client, or raw frames through its TcpClient) against a fresh bunqueue 2.9.5 server, through
# the recording proxy (tests/src/bin/record-frames.rs), and writes every frame to
# core/tests/vectors/ops/NAME.jsonl. See core/tests/vectors/ops/README.md.
#
#   scripts/capture.sh NAME [extra bunqueue server args...]
#       runs tests/peers/captures/NAME.ts; e.g. scripts/capture.sh 21_control
#
# The script gets the proxy's port as BQ_PORT. The server is in-memory unless extra args say
# otherwise (e.g. --data-path /tmp/x.db), with the rate limit lifted; everything binds 127.0.0.1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -ge 1 ]] || { echo "usage: scripts/capture.sh NAME [server args...]" >&2; exit 2; }
name="$1"; shift
script="tests/peers/captures/$name.ts"
[[ -f "$script" ]] || { echo "capture.sh: no $script" >&2; exit 2; }
out="core/tests/vectors/ops/$name.jsonl"
mkdir -p "$(dirname "$out")"
scripts/bunqueue.sh install >/dev/null
dir="${AUTOBATCH_BUNQUEUE_DIR:-$PWD/.bunqueue}"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tcp=$(free_port); http=$(free_port); proxy=$(free_port)
cargo build -q -p autobatch-tests --bin record-frames
bin="${CARGO_TARGET_DIR:-target}/debug/record-frames"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
AUTOBATCH_BUNQUEUE_DIR="$dir" scripts/bunqueue.sh start "$tcp" "$http" "$@" >/tmp/capture-server.$$.log 2>&1 &
pids+=($!)
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$tcp") 2>/dev/null && break; sleep 0.1; done
"$bin" "$proxy" "$tcp" "$out" &
pids+=($!)
# Wait for the proxy to listen without connecting to it (a probe would be recorded).
for _ in $(seq 100); do ss -ltn "sport = :$proxy" | grep -q LISTEN && break; sleep 0.1; done
BQ_PORT="$proxy" "$dir/node_modules/.bin/bun" --no-install run "$script"
sleep 0.3
echo "capture.sh: $(wc -l < "$out") frames in $out"
