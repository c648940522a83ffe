"""Enforcement of ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1) on API writes.

For CREATE and UPDATE requests that come through the HTTP API, every binding's policy whose match constraints
(resource rules, operations, namespace and object selectors, exclusions) and ``matchConditions`` fit is
evaluated with the CEL subset of ``tau_testing.sim.cel`` over ``object``, ``oldObject``, ``request``,
``namespaceObject``, ``variables`` and ``params`` (always null: ``paramRef`` is not resolved). A false
validation denies (``Deny``) or warns (``Warn``) as the binding says; an evaluation error follows
``failurePolicy``; an expression outside the interpreter's subset is skipped with a warning. DELETE requests and
subresource writes are not evaluated.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tau_testing.sim import cel
from tau_testing.sim.errors import ApiError
from tau_testing.sim.selectors import label_selector_from_dict, labels_match

if TYPE_CHECKING:
    from tau_testing.sim.auth import User
    from tau_testing.sim.resources import ResourceType
    from tau_testing.sim.store import Store

API = "admissionregistration.k8s.io/v1"
_REQUEST: contextvars.ContextVar[tuple[User, list[str], bool] | None] = contextvars.ContextVar(
    "tau_sim_admission_request", default=None)
_CODES = {"Invalid": 422, "Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}


@contextlib.contextmanager
def api_request(user: User, warnings: list[str], dry_run: bool) -> Iterator[None]:
    """Mark the store writes inside as made by ``user`` through the API (admission policies apply)."""
    token = _REQUEST.set((user, warnings, dry_run))
    try:
        yield
    finally:
        _REQUEST.reset(token)


def _rule_matches(rule: dict[str, Any], rtype: ResourceType, operation: str, name: str) -> bool:
    def has(values: Any, wanted: str) -> bool:
        values = values or []
        return "*" in values or wanted in values

    if not (has(rule.get("apiGroups"), rtype.group) and has(rule.get("apiVersions"), rtype.version)
            and has(rule.get("operations"), operation)):
        return False
    resources = rule.get("resources") or []
    if not ("*" in resources or rtype.plural in resources):
        return False
    scope = rule.get("scope", "*")
    if (scope == "Namespaced" and not rtype.namespaced) or (scope == "Cluster" and rtype.namespaced):
        return False
    names = rule.get("resourceNames") or []
    return not names or name in names


def _matches(spec: dict[str, Any] | None, store: Store, rtype: ResourceType, operation: str, obj: dict[str, Any],
             old: dict[str, Any] | None, *, need_rules: bool) -> bool:
    if not spec:
        return not need_rules
    name = (obj.get("metadata") or {}).get("name", "")
    rules = spec.get("resourceRules")
    if rules is not None or need_rules:
        if not any(_rule_matches(r, rtype, operation, name) for r in rules or []):
            return False
    if any(_rule_matches(r, rtype, operation, name) for r in spec.get("excludeResourceRules") or []):
        return False
    object_selector = label_selector_from_dict(spec.get("objectSelector"))
    if object_selector:
        labels_now = (obj.get("metadata") or {}).get("labels")
        labels_old = ((old or {}).get("metadata") or {}).get("labels")
        if not (labels_match(object_selector, labels_now) or (old is not None and labels_match(object_selector,
                                                                                              labels_old))):
            return False
    namespace_selector = label_selector_from_dict(spec.get("namespaceSelector"))
    if namespace_selector and rtype.namespaced:
        ns = store.get("v1", "Namespace", None, (obj.get("metadata") or {}).get("namespace", ""))
        if ns is None or not labels_match(namespace_selector, ns["metadata"].get("labels")):
            return False
    return True


def _evaluate(expression: str, env: dict[str, Any]) -> Any:
    return cel.evaluate(cel.compile_rule(expression), env)


class PolicyEnforcer:
    """An admission hook (``store.admission_hooks``) enforcing stored ValidatingAdmissionPolicies."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, operation: str, rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        current = _REQUEST.get()
        if current is None:
            return  # a write made by the simulator itself, not an API request
        user, warnings, dry_run = current
        bindings = self.store.list(API, "ValidatingAdmissionPolicyBinding")
        if not bindings:
            return
        meta = obj.get("metadata") or {}
        namespace_obj = self.store.get("v1", "Namespace", None, meta.get("namespace", "")) if rtype.namespaced \
            else None
        request = {
            "operation": operation, "name": meta.get("name", ""), "namespace": meta.get("namespace", ""),
            "userInfo": {"username": user.name, "groups": user.all_groups, "uid": user.uid},
            "kind": {"group": rtype.group, "version": rtype.version, "kind": rtype.kind},
            "resource": {"group": rtype.group, "version": rtype.version, "resource": rtype.plural},
            "dryRun": dry_run,
        }
        for binding in sorted(bindings, key=lambda b: b["metadata"]["name"]):
            spec = binding.get("spec") or {}
            policy = self.store.get(API, "ValidatingAdmissionPolicy", None, spec.get("policyName", ""))
            if policy is None:
                continue
            pspec = policy.get("spec") or {}
            if not _matches(pspec.get("matchConstraints"), self.store, rtype, operation, obj, old, need_rules=True):
                continue
            if not _matches(spec.get("matchResources"), self.store, rtype, operation, obj, old, need_rules=False):
                continue
            self._enforce(policy, binding, rtype, obj, old, request, namespace_obj, warnings)

    def _enforce(self, policy: dict[str, Any], binding: dict[str, Any], rtype: ResourceType, obj: dict[str, Any],
                 old: dict[str, Any] | None, request: dict[str, Any], namespace_obj: dict[str, Any] | None,
                 warnings: list[str]) -> None:
        pspec = policy.get("spec") or {}
        name, binding_name = policy["metadata"]["name"], binding["metadata"]["name"]
        actions = (binding.get("spec") or {}).get("validationActions") or []
        fail_closed = pspec.get("failurePolicy", "Fail") == "Fail"
        env: dict[str, Any] = {"object": obj, "oldObject": old, "request": request, "params": None,
                               "namespaceObject": namespace_obj}
        variables: dict[str, Any] = {}
        env["variables"] = variables
        prefix = f"ValidatingAdmissionPolicy '{name}' with binding '{binding_name}'"

        def outcome(expression: str) -> bool | None:
            """True/False; None when skipped. Raises ApiError when an error must deny."""
            try:
                value = _evaluate(expression, env)
            except cel.CelUnsupported as exc:
                warnings.append(f"tau-sim did not evaluate {prefix}: {exc}")
                return None
            except (cel.CelError, RecursionError) as exc:
                if fail_closed:
                    self._deny(rtype, obj, f"{prefix} denied request: expression '{expression}' resulted in "
                                              f"error: {exc}", "Invalid", actions, warnings)
                return None
            if not isinstance(value, bool):
                if fail_closed:
                    self._deny(rtype, obj, f"{prefix} denied request: expression '{expression}' did not evaluate "
                                              f"to a bool", "Invalid", actions, warnings)
                return None
            return value

        for variable in pspec.get("variables") or []:
            try:
                variables[variable.get("name", "")] = _evaluate(variable.get("expression", ""), env)
            except (cel.CelError, RecursionError) as exc:
                variables[variable.get("name", "")] = exc
        for condition in pspec.get("matchConditions") or []:
            if outcome(condition.get("expression", "true")) is False:
                return
        for validation in pspec.get("validations") or []:
            expression = validation.get("expression", "")
            if outcome(expression) is not False:
                continue
            message = validation.get("message")
            if not message and validation.get("messageExpression"):
                try:
                    evaluated = _evaluate(validation["messageExpression"], env)
                    message = evaluated if isinstance(evaluated, str) else None
                except (cel.CelError, RecursionError):
                    message = None
            message = message or f"failed expression: {expression}"
            self._deny(rtype, obj, f"{prefix} denied request: {message}", validation.get("reason") or "Invalid",
                       actions, warnings)

    @staticmethod
    def _deny(rtype: ResourceType, obj: dict[str, Any], message: str, reason: str, actions: list[str],
              warnings: list[str]) -> None:
        if "Warn" in actions:
            warnings.append(message.replace(" denied request: ", ": ", 1))
        if "Deny" in actions:
            name = (obj.get("metadata") or {}).get("name", "")
            qualified = f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural
            # an Invalid denial carries the message as a cause without a field, as the API server's does:
            # kubectl prints 'The <plural> "<name>" is invalid: : <message>' from it
            causes = [{"message": message}] if reason == "Invalid" else None
            raise ApiError(_CODES.get(reason, 422), reason, f'{qualified} "{name}" is forbidden: {message}',
                           causes, name=name, group=rtype.group, kind=rtype.plural)
