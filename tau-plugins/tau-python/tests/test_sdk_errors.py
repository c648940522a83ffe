"""Every documented SDK error, and the hostile inputs the issue lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tau
from tau import TauSDKError

PIP = ["numpy"]


def _fn(ctx: Any) -> None:
    return None


def test_train_requires_a_name() -> None:
    with pytest.raises(TauSDKError, match=r"^tau-py: @tau\.train requires name=\.\.\. or config\['name'\]$"):
        tau.train(runtime_pip=PIP)(_fn)
    assert tau.train(config={"name": "from-config"}, runtime_pip=PIP)(_fn).name == "from-config"


def test_workers_must_be_positive() -> None:
    with pytest.raises(TauSDKError, match=r"^tau-py: workers must be >= 1$"):
        tau.train("t", workers=0, runtime_pip=PIP)


def test_train_refuses_the_eval_lane() -> None:
    with pytest.raises(TauSDKError, match=r'cannot use lane="eval"; use @tau\.eval for eval workloads\.'):
        tau.train("t", lane="eval", runtime_pip=PIP)


def test_entrypoint_extras_require_an_entrypoint() -> None:
    for kw in ({"entrypoint_args": [1]}, {"entrypoint_kwargs": {"a": 1}}, {"extra_scripts": ["x.py"]}):
        with pytest.raises(TauSDKError, match=r"entrypoint_\* and extra_scripts require entrypoint=\.\.\."):
            tau.train("t", runtime_pip=PIP, **kw)


@pytest.mark.parametrize("key", ["schema_version", "name", "compute", "eval", "entrypoint"])
def test_extra_manifest_cannot_override_reserved_keys(key: str) -> None:
    with pytest.raises(TauSDKError, match=r"extra_manifest cannot override reserved keys " + key):
        tau.train("t", runtime_pip=PIP, extra_manifest={key: {"x": 1}})(_fn)


def test_extra_manifest_deep_merges_other_keys() -> None:
    handle = tau.train("t", runtime_pip=PIP, extra_manifest={"runtime": {"image": "img:1"},
                                                            "research": {"experiment": "e"}})(_fn)
    doc = handle.manifest()
    assert doc["runtime"] == {"pip": PIP, "image": "img:1"} and doc["research"] == {"experiment": "e"}


def test_missing_runtime_pip_is_reported_at_manifest_time() -> None:
    handle = tau.train("t")(_fn)
    with pytest.raises(TauSDKError, match=r"^tau-py: 't' has no runtime\.pip .*tau ships no default pip list\.$"):
        handle.manifest()


def test_eval_needs_cpu_workers_and_gpus() -> None:
    with pytest.raises(TauSDKError, match=r"@tau\.eval cpu_workers must be >= 1.*\(use @tau\.train instead\)"):
        tau.eval("e", cpu_workers=0, runtime_pip=PIP)
    with pytest.raises(TauSDKError, match=r"@tau\.eval gpus must be >= 1"):
        tau.eval("e", gpus=0, runtime_pip=PIP)
    with pytest.raises(TauSDKError, match=r"@tau\.eval requires name="):
        tau.eval(runtime_pip=PIP)


def test_eval_submit_requires_an_absolute_upstream_checkpoint(repo: Path) -> None:
    handle = tau.eval("e", runtime_pip=PIP)(_fn)
    for bad in (None, "relative/ckpt"):
        with pytest.raises(TauSDKError, match=r"\.submit\(\) requires upstream_checkpoint="):
            handle.submit(dry_run="client", upstream_checkpoint=bad)


def test_non_json_kwarg_is_refused() -> None:
    with pytest.raises(TauSDKError, match=r"^tau-py: entrypoint_kwargs must be JSON-serializable"):
        tau.train("t", runtime_pip=PIP, entrypoint="/opt/app/x.py:main", entrypoint_kwargs={"when": object()})
    with pytest.raises(TauSDKError, match=r"entrypoint_kwargs must be JSON-serializable"):
        tau.train("t", runtime_pip=PIP, entrypoint="/opt/app/x.py:main", entrypoint_kwargs={"x": float("nan")})
    with pytest.raises(TauSDKError, match=r"extra_manifest must be JSON-serializable"):
        tau.train("t", runtime_pip=PIP, extra_manifest={"research": {"x": {1, 2}}})(_fn)


def test_submit_refuses_inside_a_cluster_job(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    handle = tau.train("t", runtime_pip=PIP)(_fn)
    monkeypatch.setenv("TAU_CLUSTER_JOB", "1")
    with pytest.raises(TauSDKError, match=r"refusing to \.submit\(\) from inside what looks like a "
                                          r"cluster-submitted job \(TAU_CLUSTER_JOB is set\)"):
        handle.submit(dry_run="client")


def test_local_data_dir_does_not_mean_a_cluster_job(repo: Path) -> None:
    """TAU_DATA_DIR is the local backend's data-directory override: submit still works with it set."""
    (repo / "wf.py").write_text("def main(ctx):\n    return 1\n")
    handle = tau.train("t", runtime_pip=PIP, entrypoint="wf.py:main", queue="q", namespace="ns")
    outcome = handle.submit(dry_run="client", capture=True)
    assert outcome.exit_code == 0 and "kind: RayJob" in outcome.stdout


