"""Sandbox config, policy, command line, denial notes and probe failures (issue 19).

Nothing here needs bwrap to work: the command line is checked as data, and the probe's
failure paths run a missing binary and a real script that fails the way bwrap does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from amos.config import AmosConfig, format_validation_error, validate_config_file
from amos.errors import SandboxError
from amos.sandbox import (
    DEFAULT_HIDDEN_PATHS,
    SandboxLauncher,
    SandboxPolicy,
    bwrap_argv,
    denial_note,
    probe_sandbox,
    sandbox_policy,
)
from amos.sandbox.probe import INSTALL_HINT


def config_error(data: dict) -> str:
    with pytest.raises(ValidationError) as info:
        AmosConfig.model_validate(data)
    return str(format_validation_error(info.value, "amos.json"))


# --------------------------------------------------------------------------- config


def test_defaults_hide_the_credential_folders_expanded() -> None:
    config = AmosConfig()
    home = os.path.expanduser("~")
    assert config.sandbox.mode == "workspace-write"
    assert config.sandbox.network is False
    assert config.sandbox.writable_paths == []
    assert f"{home}/.ssh" in config.sandbox.hidden_paths
    assert f"{home}/.netrc" in config.sandbox.hidden_paths
    assert len(config.sandbox.hidden_paths) == len(DEFAULT_HIDDEN_PATHS)
    assert all(path.startswith("/") for path in config.sandbox.hidden_paths)


def test_paths_are_expanded_and_normalised() -> None:
    config = AmosConfig.model_validate(
        {"sandbox": {"writable_paths": ["~/cache/../pip/", "/opt//x/."], "hidden_paths": ["~/.x"]}}
    )
    home = os.path.expanduser("~")
    assert config.sandbox.writable_paths == [f"{home}/pip", "/opt/x"]
    assert config.sandbox.hidden_paths == [f"{home}/.x"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"sandbox": {"mode": "full"}},
         'amos.json: sandbox.mode: must be one of "read-only", "workspace-write" or '
         '"danger-full-access" (got "full")'),
        ({"sandbox": {"network": "yes"}}, "amos.json: sandbox.network: must be true or false"),
        ({"sandbox": {"writable_paths": ["relative/dir"]}},
         "amos.json: sandbox.writable_paths.0: must be an absolute path or start with ~"),
        ({"sandbox": {"writable_paths": ["/"]}},
         "amos.json: sandbox.writable_paths: must not hold / (that is danger-full-access)"),
        ({"sandbox": {"hidden_paths": [""]}}, "amos.json: sandbox.hidden_paths.0: must not be empty"),
        ({"sandbox": {"nework": True}},
         'amos.json: sandbox.nework: unknown key "nework"; accepted keys: mode, network,'),
    ],
)
def test_bad_sandbox_settings_name_the_field(data: dict, expected: str) -> None:
    assert config_error(data).startswith(expected)


def test_relative_sandbox_paths_in_a_file_are_relative_to_it(tmp_path: Path) -> None:
    path = tmp_path / "proj" / "amos.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"sandbox": {"writable_paths": [".cache"], "hidden_paths": ["keys"]}}))
    config = validate_config_file(path)
    assert config.sandbox.writable_paths == [str(tmp_path / "proj" / ".cache")]
    assert config.sandbox.hidden_paths == [str(tmp_path / "proj" / "keys")]


def test_the_policy_always_hides_amos_folders_and_agent_sockets(amos_home: Path) -> None:
    config = AmosConfig.model_validate({"sandbox": {"hidden_paths": [], "network": True}})
    env = {"XDG_RUNTIME_DIR": "/run/user/1000", "SSH_AUTH_SOCK": "/home/u/.agent.sock"}
    policy = sandbox_policy(config, mode="read-only", env=env)
    assert policy.mode == "read-only" and policy.network is True
    hidden = {str(p) for p in policy.hidden_paths}
    assert {str(amos_home / "config"), str(amos_home / "data"), "/run/user/1000",
            "/home/u/.agent.sock"} <= hidden
    assert policy.describe() == "read-only, network on"


# --------------------------------------------------------------------------- command line


def argv_for(policy: SandboxPolicy, ws: Path, tmp: Path, **kw) -> list[str]:
    blocker = tmp / "blocker"
    blocker.touch()
    return bwrap_argv("echo hi", workspace=ws, policy=policy, bwrap="/usr/bin/bwrap",
                      private_tmp=tmp / "private" if policy.mode == "workspace-write" else None,
                      blocker=blocker, **kw)


def pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_workspace_write_command_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".secrets").mkdir()
    (ws / "token.txt").write_text("x")
    policy = SandboxPolicy("workspace-write", hidden_paths=(ws / ".secrets", ws / "token.txt",
                                                            tmp_path / "missing"))
    argv = argv_for(policy, ws, tmp_path)
    assert argv[:8] == ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    assert argv[-4:] == ["--", "/bin/sh", "-c", "echo hi"]
    for flag in ("--unshare-pid", "--unshare-ipc", "--unshare-net", "--die-with-parent",
                 "--new-session"):
        assert flag in argv
    assert pairs(argv, "--cap-drop") == ["ALL"]
    assert pairs(argv, "--chdir") == [str(ws)]
    text = " ".join(argv)
    # parents first: /tmp, then the workspace, then what is hidden inside it
    assert text.index(f"--bind {tmp_path}/private /tmp") < text.index(f"--bind {ws} {ws}")
    assert text.index(f"--bind {ws} {ws}") < text.index(f"--perms 0000 --tmpfs {ws}/.secrets")
    assert f"--ro-bind {tmp_path}/blocker {ws}/token.txt" in text
    assert pairs(argv, "--remount-ro") == [f"{ws}/.secrets"]
    assert "missing" not in text


def test_read_only_and_network_command_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = argv_for(SandboxPolicy("read-only", network=True, writable_paths=(tmp_path,)), ws, tmp_path)
    assert "--unshare-net" not in argv
    assert "--bind" not in argv  # nothing writable, writable_paths ignored
    assert pairs(argv, "--tmpfs") == ["/tmp"] and pairs(argv, "--remount-ro") == ["/tmp"]
    assert pairs(argv, "--ro-bind") == ["/", str(ws)]


def test_path_entries_under_the_host_tmp_stay_runnable(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    bin_dir = tmp_path / "venv" / "bin"
    ws.mkdir()
    bin_dir.mkdir(parents=True)
    argv = argv_for(SandboxPolicy("workspace-write"), ws, tmp_path,
                    path_dirs=[str(bin_dir), "/usr/bin", "relative"])
    assert f"--ro-bind {bin_dir} {bin_dir}" in " ".join(argv)
    assert "/usr/bin" not in argv  # visible through the read-only root already


def test_an_unconfinable_workspace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="workspace is /"):
        argv_for(SandboxPolicy("workspace-write"), Path("/"), tmp_path)
    with pytest.raises(SandboxError):
        argv_for(SandboxPolicy("danger-full-access"), tmp_path, tmp_path)


def test_the_launcher_runs_bwrap_with_the_stripped_env_and_cleans_up(tmp_path: Path) -> None:
    if probe_sandbox().bwrap is None:
        pytest.skip(probe_sandbox().message)
    launcher = SandboxLauncher(SandboxPolicy("workspace-write"), temp_parent=tmp_path)
    launch = launcher.launch("true", workspace=tmp_path, env={"PATH": "/usr/bin", "A": "1"})
    assert launch is not None
    assert launch.env == {"PATH": "/usr/bin", "A": "1", "TMPDIR": "/tmp"}
    assert "--setenv" not in launch.argv and "--clearenv" not in launch.argv
    state = [p for p in tmp_path.iterdir() if p.name.startswith("amos-sandbox-")]
    assert len(state) == 1 and (state[0] / "tmp").is_dir()
    launcher.close()
    assert not state[0].exists()
    full = SandboxLauncher(SandboxPolicy("danger-full-access"))
    assert full.launch("true", workspace=tmp_path, env={}) is None


# --------------------------------------------------------------------------- denial notes


@pytest.mark.parametrize(
    ("stderr", "mode", "network", "cause"),
    [
        ("touch: cannot touch '/etc/x': Read-only file system", "workspace-write", False,
         "a write outside the workspace"),
        ("sh: cannot create f: Read-only file system", "read-only", False, "any write (read-only mode)"),
        ("curl: (6) Could not resolve host: example.com", "workspace-write", False, "network access"),
        ("OSError: [Errno 101] Network is unreachable", "workspace-write", False, "network access"),
        ("cat: /home/u/.ssh/id_rsa: Permission denied", "workspace-write", False, "a hidden path"),
        ("cat: ~/.ssh/id_rsa: Permission denied", "workspace-write", False, "a hidden path"),
    ],
)
def test_denials_get_a_note(stderr: str, mode: str, network: bool, cause: str, monkeypatch) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    note = denial_note(stderr, 1, mode=mode, network=network, hidden_paths=[Path("/home/u/.ssh")])
    assert note is not None and cause in note
    assert '"sandbox": "none"' in note and f"{mode}, network off" in note


@pytest.mark.parametrize(
    ("stderr", "code", "network"),
    [
        ("touch: Read-only file system", 0, False),  # it succeeded after all
        ("curl: (6) Could not resolve host: example.com", 6, True),  # the network was on
        ("cat: /etc/shadow: Permission denied", 1, False),  # not a hidden path
        ("error: test failed", 1, False),
    ],
)
def test_other_failures_get_no_note(stderr: str, code: int, network: bool) -> None:
    assert denial_note(stderr, code, mode="workspace-write", network=network,
                       hidden_paths=[Path("/home/u/.ssh")]) is None


# --------------------------------------------------------------------------- probe


def test_a_missing_bwrap_says_how_to_install_it() -> None:
    probe = probe_sandbox("amos-no-such-bwrap")
    assert probe.available is False and probe.bwrap is None
    assert "not installed" in probe.reason
    assert "apt-get install bubblewrap" in probe.fix == INSTALL_HINT
    assert probe.message.startswith("sandbox unavailable: bubblewrap (bwrap) is not installed; install")
    with pytest.raises(SandboxError) as info:
        probe.require()
    assert info.value.code == "unavailable"
    assert probe_sandbox("amos-no-such-bwrap") is probe  # asked once per process


def test_a_bwrap_that_cannot_create_namespaces_is_reported(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because"
                    " the kernel does not allow non-privileged user namespaces' >&2\nexit 1\n")
    fake.chmod(0o755)
    probe = probe_sandbox(str(fake))
    assert probe.available is False and probe.bwrap == str(fake)
    assert probe.reason.startswith("bwrap failed: bwrap: No permissions to creating new namespace")
    assert "user namespaces" in probe.fix
    assert "\n" not in probe.message


def test_the_real_probe_runs_the_sandbox_once() -> None:
    probe = probe_sandbox()
    if not probe.available:
        pytest.skip(probe.message)
    assert probe.bwrap is not None and os.path.isabs(probe.bwrap)
    assert probe.require() == probe.bwrap
