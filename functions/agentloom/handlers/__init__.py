"""Lambda entry points: each parses its event, wires adapters once per container and
calls a service (``api``: the HTTP API; ``step``: one durable cycle of a run)."""
