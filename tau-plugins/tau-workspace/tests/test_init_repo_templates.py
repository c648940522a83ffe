"""`tau workspace init-repo --template external-github|dpr` and the upstream flags.

Each template's file set, the commands the targets run, the durable output every target declares, the
defaults (dpr: facebookresearch/DPR@main), the conflicts (upstream flags with the python template or --local)
and hostile values: every bad flag is a one-line usage error naming it, and nothing is written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tau_core.config import load_config

IMAGE = "ghcr.io/acme/train:1.0"
UPSTREAM_FILES = {"src/my_port/upstream.py"}


def _init(tau_cli, out: Path, *args: str):
    return tau_cli("workspace", "init-repo", "my-port", "--image", IMAGE, "--output", str(out), *args)


def _target(out: Path, name: str) -> dict:
    return YAML(typ="safe").load((out / "tau" / f"{name}.yaml").read_text())


def test_external_github_template(tau_cli, tmp_path):
    out = tmp_path / "repo"
    r = _init(tau_cli, out, "--template", "external-github", "--upstream", "https://github.com/acme/fast-lib.git",
              "--ref", "v1.2.0", "--workspace", "aurora", "--kube-context", "research")
    assert r.exit_code == 0, r.stderr
    assert (out / "src/my_port/upstream.py").is_file() and (out / "src/my_port/train.py").is_file()
    docker = (out / "images/train.Dockerfile").read_text()
    assert "ARG UPSTREAM_URL=https://github.com/acme/fast-lib.git" in docker and "ARG UPSTREAM_REF=v1.2.0" in docker
    smoke, train = _target(out, "smoke"), _target(out, "train")
    assert smoke["entrypoint"] == train["entrypoint"] == "../src/my_port/upstream.py"
    # the import name defaults to the repository name, sanitized
    assert smoke["runtime"]["env"]["UPSTREAM_COMMAND"] == "python -c 'import fast_lib; print(\"import fast_lib: ok\")'"
    assert train["runtime"]["env"]["UPSTREAM_COMMAND"] == "python -m fast_lib"
    assert (train["runtime"]["env"]["UPSTREAM_REPO"], train["runtime"]["env"]["UPSTREAM_REF"]) == \
        ("acme/fast-lib", "v1.2.0")
    readme = (out / "README.md").read_text()
    assert "[acme/fast-lib](https://github.com/acme/fast-lib) at `v1.2.0`" in readme
    for target in ("smoke", "train", "train-gpu"):
        load_config(out / "tau" / f"{target}.yaml")  # raises on any schema problem


def test_dpr_defaults_and_overrides(tau_cli, tmp_path):
    out = tmp_path / "dpr"
    assert _init(tau_cli, out, "--template", "dpr").exit_code == 0
    env = _target(out, "train")["runtime"]["env"]
    assert (env["UPSTREAM_REPO"], env["UPSTREAM_REF"]) == ("facebookresearch/DPR", "main")
    assert env["UPSTREAM_COMMAND"].startswith("python train_dense_encoder.py ")
    assert "import dpr" in _target(out, "smoke")["runtime"]["env"]["UPSTREAM_COMMAND"]
    out2 = tmp_path / "dpr2"
    r = _init(tau_cli, out2, "--template", "dpr", "--ref", "a" * 40, "--package-import", "dpr.models",
              "--smoke-command", "python -c 'import dpr.models'", "--train-command", 'echo "$OUTPUT_DIR" && exit 0')
    assert r.exit_code == 0, r.stderr
    assert "ARG UPSTREAM_REF=" + "a" * 40 in (out2 / "images/train.Dockerfile").read_text()
    assert _target(out2, "smoke")["runtime"]["env"]["UPSTREAM_COMMAND"] == "python -c 'import dpr.models'"
    assert _target(out2, "train")["runtime"]["env"]["UPSTREAM_COMMAND"] == 'echo "$OUTPUT_DIR" && exit 0'


def test_every_target_declares_durable_output(tau_cli, tmp_path):
    """The first run has somewhere durable to put results, so `tau run get` can fetch them."""
    with_ws, without = tmp_path / "ws", tmp_path / "plain"
    assert tau_cli("workspace", "init-repo", "my-port", "--image", IMAGE, "--output", str(with_ws),
                   "--workspace", "aurora", "--kube-context", "research").exit_code == 0
    assert tau_cli("workspace", "init-repo", "my-port", "--image", IMAGE, "--output", str(without)).exit_code == 0
    for root, base in ((with_ws, "/data/projects/aurora/runs"), (without, "/data/checkpoints/workflows")):
        for target in ("smoke", "train", "train-gpu"):
            doc = _target(root, target)
            assert doc["storage"] == {"data_pvc": "blob-training", "output": f"{base}/{target}"}
            assert doc["runtime"]["env"]["OUTPUT_DIR"] == f"{base}/{target}"
            assert load_config(root / "tau" / f"{target}.yaml").normalized["storage"]["output"] == f"{base}/{target}"


def test_generated_code_writes_to_output_dir(tau_cli, tmp_path):
    """The scaffold's trainer and upstream runner write their results where the target's OUTPUT_DIR says."""
    plain, port = tmp_path / "plain", tmp_path / "port"
    assert tau_cli("workspace", "init-repo", "my-port", "--image", IMAGE, "--output", str(plain)).exit_code == 0
    assert _init(tau_cli, port, "--template", "external-github", "--upstream", "acme/lib", "--ref", "main").exit_code == 0
    results = tmp_path / "results"
    env = {"OUTPUT_DIR": str(results / "train"), "STEPS": "2", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, str(plain / "src/my_port/train.py")], env=env, check=True, capture_output=True)
    assert json.loads((results / "train" / "report.json").read_text())["steps"] == 2
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    env = {"OUTPUT_DIR": str(results / "up"), "UPSTREAM_DIR": str(upstream_dir), "PATH": "/usr/bin:/bin",
           "UPSTREAM_COMMAND": 'echo hi > "$OUTPUT_DIR/hello.txt"; exit 3', "UPSTREAM_REPO": "acme/lib"}
    done = subprocess.run([sys.executable, str(port / "src/my_port/upstream.py")], env=env, capture_output=True)
    assert done.returncode == 3  # the command's exit code is the run's
    assert (results / "up" / "hello.txt").read_text() == "hi\n"
    report = json.loads((results / "up" / "report.json").read_text())
    assert (report["exit_code"], report["upstream"]) == (3, "acme/lib")


def test_upstream_output_is_reproducible(tau_cli, tmp_path):
    args = ("--template", "dpr", "--workspace", "aurora", "--kube-context", "research")
    trees = []
    for name in ("a", "b"):
        assert _init(tau_cli, tmp_path / name, *args).exit_code == 0
        trees.append({str(p.relative_to(tmp_path / name)): (p.read_bytes(), p.stat().st_mode)
                      for p in sorted((tmp_path / name).rglob("*")) if p.is_file()})
    assert trees[0] == trees[1]
    assert oct(trees[0]["scripts/train.sh"][1] & 0o777) == "0o755"


@pytest.mark.parametrize(("args", "message"), [
    (("--template", "nope"), '--template "nope" is not one of python, external-github, dpr'),
    (("--template", "external-github", "--ref", "main"), "--template external-github requires --upstream OWNER/REPO"),
    (("--template", "external-github", "--upstream", "acme/lib"), "--template external-github requires --ref REF"),
    (("--upstream", "acme/lib"), "--upstream is only used with --template external-github or dpr"),
    (("--ref", "main"), "--ref is only used with --template external-github or dpr"),
    (("--package-import", "x"), "--package-import is only used with --template external-github or dpr"),
    (("--smoke-command", "true"), "--smoke-command is only used with --template external-github or dpr"),
    (("--train-command", "true"), "--train-command is only used with --template external-github or dpr"),
    (("--template", "dpr", "--upstream", "../../etc"), '--upstream "../../etc" is not a GitHub repository'),
    (("--template", "dpr", "--upstream", "acme/.."), '--upstream "acme/.." is not a GitHub repository'),
    (("--template", "dpr", "--upstream", "acme/lib/../x"), "is not a GitHub repository"),
    (("--template", "dpr", "--upstream", "https://evil.example/acme/lib"), "is not a GitHub repository"),
    (("--template", "dpr", "--upstream", "acme/lib;rm -rf /"), "is not a GitHub repository"),
    (("--template", "dpr", "--ref", "--upload-pack=touch /tmp/x"), "is not a valid git branch, tag or commit"),
    (("--template", "dpr", "--ref", "main..evil"), '--ref "main..evil" is not a valid git branch'),
    (("--template", "dpr", "--ref", "a b"), '--ref "a b" is not a valid git branch'),
    (("--template", "dpr", "--ref", "x$(id)"), "--ref"),
    (("--template", "dpr", "--ref", "refs/heads/x.lock"), "is not a valid git branch"),
    (("--template", "dpr", "--package-import", "os; import evil"), "is not a Python import name"),
    (("--template", "dpr", "--package-import", "../dpr"), "--package-import"),
    (("--template", "dpr", "--smoke-command", "  "), "--smoke-command must not be blank"),
    (("--template", "dpr", "--train-command", "a\nb"), r'--train-command "a\nb" must be one line'),
    (("--template", "dpr", "--train-command", "x" * 3000), "--train-command"),
    (("--template", "dpr", "--package", "../escape"), '--package "../escape" is not a Python package name'),
])
def test_bad_upstream_flags_are_one_line_usage_errors(tau_cli, tmp_path, args, message):
    out = tmp_path / "repo"
    r = _init(tau_cli, out, *args)
    assert r.exit_code == 2, r
    first = r.stderr.splitlines()[0]
    assert first.startswith("error: ") and message in first, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()  # nothing written


def test_local_takes_no_upstream_template(tau_cli, tmp_path):
    for args, flag in ((("--template", "dpr"), "--template"), (("--ref", "main"), "--ref")):
        r = tau_cli("workspace", "init-repo", "demo", "--local", "--output", str(tmp_path / "x"), *args)
        assert r.exit_code == 2 and f"--local uses the python template; drop {flag}" in r.stderr
    assert not (tmp_path / "x").exists()


def test_output_symlink_escaping_the_root_is_refused(tau_cli, tmp_path):
    out, outside = tmp_path / "repo", tmp_path / "outside"
    (out / "src").mkdir(parents=True)
    outside.mkdir()
    (out / "src" / "my_port").symlink_to(outside)
    r = _init(tau_cli, out, "--template", "dpr", "--force")
    assert r.exit_code == 1 and "scaffold path" in r.stderr, r
    assert not any(outside.iterdir())
