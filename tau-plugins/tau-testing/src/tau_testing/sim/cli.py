"""``tau-sim``: run the simulated cluster by hand.

    tau-sim serve --kubeconfig ./sim.kubeconfig [--scenario objects.yaml] [--clock real] [--port 0]
    tau-sim serve --kubeconfig ./sim.kubeconfig --bare-nodes 2 --add-user researcher=aurora-researchers
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path


def _serve(args: argparse.Namespace) -> int:
    from tau_testing.sim.cluster import SimCluster

    try:
        extra_users = _users(args.add_user)
        cluster = SimCluster(kubernetes_version=args.kubernetes_version, clock=args.clock,
                             time_scale=args.time_scale, tls=args.tls,
                             preload_crds=not (args.no_crds or args.bare_nodes), crds_dir=args.crds_dir)
    except (FileNotFoundError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, groups in extra_users:
        cluster.add_user(name, groups)
    if args.bare_nodes:
        _bare_nodes(cluster, args.bare_nodes)
    job_lines = ["starting (simulated container)", "step 1 loss=0.52", "step 2 loss=0.31", "done"]
    if args.volumes_dir:
        from tau_testing.sim.volumes import HostVolumes

        HostVolumes(Path(args.volumes_dir)).install(cluster, job_lines, 1 if args.job_seconds is None
                                                    else args.job_seconds)
    elif args.job_seconds is not None:
        from tau_testing.sim.scripts import PodScript, scripts_of

        scripts_of(cluster).add(lambda pod: "job-name" in ((pod.get("metadata") or {}).get("labels") or {}),
                                PodScript(run_seconds=args.job_seconds, logs=job_lines))
    if args.controllers:
        try:
            from tau_testing.sim.controllers import install_default_controllers
        except ImportError:
            print("warning: no controllers are available in this installation; serving the API only",
                  file=sys.stderr)
        else:
            install_default_controllers(cluster)
    if args.scenario:
        try:
            cluster.load_scenario(args.scenario)
        except (OSError, ValueError) as exc:
            print(f"error: scenario {args.scenario}: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # ApiError from an invalid object
            print(f"error: scenario {args.scenario}: {exc}", file=sys.stderr)
            return 1
    cluster.port = args.port
    cluster.start()
    path = Path(args.kubeconfig)
    try:
        cluster.write_kubeconfig(path, user=args.user)
    except (OSError, KeyError) as exc:
        cluster.stop()
        print(f"error: cannot write kubeconfig {path}: {exc}", file=sys.stderr)
        return 1
    users = ", ".join(f"{u.name} ({', '.join(u.groups) or 'no groups'})" for u in cluster.users)
    print(f"tau-sim: serving Kubernetes {cluster.kubernetes_version} at {cluster.url}", file=sys.stderr)
    print(f"tau-sim: kubeconfig {path} (context {cluster.context_for(args.user)}); users: {users}", file=sys.stderr)
    print(f"tau-sim: clock {args.clock}; press Ctrl-C to stop", file=sys.stderr)
    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    cluster.stop()
    print("tau-sim: stopped", file=sys.stderr)
    return 0


def _users(specs: list[str]) -> list[tuple[str, list[str]]]:
    """``NAME`` or ``NAME=GROUP[,GROUP...]`` -> (name, groups); a bad spec is a ValueError."""
    users = []
    for spec in specs:
        name, _, groups = spec.partition("=")
        if not name or any(c.isspace() or c == ":" for c in name):
            raise ValueError(f"--add-user {spec!r}: expected NAME or NAME=GROUP[,GROUP...]")
        users.append((name, [g for g in groups.split(",") if g]))
    return users


def _bare_nodes(cluster: object, count: int) -> None:
    """A cluster with nothing but ``count`` Ready nodes: no CRDs, no Kueue objects, no extra namespaces.

    The simulator has no DaemonSet controller, so DaemonSets report zero desired pods (what a DaemonSet whose
    node affinity matches no node reports), which lets an installer's readiness wait finish.
    """
    from tau_testing.charts import DaemonSetStatus
    from tau_testing.sim.controllers.scheduler import add_node

    cluster.add_controller("daemonsets", DaemonSetStatus())  # type: ignore[attr-defined]
    for i in range(1, count + 1):
        add_node(cluster, f"node-{i}", cpu="16", memory="64Gi")


def _standin_chart(args: argparse.Namespace) -> int:
    """Build the test umbrella chart (local stand-ins for the upstream Kueue and KubeRay charts)."""
    import shutil

    from tau_testing.charts import build_test_umbrella

    helm = shutil.which("helm")
    if helm is None:
        print("error: helm is not on PATH", file=sys.stderr)
        return 1
    try:
        chart = build_test_umbrella(Path(args.output), Path(helm), upstream_crds=args.upstream_crds)
    except (OSError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(chart)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tau-sim", description="A simulated Kubernetes API server for trials "
                                     "and tests (a test double, never a real cluster).")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the simulated API until interrupted",
                           description="Serve the simulated API on 127.0.0.1 and write a kubeconfig for it.\n\n"
                           "example:\n  tau-sim serve --kubeconfig /tmp/sim.kubeconfig --scenario objects.yaml\n"
                           "  kubectl --kubeconfig /tmp/sim.kubeconfig get ns",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig (mode 0600)")
    serve.add_argument("--scenario", help="YAML file of objects to preload (multi-document or a List)")
    serve.add_argument("--clock", choices=("fake", "real"), default="real",
                       help="real: controllers run continuously (default); fake: time stands still")
    serve.add_argument("--time-scale", type=float, default=1.0, help="speed-up of scripted durations (real clock)")
    serve.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    serve.add_argument("--user", default="admin", help="the kubeconfig's current user (default: admin)")
    serve.add_argument("--kubernetes-version", default="1.30", help="version /version reports (default 1.30)")
    serve.add_argument("--no-tls", dest="tls", action="store_false",
                       help="serve plain HTTP (kubectl then sends no bearer token; kubernetes-asyncio still does)")
    serve.add_argument("--no-crds", action="store_true", help="do not preload the Kueue and KubeRay CRDs")
    serve.add_argument("--bare-nodes", type=int, default=0, metavar="N",
                       help="start as an empty cluster with N Ready nodes (16 CPU, 64Gi each) and no CRDs: what "
                            "`tau cluster install` starts from")
    serve.add_argument("--add-user", action="append", default=[], metavar="NAME[=GROUP,...]",
                       help="add a user (and its groups) to the kubeconfig; repeatable")
    serve.add_argument("--crds-dir", help="where the CRDs are (default: $TAU_CRDS_DIR or <repo>/../shared/crds)")
    serve.add_argument("--no-controllers", dest="controllers", action="store_false",
                       help="serve the API without the simulated controllers")
    serve.add_argument("--job-seconds", type=float, default=None, metavar="S",
                       help="batch Job pods run S seconds and print a few log lines (default: 1 second)")
    serve.add_argument("--volumes-dir", default=None, metavar="DIR",
                       help="back each PersistentVolumeClaim NS/CLAIM with DIR/NS/CLAIM: `tau run get` reads "
                            "there, and a batch Job pod mounting a claim at /data writes report.json into its "
                            "$OUTPUT_DIR (standing in for the code; the simulator runs none)")
    chart = sub.add_parser("standin-chart", help="build the TauGrid umbrella chart with test stand-ins",
                           description="Copy deploy/charts and replace the upstream Kueue and KubeRay charts "
                           "(not reachable here) with small local stand-ins; prints the chart directory.")
    chart.add_argument("--output", required=True, help="directory to build in")
    chart.add_argument("--upstream-crds", action="store_true",
                       help="let the stand-ins carry the upstream Kueue and KubeRay CRDs (for --bare-nodes)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "standin-chart":
        return _standin_chart(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
