# Sourced by bin/agentloom and bin/test: make sure the virtual environment exists and
# holds this checkout's dependencies. The caller sets AGENTLOOM_EXTRAS to the extras it
# needs ("" for running an agent, "serve" for the HTTP API, "dev" for the whole check;
# comma-separated). Idempotent: the stamp records the pyproject.toml hash, the checkout
# and the extras installed, and an install is always of the union of the extras asked
# for so far, so bin/agentloom after bin/test reuses the dev install instead of
# reinstalling a smaller one (and bin/test after that does not reinstall either).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${AGENTLOOM_VENV:-$ROOT/.venv}"
EXTRAS="${AGENTLOOM_EXTRAS-}"
PY="${PYTHON:-python3}"

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "AgentLoom needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating virtual environment in $VENV" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
fi

# A comma list, sorted, without duplicates or blanks ("dev,serve"); bash only, as is
# the rest of this file but for cat, cut and sha256sum.
_extras() {
  local -A seen=()
  local name out=""
  local IFS=$', \n'
  for name in $*; do [ -z "$name" ] || seen[$name]=1; done
  while [ ${#seen[@]} -gt 0 ]; do  # the smallest name first
    local first=""
    for name in "${!seen[@]}"; do
      if [ -z "$first" ] || [[ "$name" < "$first" ]]; then first=$name; fi
    done
    out="${out:+$out,}$first"
    unset "seen[$first]"
  done
  printf '%s' "$out"
}

stamp="$VENV/.agentloom-installed"
hash="$(sha256sum <"$ROOT/pyproject.toml" | cut -c1-16)"
had="" same=""
if [ -f "$stamp" ]; then
  stamped_hash="" stamped_root=""
  while IFS= read -r line; do
    case "$line" in
      hash=*) stamped_hash="${line#hash=}" ;;
      root=*) stamped_root="${line#root=}" ;;
      extras=*) had="${line#extras=}" ;;
      *-*) stamped_hash="${line%%-*}" stamped_root="$ROOT" had="${line#*-}" ;;  # HASH-EXTRAS
    esac
  done <"$stamp"
  [ "$stamped_hash" = "$hash" ] && [ "$stamped_root" = "$ROOT" ] && same=1
fi
had="$(_extras "$had")"
want="$(_extras "$had,$EXTRAS")"
if [ -z "$same" ] || [ "$want" != "$had" ]; then
  echo "installing agentloom${want:+[$want]} into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    -e "$ROOT${want:+[$want]}" >&2
  printf 'hash=%s\nroot=%s\nextras=%s\n' "$hash" "$ROOT" "$want" >"$stamp"
fi

# The command sandbox. bin/agentloom calls this so the quickstart's sandboxed step runs on
# a fresh machine: as root with apt, bubblewrap is installed (once; a failed attempt is
# not retried on every run); otherwise a note says commands will be refused.
ensure_bubblewrap() {
  command -v bwrap >/dev/null 2>&1 && return 0
  local tried="$VENV/.agentloom-bwrap-tried"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ ! -e "$tried" ]; then
    echo "installing bubblewrap (command sandbox)" >&2
    if (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1; then
      return 0
    fi
    touch "$tried"
    echo "warning: could not install bubblewrap; sandboxed commands will be refused" >&2
  else
    echo "note: bubblewrap is not installed (apt-get install bubblewrap); sandboxed" \
         "commands will be refused" >&2
  fi
}

# The browser the console tests drive (tests/browser): Debian's chromium, installed with
# apt as root (once; a failed attempt is not retried on every run); otherwise the browser
# tests are skipped with a note.
ensure_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  local tried="$VENV/.agentloom-chromium-tried"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ ! -e "$tried" ]; then
    echo "installing chromium (console browser tests)" >&2
    if (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1; then
      return 0
    fi
    touch "$tried"
    echo "warning: could not install chromium; the browser tests will be skipped" >&2
  else
    echo "note: chromium is not installed (apt-get install chromium); the browser tests" \
         "will be skipped" >&2
  fi
}

# The protocols' own JavaScript clients the interop tests drive (tests/interop/node:
# @ag-ui/client), installed from the committed lockfile with npm ci (again only when the
# lockfile changed); without npm those tests are skipped with a note.
ensure_interop_clients() {
  local dir="$ROOT/tests/interop/node" lock
  if ! command -v npm >/dev/null 2>&1; then
    echo "note: npm is not installed; the AG-UI client tests will be skipped" >&2
    return 0
  fi
  lock="$(sha256sum <"$dir/package-lock.json" | cut -c1-16)"
  [ "$(cat "$dir/node_modules/.agentloom-lock" 2>/dev/null)" = "$lock" ] && return 0
  echo "installing the protocol clients (npm ci in tests/interop/node)" >&2
  if (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >/dev/null 2>&1; then
    echo "$lock" >"$dir/node_modules/.agentloom-lock"
  else
    echo "warning: npm ci failed; the AG-UI client tests will be skipped" >&2
  fi
}
