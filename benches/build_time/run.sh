#!/usr/bin/env bash
# Build time of the workspace at two commits, side by side: the workspace's own crates built
# from scratch with every dependency already built (`cargo build --all-features` after
# `cargo clean -p` of the workspace packages), then the rebuild after touching one file of the
# MCP server. Each side has its own worktree and target directory under a temporary directory;
# the first, untimed build of each compiles the dependencies.
#
# Usage: bash benches/build_time/run.sh BEFORE AFTER [ROUNDS]
# Prints one line per build: side, what was built, seconds, and the load average at its end.
set -euo pipefail
before=$1 after=$2 rounds=${3:-2}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'for side in before after; do git -C "$root" worktree remove --force "$work/$side" 2>/dev/null || true; done; rm -rf "$work"' EXIT
export CARGO_INCREMENTAL=0
packages=(-p dsh-tools -p dsh-tool-runtime -p dsh-tool-macros -p dsh-sdk-templates)
timed() { # side label command...
  local side=$1 label=$2; shift 2
  local start end
  start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N)
  printf '%s %s %.1f s load %s\n' "$side" "$label" "$(echo "$end - $start" | bc)" "$(cut -d' ' -f1 /proc/loadavg)"
}
for side in before after; do
  commit=$([ "$side" = before ] && echo "$before" || echo "$after")
  git -C "$root" worktree add --detach "$work/$side" "$commit" >/dev/null 2>&1
  (cd "$work/$side" && CARGO_TARGET_DIR="$work/target-$side" cargo build --all-features >/dev/null 2>&1)
done
for side in before after; do
  cd "$work/$side"
  extra=()
  for crate in dsh-tool-code-mode dsh-tool-mcp dsh-tool-provider; do
    cargo metadata --no-deps --format-version 1 | grep -q "\"name\":\"$crate\"" && extra+=(-p "$crate")
  done
  CARGO_TARGET_DIR="$work/target-$side" cargo clean "${packages[@]}" "${extra[@]}" >/dev/null 2>&1
  CARGO_TARGET_DIR="$work/target-$side" timed "$side" "workspace-from-scratch" cargo build --all-features
done
for round in $(seq 1 "$rounds"); do
  for side in before after; do
    cd "$work/$side"
    file=$( (ls dsh-tool-runtime/crates/mcp/src/mcp_server/handler.rs dsh-tool-runtime/src/mcp_server/handler.rs 2>/dev/null || true) | head -1)
    touch "$file"
    CARGO_TARGET_DIR="$work/target-$side" timed "$side" "touch-mcp-server-$round" cargo build --all-features
  done
done
