#!/usr/bin/env bash
# What `#[tool]` costs a tool author's build, side by side with rmcp's `#[tool_router]`.
#
#   bash benches/compile_time/run.sh [runs]        (default 5 runs; figures are medians)
#
# Writes two crates into a temporary directory, each with the same 100 tools — three parameters
# (`name: String`, `count: u64`, `flag: Option<bool>`) and an output struct of three fields:
#
#   dsh   `#[tool]` free fns returning a `#[tool_type]` struct, through `dsh-tools` (this
#         checkout, default features off: the macros and the runtime they expand to);
#   rmcp  one `#[tool_router]` impl whose `#[tool]` methods take `Parameters<Params>` and return
#         `Json<Output>`, the params deriving `Deserialize + JsonSchema` and the output
#         `Serialize + JsonSchema`, with rmcp at the version of this workspace's Cargo.lock.
#
# Both crates use this workspace's Cargo.lock (so the same versions) and `--offline` once the
# dependencies are fetched. Their dependencies are built once, untimed; then, each run, both crates
# in turn:
#
#   cold check   `cargo clean -p <crate>`, then `cargo check` (the crate alone, from nothing);
#   edit check   one tool's body changes (a number in it), then `cargo check`;
#   edit build   the same edit, then a debug `cargo build`.
#
# Each step's wall time and peak resident memory (GNU time's `%M`: the largest process of the
# step, which is rustc) are recorded; the table holds the medians and dsh / rmcp.
#
# Expansion size: each crate's lib after expansion (`-Zunpretty=expanded`, rustc's own printer
# through RUSTC_BOOTSTRAP, so no `cargo expand` install) minus that of the same crate with no
# tools, divided by 100: bytes, lines and whitespace-separated words per tool.
#
# Environment: COMPILE_BENCH_DIR (where the crates go; default a new temporary directory),
# COMPILE_BENCH_TARGET (their target directories; default inside that directory),
# COMPILE_BENCH_KEEP=1 (keep the crates afterwards). CARGO_INCREMENTAL is set to 1.
set -euo pipefail

runs="${1:-5}"
tools=100
edited=42
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="${COMPILE_BENCH_DIR:-$(mktemp -d -t dsh-compile-bench.XXXXXX)}"
target_root="${COMPILE_BENCH_TARGET:-$work/target}"
mkdir -p "$work" "$target_root"
if [[ "${COMPILE_BENCH_KEEP:-0}" != 1 && -z "${COMPILE_BENCH_DIR:-}" ]]; then
    trap 'rm -rf "$work"' EXIT
