"""Server-side apply (``application/apply-patch+yaml``), simplified.

Each apply manager owns the fields of its last applied configuration, recorded as a ``FieldsV1`` set in
``metadata.managedFields`` (operation ``Apply``). Applying merges the configuration into the live object
(strategic-merge rules for built-in kinds, JSON-merge rules with atomic lists for custom resources), removes the
fields the manager applied before but no longer does (unless another applier owns them), and answers 409 when
another applier owns a field the configuration sets to a different value (``force=true`` takes it over).
Simplification: updates that are not applies (PUT, other PATCH types) record no field ownership.
"""

from __future__ import annotations

import json
from typing import Any

from tau_testing.sim.errors import ApiError
from tau_testing.sim.patch import MERGE_KEYS, merge_patch, strategic_merge_patch

Path = tuple[str, ...]
_SKIP_TOP = {"apiVersion", "kind", "status"}
_SKIP_META = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
              "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}


def _merge_key(field: str, items: list[Any], custom: bool) -> str | None:
    if custom:
        return None
    if field == "ports":
        for item in items:
            if isinstance(item, dict):
                return "containerPort" if "containerPort" in item else "port"
        return None
    return MERGE_KEYS.get(field)


def field_set(config: dict[str, Any], custom: bool, status: bool = False) -> dict[str, Any]:
    """The FieldsV1 trie of an applied configuration."""

    def walk(value: Any, field: str = "") -> dict[str, Any]:
        node: dict[str, Any] = {}
        if isinstance(value, dict):
            for key, sub in value.items():
                node[f"f:{key}"] = walk(sub, key)
        elif isinstance(value, list):
            key_name = _merge_key(field, value, custom)
            if key_name is not None:
                for item in value:
                    if isinstance(item, dict) and key_name in item:
                        child = walk(item, "")
                        child["."] = {}
                        node["k:" + json.dumps({key_name: item[key_name]}, separators=(",", ":"))] = child
        return node

    trie: dict[str, Any] = {}
    for key, value in config.items():
        if key == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in _SKIP_META}
            if meta:
                trie["f:metadata"] = walk(meta)
        elif (key == "status") == status and key not in _SKIP_TOP - {"status"}:
            trie[f"f:{key}"] = walk(value, key)
    return trie


def leaves(trie: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, sub in trie.items():
        path = (*prefix, key)
        if key == "." or not sub:
            out.add(path)
        else:
            out |= leaves(sub, path)
    return out


def _step(value: Any, element: str) -> Any:
    if element.startswith("f:"):
        return value.get(element[2:]) if isinstance(value, dict) else None
    if element.startswith("k:") and isinstance(value, list):
        wanted = json.loads(element[2:])
        for item in value:
            if isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items()):
                return item
    return None


def value_at(obj: Any, path: Path) -> Any:
    current = obj
    for element in path:
        if element == ".":
            return current
        current = _step(current, element)
        if current is None:
            return None
    return current


def remove_path(obj: dict[str, Any], path: Path) -> None:
    if path and path[-1] == ".":
        path = path[:-1]
    if not path:
        return
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        item = _step(parent, last)
        if item is not None:
            parent.remove(item)


def _path_text(path: Path) -> str:
    parts = []
    for element in path:
        if element.startswith("f:"):
            parts.append("." + element[2:])
        elif element.startswith("k:"):
            parts.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(element[2:]).items()) + "]")
    return "".join(parts)


def apply(current: dict[str, Any] | None, config: dict[str, Any], manager: str, *, custom: bool, force: bool,
          now: str, status: bool = False) -> dict[str, Any]:
    """The object after ``manager`` applies ``config`` to ``current`` (None: the object does not exist yet)."""
    trie = field_set(config, custom, status)
    mine = leaves(trie)
    entries = list(((current or {}).get("metadata") or {}).get("managedFields") or [])
    subresource = "status" if status else ""
    others = [e for e in entries if e.get("operation") == "Apply" and
              (e.get("manager"), e.get("subresource", "")) != (manager, subresource)]
    previous = next((e for e in entries if e.get("operation") == "Apply" and e.get("manager") == manager and
                     e.get("subresource", "") == subresource), None)
    if current is None:
        result = dict(config)
    else:
        conflicts: list[tuple[str, Path]] = []
        for entry in others:
            owned = leaves(entry.get("fieldsV1") or {})
            for path in sorted(mine & owned):
                if path[-1] == ".":
                    continue
                if value_at(current, path) != value_at(config, path):
                    conflicts.append((entry.get("manager", ""), path))
        if conflicts and not force:
            causes = [{"reason": "FieldManagerConflict", "message": f'conflict with "{who}"',
                       "field": _path_text(path)} for who, path in conflicts]
            lines = "\n".join(f'- {c["message"]}: {c["field"]}' for c in causes)
            raise ApiError(409, "Conflict", f"Apply failed with {len(conflicts)} conflict"
                           f"{'s' if len(conflicts) != 1 else ''}: {lines}", causes)
        if conflicts:
            taken = {path for _, path in conflicts}
            for entry in others:
                kept = leaves(entry.get("fieldsV1") or {}) - taken
                entry["fieldsV1"] = _trie(kept)
        result = json.loads(json.dumps(current))
        if previous is not None:
            owned_by_others: set[Path] = set()
            for entry in others:
                owned_by_others |= leaves(entry.get("fieldsV1") or {})
            for path in sorted(leaves(previous.get("fieldsV1") or {}) - mine - owned_by_others, reverse=True):
                remove_path(result, path)
        body = {k: v for k, v in config.items() if k not in ("apiVersion", "kind")}
        if custom:
            result = _merge_atomic_lists(result, body)
        else:
            result = strategic_merge_patch(result, body)
    if previous is not None and previous.get("fieldsV1") == trie:
        now = previous.get("time", now)  # an unchanged field set keeps its time, so a no-op apply stays a no-op
    entries = [*others, *(e for e in entries if e.get("operation") != "Apply")]
    entries.append({"manager": manager, "operation": "Apply", "apiVersion": config.get("apiVersion", ""),
                    "time": now, "fieldsType": "FieldsV1", "fieldsV1": trie,
                    **({"subresource": "status"} if status else {})})
    result.setdefault("metadata", {})["managedFields"] = [e for e in entries if e.get("fieldsV1") or
                                                          e.get("operation") != "Apply"]
    return result


def _merge_atomic_lists(target: Any, patch: Any) -> Any:
    """Merge dicts recursively, replace lists and scalars; ``None`` in the configuration is kept as a value."""
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return json.loads(json.dumps(patch))
    out = dict(target)
    for key, value in patch.items():
        out[key] = _merge_atomic_lists(target.get(key), value) if isinstance(value, dict) else \
            json.loads(json.dumps(value))
    return out


def _trie(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in paths:
        node = root
        for element in path:
            node = node.setdefault(element, {})
    return root


__all__ = ["apply", "field_set", "leaves", "merge_patch"]
