# Sourced by bin/agentloom and bin/test: make sure the virtual environment exists and
# holds this checkout's dependencies. Idempotent; reinstalls when pyproject.toml changes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${AGENTLOOM_VENV:-$ROOT/.venv}"
EXTRAS="${AGENTLOOM_EXTRAS:-dev}"
PY="${PYTHON:-python3}"

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "AgentLoom needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating virtual environment in $VENV" >&2
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.agentloom-installed"
want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)-$EXTRAS"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing agentloom[$EXTRAS] into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[$EXTRAS]" >&2
  echo "$want" > "$stamp"
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
