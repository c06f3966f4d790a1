"""A sub-agent sees only its template's skills: its system prompt lists them alone and
``skill_load`` of another bound skill is refused; the main instance's prompt lists all.
Through the production engine factory (``support.engine``)."""

from __future__ import annotations

import json
from pathlib import Path

from support.engine import build_engine, drive, make_snapshot
from unit.skills.builders import hello_zip, memory_store, skill_md

from agentloom.capabilities import RunScope
from agentloom.skills import SkillsCapability, SkillSource, tree_from_zip
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.testing import FunctionModel, ScriptedModel


async def test_the_child_sees_its_templates_skills_only(tmp_path: Path) -> None:
    store = memory_store(tmp_path)
    for name in ("hello", "other"):
        tree = tree_from_zip(hello_zip(folder="", **{"SKILL.md": skill_md(
            name=name, description=f"The {name} skill.")}))
        store.import_tree("local", tree, SkillSource(kind="zip"), user_id="u")
    capability = SkillsCapability(store, tmp_path / "ws")
    config = capability.pin("local", {
        "skills": ["hello", "other"], "subagents": [
            {"id": "helper", "name": "H", "duty": "helps", "tools": ["skill_load"],
             "skills": ["other"]}]})
    snapshot = make_snapshot(**config)
    systems: dict[str, str] = {}
    results: list[str] = []

    def reply(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        systems.setdefault(request.instance, str(request.messages[0]["content"]))
        tools = [m for m in request.messages if m.get("role") == "tool"]
        if request.instance == "main":
            if not tools:
                return ScriptedModel.call("delegate_task", {"subagent_id": "helper",
                                                            "task": "load skills"})
            return ScriptedModel.answer("done")
        if len(tools) < 2:
            name = ("hello", "other")[len(tools)]
            return ScriptedModel.call("skill_load", {"name": name})
        results.extend(str(m["content"]) for m in tools)
        return ScriptedModel.answer("child done")

    engine = build_engine(snapshot=snapshot, model=FunctionModel(reply),
                          tools=capability.tools(snapshot, RunScope("local", "tester", 1,
                                                                    "s", "r")))
    await engine.start("go")
    assert (await drive(engine)).status == "completed"
    assert "- hello: The hello skill.\n- other: The other skill." in systems["main"]
    child = systems["sub-1"]
    assert "- other: The other skill." in child and "hello" not in child
    refused, loaded = results
    assert json.loads(refused)["error"]["code"] == "skill_not_bound"
    assert json.loads(loaded)["name"] == "other"
