"""The knowledge ``Capability``: ``knowledge_bases`` bound at publish, ``knowledge_search``
in runs.

``pin`` checks that every id in the draft's ``knowledge_bases`` (and in each sub-agent
template's own list) names a knowledge base of the space — a 422 naming the field
otherwise — and freezes the list (deduplicated, in order). A base's content is not
frozen: a run searches the base as it is at the call (documents are living content,
like a search engine's); deleting a bound base makes its search return nothing.

``tools`` adds ``knowledge_search(query, top_k)`` when the version or one of its
templates binds a base. It searches the bases bound to the calling instance only — the
version's list for ``main``, a sub-agent template's own list for its instance (a
template without bases gets nothing, even when ``knowledge_search`` is in its tools) —
and returns citable passages with a ``citation_id`` each. Its prompt section lists the
instance's bound bases (name and description), rendered when the instance starts (the
engine records it, so a resume does not re-render it). The call is durable per
``search`` (``search_with_context``), hence ``read_only`` and ``resume_inflight``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentloom.capabilities import CapabilityBase, RunScope
from agentloom.platform.errors import Invalid, PlatformError
from agentloom_runtime.errors import ToolError
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

from .search import SearchCall
from .service import KnowledgeService
from .store import Citation

TOOL = "knowledge_search"
MAX_TOOL_TOP_K = 10
DESCRIPTION = (
    "Search the knowledge bases bound to you for passages relevant to a query. Returns "
    "passages with a citation_id each; when you use a passage in your answer, cite it "
    "as [citation_id].")
PARAMETERS: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["query"],
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 2_000,
                  "description": "What to look for, in natural language"},
        "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOOL_TOP_K,
                  "description": "How many passages (default 5)"}}}


def _ids(value: object, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise Invalid(f"{field} must be a list of knowledge base ids", code="field_invalid",
                      details={"fields": [{"field": field, "message": "a list of ids"}]})
    return list(dict.fromkeys(value))


class KnowledgeCapability(CapabilityBase):
    kind = "knowledge"

    def __init__(self, service: KnowledgeService) -> None:
        self.service = service

    def pin(self, space_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        pinned = dict(config)
        if "knowledge_bases" in config:
            pinned["knowledge_bases"] = self._check(space_id, config["knowledge_bases"],
                                                    "knowledge_bases")
        subagents = config.get("subagents")
        if isinstance(subagents, list | tuple):
            pinned["subagents"] = [
                {**t, "knowledge_bases": self._check(
                    space_id, t["knowledge_bases"], f"subagents[{i}].knowledge_bases")}
                if isinstance(t, Mapping) and "knowledge_bases" in t else t
                for i, t in enumerate(subagents)]
        return pinned

    def _check(self, space_id: str, value: object, field: str) -> list[str]:
        ids = _ids(value, field)
        for position, base_id in enumerate(ids):
            if self.service.store.base(space_id, base_id) is None:
                message = f"no knowledge base {base_id[:80]!r} in this space"
                raise Invalid(f"{field}[{position}]: {message}",
                              code="knowledge_base_not_found", details={"fields": [
                                  {"field": f"{field}[{position}]", "message": message}]})
        return ids

    def tools(self, snapshot: AgentSnapshot, scope: RunScope) -> list[ToolDefinition]:
        bound: dict[str | None, tuple[str, ...]] = {
            None: snapshot.knowledge_bases,
                 **{t.id: t.knowledge_bases for t in snapshot.subagents}}
        if not any(bound.values()):
            return []
        service = self.service

        async def handler(context: ToolContext, arguments: dict[str, Any]) -> Any:
            base_ids = bound.get(context.template, ())
            if not base_ids:
                raise ToolError("no knowledge base is bound to this agent "
                                f"({context.template or 'main'})")
            call = SearchCall(space_id=scope.space_id, run_id=scope.run_id,
                              request_id=context.request_id, instance=context.instance,
                              top_k=int(arguments.get("top_k", 5)))
            try:
                citations = await service.search_for_run(
                    call, base_ids, str(arguments["query"]), context.services.get("hooks"))
            except PlatformError as err:  # an embeddings failure is the tool's failure
                raise ToolError(f"{err.code}: {err.message}") from None
            return render(citations, service, scope.space_id)

        def prompt(config: Mapping[str, Any], template: str | None) -> str:
            bases = [b for b in (service.store.base(scope.space_id, i)
                                 for i in bound.get(template, ())) if b]
            if not bases:
                return ""
            lines = [f"- {b.name}" + (f": {b.description}" if b.description else "")
                     for b in bases]
            return ("Knowledge bases you can search with knowledge_search (cite a passage "
                    "you use as [citation_id]):\n" + "\n".join(lines))

        return [ToolDefinition(
            name=TOOL, description=DESCRIPTION, parameters=PARAMETERS, handler=handler,
            prompt=prompt,
            implementation_id="knowledge-search/v1", tool_id=TOOL, read_only=True,
            resume_inflight=True, timeout=60.0, evidence_fields=("query",))]


def render(citations: Sequence[Citation], service: KnowledgeService,
           space_id: str) -> dict[str, Any]:
    if not citations:
        return {"passages": [], "note": "no passage matched; try other words"}
    return {"passages": [
        {"citation_id": c.citation_id, "knowledge_base": c.base_name,
         "document": c.document_name, "title": c.title, "heading": c.heading,
         "score": round(c.score, 4), "text": service.runs.text(c, space_id)}
        for c in citations],
        "note": "cite a passage you use as [citation_id]"}
