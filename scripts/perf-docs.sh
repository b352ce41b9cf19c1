#!/usr/bin/env bash
# Regenerates the result sections of docs/performance.md from the bench's own JSON documents
# (bench/results/NAME.json, written by `autobatch-bench --json`), so that no figure in the docs
# is typed by hand. Each section stands between `<!-- results:NAME -->` and
# `<!-- /results:NAME -->`; what is between them is replaced by `autobatch-bench --render`.
#
#   scripts/perf-docs.sh          rewrite docs/performance.md
#   scripts/perf-docs.sh --check  fail when docs/performance.md differs from its JSON documents
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
doc=docs/performance.md
cargo build --release --quiet -p autobatch-bench
bench=${CARGO_TARGET_DIR:-target}/release/autobatch-bench
out=$(mktemp)
trap 'rm -f "$out"' EXIT
skip=""
while IFS= read -r line; do
    if [[ -n "$skip" ]]; then
        [[ "$line" == "<!-- /results:$skip -->" ]] || continue
        skip=""
    fi
    printf '%s\n' "$line" >>"$out"
    if [[ "$line" =~ ^\<!--\ results:([a-z0-9-]+)\ --\>$ ]]; then
        skip=${BASH_REMATCH[1]}
        json=bench/results/$skip.json
        [[ -f "$json" ]] || { echo "perf-docs: $doc names $json, which does not exist" >&2; exit 1; }
        printf '\n' >>"$out"
        "$bench" --render "$json" >>"$out"
        printf '\n<!-- /results:%s -->\n' "$skip" >>"$out"
    fi
done <"$doc"
[[ -z "$skip" ]] || { echo "perf-docs: <!-- results:$skip --> is never closed" >&2; exit 1; }
if [[ "${1:-}" == "--check" ]]; then
    if ! diff -u "$doc" "$out"; then
        echo "perf-docs: $doc is out of date with bench/results/*.json: run scripts/perf-docs.sh" >&2
        exit 1
    fi
    echo "perf-docs: $doc matches bench/results/*.json"
else
    cp "$out" "$doc"
fi
