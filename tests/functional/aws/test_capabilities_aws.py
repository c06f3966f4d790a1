"""Skills, MCP tools and knowledge bases on the AWS composition (moto DynamoDB, KMS,
EFS, ECS; a real MCP server and model server on 127.0.0.1): publish pins a skill and an
MCP tool through the api platform; the step service runs ``skill_load`` and a
``workspace_command`` whose Fargate revision mounts the skill version read-only at
``/skills/hello`` (the registered task definition and the RunTask overrides are read
back from moto); the api function offers skills and MCP, and knowledge only with
``AGENTLOOM_VECTOR_BUCKET``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from functional.aws.harness import (
    ALICE,
    Bench,
    Container,
    clients,
    drive,
    efs,
    event,
    open_bench,
    pass_machine,
)
from functional.mcp.servers import Running, serve
from moto import mock_aws
from unit.knowledge.builders import s3vectors_query_shim
from unit.skills.builders import hello_zip

from agentloom.aws.capabilities import aws_capabilities
from agentloom.aws.config import AwsConfig
from agentloom.aws.sandbox import SKILL_READER, family
from agentloom.capabilities import Capabilities
from agentloom.crypto.kms_keyring import KmsKeyring
from agentloom.handlers import api as api_handler
from agentloom.knowledge import KnowledgeCapability
from agentloom.mcp import McpCapability, McpPolicy
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.dynamodb import DynamoDbItemStore
from agentloom.skills import SkillsCapability
from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.testing.openai_server import OpenAICompatibleServer
from agentloom_runtime.workspace import CommandSpec, WorkspaceError

SCRIPT = [ScriptedModel.call("skill_load", {"name": "hello"}, id="c1"),
          ScriptedModel.call("workspace_command", {"command": "echo ran-$((40+2))"}, id="c2"),
          ScriptedModel.answer("Loaded the skill."), ScriptedModel.verdict("complete")]


def _of(capabilities: Capabilities, kind: type[Any]) -> Any:
    found = capabilities.find(kind)  # the AWS set builds each kind on first use
    assert found is not None
    return found


@pytest.fixture
def mcp_server() -> Iterator[Running]:
    with serve("http") as running:
        yield running


@pytest.fixture
def model() -> Iterator[OpenAICompatibleServer]:
    server = OpenAICompatibleServer(SCRIPT).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def skill_bench(aws_env: None, tmp_path: Path, mcp_server: Running,
                model: OpenAICompatibleServer) -> Iterator[Bench]:
    with mock_aws():
        aws = clients()
        machine = pass_machine(aws)

        def wired(config: AwsConfig) -> Capabilities:  # the default, MCP on 127.0.0.1
            store = PlatformStore(DynamoDbItemStore(config.platform_table, client=aws.dynamodb))
            return aws_capabilities(
                table=config.platform_table, dynamodb=aws.dynamodb, store=store,
                keyring=KmsKeyring(config.kms_key_id, client=aws.kms),
                workspace_root=config.workspace_root,
                mcp_policy=McpPolicy(allow_loopback=True))

        bench = open_bench(aws, tmp_path, model.base_url, state_machine_arn=machine,
                           capabilities=wired)
        try:
            yield bench
        finally:
            bench.service.close()


def _publish(bench: Bench, mcp_url: str) -> dict[str, Any]:
    admin = bench.api.admin
    space = admin.create_space(ALICE, "Team")
    skills = _of(admin.capabilities, SkillsCapability).service(admin.store)
    skills.import_zip(ALICE, space.space_id, hello_zip())
    resource = _of(admin.capabilities, McpCapability).service.create(
        ALICE, space.space_id, "calc", {"transport": "streamable_http", "url": mcp_url})
    agent, _ = admin.create_agent(ALICE, space.space_id, "Helper", {
        "prompt": "Use the skill.", "model": {"model": "scripted-model"},
        "tools": ["workspace", "workspace_command"], "skills": ["hello"],
        "mcp_tools": [{"resource_id": resource.resource_id, "tool": "add"}]})
    version, _ = admin.publish(ALICE, space.space_id, agent.agent_id)
    session = bench.api.sessions.create_session(ALICE, space.space_id, agent.agent_id)
    bench.space_id, bench.agent_id = space.space_id, agent.agent_id
    bench.session_id = session.session_id
    return version.snapshot


def test_publish_pins_a_skill_and_an_mcp_tool(skill_bench: Bench,
                                              mcp_server: Running) -> None:
    snapshot = _publish(skill_bench, mcp_server.url)
    assert snapshot["skills"][0].startswith("hello@sha256:")
    [binding] = snapshot["mcp_tools"]
    assert binding["tool"] == "add" and binding["schema_digest"]
    items = repr(skill_bench.aws.dynamodb.scan(TableName="platform")["Items"])
    assert "skill#" in items and "# Guide" not in items  # the files are sealed under KMS


def test_a_step_loads_the_skill_and_mounts_it_read_only_on_fargate(
        skill_bench: Bench, mcp_server: Running, model: OpenAICompatibleServer) -> None:
    snapshot = _publish(skill_bench, mcp_server.url)
    run, _ = skill_bench.api.sessions.ask(ALICE, skill_bench.session_id, "Use it")
    replies = drive(skill_bench, run.run_id)
    assert replies[-1]["status"] == "completed", replies[-1]
    seen = json.dumps(model.bodies)
    assert "Run `python3 /skills/hello/scripts/x.py`" in seen  # skill_load's result
    assert "ran-42" in seen  # the command ran (its output, not its text)
    command = next(r["command"] for r in replies if r["next"] == "command")
    hexdigest = snapshot["skills"][0].split("sha256:")[1]
    folder = skill_bench.root / ".agentloom-skills" / skill_bench.space_id / hexdigest
    mounts = Container(skill_bench).mounts(command["task_definition"])
    assert mounts["/skills/hello"] == folder and (folder / "SKILL.md").is_file()
    described = skill_bench.aws.ecs.describe_task_definition(
        taskDefinition=command["task_definition"])["taskDefinition"]
    [point] = [m for m in described["containerDefinitions"][0]["mountPoints"]
               if m["containerPath"] == "/skills/hello"]
    assert point["readOnly"] is True
    # and its access point's identity cannot write (or chmod) the version's files, even
    # mounted read-write by hand with the task role
    skill_ap = next(v["efsVolumeConfiguration"]["authorizationConfig"]["accessPointId"]
                    for v in described["volumes"] if v["name"] == point["sourceVolume"])
    (described_ap,) = skill_bench.aws.efs.describe_access_points(
        AccessPointId=skill_ap)["AccessPoints"]
    assert described_ap["PosixUser"] == {"Uid": SKILL_READER, "Gid": SKILL_READER}
    assert SKILL_READER != skill_bench.service.sandbox.config.uid  # not the files' owner
    assert described["family"] == family("agentloom-test-sbx", (snapshot["skills"][0],))
    override = command["overrides"]["ContainerOverrides"][0]
    spec = json.loads(override["Command"][1])
    assert spec["skills"] == {"hello": "/skills/hello"}  # the container's path


def test_skill_revisions_are_made_once_and_foreign_folders_refused(
        skill_bench: Bench, mcp_server: Running) -> None:
    snapshot = _publish(skill_bench, mcp_server.url)
    run, _ = skill_bench.api.sessions.ask(ALICE, skill_bench.session_id, "Use it")
    service = skill_bench.service
    found = skill_bench.api.store.runs.find(run.run_id)
    assert found is not None
    workspaces = efs(service.host.ports.workspaces(service._snapshot(found.value),
                                                   found.value.session_id))
    instance = workspaces.session_dir() / "main"
    instance.mkdir(parents=True, exist_ok=True)
    hexdigest = snapshot["skills"][0].split("sha256:")[1]
    host = str(skill_bench.root / ".agentloom-skills" / skill_bench.space_id / hexdigest)
    first = service.sandbox.command(workspaces, CommandSpec(
        request_id=f"{run.run_id}.main.1", command="true", skills={"hello": host}),
        str(instance))
    made = service.sandbox.created
    again = service.sandbox.command(workspaces, CommandSpec(
        request_id=f"{run.run_id}.main.2", command="true", skills={"hello": host}),
        str(instance))
    assert again["task_definition"] == first["task_definition"]
    assert service.sandbox.created == made
    plain = service.sandbox.command(workspaces, CommandSpec(
        request_id=f"{run.run_id}.main.3", command="true"), str(instance))
    assert plain["task_definition"] != first["task_definition"]
    for hostile in ("/etc", str(workspaces.session_dir()),
                    str(skill_bench.root / ".agentloom-skills" / "spc_other" / hexdigest)):
        with pytest.raises(WorkspaceError, match="not a skill version"):
            service.sandbox.command(workspaces, CommandSpec(
                request_id=f"{run.run_id}.main.4", command="true",
                skills={"hello": hostile}), str(instance))


def test_the_api_function_offers_skills_and_mcp_and_knowledge_only_with_a_bucket(
        skill_bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in skill_bench.resources.env.items():
        if not name.startswith(("AGENTLOOM_SANDBOX", "AGENTLOOM_WORKSPACE", "AGENTLOOM_EFS")):
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENTLOOM_VECTOR_BUCKET", raising=False)
    space = skill_bench.api.admin.create_space(ALICE, "Team")
    api_handler.configure(None)
    try:
        base = f"/api/v1/spaces/{space.space_id}"
        out = api_handler.handler(event("GET", f"{base}/skills"), None)
        assert out["statusCode"] == 200, out
        out = api_handler.handler(event("GET", f"{base}/mcp/resources"), None)
        assert out["statusCode"] == 200, out
        out = api_handler.handler(event("GET", f"{base}/knowledge/bases"), None)
        assert out["statusCode"] == 404
        assert json.loads(out["body"])["error"]["code"] == "knowledge_unavailable"
        out = api_handler.handler(event("POST", f"{base}/agents", {
            "name": "Reader", "config": {"prompt": "p", "model": {"model": "m"},
                                         "knowledge_bases": ["kb_x"]}}), None)
        assert out["statusCode"] == 201, out
        agent_id = json.loads(out["body"])["agent"]["agent_id"]
        out = api_handler.handler(event("POST", f"{base}/agents/{agent_id}/publish", {}),
                                  None)
        assert out["statusCode"] == 422, out
        error = json.loads(out["body"])["error"]
        assert error["code"] == "knowledge_unavailable"
        assert "AGENTLOOM_VECTOR_BUCKET" in error["message"]
    finally:
        api_handler.configure(None)


def test_a_vector_bucket_offers_knowledge_on_s3_vectors(skill_bench: Bench) -> None:
    vectors = boto3.client("s3vectors", region_name="us-east-1")
    vectors.create_vector_bucket(vectorBucketName="agentloom-kb")
    s3vectors_query_shim(vectors)
    env = {**skill_bench.resources.env, "AGENTLOOM_VECTOR_BUCKET": "agentloom-kb"}
    config = AwsConfig.from_environ(env)
    assert config.vector_bucket == "agentloom-kb"
    store = PlatformStore(DynamoDbItemStore(config.platform_table, client=skill_bench.aws.dynamodb))
    wired = aws_capabilities(table=config.platform_table, dynamodb=skill_bench.aws.dynamodb,
                             store=store, keyring=KmsKeyring(config.kms_key_id,
                                                             client=skill_bench.aws.kms),
                             vector_bucket=config.vector_bucket, vectors=lambda: vectors)
    knowledge = _of(wired, KnowledgeCapability)
    assert knowledge.kind == "knowledge"
    with pytest.raises(ValueError, match="s3vectors client"):
        aws_capabilities(table="t", dynamodb=None, store=store, keyring=None,  # type: ignore[arg-type]
                         vector_bucket="b")
