"""``portal serve``'s Kusto, run-history, Stellar-tuning and ``--policy`` flags: parsed, validated, typed, passed on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from taugrid_portal.portal.cli import build_config, serve

KUSTO = "https://mycluster.westeurope.kusto.windows.net"


def parse(*args: str) -> tuple:
    ctx = serve.make_context("serve", list(args))
    return build_config(dict(ctx.params))


def test_every_reference_flag_reaches_the_typed_config(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{}\n")
    policy = tmp_path / "policy.yaml"
    policy.write_text("lanes: [batch, interactive]\n")
    config, _ = parse("--no-kubernetes", "--cluster", "west", "--kusto-endpoint", KUSTO, "--kusto-database", "Tel",
                      "--kusto-cost-database", "Costs", "--kusto-ingestion", "remote-write",
                      "--kusto-query-command", "kq", "--kusto-query-arg", "--db={database}",
                      "--kusto-query-arg", "{query}", "--kusto-metrics-file", str(rows),
                      "--allowed-project", "a", "--allowed-project", "b", "--featured-project", "a",
                      "--discovery-since", "30d", "--max-discovery-since", "1000h", "--target-since", "1.5d",
                      "--kusto-target-points", "500", "--max-runs", "50", "--max-metric-rows", "10",
                      "--request-timeout", "1m30s", "--run-history-enabled", "--run-history-table", "Hist",
                      "--run-history-limit", "20", "--policy", str(policy), "--default-target", "exp",
                      "--metric", "loss")
    k = config.kusto
    assert (k.endpoint, k.database, k.cost_database, k.ingestion) == (KUSTO, "Tel", "Costs", "remote-write")
    assert k.query_command == "kq" and k.query_args == ("--db={database}", "{query}") and k.metrics_file == rows
    assert k.allowed_projects == ("a", "b") and k.featured_projects == ("a",)
    assert k.discovery_since_seconds == 30 * 86400 and k.max_discovery_since_seconds == 1000 * 3600
    assert k.target_since_seconds == 1.5 * 86400 and k.request_timeout_seconds == 90
    assert (k.target_points, k.max_runs, k.max_metric_rows) == (500, 50, 10)
    h = config.run_history
    assert (h.enabled, h.table, h.limit) == (True, "Hist", 20)
    assert config.policy is not None and config.policy.path == policy and len(config.policy.sha256) == 64
    assert (config.default_target, config.metric) == ("exp", "loss")
    defaults, _ = parse("--no-kubernetes")
    assert defaults.kusto.cost_database == "CostTracking" and defaults.run_history.table == "TauExpRunLifecycle"
    assert defaults.run_history.limit == 200 and defaults.kusto.discovery_since_seconds == 90 * 86400


@pytest.mark.parametrize(("args", "message"), [
    (["--run-history-enabled"], "--run-history-enabled needs --kusto-endpoint or --kusto-query-command"),
    (["--run-history-enabled", "--kusto-query-command", "kq"], "needs --cluster"),
    (["--kusto-endpoint", "http://k.example"], "must be an https:// cluster URL"),
    (["--kusto-endpoint", "https://u:p@k.example"], "must be an https:// cluster URL"),
    (["--kusto-cost-database", "Cost; drop"], "is not a Kusto database or table name"),
    (["--run-history-table", "1x"], "is not a Kusto database or table name"),
    (["--run-history-limit", "0"], "must be at least 1"),
    (["--kusto-target-points", "20000"], "at most 12000"),
    (["--discovery-since", "soon"], "is not a duration"),
    (["--request-timeout", "0s"], "must be longer than zero"),
    (["--discovery-since", "400d"], "is longer than --max-discovery-since"),
    (["--kusto-query-arg", "{query}"], "--kusto-query-arg needs --kusto-query-command"),
    (["--kusto-query-command", "kq", "--kusto-query-arg", "{token}"], "unknown placeholder {token}"),
    (["--kusto-metrics-file", "/nonexistent/rows.jsonl"], "no such file"),
    (["--kusto-ingestion", "stream"], "Invalid value for '--kusto-ingestion'"),
    (["--policy", "/nonexistent/policy.yaml"], "--policy /nonexistent/policy.yaml: no such file"),
    (["--kusto-workspace", "a", "--workspace", "b"], "conflicts with --workspace"),
])
def test_bad_flags_are_refused_in_one_line(capsys, args: list[str], message: str) -> None:
    from tau_core.cli import run
    from taugrid_portal.cli import cli

    code = run(cli, ["portal", "serve", "--no-kubernetes", *args], prog_name="taugrid-portal")
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


def test_a_policy_that_is_not_a_mapping_is_refused(tmp_path: Path, capsys) -> None:
    from tau_core.cli import run
    from taugrid_portal.cli import cli

    for text, message in (("- a\n- b\n", "expected a mapping"), ("a: [b\n", "is not valid YAML or JSON")):
        (tmp_path / "p.yaml").write_text(text)
        code = run(cli, ["portal", "serve", "--no-kubernetes", "--policy", str(tmp_path / "p.yaml")],
                   prog_name="taugrid-portal")
        err = capsys.readouterr().err
        assert code == 2 and message in err, err


def test_deprecated_aliases_are_accepted_with_a_warning(capsys) -> None:
    config, _ = parse("--no-kubernetes", "--kusto-workspace", "aurora", "--kusto-project", "p", "--kusto-since", "7d")
    err = capsys.readouterr().err
    assert config.workspace == "aurora"
    assert "--kusto-workspace is deprecated" in err and "--kusto-project is deprecated" in err
    assert "--kusto-since is deprecated" in err


def test_served_kusto_boards_degrade_when_kusto_fails(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    entry = "from taugrid_portal.cli import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", entry, "portal", "serve", "--no-kubernetes",
                             "--addr", f"127.0.0.1:{port}", "--kusto-endpoint", KUSTO, "--cluster", "west",
                             "--run-history-enabled", "--kusto-cost-database", "Costs"],
                            stderr=subprocess.PIPE, text=True, env={**os.environ})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/healthz", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("the Portal did not start") from None
                time.sleep(0.1)
        for board in ("cluster", "cost", "nodeutil"):  # Kusto configured but not answering (no sign-in): 502
            r = httpx.get(f"{base}/api/portal/{board}")
            assert r.status_code == 502 and "board failed; see the Portal log" in r.json()["error"], r.text
        r = httpx.get(f"{base}/api/portal/cost", params={"window": "soon"})
        assert r.status_code == 400 and "window 'soon' is not a duration" in r.json()["error"]
        overview = httpx.get(base + "/api/portal/overview").json()
        assert overview["cards"]["costUnavailable"] == "cost board failed; see the Portal log"
        assert "cost" not in overview["cards"] and "health" not in overview["cards"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    err = proc.stderr.read()
    assert f"boards read Kusto at {KUSTO} (Metrics, cost in Costs)" in err
    assert "portal: cost board failed: " in err
    assert f"serving taugrid-portal portal at {base}/portal" in err and "no authentication" not in err


def test_binding_beyond_loopback_warns_that_the_portal_has_no_authentication() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    entry = "from taugrid_portal.cli import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", entry, "portal", "serve", "--no-kubernetes",
                             "--addr", f"0.0.0.0:{port}"], stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the start-up lines come before the server accepts anything
            lines.append(line)
            if line.startswith("serving "):
                break
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json() == {"status": "ok"}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    err = "".join(lines)
    assert "warning: listening on 0.0.0.0: the Portal has no authentication of its own" in err, err
    assert "Traceback" not in err