def test_entrypoint_staging_rules(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.py"
    outside.write_text("def main(ctx):\n    pass\n")
    with pytest.raises(TauSDKError, match=r"entrypoint .* is outside the repository"):
        tau.train("t", runtime_pip=PIP, entrypoint=f"{outside}:main")
    with pytest.raises(TauSDKError, match=r"entrypoint .* is outside the repository"):
        tau.train("t", runtime_pip=PIP, entrypoint="../elsewhere.py:main")
    with pytest.raises(FileNotFoundError, match=r"entrypoint 'missing\.py' does not exist"):
        tau.train("t", runtime_pip=PIP, entrypoint="missing.py:main")
    in_pod = tau.train("t", runtime_pip=PIP, entrypoint="/opt/image/train.py")  # exists only in the image
    assert in_pod.manifest()["entrypoint"]["script"] == "/opt/image/train.py"
    assert in_pod.manifest()["entrypoint"]["function"] == "main"


def test_env_values_must_be_strings_or_secrets() -> None:
    with pytest.raises(TauSDKError, match=r"env\['N'\] must be a string"):
        tau.train("t", runtime_pip=PIP, env={"N": 3})(_fn)  # type: ignore[dict-item]


def test_secret_from_env_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAU_TEST_UNSET_SECRET", raising=False)
    handle = tau.train("t", runtime_pip=PIP, env={"TOKEN": tau.secret_from_env("TAU_TEST_UNSET_SECRET")})(_fn)
    with pytest.raises(TauSDKError, match=r"secret_from_env\('TAU_TEST_UNSET_SECRET'\): the variable is not set"):
        handle.secret_values()
    assert "redacted" in repr(tau.secret("hunter2")) and "hunter2" not in repr(tau.secret("hunter2"))


def test_serve_errors() -> None:
    with pytest.raises(TauSDKError, match=r"at most one checkpoint source"):
        tau.serve("s", "p", checkpoint_ref="a", from_model="b")
    with pytest.raises(TauSDKError, match=r"kind must be one of rayservice, deployment"):
        tau.serve("s", "p", kind="statefulset")
    with pytest.raises(TauSDKError, match=r"runtime_pip applies to kind='rayservice' only"):
        tau.serve("s", "p", kind="deployment", runtime_pip=["x"])
    with pytest.raises(TauSDKError, match=r"requires name= and profile="):
        tau.serve("s", "")
    with pytest.raises(TauSDKError, match=r"use tau\.secret_ref"):
        tau.serve("s", "p", env={"T": tau.secret("x")}).deploy_args()


def test_helpers(repo: Path) -> None:
    assert tau.pvc_mount("cache", "model-cache", "/models") == {"name": "cache", "mountPath": "/models",
                                                                "pvc": "model-cache", "readOnly": True}
    with pytest.raises(TauSDKError, match=r"must be absolute"):
        tau.pvc_mount("cache", "c", "models")
    assert tau.dataset_file_reference("squad", "v2/train.jsonl") == "/data/datasets/squad/v2/train.jsonl"
    for bad in (("squad", "../x"), ("..", "a"), ("squad", "/etc/passwd")):
        with pytest.raises(TauSDKError, match=r"must stay inside the dataset"):
            tau.dataset_file_reference(*bad)
    (repo / "rows.jsonl").write_text('{"a": 1}\n\n{"b": 2}\n[1]\n')
    with pytest.raises(TauSDKError, match=r"rows\.jsonl:4: expected a JSON object"):
        tau.read_jsonl_objects(repo / "rows.jsonl")
    (repo / "cfg.yaml").write_text("name: from-file\nlr: 0.1\n")
    assert tau.load_config(repo / "cfg.yaml") == {"name": "from-file", "lr": 0.1}
    assert tau.train(config=tau.load_config(repo / "cfg.yaml"), runtime_pip=PIP)(_fn).name == "from-file"
    with pytest.raises(TauSDKError, match=r"config values must be JSON-serializable"):
        tau.config(x=object())
    (repo / "tau_user_module.py").write_text("import tau\n\n@tau.train('m', runtime_pip=['x'])\n"
                                             "def main(ctx, n=1):\n    return n * 2\n")
    assert tau.call_staged_function("main", None, 4, path=repo / "tau_user_module.py") == 8
    with pytest.raises(TauSDKError, match=r"has no function 'nope'"):
        tau.call_staged_function("nope", path=repo / "tau_user_module.py")
