"""Cross-field rules of the direct run config (reference §1), applied after the schema passes.

Each rule reads the alias-resolved values (canonical dotted path -> value, only what the
user set) and reports problems at the position of the key the user actually wrote.

The rules live in :mod:`.rules_identity` and :mod:`.rules_storage` and register themselves, in
that order, with :data:`RULES` (:mod:`.rule_context`); :func:`run_all` applies them.
"""

from __future__ import annotations

from tau_core.config import rules_identity as rules_identity  # registration order: identity ... policy
from tau_core.config import rules_storage as rules_storage  # then storage ... resilience
from tau_core.config.rule_context import RULES, Rule, RuleContext, run_all

__all__ = ["RULES", "Rule", "RuleContext", "run_all"]
