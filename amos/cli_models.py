"""``amos models``: the models amos knows, which provider keys are set, what a local server serves.

A thin client of :class:`amos.engine.ModelCatalog` (issue 21). Exit 0 whenever the list
was printed — an OpenAI-compatible server that cannot be reached is one line of it —
and 2 for a bad flag or config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from amos.safe_text import printable

HELP = """List the models amos knows per provider, with context window and price, and which keys are set.

For openai-compatible, the server at the base URL (--base-url, else
providers.openai-compatible.base_url, default http://localhost:11434/v1) is asked for
its own list (GET /v1/models, 3 s at most; --offline skips it). A server that cannot be
reached is reported on one line and the exit code stays 0. Keys are shown as
set / not set, never their value. Prices are genai-prices' bundled snapshot (USD per
million tokens, input / output), never fetched.

Examples:

\b
  amos models                                     # every provider; the model in force is marked *
  amos models --json | jq '.providers[] | {provider, key}'
  amos models --base-url http://127.0.0.1:8080/v1 # what a llama.cpp server serves
  amos models -m anthropic:claude-sonnet-4-5      # that model's window and price first
  amos models --offline                           # do not ask any server
"""


def _money(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:,.2f}" if value >= 0.1 or value == 0 else f"${value:,.3f}"


def _price(row: dict[str, Any]) -> str:
    if row.get("input_usd_per_mtok") is None:
        return ""
    return f"{_money(row['input_usd_per_mtok'])} / {_money(row['output_usd_per_mtok'])}"


def _window(tokens: int | None) -> str:
    return f"{tokens:,}" if tokens else "—"


def _keys(entry: dict[str, Any]) -> str:
    if entry["key"] == "not needed":
        return "no key needed"
    return f"key {' or '.join(entry['key_variables'])}: {entry['key']}"


def _wrapped(items: list[str], width: int = 78) -> list[str]:
    """``items`` joined with `` · ``, broken into lines between items (never inside one)."""
    lines, line = [], ""
    for item in items:
        if line and len(line) + 3 + len(item) > width:
            lines.append("    " + line)
            line = ""
        line = f"{line} · {item}" if line else item
    return lines + (["    " + line] if line else [])


_SOURCE_WORDS = {"table": "amos's table", "config": "context.window_tokens", "assumed": "assumed"}
"""How the text listing says where the window in force comes from."""


def render_text(data: dict[str, Any]) -> list[str]:
    """The lines ``amos models`` prints for a :meth:`ModelsReport.to_dict` document."""
    current = data["current"]
    lines = []
    if current is None:
        lines.append("model in force: none (--model PROVIDER:MODEL, or \"model\" in the config)")
    else:
        price = _price(current)
        source = _SOURCE_WORDS.get(current["window_source"], current["window_source"])
        lines.append(f"model in force: {current['model']} (window {_window(current['window_tokens'])} tokens, "
                     f"{source}" + (f"; {price} per 1M tokens in / out" if price else "") + ")")
    chosen = current["model"] if current else None
    for entry in data["providers"]:
        lines.append("")
        head = f"{entry['provider']} · {_keys(entry)}"
        if entry["provider"] == "openai-compatible" and entry["base_url"]:
            head += f" · server {entry['base_url']}"
        lines.append(head)
        rows = list(entry["server_models"] or [])
        table = entry["models"]
        if entry["provider"] != "openai-compatible":
            rows += table
        if entry["server_error"]:
            lines.append(f"  server: {entry['server_error']} — is it running? (--base-url URL, or "
                         "providers.openai-compatible.base_url)")
        elif entry["provider"] == "openai-compatible" and entry["base_url"] and entry["server_models"] is None:
            lines.append("  server: not asked (--offline)")
        elif entry["server_models"] is not None and not entry["server_models"] and not entry["server_dropped"]:
            lines.append("  server: answered with no models")
        if entry.get("server_dropped"):
            lines.append(f"  server: {entry['server_dropped']:,} more ids not shown (past 500, or not a "
                         "one-line printable name)")
        width = max((len(r["model"]) for r in rows), default=0)
        for row in rows:
            mark = "*" if row["model"] == chosen else " "
            tail = _price(row)
            if row["source"] == "server":
                tail = {"assumed": "(server; window assumed)", "config": "(server; window from the config)"}.get(
                    row["window_source"], "(server)")
            lines.append(f" {mark}{row['model']:<{width}}  {_window(row['window_tokens']):>9}  {tail}".rstrip())
        if entry["provider"] == "openai-compatible":
            lines.append("  window table (model names a local server may use):")
            lines += _wrapped([f"{r['model'].partition(':')[2]} {_window(r['window_tokens'])}" for r in table])
    lines += ["", "scripted:PATH · a script file played offline (amos run --demo)",
              "windows: amos's table (context.window_tokens overrides it); assumed: 32,000, what a run",
              "  uses for a model the table does not know (it reads llama-server's /props when it starts)",
              "prices: USD per 1M tokens in / out, genai-prices' bundled snapshot; — not known"]
    return lines


def models_command(
    config: Annotated[Path | None, typer.Option("--config", help="Config file (overrides user and project config).")] = None,
    model: Annotated[str | None, typer.Option("-m", "--model", help="The model in force, PROVIDER:MODEL "
                                                                   "(default: the config's).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="The OpenAI-compatible server to ask "
                                                                    "(default: the config's).")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Do not ask the OpenAI-compatible server.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    from amos.engine import ModelCatalog
    from amos.errors import AmosError

    try:
        catalog, warnings = ModelCatalog.open(config, model=model, base_url=base_url)
        for warning in warnings:
            typer.echo(printable(f"amos: warning: {warning}"), err=True)
        data = catalog.report(ask_server=not offline).to_dict()
    except AmosError as exc:
        typer.echo(printable(f"amos: {exc}"), err=True)
        if json_out:  # a script parsing stdout still gets one object
            code = getattr(exc, "code", None)
            code = str(code).upper() if isinstance(code, str) and code else "USAGE_ERROR" if exc.exit_code == 2 \
                else "ERROR"
            typer.echo(json.dumps({"ok": False, "error": {"code": code, "message": str(exc)}}, ensure_ascii=False))
        raise typer.Exit(exc.exit_code) from None
    if json_out:
        typer.echo(json.dumps(data, ensure_ascii=False))
        return
    for line in render_text(data):
        typer.echo(printable(line))


models_command.__doc__ = HELP
