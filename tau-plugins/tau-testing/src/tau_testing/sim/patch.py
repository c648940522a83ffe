"""JSON merge patch (RFC 7386), strategic merge patch and JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any

from tau_testing.sim.errors import ApiError

# Lists of objects in core Kubernetes types that strategic merge patch merges by a key.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "secrets": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}
# Lists of primitives that strategic merge patch merges (set union) instead of replacing.
MERGE_PRIMITIVE_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _port_key(items: list[Any]) -> str | None:
    for item in items:
        if isinstance(item, dict):
            if "containerPort" in item:
                return "containerPort"
            if "port" in item:
                return "port"
    return None


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, list):
            result[key] = _merge_list(key, current if isinstance(current, list) else None, value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(current, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(key: str, current: list[Any] | None, patch: list[Any]) -> list[Any]:
    if key in MERGE_PRIMITIVE_LISTS:
        out = list(current or [])
        for item in patch:
            if item not in out:
                out.append(copy.deepcopy(item))
        return out
    merge_key = MERGE_KEYS.get(key) or (_port_key(patch) if key == "ports" else None)
    if merge_key is None or current is None:
        cleaned = [p for p in patch if not (isinstance(p, dict) and p.get("$patch") == "delete")]
        if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in cleaned):
            return [copy.deepcopy({k: v for k, v in p.items() if k != "$patch"}) for p in cleaned
                    if not p.get("$patch")]
        return [strategic_merge_patch(None, p) if isinstance(p, dict) else copy.deepcopy(p) for p in cleaned]
    out = [copy.deepcopy(i) for i in current]
    if any(isinstance(p, dict) and p.get("$patch") == "replace" and merge_key not in p for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            out.append(copy.deepcopy(item))
            continue
        index = next((i for i, existing in enumerate(out)
                      if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
            continue
        if index is None:
            out.append(strategic_merge_patch(None, item))
        else:
            out[index] = strategic_merge_patch(out[index], item)
    return out


# JSON patch ---------------------------------------------------------------------------------------------------

def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                       f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _fail(message: str) -> ApiError:
    return ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: {message}")


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    current = doc
    for part in parts[:-1]:
        if isinstance(current, dict):
            if part not in current:
                raise _fail(f"doc is missing path: {path!r}")
            current = current[part]
        elif isinstance(current, list):
            try:
                current = current[int(part)]
            except (ValueError, IndexError) as exc:
                raise _fail(f"doc is missing path: {path!r}") from exc
        else:
            raise _fail(f"doc is missing path: {path!r}")
    return current, parts[-1]


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise _fail(f"doc is missing key: {path!r}")
        return parent[last]
    if isinstance(parent, list):
        try:
            return parent[int(last)]
        except (ValueError, IndexError) as exc:
            raise _fail(f"doc is missing path: {path!r}") from exc
    raise _fail(f"doc is missing path: {path!r}")


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-":
            parent.append(copy.deepcopy(value))
        else:
            try:
                index = int(last)
            except ValueError as exc:
                raise _fail(f"invalid array index {last!r}") from exc
            if index < 0 or index > len(parent):
                raise _fail(f"add operation index {index} out of bounds")
            parent.insert(index, copy.deepcopy(value))
    else:
        raise _fail(f"doc is missing path: {path!r}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise _fail("cannot remove the whole document")
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise _fail(f"unable to remove nonexistent key: {last}: missing value")
        del parent[last]
    elif isinstance(parent, list):
        try:
            parent.pop(int(last))
        except (ValueError, IndexError) as exc:
            raise _fail(f"remove operation index out of bounds: {path!r}") from exc
    else:
        raise _fail(f"doc is missing path: {path!r}")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _fail(f"invalid JSON patch operation: {op!r}")
        kind = op["op"]
        path = op["path"]
        if kind == "add":
            doc = _add(doc, path, op.get("value"))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            parts = _pointer(path)
            if not parts:
                doc = copy.deepcopy(op.get("value"))
            else:
                parent, last = _parent(doc, parts, path)
                if isinstance(parent, list):
                    parent[int(last)] = copy.deepcopy(op.get("value"))
                else:
                    parent[last] = copy.deepcopy(op.get("value"))
        elif kind == "move":
            value = _get(doc, op["from"])
            doc = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, _get(doc, op["from"]))
        elif kind == "test":
            try:
                actual = _get(doc, path)
            except ApiError:
                actual = None
            if actual != op.get("value"):
                raise _fail(f"testing value {path} failed: test failed")
        else:
            raise _fail(f"unexpected kind of operation: {kind!r}")
    return doc
