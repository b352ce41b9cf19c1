#!/usr/bin/env bash
# Where the web endpoint's CPU goes, per request: the web_orders example under wrk against the
# embedded broker (autobatch-broker, a process of its own), profiled with `perf record`, once
# without the add (the baseline) and once with it; the web process's samples are grouped by
# where the code comes from, in µs per request, beside the difference the add makes; its futex
# calls and context switches per request are counted alongside (`perf stat`).
#
#   scripts/web-profile.sh [CONNECTIONS] [on|off] [multi_thread|current_thread]
#       defaults: 100 on multi_thread
#
# Needs perf (permission to profile a process of your own: kernel.perf_event_paranoid ≤ 2)
# and wrk (scripts/web-deps.sh). A sample every millisecond for SECONDS_PER_RUN (env, default 4)
# per run: read the groups as rough shares, and compare runs made on the same machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

connections=${1:-100}
batching=${2:-on}
runtime=${3:-multi_thread}
seconds=${SECONDS_PER_RUN:-4}
die() {
    echo "web-profile.sh: ERROR: $*" >&2
    exit 1
}
command -v perf >/dev/null 2>&1 || die "perf is not installed"
command -v wrk >/dev/null 2>&1 || die "wrk is not installed. Run: scripts/web-deps.sh"
[[ "$batching" == on || "$batching" == off ]] || die "batching is on or off, not $batching"
[[ "$runtime" == multi_thread || "$runtime" == current_thread ]] ||
    die "the runtime is multi_thread or current_thread, not $runtime"

cargo build --release --quiet -p autobatch-broker -p autobatch-tokio --example web_orders
target=${CARGO_TARGET_DIR:-target}/release
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A port nobody listens on, from the kernel.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# waits until something listens on 127.0.0.1:$1
wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    die "nothing listens on 127.0.0.1:$1"
}

broker_port=$(free_port)
"$target/autobatch-broker" --host 127.0.0.1 --port "$broker_port" >/dev/null 2>&1 &
pids+=($!)
wait_port "$broker_port"

# profile NAME [web_orders args...]: one web process, warmed up, then recorded under wrk.
# Prints "requests cpu_us" of the recorded run; leaves $work/NAME.perf.
profile() {
    local name=$1 web_port web requests
    shift
    web_port=$(free_port)
    "$target/examples/web_orders" --listen "127.0.0.1:$web_port" \
        --bunqueue "127.0.0.1:$broker_port" --runtime "$runtime" "$@" >/dev/null 2>&1 &
    web=$!
    pids+=("$web")
    wait_port "$web_port"
    local url="http://127.0.0.1:$web_port/orders"
    wrk -t1 -c"$connections" -d2s -s bench/web/post.lua "$url" >/dev/null
    perf record -q -F 1000 -p "$web" -o "$work/$name.perf" -- sleep "$seconds" \
        >/dev/null 2>&1 &
    local recorder=$!
    # Alongside: the system calls that wait for or wake another thread, and the switches.
    perf stat -x, -e syscalls:sys_enter_futex,context-switches -p "$web" \
        -o "$work/$name.stat" -- sleep "$seconds" >/dev/null 2>&1 &
    local counter=$!
    requests=$(wrk -t1 -c"$connections" -d"${seconds}s" -s bench/web/post.lua "$url" |
        awk '/requests in/ {print $1}')
    wait "$recorder" "$counter"
    kill "$web"
    wait "$web" 2>/dev/null || true
    echo "$requests" >"$work/$name.requests"
}

# groups NAME: µs per request of each group, from NAME's samples.
groups() {
    local name=$1 requests
    requests=$(cat "$work/$name.requests")
    perf report -i "$work/$name.perf" --no-children --sort dso,sym --stdio -g none 2>/dev/null |
        awk -v requests="$requests" '
        /^#/ || !/%/ { next }
        {
            share = $1; sub("%", "", share)
            line = $0
            if (line ~ /autobatch/) g = "autobatch"
            else if (line ~ /\[k\]/) g = "kernel"
            else if (line ~ /malloc|free|_int_|consolidate|unlink_chunk|lll_lock|memmove|memcpy|memset/) g = "allocator and memcpy"
            else if (line ~ /tokio::|mio::/) g = "tokio"
            else if (line ~ /hyper|axum|tower|http::|httparse/) g = "hyper and axum"
            else if (line ~ /serde/) g = "serde (JSON)"
            else g = "other"
            sum[g] += share
        }
        END { for (g in sum) printf "%s\t%f\n", g, sum[g] }' >"$work/$name.shares"
    # The CPU time the samples stand for: the sum of their periods (ns of cpu-clock).
    local total_ns
    total_ns=$(perf script -i "$work/$name.perf" -F period 2>/dev/null | awk '{ t += $1 } END { print t }')
    awk -F'\t' -v total="$total_ns" -v requests="$requests" '
        { printf "%s\t%.2f\n", $1, $2 / 100 * total / 1000 / requests }' "$work/$name.shares"
}

echo "web-profile: web_orders on $runtime, $connections connections, batching $batching, against autobatch-broker; ${seconds} s recorded per run"
profile baseline --no-add
profile add --batching "$batching"
groups baseline >"$work/baseline.us"
groups add >"$work/add.us"
printf '\n%-22s %12s %12s %12s\n' "µs per request" "no add" "with add" "add's cost"
join -t$'\t' -a1 -a2 -e 0 -o 0,1.2,2.2 <(sort "$work/baseline.us") <(sort "$work/add.us") |
    awk -F'\t' '
    { printf "%-22s %12.2f %12.2f %12.2f\n", $1, $2, $3, $3 - $2; b += $2; a += $3 }
    END { printf "%-22s %12.2f %12.2f %12.2f\n", "total", b, a, a - b }'
# counts NAME: futex calls and context switches per request, from perf stat's CSV.
counts() {
    local requests
    requests=$(cat "$work/$1.requests")
    awk -F, -v requests="$requests" '
        $3 ~ /futex/ { printf "futex calls\t%.3f\n", $1 / requests }
        $3 ~ /context-switches/ { printf "context switches\t%.3f\n", $1 / requests }' \
        "$work/$1.stat"
}
printf '\n%-22s %12s %12s\n' "per request" "no add" "with add"
join -t$'\t' -a1 -a2 -e 0 -o 0,1.2,2.2 <(counts baseline | sort) <(counts add | sort) |
    awk -F'\t' '{ printf "%-22s %12.3f %12.3f\n", $1, $2, $3 }'
echo
echo "requests recorded: $(cat "$work/baseline.requests") without the add, $(cat "$work/add.requests") with it"
