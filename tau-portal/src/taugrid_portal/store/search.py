"""Run and experiment search (``tau.exp.run_search.v0`` / ``tau.exp.experiment_search.v0``).

Filters that SQL can answer (project, group, state, since, tags, metric names, metric
filters, free text, target) are pushed into one query over the index; lifecycle gates are
then evaluated in Python on the candidates with their summaries.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from tau_core.errors import UsageError

from ._util import fmt_time, now_text, parse_since
from .core import ExperimentStore, RunRecord
from .lifecycle import classify, normalize_lifecycle, parse_metric_filter

RUN_SEARCH_SCHEMA = "tau.exp.run_search.v0"
EXPERIMENT_SEARCH_SCHEMA = "tau.exp.experiment_search.v0"
MAX_LIMIT = 1000


def parse_tags(values: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        if "=" not in v or not v.split("=", 1)[0].strip():
            raise UsageError(f"--tag: expected key=value, got {v!r}", hint="for example --tag dataset=imagenet")
        k, _, val = v.partition("=")
        out[k.strip()] = val.strip()
    return out


def _run_where(
    store: ExperimentStore,
    *,
    q: str | None,
    target: str | None,
    project: str | None,
    group: str | None,
    state: str | None,
    tags: dict[str, str],
    metric_names: Sequence[str],
    metric_filters: Sequence[Any],
    since: str | None,
) -> tuple[str, list[Any], list[str] | None]:
    where, params = ["1=1"], []
    target_ids: list[str] | None = None
    if target:
        target_ids = store.resolve_target(target).run_ids
    if project:
        where.append("r.project = ?")
        params.append(project)
    if group:
        where.append("r.run_group_id = ?")
        params.append(group)
    if state:
        where.append("lower(r.state) = ?")
        params.append(state.lower())
    if since:
        where.append("r.created_at >= ?")
        params.append(fmt_time(parse_since(since)))
    for k, v in tags.items():
        where.append("EXISTS (SELECT 1 FROM tags t WHERE t.scope_type = 'run' AND t.scope_id = r.run_id "
                     "AND t.key = ? AND t.value = ?)")
        params += [k, v]
    for name in metric_names:
        where.append("EXISTS (SELECT 1 FROM metric_summaries s WHERE s.run_id = r.run_id AND s.metric_name = ?)")
        params.append(name)
    for f in metric_filters:
        cond, p = f.sql()
        where.append(f"EXISTS (SELECT 1 FROM metric_summaries s WHERE s.run_id = r.run_id AND {cond})")
        params += p
    if q:
        like = f"%{q.strip().lower()}%"
        where.append(
            "(lower(r.run_id) LIKE ? OR lower(r.project) LIKE ? OR lower(r.run_group_id) LIKE ? "
            "OR lower(COALESCE(r.owner, '')) LIKE ? OR lower(COALESCE(r.result_uri, '')) LIKE ? "
            "OR lower(r.experiment_id) LIKE ? "
            "OR EXISTS (SELECT 1 FROM run_groups g WHERE g.run_group_id = r.run_group_id AND g.project = r.project "
            "AND lower(g.name) LIKE ?) "
            "OR EXISTS (SELECT 1 FROM tags t WHERE t.scope_type = 'run' AND t.scope_id = r.run_id "
            "AND (lower(t.key) LIKE ? OR lower(t.value) LIKE ?)) "
            "OR EXISTS (SELECT 1 FROM metric_summaries s WHERE s.run_id = r.run_id AND lower(s.metric_name) LIKE ?))"
        )
        params += [like] * 10
    return " AND ".join(where), params, target_ids


def search_runs(
    store: ExperimentStore,
    *,
    q: str | None = None,
    target: str | None = None,
    project: str | None = None,
    group: str | None = None,
    state: str | None = None,
    lifecycle: str | None = None,
    tags: dict[str, str] | None = None,
    metric_names: Sequence[str] = (),
    metric_filters: Sequence[str] = (),
    since: str | None = None,
    min_step: int | None = None,
    limit: int = 200,
) -> dict[str, Any]:
    if limit < 0:
        raise UsageError("limit must be non-negative")
    limit = min(limit, MAX_LIMIT)
    filters = tuple(parse_metric_filter(f) for f in metric_filters)
    life = normalize_lifecycle(lifecycle) if lifecycle else None
    store.ensure_summaries()
    where, params, target_ids = _run_where(
        store, q=q, target=target, project=project, group=group, state=state, tags=tags or {},
        metric_names=metric_names, metric_filters=filters, since=since,
    )
    rows = store.query(f"SELECT r.* FROM runs r WHERE {where} ORDER BY r.created_at DESC, r.run_id", params)
    if target_ids is not None:
        wanted = set(target_ids)
        rows = [r for r in rows if r["run_id"] in wanted]
    if life is not None:
        ids = [r["run_id"] for r in rows]
        tag_map = store.tags_for("run", ids)
        by_run: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
        for s in store.summaries(ids):
            by_run[s["run_id"]].append(s)
        rows = [
            r for r in rows
            if classify(r, tag_map[r["run_id"]], by_run[r["run_id"]], min_step=min_step, metric_filters=filters)[0]
            == life
        ]
    total = len(rows)
    page = rows[:limit]
    records = store._records(page, min_step=min_step, metric_filters=filters)
    summaries: dict[str, list[dict[str, Any]]] = {r.run_id: [] for r in records}
    for s in store.summaries([r.run_id for r in records]):
        summaries[s["run_id"]].append(s)
    runs = []
    for rec in records:
        d = rec.to_dict()
        d["metrics"] = [
            {"name": s["metric_name"], **{k: v for k, v in s.items()
                                          if k not in ("run_id", "project", "run_group_id", "metric_name")}}
            for s in summaries[rec.run_id]
        ]
        runs.append(d)
    return {
        "schema_version": RUN_SEARCH_SCHEMA, "generated_at": now_text(), "store_path": str(store.root),
        "target": target or "", "total": total, "truncated": total > len(page), "runs": runs,
        "warnings": list(store.warnings),
    }


def search_experiments(
    store: ExperimentStore,
    *,
    q: str | None = None,
    project: str | None = None,
    lifecycle: str | None = None,
    tags: dict[str, str] | None = None,
    metric_names: Sequence[str] = (),
    metric_filters: Sequence[str] = (),
    since: str | None = None,
    limit: int = 200,
) -> dict[str, Any]:
    if limit < 0:
        raise UsageError("limit must be non-negative")
    life = normalize_lifecycle(lifecycle) if lifecycle else None
    filters = tuple(parse_metric_filter(f) for f in metric_filters)
    experiments = store.experiments(project)
    all_runs = store.runs(project=project)
    by_exp: dict[str, list[RunRecord]] = {}
    for r in all_runs:
        by_exp.setdefault(r.experiment_id or r.run_group_id, []).append(r)
    sums: dict[str, dict[str, dict[str, Any]]] = {}
    if filters:
        for s in store.summaries([r.run_id for r in all_runs]):
            sums.setdefault(s["run_id"], {})[s["metric_name"]] = s
    since_text = fmt_time(parse_since(since)) if since else None
    out = []
    for e in experiments:
        runs = by_exp.get(e["experiment_id"], [])
        if tags:
            runs = [r for r in runs if all(r.tags.get(k) == v for k, v in tags.items())]
        if metric_names:
            runs = [r for r in runs if all(m in r.metric_names for m in metric_names)]
        if filters:
            runs = [r for r in runs if all(f.test(sums.get(r.run_id, {}).get(f.metric)) for f in filters)]
        if life:
            runs = [r for r in runs if r.lifecycle_state == life]
        if (tags or metric_names or filters or life) and not runs:
            continue
        latest = max((r.started_at or r.completed_at or r.created_at for r in runs), default=None)
        if since_text and (latest is None or latest < since_text):
            continue
        metric_set = sorted({m for r in runs for m in r.metric_names})
        text = " ".join([e["experiment_id"], e["name"], e.get("description") or "", e["project"],
                         *metric_set, *(f"{k}={v}" for r in runs for k, v in r.tags.items())]).lower()
        if q and q.strip().lower() not in text:
            continue
        out.append({
            **e, "runs": len(runs), "run_groups": len({r.run_group_id for r in runs}),
            "state_counts": dict(sorted(Counter(r.state for r in runs).items())),
            "lifecycle_counts": dict(sorted(Counter(r.lifecycle_state for r in runs).items())),
            "latest_run_at": latest, "metric_names": metric_set,
        })
    out.sort(key=lambda e: (e["latest_run_at"] or "", e["experiment_id"]), reverse=True)
    total = len(out)
    return {
        "schema_version": EXPERIMENT_SEARCH_SCHEMA, "generated_at": now_text(), "store_path": str(store.root),
        "total": total, "truncated": total > min(limit, MAX_LIMIT), "experiments": out[: min(limit, MAX_LIMIT)],
        "warnings": list(store.warnings),
    }
