"""The plugin host: discovery, allow/block lists, failure isolation, duplicates, tracing."""

from __future__ import annotations

import click
import pytest

from tau_core.errors import PluginError
from tau_core.hookspecs import hookimpl
from tau_core.plugins import Host

GOOD_PLUGIN = """
from tau_core.hookspecs import hookimpl

@hookimpl
def tau_register_roots(register):
    register("{root}", "{module}_cli:cmd", help="The {root} root.")
"""
GOOD_CLI = """
import click

@click.command()
def cmd():
    "Say hello."
    click.echo("hello from {root}")
"""


def add_root(site, dist: str, root: str, module: str | None = None) -> None:
    module = module or dist.replace("-", "_")
    site.add(
        dist,
        {module: GOOD_PLUGIN.format(root=root, module=module), f"{module}_cli": GOOD_CLI.format(root=root)},
        {root: module},
    )


def test_entry_point_plugin_provides_a_root(fake_site):
    add_root(fake_site, "acme-hello", "hello")
    result = fake_site.run("hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello from hello\n"
    help_ = fake_site.run("--help")
    assert "hello" in help_.stdout and "The hello root." in help_.stdout


def test_plugin_that_raises_on_import_is_isolated(fake_site):
    add_root(fake_site, "acme-hello", "hello")
    fake_site.add("acme-broken", {"acme_broken": "raise RuntimeError('boom at import')"}, {"broken": "acme_broken"})
    result = fake_site.run("hello")
    assert result.returncode == 0
    assert result.stdout == "hello from hello\n"
    lines = [line for line in result.stderr.splitlines() if "acme-broken" in line]
    assert len(lines) == 1
    assert "RuntimeError: boom at import" in lines[0]
    assert "Traceback" not in result.stderr


def test_invoking_a_root_whose_plugin_failed_exits_1_with_hint(fake_site):
    fake_site.add("tau-broken", {"tau_broken": "import does_not_exist_anywhere"}, {"broken": "tau_broken"})
    result = fake_site.run("broken")
    assert result.returncode == 1
    assert "error: command root 'broken' is unavailable" in result.stderr
    assert "hint: reinstall tau-broken" in result.stderr
    assert "Traceback" not in result.stderr


def test_broken_entry_point_target(fake_site):
    fake_site.add("acme-ep", {}, {"ep": "module_that_is_missing:attr"})
    result = fake_site.run("--help")
    assert result.returncode == 0
    assert "plugin 'ep' from acme-ep was not loaded" in result.stderr
    assert "ModuleNotFoundError" in result.stderr


def test_root_target_that_fails_to_import_exits_1(fake_site):
    fake_site.add(
        "acme-lazy",
        {"acme_lazy": GOOD_PLUGIN.format(root="lazy", module="acme_lazy"), "acme_lazy_cli": "raise ImportError('no')"},
        {"lazy": "acme_lazy"},
    )
    assert fake_site.run("--help").returncode == 0
    result = fake_site.run("lazy")
    assert result.returncode == 1
    assert "error: root 'lazy' from acme-lazy failed to load: ImportError: no" in result.stderr
    assert "Traceback" not in result.stderr


def test_wrong_hook_signature_is_reported_and_skipped(fake_site):
    add_root(fake_site, "acme-hello", "hello")
    fake_site.add(
        "acme-wrongsig",
        {"acme_wrongsig": "from tau_core.hookspecs import hookimpl\n@hookimpl\ndef tau_register_roots(register, extra):\n    pass\n"},
        {"wrongsig": "acme_wrongsig"},
    )
    result = fake_site.run("hello")
    assert result.returncode == 0
    assert "plugin 'wrongsig' from acme-wrongsig was not loaded" in result.stderr
    assert "extra" in result.stderr


def test_unknown_hook_is_reported_and_skipped(fake_site):
    fake_site.add(
        "acme-unknown",
        {"acme_unknown": "from tau_core.hookspecs import hookimpl\n@hookimpl\ndef tau_no_such_hook():\n    pass\n"},
        {"unknown": "acme_unknown"},
    )
    result = fake_site.run("--help")
    assert result.returncode == 0
    assert "plugin 'unknown' from acme-unknown was not loaded: implements unknown hook(s) tau_no_such_hook" in result.stderr


def test_duplicate_root_names_both_distributions(fake_site):
    add_root(fake_site, "acme-one", "dup", module="acme_one")
    add_root(fake_site, "acme-two", "dup", module="acme_two")
    result = fake_site.run("--help")
    assert result.returncode == 1
    assert "command root 'dup' is registered by both" in result.stderr
    assert "acme-one" in result.stderr and "acme-two" in result.stderr


def test_allowlist_filters_before_import(fake_site):
    add_root(fake_site, "acme-hello", "hello")
    fake_site.add("acme-broken", {"acme_broken": "raise RuntimeError('must not be imported')"}, {"broken": "acme_broken"})
    result = fake_site.run("hello", env={"TAU_PLUGINS": "acme-hello"})
    assert result.returncode == 0
    assert "must not be imported" not in result.stderr
    result = fake_site.run("--help", env={"TAU_PLUGINS": ""})
    assert result.returncode == 0
    assert "Commands:" not in result.stdout
    assert "acme" not in result.stderr


def test_blocklist_filters_before_import(fake_site):
    add_root(fake_site, "acme-hello", "hello")
    fake_site.add("acme-broken", {"acme_broken": "raise RuntimeError('must not be imported')"}, {"broken": "acme_broken"})
    result = fake_site.run("hello", env={"TAU_DISABLE_PLUGINS": "broken"})
    assert result.returncode == 0
    assert result.stderr == ""
    result = fake_site.run("hello", env={"TAU_DISABLE_PLUGINS": "acme-hello"})
    assert result.returncode == 2  # unknown command now
    assert "No such command 'hello'" in result.stderr


def test_trace_hooks_prints_calls_to_stderr(fake_site):
    add_root(fake_site, "acme-hello", "hello")
    result = fake_site.run("hello", env={"TAU_TRACE_HOOKS": "1"})
    assert result.returncode == 0
    assert result.stdout == "hello from hello\n"
    assert "trace: tau_register_roots(register) -> hello" in result.stderr
    assert "trace: tau_register_roots returned" in result.stderr


def test_unexpected_exception_is_one_line_unless_debug(fake_site):
    fake_site.add(
        "acme-crash",
        {
            "acme_crash": GOOD_PLUGIN.format(root="crash", module="acme_crash"),
            "acme_crash_cli": "import click\n@click.command()\ndef cmd():\n    raise ZeroDivisionError('oops')\n",
        },
        {"crash": "acme_crash"},
    )
    result = fake_site.run("crash")
    assert result.returncode == 1
    assert "error: internal error: ZeroDivisionError: oops" in result.stderr
    assert "please report it" in result.stderr
    assert "Traceback" not in result.stderr
    debug = fake_site.run("crash", env={"TAU_DEBUG": "1"})
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr


def test_unknown_root_and_unknown_flag_are_usage_errors(fake_site):
    result = fake_site.run("no-such-root")
    assert result.returncode == 2
    assert "No such command 'no-such-root'" in result.stderr
    result = fake_site.run("--no-such-flag")
    assert result.returncode == 2
    assert "No such option" in result.stderr
    assert "Traceback" not in result.stderr


class _Roots:
    @hookimpl
    def tau_register_roots(self, register):
        register("inline", click.command(name="inline")(lambda: click.echo("inline!")), help="Inline root.")


def test_inline_plugin_through_tau_cli_fixture(tau_cli, tau_plugins):
    tau_plugins.register(_Roots(), name="inline-plugin")
    result = tau_cli("inline")
    assert result.exit_code == 0, result
    assert result.stdout == "inline!\n"


BUILTIN, CUSTOM = object(), object()


def test_registry_priority_overrides_and_equal_priority_conflicts():
    class Base:
        @hookimpl
        def tau_register_renderers(self, register):
            register("Job", BUILTIN)

    class Override:
        @hookimpl
        def tau_register_renderers(self, register):
            register("Job", CUSTOM, priority=10)

    class Clash:
        @hookimpl
        def tau_register_renderers(self, register):
            register("Job", "acme.clash:render", priority=10)

    host = Host.create(entry_points=False, extra_plugins=[("base", Base()), ("override", Override())], env={})
    entry = host.registry("renderers")["Job"]
    assert entry.load() is CUSTOM and entry.dist == "override"
    assert [e.target for e in host.registry("renderers").shadowed] == [BUILTIN]
    host.add_plugin("clash", Clash(), dist="acme-clash")
    with pytest.raises(PluginError, match="registered by both"):
        host.registry("renderers")


def test_plugin_failing_inside_register_hook_is_isolated(capsys):
    class Broken:
        @hookimpl
        def tau_register_roots(self, register):
            raise ValueError("bad plugin")

    host = Host.create(entry_points=False, extra_plugins=[("broken", Broken()), ("good", _Roots())], env={})
    assert list(host.roots()) == ["inline"]
    assert "plugin 'broken' from broken failed in tau_register_roots: ValueError: bad plugin" in capsys.readouterr().err


def test_exit_codes_from_ctx_exit_are_kept(tau_cli, tau_plugins):
    @click.command(name="code")
    @click.argument("n", type=int)
    @click.pass_context
    def code(ctx, n):
        ctx.exit(n)

    class P:
        @hookimpl
        def tau_register_roots(self, register):
            register("code", code, help="Exit with N.")

    tau_plugins.register(P(), name="exit-code")
    assert tau_cli("code", "3").exit_code == 3
    assert tau_cli("code", "0").exit_code == 0


def _unwinding_ctrl_c() -> None:
    """What Ctrl-C inside ``threading.Condition.wait`` can leave: the lock's RuntimeError in place of it."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise RuntimeError("cannot release un-acquired lock") from None


def test_an_error_raised_while_ctrl_c_unwinds_is_an_interrupt_not_an_internal_error(tau_cli, tau_plugins):
    from tau_core.errors import interrupted

    @click.command(name="wait")
    def wait():
        _unwinding_ctrl_c()

    class P:
        @hookimpl
        def tau_register_roots(self, register):
            register("wait", wait, help="Wait, then be interrupted.")

    tau_plugins.register(P(), name="interrupted")
    r = tau_cli("wait")
    assert r.exit_code == 130, r
    assert "error: interrupted" in r.stderr and "internal error" not in r.stderr
    try:
        _unwinding_ctrl_c()
    except RuntimeError as exc:
        assert interrupted(exc)  # `from None` hides the context from tracebacks, not from the chain
    assert not interrupted(RuntimeError("cannot release un-acquired lock"))
