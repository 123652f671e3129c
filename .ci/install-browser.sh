#!/usr/bin/env bash
# Installs Debian's `chromium` (headless use only) for the replay-page browser test, at the version
# pinned in `.ci/tools/browser.txt`; when the archive no longer carries that version (Debian
# security updates replace it), the archive's current one is installed and a warning printed.
#
# Idempotent and safe to call from several test processes at once (a lock serialises installs).
# Needs root and apt. Prints the browser's path on success; exits non-zero when it cannot install.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$root/.tools"
exec 9>"$root/.tools/.browser.lock"
flock 9

if command -v chromium >/dev/null 2>&1; then
  command -v chromium
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-browser: apt-get not found; install chromium by hand" >&2
  exit 1
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "install-browser: installing chromium needs root" >&2
  exit 1
fi

pinned="$(grep -v '^#' "$root/.ci/tools/browser.txt" | grep -m1 '^chromium=')"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
if ! apt-get install -y -qq --no-install-recommends "$pinned" >&2; then
  echo "install-browser: $pinned is not in the archive any more; installing its current chromium" >&2
  apt-get install -y -qq --no-install-recommends chromium >&2
fi
command -v chromium
