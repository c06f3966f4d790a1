"""Context management: token estimators, compaction policies, session history.

Public surface (the ``JournalContextManager`` lives in ``context.manager``):

- estimators: ``Utf8BytesEstimator``, ``OpenAIEstimator``, ``DeepSeekEstimator``,
  ``estimator_for``;
- policies: ``BudgetCompactionPolicy`` (``budget-handoff/v1``),
  ``CharacterCompactionPolicy`` (``character-handoff/v1``), ``CompactionFailureMemory``,
  ``with_summary`` (re-render a hook-rewritten summary);
- protocol helpers: ``strip_private``, ``public_messages``, ``protocol_violations``;
- session history: see ``context.history``.
"""

from ._protocol import protocol_violations, public_messages, strip_private
from ._summary import with_summary
from .budget import BudgetCompactionPolicy
from .character import CharacterCompactionPolicy
from .estimators import DeepSeekEstimator, OpenAIEstimator, Utf8BytesEstimator, estimator_for
from .failures import CompactionFailureMemory

__all__ = [
    "BudgetCompactionPolicy",
    "CharacterCompactionPolicy",
    "CompactionFailureMemory",
    "DeepSeekEstimator",
    "OpenAIEstimator",
    "Utf8BytesEstimator",
    "estimator_for",
    "protocol_violations",
    "public_messages",
    "strip_private",
    "with_summary",
]
