"""``skill_load`` as the model sees it (through the production engine factory): the
mount path and the file list come before a long body, so the run's visible cap
(24,000 characters; the rest behind ``read_result``) cuts the body, not the list."""

from __future__ import annotations

from pathlib import Path

from support.engine import build_engine, drive, make_snapshot
from unit.skills.builders import hello_zip, memory_store, skill_md

from agentloom.capabilities import RunScope
from agentloom.skills import SkillsCapability, SkillSource, tree_from_zip
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.testing import FunctionModel, ScriptedModel


async def test_skill_load_shows_the_mount_and_file_list_before_a_long_body(
        tmp_path: Path) -> None:
    """Issue 17: the body came before the mount and the files, so a long SKILL.md cut
    the file list off what the model saw."""
    body = "# Long instructions\n" + "Follow each step with care.\n" * 2_000  # ~56 KB
    store = memory_store(tmp_path)
    store.import_tree("local", tree_from_zip(hello_zip(**{"SKILL.md": skill_md(body=body)})),
                      SkillSource(kind="zip"), user_id="u")
    capability = SkillsCapability(store, tmp_path / "ws")
    snapshot = make_snapshot(**capability.pin("local", {"skills": ["hello"]}))
    shown: list[str] = []

    def reply(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        tools = [m for m in request.messages if m.get("role") == "tool"]
        if not tools:
            return ScriptedModel.call("skill_load", {"name": "hello"})
        shown.append(str(tools[0]["content"]))
        return ScriptedModel.answer("read it")

    engine = build_engine(snapshot=snapshot, model=FunctionModel(reply),
                          tools=capability.tools(snapshot, RunScope("local", "tester", 1,
                                                                    "s", "r")))
    await engine.start("use the hello skill")
    assert (await drive(engine)).status == "completed"
    seen = shown[0]
    assert len(seen) <= 24_000 and "read_result" in seen  # the body was cut
    assert '"mount": "/skills/hello"' in seen
    assert '"path": "references/guide.md"' in seen and '"path": "scripts/x.py"' in seen
    assert seen.index('"files"') < seen.index('"body"')
