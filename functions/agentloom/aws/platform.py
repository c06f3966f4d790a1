"""The AWS composition: what the api and step functions run on.

The sibling of ``agentloom.local.embedded.EmbeddedPlatform``, with the AWS adapters: the
DynamoDB checkpoint store and platform store (a step's session records, cursors and usage
written in its checkpoint commit by the store's companion ``SessionCommits``), the
checkpoint store and the platform's secrets encrypted through the envelope codec
under a ``KmsKeyring`` (the checkpoint documents' key scope is their space and session,
looked up once per document in the platform table: a data key, and so a KMS call, per
document and cache lifetime — docs/encryption.md); ``RunTracker``; the run host
(``aws_host``: ``agentloom.platform.host`` with the EFS workspaces, mounted in the step
function and detached in the API function); ``SfnRunLauncher``; ``SessionService`` and
``AdminService``; the capability
set (``agentloom.aws.capabilities``: Skills, MCP tools, knowledge bases when a vector
bucket is configured) shared by the admin's publish and the engines. Clients are
injected (``AwsClients``), built once per container from the region otherwise.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentloom.aws.capabilities import aws_capabilities
from agentloom.aws.config import AwsConfig
from agentloom.aws.workspaces import EfsWorkspaces
from agentloom.capabilities import Capabilities
from agentloom.crypto import EnvelopeCodec, KeyScope
from agentloom.crypto.kms_keyring import KmsKeyring
from agentloom.models.gateway import ConnectionModels, default_model_factory
from agentloom.platform.admin import AdminService
from agentloom.platform.agents import DraftRules
from agentloom.platform.host import HostPorts, RunHost, relay_steps
from agentloom.platform.launcher import ModelFactory
from agentloom.platform.redaction import Redactor
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.sessions import SessionService
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.dynamodb import DynamoDbItemStore
from agentloom.platform.store.session_commits import SessionCommits
from agentloom.platform.teardown import NOTHING_EXTRA, SessionResources
from agentloom.platform.tracker import RunTracker
from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore
from agentloom_runtime.errors import ConfigError

if TYPE_CHECKING:  # the boto3 stubs (the dev extra); the Lambda bundle never loads them
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_efs import EFSClient
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_s3vectors import S3VectorsClient
    from mypy_boto3_stepfunctions import SFNClient

SCOPE_CACHE = 1024


class Deferred:
    """A botocore client created on first use (any attribute): a cold container creates
    only the clients its first invocation calls (botocore loads each service's model
    when its client is created)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._client: Any = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.created(), name)

    def created(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._make()
            return self._client


@dataclass
class AwsClients:
    dynamodb: DynamoDBClient
    kms: KMSClient
    sfn: SFNClient
    ecs: ECSClient
    efs: EFSClient
    s3vectors: S3VectorsClient | None = None  # made on first use (knowledge bases only)
    lambda_: Any = None  # the API's invoke of the step (a session's files); no stubs

    def vectors(self, region: str) -> S3VectorsClient:
        if self.s3vectors is None:
            self.s3vectors = _session().create_client("s3vectors", region_name=region)
        return self.s3vectors

    @classmethod
    def for_region(cls, region: str) -> AwsClients:
        """Each client ``Deferred`` on one botocore session. botocore directly, not
        boto3: these clients are botocore's (boto3's session adds nothing to them), and
        importing boto3 imports s3transfer, a third of the AWS SDK's import time."""
        session = _session()

        def client(service: str) -> Any:
            return Deferred(lambda: session.create_client(service, region_name=region))

        def invoker() -> Any:  # answers within the API function's 29 s (one retry)
            from botocore.config import Config

            return session.create_client("lambda", region_name=region, config=Config(
                connect_timeout=5, read_timeout=20, retries={"max_attempts": 2}))

        return cls(dynamodb=client("dynamodb"), kms=client("kms"),
                   sfn=client("stepfunctions"), ecs=client("ecs"), efs=client("efs"),
                   lambda_=Deferred(invoker))


@functools.cache
def _session() -> Any:
    """One botocore session per container: its loader reads each service model once
    (``_botocore.ColdStartLoader``: without botocore's scan of every service folder)."""
    from agentloom.aws._botocore import cold_start_session  # botocore: the aws extra

    return cold_start_session()


def document_scope(store: PlatformStore, stage: str) -> Callable[[str], KeyScope]:
    """The key scope of a checkpoint document: ``run_…`` (and ``run_…/inbox``) and
    ``session:ses_…`` belong to a session of a space. Unknown documents are refused (the
    codec then writes nothing)."""
    cache: dict[str, KeyScope] = {}

    def scope(document: str) -> KeyScope:
        if document in cache:
            return cache[document]
        base = document.split("/", 1)[0]
        if base.startswith("session:"):
            found = store.sessions.get(base.removeprefix("session:"))
            space, session = (found.value.space_id, found.value.session_id) if found \
                else (None, None)
        else:
            run = store.runs.find(base)
            space, session = (run.value.space_id, run.value.session_id) if run \
                else (None, None)
        if space is None or session is None:
            raise ConfigError(f"no run or session owns the document {document[:80]!r}",
                              details={"code": "unknown_document"})
        if len(cache) >= SCOPE_CACHE:
            cache.clear()
        cache[document] = {"stage": stage, "space": space, "session": session}
        return cache[document]

    return scope


def aws_host(config: AwsConfig, tracker: RunTracker, models: ModelFactory,
             capabilities: Capabilities) -> RunHost:
    """The run host on AWS: the EFS workspaces (mounted in the step function, detached in
    the API function), a relay per invocation (a warm engine serves many), events into
    the platform's event log."""
    workspaces = EfsWorkspaces.factory(config.workspace_root, config.volume_id,
                                       mounted=config.sandbox is not None)
    return RunHost(HostPorts(tracker=tracker, workspaces=workspaces, models=models,
                             observe=relay_steps, capabilities=capabilities))


@dataclass
class AwsPlatform:
    config: AwsConfig
    clients: AwsClients
    store: PlatformStore
    checkpoints: DynamoDbCheckpointStore
    tracker: RunTracker
    host: RunHost
    launcher: Any  # SfnRunLauncher (imported lazily: it pulls nothing heavy, but keeps order)
    sessions: SessionService
    admin: AdminService

    @classmethod
    def open(cls, config: AwsConfig, clients: AwsClients | None = None, *,
             model_factory: ModelFactory | None = None, rules: DraftRules | None = None,
             capabilities: Capabilities | None = None) -> AwsPlatform:
        from agentloom.aws.launcher import SfnRunLauncher

        clients = clients or AwsClients.for_region(config.region)
        store = PlatformStore(DynamoDbItemStore(config.platform_table, client=clients.dynamodb))
        keyring = KmsKeyring(config.kms_key_id, client=clients.kms)
        if capabilities is None:
            capabilities = aws_capabilities(
                table=config.platform_table, dynamodb=clients.dynamodb, store=store,
                keyring=keyring, workspace_root=config.workspace_root,
                vector_bucket=config.vector_bucket,
                vectors=lambda: clients.vectors(config.region))
        codec = EnvelopeCodec(keyring, scope=document_scope(store, config.stage))
        checkpoints = DynamoDbCheckpointStore(config.checkpoint_table,
                                              client=clients.dynamodb, codec=codec)
        redactor = Redactor.from_environment()
        commits = SessionCommits(store, redactor=redactor)  # records in the run's commit
        checkpoints.attach(commits)
        tracker = RunTracker(store, checkpoints, redactor=redactor, commits=commits)
        admin = AdminService(store, rules, secrets=CodecSecrets(keyring, store),
                             capabilities=capabilities)  # discovery made on first use
        models = ConnectionModels(admin, model_factory or default_model_factory,
                                  redact=tracker.redactor.add)
        host = aws_host(config, tracker, models, capabilities)
        launcher = SfnRunLauncher(host, store, sfn=clients.sfn, ecs=clients.ecs,
                                  state_machine_arn=config.state_machine_arn)
        sessions = SessionService(store, tracker, launcher, host,
                                  resources=sandbox_teardown(config, clients, store))
        return cls(config=config, clients=clients, store=store, checkpoints=checkpoints,
                   tracker=tracker, host=host, launcher=launcher, sessions=sessions,
                   admin=admin)


def sandbox_teardown(config: AwsConfig, clients: AwsClients,
                     store: PlatformStore) -> SessionResources:
    """What a session's delete removes on AWS: its access points, revisions and files
    (none without a workspace file system: then no session has any)."""
    if config.file_system_id is None:
        return NOTHING_EXTRA
    from agentloom.aws.session_files import StepFilesRemoval
    from agentloom.aws.teardown import SandboxTeardown

    files = StepFilesRemoval(clients.lambda_, config.step_function) \
        if config.step_function and clients.lambda_ is not None else None
    return SandboxTeardown(store, efs=clients.efs, ecs=clients.ecs,
                           file_system_id=config.file_system_id, files=files)
