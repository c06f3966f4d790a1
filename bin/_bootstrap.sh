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
