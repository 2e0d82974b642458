"""Issue 17 item 3: a provider key printed encoded never reaches the session, the screen or --json.

A real run with real commands (coreutils ``base64``, ``basenc``, ``od``, ``fold``)
printing a key read from a workspace file: base64 at three alignments (line-wrapped, as
``base64`` does), base64url, hex bytes, URL-encoding and 8-character pieces one per line.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from amos.evidence.redact import REDACTED, redact, redact_text
from amos.providers.common import scrub

from .support import cli, write_script

KEY = "sk-proj-ENCODED+KEY/0123456789abcdefXYZ"

COMMANDS = {
    "b64": "base64 .env",                                    # wrapped at 76 columns
    "b64_1": "printf x | cat - .env | base64",               # the key one byte further on
    "b64_2": "printf xy | cat - .env | base64 -w 0",
    "b64url": "basenc --base64url -w 0 .env",
    "hex": "od -An -tx1 .env",                               # hex bytes, space separated, wrapped
    "hexup": "od -An -tx1 .env | tr a-f A-F | tr -d ' \\n'",
    "url": f"{sys.executable} -c \"import urllib.parse;print(urllib.parse.quote(open('.env').read()))\"",
    "pieces": "fold -w 8 .env",                              # 8-character pieces, one per line
}


def _forms(secret: str) -> list[str]:
    """The encoded forms a leak check looks for (computed here, independently of amos)."""
    raw = secret.encode()
    forms = [secret, raw.hex(), raw.hex().upper(), quote(secret, safe=""), quote(secret)]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode().rstrip("=")
        core = encoded[-(-8 * shift // 6):8 * (shift + len(raw)) // 6]
        forms += [core, core.replace("+", "-").replace("/", "_")]
    return forms


def _strings(value, out: list[str]) -> list[str]:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            out.append(k)
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    return out


def _squeezed_texts(home: Path, *extra: str) -> list[str]:
    """Every string amos wrote (JSON values decoded, so escaped newlines are real), whitespace removed."""
    texts = list(extra)
    for path in home.rglob("*"):
        if not path.is_file():
            continue
        raw = path.read_text(errors="replace")
        texts.append(raw)
        for line in raw.splitlines() if path.suffix == ".jsonl" else [raw]:
            try:
                texts.extend(_strings(json.loads(line), []))
            except ValueError:
                pass
    return ["".join(t.split()) for t in texts]


@pytest.mark.skipif(not all(shutil.which(c) for c in ("base64", "basenc", "od", "fold")),
                    reason="needs coreutils base64, basenc, od and fold")
def test_a_key_printed_encoded_by_commands_is_masked_everywhere(tmp_path, amos_home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    calls = [{"id": name, "name": "run_command", "arguments": {"command": cmd}} for name, cmd in COMMANDS.items()]
    script = write_script(tmp_path, [{"tool_calls": calls}, {"text": "printed"}])
    result = cli("run", "--yes", "--script", str(script), "--workspace", str(ws), "--json", "show the key")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [c["status"] for c in doc["tool_calls"]] == ["succeeded"] * len(COMMANDS), doc["tool_calls"]
    session = json.loads(Path(doc["session_path"]).read_text())
    results = {p["call_id"]: p["content"] for m in session["messages"] for p in m["parts"]
               if p.get("part_kind") == "tool_result"}
    for name in COMMANDS:
        assert REDACTED in results[name], (name, results[name])
    forms = _forms(KEY)
    for text in _squeezed_texts(amos_home, result.stdout, result.stderr):
        for form in forms:
            assert form not in text, form


def test_every_alignment_and_encoding_is_masked_inside_longer_text():
    import re

    from amos.evidence.redact import encoded_forms

    raw = KEY.encode()
    for prefix in (b"", b"a", b"ab", b"abc"):
        for suffix in (b"", b"\n", b"zz"):
            blob = prefix + raw + suffix
            for encoded in (base64.b64encode(blob).decode(), base64.urlsafe_b64encode(blob).decode(),
                            base64.encodebytes(blob).decode()):
                out = redact_text(f"data: {encoded} end", [KEY])
                assert REDACTED in out and out.startswith("data: ") and out.endswith(" end"), (prefix, suffix)
                assert all(f not in "".join(out.split()) for f in encoded_forms(KEY))
    lower_escapes = re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(KEY, safe=""))
    for encoded in (raw.hex(), raw.hex().upper(), quote(KEY, safe=""), quote(KEY), lower_escapes):
        assert redact_text(f"[{encoded}]", [KEY]) == f"[{REDACTED}]", encoded
    assert redact({"k": [KEY[:8] + "\n" + KEY[8:]]}, [KEY]) == {"k": [REDACTED]}
    assert scrub(f"bad key {base64.b64encode(raw).decode()}", (KEY,)) == "bad key ****"


def test_below_the_minimum_nothing_is_masked_and_ordinary_text_is_untouched():
    from amos.evidence.redact import MIN_SECRET_LENGTH, encoded_forms

    short = "x" * (MIN_SECRET_LENGTH - 1)
    assert encoded_forms(short) == ()
    assert redact_text(f"{short} {base64.b64encode(short.encode()).decode()}", [short]).count(REDACTED) == 0
    prose = (Path(__file__).parents[1] / "README.md").read_text()
    assert redact_text(prose, [KEY, "hunter" + "2" * 9]) == prose
