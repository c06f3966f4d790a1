"""The AWS deployment's adapters and services: the environment contract (``config``), the
composition (``platform``), the Step Functions run launcher (``launcher``) and the run's
fence (``fence``), EFS workspaces (``workspaces``), per-session Fargate sandboxes
(``sandbox``) and the step function's service (``steps``). Needs the ``aws`` extra."""
