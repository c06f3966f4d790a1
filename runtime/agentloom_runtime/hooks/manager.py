"""``HookManager`` (``hooks/v1``): matches published bindings and runs hook stages.

``run`` is the one stage loop: it validates the payload against the point contract, runs
the matched bindings in order under one shared stage budget (``stage_timeout``) and
applies each result. The host persists around it with two callbacks:
``before(binding, payload)`` is awaited before each binding runs and
``after(binding, cursor, payload)`` after each completed one (``cursor`` = bindings
done). A resumed stage passes the saved cursor as ``start`` with the saved payload:
completed hooks do not run again. Whether an unfinished hook may run again is
``replay_required`` (``replay_safe`` is False by default); the decision is the host's.

What a handler receives: a private copy of the point's writable fields (it may change
them freely; only a returned patch counts) and read-only, uncopied views
(``FrozenDict`` / ``FrozenList``) of everything else — the history and tool schemas
are never copied per hook. Patching a read-only field is refused by the point contract.

With ``saved_config`` (the manifest from the checkpoint) the manager refuses to exist
unless the current registry, points and bindings produce exactly that manifest.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentloom_runtime.errors import ResumeMismatch
from agentloom_runtime.hook_contracts import AfterBinding, BeforeBinding, HookStageBinding
from agentloom_runtime.tool_contracts import freeze

from ._manifest import build_manifest, verify
from ._point import HookPoint
from ._readonly import readonly
from .bindings import HookBinding, ResolvedBinding
from .context import HookScope
from .errors import (
    HookConfigError,
    HookContractError,
    HookError,
    HookFailure,
    HookTimeout,
)
from .executor import DEFAULT_STAGE_TIMEOUT, HookExecutor
from .points import HookPointRegistry
from .registry import HookRegistry
from .results import Reject


@dataclass(frozen=True)
class HookDiagnostic:
    """A recorded, non-fatal hook failure (observation hooks, error / finally stages)."""

    hook_id: str
    version: str
    point: str
    kind: str  # "timeout" | "error" | "contract"
    message: str
    error_type: str = ""

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class BindingOutcome:
    payload: dict[str, Any]
    rejected: Reject | None = None
    diagnostics: tuple[HookDiagnostic, ...] = ()


@dataclass(frozen=True)
class StageOutcome:
    payload: dict[str, Any]
    rejected: Reject | None
    cursor: int
    diagnostics: tuple[HookDiagnostic, ...] = ()


class HookManager:
    """Implements the ``hook_contracts.HookManager`` port."""

    module_id = "hooks/v1"

    def __init__(self, registry: HookRegistry, bindings: Sequence[HookBinding], *,
                 points: HookPointRegistry | None = None,
                 saved_config: Mapping[str, Any] | None = None,
                 stage_timeout: float = DEFAULT_STAGE_TIMEOUT) -> None:
        self._registry = registry
        self._points = _choose_points(points, saved_config)
        self._executor = HookExecutor(stage_timeout=stage_timeout)
        self._by_point: dict[str, list[ResolvedBinding]] = {}
        self._closed = False
        for position, binding in enumerate(bindings):
            self._add(binding, position)
        orders = [r.order for items in self._by_point.values() for r in items]
        if len(orders) != len(set(orders)):
            raise HookConfigError("bindings must have distinct publication orders")
        for name, items in self._by_point.items():
            items.sort(key=lambda r: (r.priority, r.order))
            self._by_point[name] = [dataclasses.replace(r, index=i) for i, r in enumerate(items)]
        self._manifest = build_manifest(
            self._points, (r for items in self._by_point.values() for r in items),
            stage_timeout)
        if saved_config is not None:
            verify(saved_config, self._manifest)

    def _add(self, binding: HookBinding, position: int) -> None:
        if not isinstance(binding, HookBinding):
            raise HookConfigError(f"binding #{position} is not a HookBinding")
        definition = self._registry.get(binding.hook_id, binding.version)
        point = self._points.get(binding.point)
        if binding.matcher.tools is not None and not point.tool_scoped:
            raise HookConfigError(f"binding {binding.hook_id}: match.tools only applies to "
                                  f"tool points, not {point.name}")
        order = position if binding.order is None else binding.order
        self._by_point.setdefault(point.name, []).append(ResolvedBinding(
            binding=binding, definition=definition, point=point, order=order,
            config=freeze(binding.config)))

    # ------------------------------------------------------------ module port

    def checkpoint_config(self) -> dict[str, Any]:
        """The manifest to save with the run (JSON)."""
        return dict(copy.deepcopy(self._manifest))

    @property
    def points(self) -> HookPointRegistry:
        return self._points

    @property
    def stage_timeout(self) -> float:
        return self._executor.stage_timeout

    async def aclose(self) -> None:
        """Refuse further stages; running handlers belong to the caller's tasks, which
        the engine cancels before closing modules."""
        self._closed = True

    # ------------------------------------------------------------ engine API

    def stage(self, point: str, scope: HookScope) -> list[ResolvedBinding]:
        """The bindings that run at ``point`` for ``scope``, in order. Deterministic for
        the same bindings and scope, so a saved cursor indexes the same list."""
        definition = self._points.get(point)
        return [r for r in self._by_point.get(point, ())
                if r.binding.matcher.matches(definition, scope)]

    def writable(self, point: str) -> frozenset[str]:
        """The payload fields a hook at ``point`` may change."""
        return self._points.get(point).writable

    def validate(self, point: str, payload: Mapping[str, Any]) -> None:
        """Check a payload the engine built against the point contract."""
        self._points.get(point).validate(payload)

    def replay_required(self, binding: HookStageBinding) -> bool:
        """True when an unfinished run of this hook must not be repeated blindly."""
        return not binding.replay_safe

    async def run(self, point: str, payload: dict[str, Any], scope: HookScope, *,
                  start: int = 0, before: BeforeBinding | None = None,
                  after: AfterBinding | None = None) -> StageOutcome:
        """Run the stage of ``point`` for ``scope`` from binding ``start``.

        The payload is validated against the point contract before the first binding
        (``HookContractError``); it is never mutated. One stage deadline, ``stage_timeout``
        from the first binding, is shared by all bindings of the call (each also has its
        own timeout); time spent in the callbacks does not count against it.
        ``before(binding, payload)`` is awaited before each binding and
        ``after(binding, cursor, payload)`` after each completed one. A rejection returns
        at once with ``cursor`` past the rejecting binding and no ``after`` call. A
        hook failure raises, except the failures that become diagnostics (observation
        hooks, error / finally points), after which the stage goes on."""
        self._check_open()
        resolved = self.stage(point, scope)
        if not 0 <= start <= len(resolved):
            raise HookConfigError(f"cursor {start} is outside the {point} stage "
                                  f"({len(resolved)} bindings)")
        if start == len(resolved):
            return StageOutcome(payload, None, start)
        definition = self._points.get(point)
        definition.validate(payload, deep=False)
        if scope.point != point:
            scope = dataclasses.replace(scope, point=point)
        loop = asyncio.get_running_loop()
        deadline = self._executor.stage_deadline()
        views = _Views(definition)
        diagnostics: list[HookDiagnostic] = []
        for item in resolved[start:]:
            if before is not None:
                paused = loop.time()
                await before(item, payload)
                deadline += loop.time() - paused
            outcome = await self._run_binding(item, payload, views, scope, deadline)
            diagnostics.extend(outcome.diagnostics)
            payload = outcome.payload
            if outcome.rejected is not None:
                return StageOutcome(payload, outcome.rejected, item.index + 1,
                                    tuple(diagnostics))
            if after is not None:
                paused = loop.time()
                await after(item, item.index + 1, payload)
                deadline += loop.time() - paused
        return StageOutcome(payload, None, len(resolved), tuple(diagnostics))

    async def _run_binding(self, resolved: ResolvedBinding, payload: dict[str, Any],
                           views: _Views, scope: HookScope,
                           stage_deadline: float) -> BindingOutcome:
        """Run one binding; ``stage_deadline`` is on the running loop's monotonic clock,
        never a persisted value."""
        self._check_open()
        point = resolved.point
        ctx = self._executor.context(
            hook_id=resolved.hook_id, hook_version=resolved.version, config=resolved.config,
            scope=scope, timeout=resolved.timeout, stage_deadline=stage_deadline)
        try:
            result = await self._executor.call(
                resolved.definition.handler, ctx, views.handler_payload(payload),
                limit=resolved.timeout, stage_deadline=stage_deadline)
            new = point.apply(payload, result, hook_id=resolved.hook_id,
                              observation=resolved.observation)
        except HookError as exc:
            if not (point.diagnostic_only or (resolved.observation
                                               and isinstance(exc, HookFailure))):
                raise
            return BindingOutcome(payload, None, (_diagnostic(resolved, exc),))
        if isinstance(result, Reject):
            return BindingOutcome(payload, Reject(result.reason, resolved.hook_id))
        return BindingOutcome(new)

    def _check_open(self) -> None:
        if self._closed:
            raise HookConfigError("the hook manager is closed")


def _choose_points(points: HookPointRegistry | None,
                   saved: Mapping[str, Any] | None) -> HookPointRegistry:
    if points is not None:
        return points.copy()
    if saved is None:
        return HookPointRegistry.builtin(2)
    version = saved.get("point_contract_version", 1)
    if version not in (1, 2):
        raise ResumeMismatch(f"the run uses point contract version {version!r}, which this "
                             f"runtime does not provide", details={"module": "hooks/v1"})
    return HookPointRegistry.builtin(int(version))


def _diagnostic(resolved: ResolvedBinding, exc: HookError) -> HookDiagnostic:
    kind = "timeout" if isinstance(exc, HookTimeout) else (
        "contract" if isinstance(exc, HookContractError) else "error")
    return HookDiagnostic(hook_id=resolved.hook_id, version=resolved.version,
                          point=resolved.point.name, kind=kind, message=exc.message,
                          error_type=str(exc.details.get("error_type", "")))


class _Views:
    """The payloads handed to the handlers of one stage call: the read-only fields as
    views built once per field value (O(1) each: nothing is copied), the writable fields
    as a private copy per handler."""

    __slots__ = ("_views", "_writable")

    def __init__(self, point: HookPoint) -> None:
        self._writable = point.writable
        self._views: dict[str, tuple[Any, Any]] = {}  # field -> (value, its view)

    def handler_payload(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in payload.items():
            if key in self._writable:
                out[key] = _private_copy(value)
                continue
            seen = self._views.get(key)
            if seen is None or seen[0] is not value:
                seen = self._views[key] = (value, readonly(value))
            out[key] = seen[1]
        return out


_IMMUTABLE = (str, int, float, bool, type(None))


def _private_copy(value: Any) -> Any:
    """A copy the handler may mutate freely (immutable values are shared). Payloads are
    JSON data built by the host; a pickle round trip of our own bytes is the fastest deep
    copy of them."""
    if isinstance(value, _IMMUTABLE):
        return value
    try:
        return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    except Exception:
        return copy.deepcopy(value)
