"""Release values: every TauGrid image pinned by digest, from the table in ``deploy/docker/images.toml``.

    python tests/tools/release_values.py record --out FILE NAME=sha256:... ...   (what `nox -s images -- --push` runs)
    python tests/tools/release_values.py write --digests FILE --out DIR          (what `nox -s release` runs)

``record`` writes the digests file: ``{"version": ..., "images": {"tau-controller": "sha256:...", ...}}``.
``write`` turns the table into ``values-release.yaml`` (for the umbrella chart: ``repository`` plus ``digest``
at each value path; the charts use a digest over a tag) and ``images.env`` (``TAU_METRICS_OFFLOAD_IMAGE=
repo@sha256:...``). Without a digests file it writes ``values-release.template.yaml`` and
``images.template.env`` instead, whose ``${digest:NAME}`` placeholders ``write --digests`` fills later: a file
that is not pinned is never named as if it were.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "deploy" / "docker" / "images.toml"
DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
PLACEHOLDER = "${digest:%s}"
VALUES, TEMPLATE = "values-release.yaml", "values-release.template.yaml"
ENV_FILE, ENV_TEMPLATE = "images.env", "images.template.env"


class ValuesError(Exception):
    pass


@dataclass(frozen=True)
class Image:
    name: str
    dockerfile: str
    repository: str  # registry/repository
    values: tuple[str, ...]
    env: tuple[str, ...]


def images(table: Path = TABLE) -> list[Image]:
    data = tomllib.loads(table.read_text())
    registry = data["registry"].rstrip("/")
    return [Image(name, entry["dockerfile"], f"{registry}/{entry['repository']}", tuple(entry.get("values", ())),
                  tuple(entry.get("env", ()))) for name, entry in data["images"].items()]


def read_digests(path: Path, wanted: list[Image]) -> dict[str, str]:
    """The digests file, checked: every image of the table present, each a ``sha256:`` digest."""
    try:
        found = json.loads(path.read_text())["images"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValuesError(f"{path}: not a digests file ({exc}); hint: `nox -s images -- --push` writes it") from exc
    problems = [f"{i.name}: missing" for i in wanted if i.name not in found]
    problems += [f"{name}: {value!r} is not sha256:<64 hex>" for name, value in found.items()
                 if not isinstance(value, str) or not DIGEST.match(value)]
    if problems:
        raise ValuesError(f"{path}: " + "; ".join(problems))
    return {i.name: found[i.name] for i in wanted}


def _nest(pairs: list[tuple[str, dict[str, str]]]) -> dict[str, object]:
    tree: dict[str, object] = {}
    for path, leaf in pairs:
        node = tree
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})  # type: ignore[assignment]
        node[last] = leaf
    return tree


def _yaml(tree: dict[str, object], indent: int = 0) -> str:
    """Block YAML of nested string maps (every scalar double-quoted, as JSON strings are valid YAML)."""
    out = []
    for key, value in tree.items():
        if isinstance(value, dict):
            out.append(f"{' ' * indent}{key}:\n{_yaml(value, indent + 2)}")
        else:
            out.append(f"{' ' * indent}{key}: {json.dumps(value)}\n")
    return "".join(out)


def render(table: list[Image], digests: dict[str, str] | None, version: str) -> tuple[str, str]:
    """(values YAML, env file) with digests, or with ``${digest:NAME}`` placeholders when ``digests`` is None."""
    def digest(image: Image) -> str:
        return digests[image.name] if digests else PLACEHOLDER % image.name

    pairs = [(path, {"repository": i.repository, "digest": digest(i)}) for i in table for path in i.values]
    state = "pinned by digest" if digests else "TEMPLATE: fill the ${digest:...} placeholders with `write --digests`"
    head = (f"# TauGrid {version} release values for the umbrella chart (helm install ... -f {VALUES}),\n"
            f"# generated from deploy/docker/images.toml by tests/tools/release_values.py: {state}.\n")
    env = "".join(f"{var}={i.repository}@{digest(i)}\n" for i in table for var in i.env)
    return head + _yaml(_nest(pairs)), env


def write(out: Path, digests_file: Path | None, version: str) -> Path:
    """Write the release values into ``out``; returns the values file written (pinned, or the template)."""
    table = images()
    digests = read_digests(digests_file, table) if digests_file else None
    values, env = render(table, digests, version)
    target = out / (VALUES if digests else TEMPLATE)
    target.write_text(values)
    (out / (ENV_FILE if digests else ENV_TEMPLATE)).write_text(env)
    return target


def record(out: Path, pairs: list[str], version: str) -> None:
    table = {i.name for i in images()}
    found: dict[str, str] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name not in table or not DIGEST.match(value):
            raise ValuesError(f"{pair!r}: expected NAME=sha256:<64 hex> with NAME one of {sorted(table)}")
        found[name] = value
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"version": version, "images": found}, indent=2, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("pairs", nargs="+", metavar="NAME=DIGEST")
    wr = sub.add_parser("write")
    wr.add_argument("--digests", type=Path)
    wr.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    version = (ROOT / "VERSION").read_text().strip()
    try:
        if args.command == "record":
            record(args.out, args.pairs, version)
            print(f"digests of {len(args.pairs)} images written to {args.out}")
        else:
            print(f"wrote {write(args.out, args.digests, version)}")
    except ValuesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
