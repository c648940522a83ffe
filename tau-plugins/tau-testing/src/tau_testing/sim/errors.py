"""API errors carrying a real Kubernetes ``Status`` body."""

from __future__ import annotations

from typing import Any

_REASON_BY_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error the simulated API server answers with: HTTP ``code`` plus a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str | None = None,
        message: str = "",
        causes: list[dict[str, Any]] | None = None,
        *,
        name: str | None = None,
        group: str | None = None,
        kind: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        self.code = code
        self.reason = reason or _REASON_BY_CODE.get(code, "Unknown")
        self.message = message or self.reason
        self.causes = causes
        self.name = name
        self.group = group
        self.kind = kind
        self.retry_after = retry_after
        super().__init__(f"{self.code} {self.reason}: {self.message}")

    def status_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        details: dict[str, Any] = {}
        if self.name is not None:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind is not None:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = list(self.causes)
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        if details:
            body["details"] = details
        return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(plural, group)} "{name}" not found',
                    name=name, group=group, kind=plural)


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{_qualified(plural, group)} "{name}" already exists',
                    name=name, group=group, kind=plural)


def conflict(plural: str, group: str, name: str, detail: str | None = None) -> ApiError:
    detail = detail or ("the object has been modified; please apply your changes to the latest version "
                        "and try again")
    return ApiError(409, "Conflict",
                    f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {detail}',
                    name=name, group=group, kind=plural)


def invalid(kind: str, group: str, name: str, causes: list[dict[str, Any]]) -> ApiError:
    qualified_kind = f"{kind}.{group}" if group else kind
    parts = [f"{c.get('field')}: {c.get('message')}" if c.get("field") else str(c.get("message"))
             for c in causes]
    if len(parts) == 1:
        text = parts[0]
    else:
        text = "[" + ", ".join(parts) + "]"
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {text}', causes,
                    name=name, group=group, kind=kind)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def field_invalid(field: str, value: Any, detail: str) -> dict[str, Any]:
    import json

    try:
        shown = json.dumps(value)
    except (TypeError, ValueError):
        shown = repr(value)
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {shown}: {detail}", "field": field}


def field_required(field: str, detail: str = "") -> dict[str, Any]:
    message = "Required value" + (f": {detail}" if detail else "")
    return {"reason": "FieldValueRequired", "message": message, "field": field}


def field_not_supported(field: str, value: Any, supported: list[Any]) -> dict[str, Any]:
    import json

    allowed = ", ".join(json.dumps(s) for s in supported)
    return {"reason": "FieldValueNotSupported",
            "message": f"Unsupported value: {json.dumps(value)}: supported values: {allowed}", "field": field}


def field_forbidden(field: str, detail: str) -> dict[str, Any]:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}
