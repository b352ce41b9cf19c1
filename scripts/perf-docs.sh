#!/usr/bin/env bash
# Regenerates the figures in the docs from the bench's own JSON documents (bench/results/NAME.json,
# written by `autobatch-bench --json`), so that no figure is typed by hand:
#
# * docs/performance.md and docs/web.md: between `<!-- results:NAME -->` and
#   `<!-- /results:NAME -->`, the run's tables and goals (`autobatch-bench --render`);
# * README.md: between `<!-- headline:NAME -->` and `<!-- /headline:NAME -->`, the headline table
#   of a --compare run (`autobatch-bench --render-headline`);
# * bench/results/NAME.svg: the chart of bench/results/NAME.json (`autobatch-bench --render-svg`).
#
#   scripts/perf-docs.sh          rewrite the docs and the charts
#   scripts/perf-docs.sh --check  fail when any differs from the JSON documents
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release --quiet -p autobatch-bench
bench=${CARGO_TARGET_DIR:-target}/release/autobatch-bench
check=false
[[ "${1:-}" == "--check" ]] && check=true
status=0

# splice FILE KIND FLAG: replaces what stands between each pair of KIND markers in FILE by the
# output of `autobatch-bench FLAG bench/results/NAME.json`.
splice() {
    local doc=$1 kind=$2 flag=$3 out open="" line
    out=$(mktemp)
    while IFS= read -r line; do
        if [[ -n "$open" ]]; then
            [[ "$line" == "<!-- /$kind:$open -->" ]] || continue
            open=""
        fi
        printf '%s\n' "$line" >>"$out"
        if [[ "$line" =~ ^\<!--\ $kind:([a-z0-9-]+)\ --\>$ ]]; then
            open=${BASH_REMATCH[1]}
            local json=bench/results/$open.json
            [[ -f "$json" ]] || { echo "perf-docs: $doc names $json, which does not exist" >&2; exit 1; }
            printf '\n' >>"$out"
            "$bench" "$flag" "$json" >>"$out"
            printf '\n' >>"$out"
        fi
    done <"$doc"
    [[ -z "$open" ]] || { echo "perf-docs: <!-- $kind:$open --> in $doc is never closed" >&2; exit 1; }
    if $check; then
        if ! diff -u "$doc" "$out"; then
            echo "perf-docs: $doc is out of date with bench/results/*.json: run scripts/perf-docs.sh" >&2
            status=1
        else
            echo "perf-docs: $doc matches bench/results/*.json"
        fi
    else
        cp "$out" "$doc"
    fi
    rm -f "$out"
}

# chart SVG: rewrites (or, with --check, compares) SVG, the chart of the JSON document beside it.
chart() {
    local svg=$1 out
    out=$(mktemp)
    "$bench" --render-svg "${svg%.svg}.json" >"$out"
    if $check; then
        if cmp -s "$svg" "$out"; then
            echo "perf-docs: $svg matches ${svg%.svg}.json"
        else
            echo "perf-docs: $svg is out of date with ${svg%.svg}.json: run scripts/perf-docs.sh" >&2
            status=1
        fi
    else
        cp "$out" "$svg"
    fi
    rm -f "$out"
}

splice docs/performance.md results --render
splice docs/web.md results --render
splice README.md headline --render-headline
for svg in bench/results/*.svg; do
    chart "$svg"
done
exit $status
