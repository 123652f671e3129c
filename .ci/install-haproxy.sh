#!/usr/bin/env bash
# Installs Debian's `haproxy` for the replica test (`tests/durable_replicas.rs`), at the version
# pinned in `.ci/tools/haproxy.txt`; when the archive no longer carries that version (Debian
# security updates replace it), the archive's current one is installed and a warning printed.
# Only the program is used: the test runs its own haproxy with its own configuration, and the
# package's service is left stopped.
#
# Idempotent and safe to call from several test processes at once (a lock serialises installs).
# Needs root and apt. Prints haproxy's path on success; exits non-zero when it cannot install.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$root/.tools"
exec 9>"$root/.tools/.haproxy.lock"
flock 9

if command -v haproxy >/dev/null 2>&1; then
  command -v haproxy
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-haproxy: apt-get not found; install haproxy by hand" >&2
  exit 1
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "install-haproxy: installing haproxy needs root" >&2
  exit 1
fi

pinned="$(grep -v '^#' "$root/.ci/tools/haproxy.txt" | grep -m1 '^haproxy=')"
export DEBIAN_FRONTEND=noninteractive
# No service is started by the package's scripts: the test starts haproxy itself.
policy="$(mktemp)"
trap 'rm -f "$policy"' EXIT
printf '#!/bin/sh\nexit 101\n' >"$policy"
chmod +x "$policy"
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  cp "$policy" /usr/sbin/policy-rc.d
  trap 'rm -f "$policy" /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq >&2
if ! apt-get install -y -qq --no-install-recommends "$pinned" >&2; then
  echo "install-haproxy: $pinned is not in the archive any more; installing its current haproxy" >&2
  apt-get install -y -qq --no-install-recommends haproxy >&2
fi
command -v haproxy
