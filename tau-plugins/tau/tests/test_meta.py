"""The meta-package pulls in every root distribution, and each one registers its root."""

from importlib.metadata import distribution, requires

from packaging.requirements import Requirement


def _root_dists() -> list[str]:
    reqs = [Requirement(r) for r in requires("tau") or []]
    return [r.name for r in reqs if r.marker is None and r.name != "tau-core"]


def test_meta_package_depends_on_core_and_roots():
    names = {Requirement(r).name for r in requires("tau") or []}
    assert {"tau-core", "tau-version", "tau-run", "tau-logs", "tau-workspace"} <= names


def test_every_root_distribution_is_installed_and_registers_its_root(tau_cli):
    result = tau_cli("version", "-o", "json")
    assert result.exit_code == 0, result
    import json

    doc = json.loads(result.stdout)
    by_dist = {p["distribution"]: p for p in doc["plugins"]}
    for dist in _root_dists():
        distribution(dist)  # raises when missing
        assert dist in by_dist, f"{dist} is a dependency of tau but registers no plugin"
        assert by_dist[dist]["status"] == "loaded"
        assert by_dist[dist]["roots"], f"{dist} registers no command root"
