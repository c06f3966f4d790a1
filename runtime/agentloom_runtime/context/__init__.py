"""Context management: token estimators, compaction policies, session history.

Public surface (the ``JournalContextManager`` lives in ``context.manager``):

- estimators: ``Utf8BytesEstimator``, ``OpenAIEstimator``, ``DeepSeekEstimator``,
  ``estimator_for``;
- policies: ``CompactionPolicyBase`` (every capability the host calls, with defaults;
  ``with_defaults`` wraps a bare policy in one),
  ``BudgetCompactionPolicy`` (``budget-handoff/v1``), ``CharacterCompactionPolicy``
  (``character-handoff/v1``), ``NoCompaction`` (``no-compaction/v1``),
  ``CompactionFailureMemory``, ``with_summary`` (re-render a hook-rewritten summary);
- protocol helpers: ``strip_private``, ``public_messages``, ``protocol_violations``;
- session history: see ``context.history``.

The two handoff policies load on first use (PEP 562): the engine imports this package
for its light parts, and assembles a policy only in ``create_engine``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloom_runtime._lazy import lazy_exports

from ._protocol import protocol_violations, public_messages, strip_private
from ._summary import with_summary
from .estimators import DeepSeekEstimator, OpenAIEstimator, Utf8BytesEstimator, estimator_for
from .failures import CompactionFailureMemory
from .policy import CompactionPolicyBase, Decision, NoCompaction, with_defaults

if TYPE_CHECKING:
    from .budget import BudgetCompactionPolicy
    from .character import CharacterCompactionPolicy

_HOMES = {"BudgetCompactionPolicy": ".budget", "CharacterCompactionPolicy": ".character"}

__all__ = [
    "BudgetCompactionPolicy",
    "CharacterCompactionPolicy",
    "CompactionFailureMemory",
    "CompactionPolicyBase",
    "Decision",
    "DeepSeekEstimator",
    "NoCompaction",
    "OpenAIEstimator",
    "Utf8BytesEstimator",
    "estimator_for",
    "protocol_violations",
    "public_messages",
    "strip_private",
    "with_defaults",
    "with_summary",
]


__getattr__ = lazy_exports(__name__, _HOMES)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
