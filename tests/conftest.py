"""Test-wide guards: no network, and an isolated AMOS_HOME for every test; shared fixtures."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_local(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", "", None):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self, address):
    if not _is_local(address):
        raise RuntimeError(f"test tried to reach the network: {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if not _is_local(address):
        raise RuntimeError(f"test tried to reach the network: {address!r}")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if not _is_local((host,)):
        raise RuntimeError(f"test tried to resolve a network host: {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Fail any test that tries to reach anything but loopback."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)


@pytest.fixture(autouse=True)
def amos_home(tmp_path_factory, monkeypatch):
    """Every test gets its own empty AMOS_HOME and no provider keys."""
    home = tmp_path_factory.mktemp("amos_home")
    monkeypatch.setenv("AMOS_HOME", str(home))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AMOS_LOG"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(autouse=True)
def _approval_keys_answer_at_once(monkeypatch):
    """Pilot tests press y/s/n the moment the dialog is up; people get a short delay
    (type-ahead protection, tested with the delay on in test_tui_approvals.py)."""
    monkeypatch.setattr("amos.tui.screens.approval.ANSWER_DELAY_S", 0.0)


@pytest.fixture
def visible() -> Iterator[Path]:
    """A scratch folder outside /tmp (so visible, read-only, inside the command sandbox,
    which replaces /tmp); removed afterwards."""
    base = Path("/var/tmp")
    if not base.is_dir() or not os.access(base, os.W_OK):
        pytest.skip("needs a writable /var/tmp (a folder the sandbox does not replace)")
    folder = Path(tempfile.mkdtemp(prefix="amos-test-", dir=base)).resolve()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
