"""Store adapters: one backend per module, each implementing a port's primitives.

Checkpoints (port: ``agentloom_runtime.checkpoint.BaseCheckpointStore``):

- ``SqliteCheckpointStore`` (embedded default, one file, WAL) — exported here;
- ``agentloom.stores.dynamodb_checkpoints.DynamoDbCheckpointStore`` (AWS) — import it
  from its module: it needs boto3 (``pip install 'agentloom[aws]'``), and importing this
  package must not.
"""

from .sqlite_checkpoints import SqliteCheckpointStore

__all__ = ["SqliteCheckpointStore"]
