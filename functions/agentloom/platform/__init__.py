"""The platform around the runtime: spaces, members and roles, agents with drafts and
published versions, sessions and runs, identity, and the stores that keep them.

- ``domain``: the records (pydantic, format-versioned) and id rules;
- ``store``: ``PlatformStore``, one repository per kind of record over an item store
  (three primitives) with its in-memory, SQLite and DynamoDB adapters;
- ``identity``: principals from JWT claims or bearer tokens (hashed at rest);
- ``access``: who may do what (membership, roles, creator-only session content);
- ``agents``: draft validation, default context policy, freezing and hashing versions;
- ``admin``: ``AdminService`` (spaces, members, agents, drafts, publish, versions);
- ``sessions``: ``SessionService`` (sessions, ask, resume, resolve, supplement,
  cancel, run status, messages, events) over a ``RunLauncher`` (``launcher``);
- ``host``: ``RunHost``, the one place an engine is assembled for a run, from ports
  (``HostPorts``: workspaces, models, capabilities, hooks, observer, events) that the
  adapter packages fill — ``agentloom.local`` (one machine) and ``agentloom.aws`` —
  with the run's workspaces port and the layout both adapters share;
- ``lease``: the one session lease (the run that holds a session, and who drives it).

This package imports neither adapter package (import-linter checks it).
"""