fi
export CARGO_INCREMENTAL=1
rmcp_version="$(grep -A1 '^name = "rmcp"$' "$repo/Cargo.lock" | sed -n 's/^version = "\(.*\)"$/\1/p')"
schemars_version="$(sed -n 's/^schemars = { version = "\([^"]*\)".*/\1/p' "$repo/Cargo.toml")"

# A crate's manifest: $1 = directory, $2 = package name, $3 = dependency lines.
write_manifest() {
    cat >"$1/Cargo.toml" <<EOF
[package]
name = "$2"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
$3
EOF
    cp "$repo/Cargo.lock" "$1/Cargo.lock"
}

# The body line of tool $1 carries ${delta}; the edit step rewrites it.
gen_dsh() { # $1 = directory, $2 = number of tools
    local dir="$1" n="$2" i id
    mkdir -p "$dir/src"
    write_manifest "$dir" bench-dsh "dsh-tools = { path = \"$repo\", default-features = false }"
    {
        echo '//! 100 tools written with `#[tool]`.'
        echo 'use dsh_tools::{ToolDefinition, ToolError, tool, tool_type};'
        for ((i = 0; i < n; i++)); do
            printf -v id '%03d' "$i"
            cat <<EOF

/// What tool $id answers.
#[tool_type]
pub struct Out$id {
    /// The name, prefixed.
    pub id: String,
    /// The count, moved.
    pub count: u64,
    /// The flag, or false.
    pub ok: bool,
}

/// Tool $id: combine a name, a count and a flag.
#[tool]
pub async fn tool_$id(
    /// A name.
    name: String,
    /// A count.
    count: u64,
    /// A flag.
    flag: Option<bool>,
) -> Result<Out$id, ToolError> {
    let delta = 0; // body-$id
    Ok(Out$id { id: format!("$id:{name}"), count: count + delta, ok: flag.unwrap_or(false) })
}
EOF
        done
        echo
        echo '/// Every tool, erased.'
        echo 'pub fn definitions() -> Vec<ToolDefinition> {'
        echo '    vec!['
        for ((i = 0; i < n; i++)); do
            printf '        ToolDefinition::from_tool(Tool%03dTool),\n' "$i"
        done
        echo '    ]'
        echo '}'
    } >"$dir/src/lib.rs"
}

gen_rmcp() { # $1 = directory, $2 = number of tools
    local dir="$1" n="$2" i id
    mkdir -p "$dir/src"
    write_manifest "$dir" bench-rmcp "rmcp = { version = \"=$rmcp_version\", default-features = false, features = [\"server\", \"macros\"] }
schemars = \"$schemars_version\"
serde = { version = \"1\", features = [\"derive\"] }"
    {
        echo '//! 100 tools written with `#[tool_router]`.'
        echo 'use rmcp::handler::server::tool::ToolRouter;'
        echo 'use rmcp::handler::server::wrapper::{Json, Parameters};'
        echo 'use rmcp::{ErrorData, tool, tool_router};'
        echo 'use serde::{Deserialize, Serialize};'
        for ((i = 0; i < n; i++)); do
            printf -v id '%03d' "$i"
            cat <<EOF

/// The parameters of tool $id.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct Params$id {
    /// A name.
    pub name: String,
    /// A count.
    pub count: u64,
    /// A flag.
    pub flag: Option<bool>,
}

/// What tool $id answers.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Out$id {
    /// The name, prefixed.
    pub id: String,
    /// The count, moved.
    pub count: u64,
    /// The flag, or false.
    pub ok: bool,
}
EOF
        done
        echo
        echo '/// The server holding the tools.'
        echo '#[derive(Clone, Default)]'
        echo 'pub struct Server;'
        echo
        # A router with no tools must say so.
        if ((n == 0)); then echo '#[tool_router(allow_empty)]'; else echo '#[tool_router]'; fi
        echo 'impl Server {'
        for ((i = 0; i < n; i++)); do
            printf -v id '%03d' "$i"
            cat <<EOF
    /// Tool $id: combine a name, a count and a flag.
    #[tool]
    async fn tool_$id(
        &self,
        Parameters(Params$id { name, count, flag }): Parameters<Params$id>,
    ) -> Result<Json<Out$id>, ErrorData> {
        let delta = 0; // body-$id
        Ok(Json(Out$id { id: format!("$id:{name}"), count: count + delta, ok: flag.unwrap_or(false) }))
    }

EOF
        done
        echo '}'
        echo
        echo '/// Every tool, routed.'
        echo 'pub fn router() -> ToolRouter<Server> {'
        echo '    Server::tool_router()'
        echo '}'
    } >"$dir/src/lib.rs"
}

# Runs cargo ($2...) in crate directory $1 under GNU time; prints "seconds kib".
timed() {
    local dir="$1"
    shift
    local out="$work/time.out"
    (cd "$dir" && /usr/bin/time -f '%e %M' -o "$out" cargo "$@" --offline --quiet \
        --target-dir "$target_root/$(basename "$dir")" >/dev/null 2>"$work/cargo.err") || {
        cat "$work/cargo.err" >&2
        return 1
    }
    cat "$out"
}

edit_tool() { # $1 = directory, $2 = new number
    sed -i "s|let delta = [0-9]*; // body-$(printf '%03d' "$edited")|let delta = $2; // body-$(printf '%03d' "$edited")|" "$1/src/lib.rs"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Bytes, lines and words of crate $1's expanded lib.
expanded_size() {
    local dir="$1"
    (cd "$dir" && RUSTC_BOOTSTRAP=1 cargo rustc --lib --profile check --offline --quiet \
        --target-dir "$target_root/$(basename "${dir%-empty}")-expand" -- -Zunpretty=expanded 2>"$work/cargo.err") \
        >"$work/expanded.rs" || {
        cat "$work/cargo.err" >&2
        return 1
    }
    echo "$(wc -c <"$work/expanded.rs") $(wc -l <"$work/expanded.rs") $(wc -w <"$work/expanded.rs")"
}

for side in dsh rmcp; do
    "gen_$side" "$work/$side" "$tools"
    "gen_$side" "$work/$side-empty" 0
    # Fetch anything the lockfile names but the cache lacks, then build the dependencies once.
    (cd "$work/$side" && cargo fetch --quiet)
    echo "building the dependencies of $side (untimed)" >&2
    timed "$work/$side" check >/dev/null
    timed "$work/$side" build >/dev/null
done

declare -A samples
for ((run = 1; run <= runs; run++)); do
    echo "run $run/$runs" >&2
    for side in dsh rmcp; do
        dir="$work/$side"
        (cd "$dir" && cargo clean --offline --quiet -p "bench-$side" --target-dir "$target_root/$side")
        samples[$side.cold]+="$(timed "$dir" check)"$'\n'
        edit_tool "$dir" "$run"
        samples[$side.check]+="$(timed "$dir" check)"$'\n'
        edit_tool "$dir" "$((run + 1000))"
        samples[$side.build]+="$(timed "$dir" build)"$'\n'
    done
done

printf '\n100 tools, %s runs, medians (rmcp %s)\n\n' "$runs" "$rmcp_version"
printf '| step | dsh s | rmcp s | dsh / rmcp | dsh MiB | rmcp MiB |\n| --- | --- | --- | --- | --- | --- |\n'
for step in cold check build; do
    ds="$(printf '%s' "${samples[dsh.$step]}" | awk 'NF { print $1 }' | median)"
    rs="$(printf '%s' "${samples[rmcp.$step]}" | awk 'NF { print $1 }' | median)"
    dm="$(printf '%s' "${samples[dsh.$step]}" | awk 'NF { print $2 }' | median)"
    rm_="$(printf '%s' "${samples[rmcp.$step]}" | awk 'NF { print $2 }' | median)"
    case "$step" in
        cold) label='cold `cargo check`' ;;
        check) label='edit one tool + `cargo check`' ;;
        build) label='edit one tool + debug `cargo build`' ;;
    esac
    awk -v l="$label" -v ds="$ds" -v rs="$rs" -v dm="$dm" -v rm="$rm_" \
        'BEGIN { printf "| %s | %.2f | %.2f | %.2f× | %.0f | %.0f |\n", l, ds, rs, ds / rs, dm / 1024, rm / 1024 }'
done

printf '\n| expansion per tool | bytes | lines | words |\n| --- | --- | --- | --- |\n'
for side in dsh rmcp; do
    read -r b l w <<<"$(expanded_size "$work/$side")"
    read -r b0 l0 w0 <<<"$(expanded_size "$work/$side-empty")"
    awk -v s="$side" -v b="$((b - b0))" -v l="$((l - l0))" -v w="$((w - w0))" -v n="$tools" \
        'BEGIN { printf "| %s | %.0f | %.0f | %.0f |\n", s, b / n, l / n, w / n }'
done
