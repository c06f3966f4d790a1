"""A2A (the Agent2Agent protocol, version 1.0, JSON-RPC binding) over the platform's
sessions, runs and event log: an agent card per published agent and the task methods,
a thin facade that calls the same services as the HTTP routes (docs/interop.md#a2a).

- ``wire``: the protocol's objects and JSON-RPC envelopes (pydantic);
- ``card``: the agent card from the published version and the deployment's identity;
- ``states``: a run as a task (state, status message with the way out, answer artifact);
- ``contexts``: which session a message goes to; a retried first message finds its own;
- ``tasks``: the methods over ``SessionService``;
- ``routes``: the two routes (``register``).
"""

from agentloom.api.a2a.routes import register

__all__ = ["register"]
