#!/usr/bin/env bash
# Mutation testing of the batcher and the session: each mutant is one small change to
# core/src/batch or core/src/session (a `>` made `>=`, a `+=` made `-=`, a body replaced by a
# default), and the tests must notice it. Configuration: .cargo/mutants.toml (which files,
# which tests, the mutants excluded and why) and .config/nextest.toml (profile `mutants`).
# With `--driver`, the same for the driver's add and answer path (.cargo/mutants-driver.toml,
# profile `mutants-driver`).
# Scores and the commands behind them: docs/reliability.md#mutation-testing.
#
#   scripts/mutants.sh [FILE…] [ARG…]
#   scripts/mutants.sh --driver [FILE…] [ARG…]
#
# FILEs (paths ending in .rs) limit the run to those files; without any, every file of
# core/src/batch and core/src/session. Every other ARG goes to cargo-mutants as it is, for
# example `--shard 2/8`, `--in-diff changes.diff`, `--jobs 1`, `--list`.
# With `--driver` (first), the driver's add and answer path instead: the files and tests of
# .cargo/mutants-driver.toml (nextest profile `mutants-driver`); FILEs then limit it to
# those of them, and results go to target/mutants-driver unless MUTANTS_OUT says otherwise.
# Results go to target/mutants/mutants.out (MUTANTS_OUT sets another directory); the score
# is printed at the end (a mutant whose tests time out counts as caught: they did not pass).
# Exits as cargo-mutants does: 0 when every mutant tested was caught, 2 when one was missed,
# 3 when one timed out.
# Needs cargo-mutants (`cargo install --locked cargo-mutants`) and cargo-nextest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

config=()
default_files=(--file 'core/src/batch/**/*.rs' --file 'core/src/session/**/*.rs')
default_out=target/mutants
if [[ "${1:-}" == --driver ]]; then
    shift
    # cargo-mutants builds and tests its unmutated baseline with the mutated package's
    # targets only, where the tests crate's `--test` targets are not found; so no baseline
    # (the unmutated tree passes `cargo nextest run --profile mutants-driver -p
    # autobatch-driver -p autobatch-tests --lib --test scenarios --test add_path --test
    # idempotent --test add_path_wakes`) and a fixed test timeout, several times what the set
    # takes on a loaded machine (under a minute).
    config=(--config .cargo/mutants-driver.toml --baseline skip --timeout 240)
    # The globs of .cargo/mutants-driver.toml leave only the add and answer path of these.
    default_files=(--file 'driver/src/**/*.rs')
    default_out=target/mutants-driver
fi
files=()
args=()
for a in "$@"; do
    case "$a" in
        *.rs) files+=(--file "$a") ;;
        *) args+=("$a") ;;
    esac
done
if [[ ${#files[@]} -eq 0 ]]; then
    files=("${default_files[@]}")
fi
# Listing needs no output directory, nor a score.
for a in "${args[@]}"; do
    if [[ "$a" == --list* ]]; then
        exec cargo mutants "${config[@]}" "${files[@]}" "${args[@]}"
    fi
done

# cargo-mutants keeps the previous results as mutants.out.old (and reads them with --iterate).
out="${MUTANTS_OUT:-$default_out}"
mkdir -p "$out"
status=0
cargo mutants "${config[@]}" "${files[@]}" --output "$out" "${args[@]}" || status=$?

dir="$out/mutants.out"
count() { if [[ -f "$dir/$1.txt" ]]; then wc -l <"$dir/$1.txt"; else echo 0; fi; }
caught=$(count caught)
missed=$(count missed)
timeout=$(count timeout)
unviable=$(count unviable)
viable=$((caught + missed + timeout))
total=$((viable + unviable))
if [[ $viable -gt 0 ]]; then
    echo "mutants: $total tested, $caught caught, $missed missed, $timeout timeout, $unviable unviable"
    # A mutant that makes the tests hang past the timeout was noticed too: it counts as caught.
    awk -v c="$((caught + timeout))" -v v="$viable" \
        'BEGIN { printf "score: %d caught of %d viable (%.1f %%)\n", c, v, 100 * c / v }'
    if [[ $missed -gt 0 ]]; then
        echo "missed:"
        sed 's/^/  /' "$dir/missed.txt"
    fi
    if [[ $timeout -gt 0 ]]; then
        echo "timed out:"
        sed 's/^/  /' "$dir/timeout.txt"
    fi
else
    echo "mutants: none tested ($unviable unviable)"
fi
exit "$status"
