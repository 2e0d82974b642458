"""``amos config …``: show, check, locate and trust configuration files.

A thin client of :mod:`amos.config` (STYLE.md §1): every command calls the library and
renders; an :class:`~amos.errors.AmosError` becomes one line on stderr and exit code 2,
never a traceback (spec/cli.md, "Errors"). The main CLI mounts it with
``app.add_typer(config_app, name="config")``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from amos import paths
from amos.errors import AmosError


def _cfg():
    """The config module, imported on first use (it is slow to import; --help must stay fast)."""
    import amos.config

    return amos.config

config_app = typer.Typer(
    help="Show, validate, locate and trust amos configuration files.",
    no_args_is_help=True,
)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Config file applied over the user config and a trusted ./amos.json.",
        show_default=False,
    ),
]


@contextmanager
def _command_edge() -> Iterator[None]:
    """Turn a domain error into one stderr line and exit code 2."""
    try:
        yield
    except (AmosError, OSError) as exc:
        for error in [exc, *getattr(exc, "others", [])]:  # every error of an invalid file
            message = " ".join(str(error).split())
            typer.echo(f"amos: {message}", err=True)
        raise typer.Exit(2) from None


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)


def _print_json(data: dict[str, Any]) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


@config_app.command("show")
def show(
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Print the built-in defaults instead.")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Print the merged configuration as JSON, secrets masked.

    Layers, later wins: built-in defaults, the user config file,
    ./amos.json (only when trusted), --config. Warnings (such as an
    untrusted ./amos.json) go to stderr.

    Examples:

        amos config show

        amos config show --defaults

        amos config show --config ci.json
    """
    with _command_edge():
        if defaults:
            data = _cfg().config_to_json(_cfg().default_config())
        else:
            loaded = _cfg().load_config(config_path=config)
            _warn(loaded.warnings)
            data = _cfg().config_to_json(loaded.config)
        _print_json(_cfg().mask_secrets(data))


@config_app.command("check")
def check(
    path: Annotated[
        Path | None,
        typer.Argument(help="File to validate on its own (default: the files in use).",
                       show_default=False),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Validate a config file, or every config file in use; print "ok: PATH" lines.

    An invalid file prints one line per error, each naming the file, the JSON
    path of the bad field and what is accepted, and exits 2.

    Examples:

        amos config check

        amos config check ./amos.json

        amos config check --config ci.json
    """
    with _command_edge():
        if path is not None:
            checked = _cfg().validate_config_file(path)
            _warn(_cfg().advisories(checked))
            typer.echo(f"ok: {path}")
            return
        loaded = _cfg().load_config(config_path=config)
        from amos.mcp.config import load_mcp_servers

        mcp = load_mcp_servers(loaded.config, project_dir=Path.cwd())  # merged servers complete
        _warn(loaded.warnings + _cfg().advisories(loaded.config) + mcp.warnings)
        for source in loaded.sources:
            typer.echo(f"ok: {source}")
        if not loaded.sources:
            typer.echo("ok: no config files in use (built-in defaults)")


@config_app.command("path")
def path_command(config: ConfigOption = None) -> None:
    """Print the folders and files amos uses, and which config files are in use.

    Folders derive from $AMOS_HOME when set, else the platform's user
    config and data folders; sessions.directory and evidence.directory
    move their stores.

    Examples:

        amos config path

        AMOS_HOME=/tmp/amos amos config path
    """
    with _command_edge():
        loaded = _cfg().load_config(config_path=config)
        _warn(loaded.warnings)
        user_file = loaded.user_config_path
        rows = [
            ("config dir", str(paths.config_dir())),
            ("user config", f"{user_file}{'' if user_file.exists() else ' (not created)'}"),
            ("data dir", str(paths.data_dir())),
            ("sessions dir", str(paths.sessions_dir(loaded.config))),
            ("evidence dir", str(paths.evidence_dir(loaded.config))),
            ("store", _store_line(loaded.config)),
            ("log dir", str(paths.log_dir())),
            ("commands dir", str(paths.commands_dir())),
        ]
        in_use = [str(source) for source in loaded.sources] or ["(none: built-in defaults)"]
        rows += [("config in use", source) for source in in_use]
        for label, value in rows:
            typer.echo(f"{label + ':':<15} {value}")


def _store_line(config) -> str:
    """``files`` or where the PostgreSQL store is (password masked; issue 22)."""
    if config.store.backend != "postgres":
        return "files (the sessions and evidence dirs)"
    from amos.redact import mask_url

    url = os.environ.get("AMOS_STORE_URL", "").strip() or config.store.url
    return f"postgres {mask_url(url) if url else '(no store.url or AMOS_STORE_URL)'}"


@config_app.command("trust")
def trust(
    directory: Annotated[
        Path | None,
        typer.Argument(metavar="DIR", help="Project folder (default: the current directory).",
                       show_default=False),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Accepted like every subcommand; trust is always "
                     "recorded in the user config file.", show_default=False),
    ] = None,
) -> None:
    """Trust DIR/amos.json and DIR/.mcp.json: record path and SHA-256 in the user config.

    A project's amos.json can grant tool permissions and run commands, and
    its .mcp.json starts MCP servers, so each is read only once trusted, and
    only while its content is unchanged: after editing it, trust it again.
    Each file must be valid (unknown keys in .mcp.json are allowed).

    Examples:

        amos config trust

        amos config trust ~/src/myproject
    """
    with _command_edge():
        from amos.mcp.config import mcp_json_path, trust_mcp_file

        folder = directory if directory is not None else Path.cwd()
        trusted = []
        has_mcp = mcp_json_path(folder).is_file()
        if paths.project_config_file(folder).is_file() or not has_mcp:
            trusted.append(_cfg().trust_project(folder))
        if has_mcp:
            trusted.append(trust_mcp_file(folder))
        recorded = _cfg().read_trusted_projects()
        for project in trusted:
            typer.echo(f"trusted: {project}")
            typer.echo(f"sha256:  {recorded.get(str(project), '?')}")
        typer.echo(f"recorded in: {paths.user_config_file()}")
