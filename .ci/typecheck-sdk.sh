#!/usr/bin/env bash
# Type-checks generated code-mode SDKs: the committed `sdk/` files, the generator's snapshot
# goldens, and every directory given as an argument (tests/sdk_typecheck.rs passes the SDKs it
# renders from the corpus).
#
# TypeScript and mypy come from `.ci/install-tools.sh` (pinned in `.ci/tools/`, installed under
# `.tools/` on first use), so this runs the same on a fresh machine without global installs.
# Needs: node + npm, python3 (3.10+) with venv.
#
# Usage: .ci/typecheck-sdk.sh [DIR...]        Exit status: non-zero on any type error.
set -euo pipefail

# The oldest Python the generated SDK supports; mypy checks against it.
PYTHON_FLOOR=3.10

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# TypeScript and mypy at the versions pinned in .ci/tools/ (installed once, then reused).
"$root/.ci/install-tools.sh" >/dev/null
tsc="$root/.tools/node/node_modules/.bin/tsc"
mypy="$root/.tools/venv/bin/mypy"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
targets=()

# Directories named on the command line (e.g. SDKs rendered from the corpus by the test that
# calls this script) are checked too.
for dir in "$@"; do
  targets+=("$dir")
done
if [[ -d "$root/sdk" ]]; then
  targets+=("$root/sdk")
fi
# The reviewed snapshot goldens of the generator's tests
# (tests/<group>/snapshots/<group>__sdk_*__{typescript,python}.snap): the text after insta's `---`
# front matter. None found is an error: the goldens moved and would go unchecked.
mkdir -p "$work/goldens"
goldens=0
for snap in "$root"/tests/*/snapshots/*sdk_*__typescript.snap "$root"/tests/*/snapshots/*sdk_*__python.snap; do
  [[ -f "$snap" ]] || continue
  goldens=$((goldens + 1))
  name="$(basename "$snap" .snap)"
  case "$name" in
    *__typescript) extension=ts ;;
    *) extension=py ;;
  esac
  awk 'seen >= 2 { print; next } /^---$/ { seen++ }' "$snap" >"$work/goldens/${name//-/_}.$extension"
done
if [[ $goldens -eq 0 ]]; then
  echo "no SDK snapshot goldens under tests/*/snapshots/" >&2
  exit 1
fi
targets+=("$work/goldens")
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "nothing to check"
  exit 0
fi

status=0
for dir in "${targets[@]}"; do
  # Each SDK file declares `tools` in the global scope, so each is its own tsc program.
  while IFS= read -r -d '' file; do
    if ! "$tsc" --noEmit --strict --target es2022 "$file"; then
      echo "tsc: errors in $file"
      status=1
    fi
  done < <(find "$dir" -maxdepth 1 -name '*.ts' -print0 | sort -z)
  mapfile -d '' py_files < <(find "$dir" -maxdepth 1 -name '*.py' -print0 | sort -z)
  if [[ ${#py_files[@]} -gt 0 ]]; then
    if ! "$mypy" --strict --python-version "$PYTHON_FLOOR" --no-incremental "${py_files[@]}"; then
      status=1
    fi
    # The stubs also import cleanly: every evaluated type expression is quoted.
    for file in "${py_files[@]}"; do
      if ! python3 "$file"; then
        echo "python3: $file does not import"
        status=1
      fi
    done
  fi
done
exit "$status"
