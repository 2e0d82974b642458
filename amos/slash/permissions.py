"""``/permissions`` and ``/plan [on|off]`` (issue 19).

``/permissions`` shows the rules in force, each with where it came from (a config
file, ``--allow``/``--deny``, a grant answered ``a`` in this session), the sandbox and
what a call no rule speaks of gets. ``/plan`` turns plan mode on for the next runs
(read-only sandbox, write tools denied, the model asked for a plan); ``/plan off``
returns to the configured mode. Host API only.
"""

from __future__ import annotations

from typing import Any

from amos.errors import SlashCommandError

PERMISSIONS_USAGE = "/permissions"
PLAN_USAGE = "/plan [on | off]"


def sandbox_line(sandbox: dict[str, Any], plan: bool) -> str:
    """One line on where commands run, e.g. ``sandbox: workspace-write, network off``."""
    if sandbox.get("problem"):
        return f"sandbox: none — {sandbox['problem']}; commands ask before they run"
    if sandbox["mode"] == "danger-full-access":
        return "sandbox: danger-full-access (commands run with your full rights, after asking)"
    return (f"sandbox: {sandbox['mode']}{' (plan mode)' if plan else ''}, network "
            f"{'on' if sandbox['network'] else 'off'} — commands run confined, without asking")


def permissions_command(runner: Any, rest: str, line: str) -> Any:
    """``/permissions``: the rules in force and where each came from."""
    from amos.slash.commands import SlashResult

    if rest.strip():
        raise SlashCommandError("/permissions takes no arguments", usage=PERMISSIONS_USAGE)
    listing = runner.permissions.listing()
    tools = runner.tools_report()
    lines = [sandbox_line(listing["sandbox"], listing["plan"]), f"plan mode: {'on' if listing['plan'] else 'off'}"]
    rules = listing["rules"]
    if rules:
        width = max(len(r["rule"]) for r in rules)
        lines.append("rules (deny wins over ask over allow):")
        lines += [f"  {r['kind']:<5}  {r['rule']:<{width}}  {r['source']}" for r in rules]
    else:
        lines.append("rules: none (add permissions.allow / ask / deny in the config, or --allow / --deny)")
    lines.append("without a rule:")
    width = max((len(t["name"]) for t in tools), default=0)
    lines += [f"  {t['name']:<{width}}  {t['permission']:<5}  ({t.get('by', '')})" for t in tools]
    return SlashResult(command=line, text="\n".join(lines), result={**listing, "tools": tools})


def plan_command(runner: Any, rest: str, line: str) -> Any:
    """``/plan`` (on), ``/plan off``: plan mode for the next runs."""
    from amos.slash.commands import SlashResult

    arg = rest.strip().lower()
    if arg not in ("", "on", "off"):
        raise SlashCommandError(f"/plan takes on or off, not {rest.strip()!r}", usage=PLAN_USAGE)
    if runner.is_running:
        return SlashResult(command=line, ok=False, error={"code": "BUSY", "message": "a run is active; /plan "
                                                          "works between runs"},
                           text="a run is active; /plan works between runs")
    runner.permissions.set_plan(arg != "off")
    on = runner.permissions.plan
    listing = runner.permissions.listing()
    text = ("plan mode on: the next runs read and plan; write tools are refused and commands run read-only"
            if on else "plan mode off: back to the configured mode") + f"\n{sandbox_line(listing['sandbox'], on)}"
    return SlashResult(command=line, text=text, result={"plan": on, "sandbox": listing["sandbox"]})


__all__ = ["permissions_command", "plan_command", "sandbox_line", "PERMISSIONS_USAGE", "PLAN_USAGE"]
