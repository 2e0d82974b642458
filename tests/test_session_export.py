"""``amos sessions export``: readable Markdown and the full JSON of a saved session."""

from __future__ import annotations

import json
import os
import stat

from markdown_it import MarkdownIt

from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from amos.policy.stop import StopReceipt
from amos.session_export import MAX_ARG_CHARS, export_json, export_markdown
from amos.sessions import ExecutionRecord, HeldCall, HostSettings, PendingApproval, Session

from .support import cli, cli_json, write_script

PROMPTS = ["write the notes file", "read it back and run the check", "finish with a report"]
ANSWERS = [
    "Wrote **notes.txt** with two lines.",
    "The notes say hello; the check exited 3.",
    "Now `report.txt` really exists.",
]


def _three_runs(tmp_path) -> str:
    """A saved session of three runs through the real CLI; returns its id."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [
        {"text": "I'll write the file.",
         "tool_calls": [{"id": "w1", "name": "write_file",
                         "arguments": {"path": "notes.txt", "content": "hello\nworld\n"}}]},
        {"text": ANSWERS[0]},
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}},
                        {"id": "x1", "name": "run_command", "arguments": {"command": "echo checking; exit 3"}}]},
        {"text": ANSWERS[1]},
        {"text": "All done."},
        {"expect": {"last_message_role": "user"},
         "tool_calls": [{"id": "w2", "name": "write_file", "arguments": {"path": "report.txt", "content": "ok\n"}}]},
        {"text": ANSWERS[2]},
    ])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), PROMPTS[0])
    assert code == 0, doc
    sid = doc["session_id"]
    code, doc = cli_json("run", "--yes", "--session", sid, PROMPTS[1])
    assert code == 0, doc
    cfg = tmp_path / "policy.json"
    cfg.write_text(json.dumps({"loop_policy": {"completion": {"files": ["report.txt"]}}}))
    code, doc = cli_json("run", "--yes", "--config", str(cfg), "--session", sid, PROMPTS[2])
    assert code == 0 and doc["stop"]["verdict"] == "VERIFIED_COMPLETE", doc
    return sid


def test_markdown_export_shows_prompts_answers_tool_calls_feedback_and_receipt(tmp_path):
    sid = _three_runs(tmp_path)
    result = cli("sessions", "export", sid, "--format", "md")
    assert result.exit_code == 0, result.stderr
    md = result.stdout
    assert md.startswith("# amos session: write the notes file\n")
    assert f"**Session:** `{sid}`" in md and f"`{tmp_path / 'ws'}`" in md and "**Usage:**" in md

    # every prompt and every answer, verbatim and in order
    positions = []
    for prompt, answer in zip(PROMPTS, ANSWERS, strict=True):
        positions += [md.index(f"\n{prompt}\n"), md.index(f"\n{answer}\n")]
    assert positions == sorted(positions)
    assert md.count("## You") == 3

    # each tool call with its arguments and the summary of its result
    assert "#### Tool call `write_file` · `w1`" in md
    assert '{"path": "notes.txt", "content": "hello\\nworld\\n"}' in md
    assert "created notes.txt" in md
    assert "#### Tool call `read_file` · `r1`" in md and "notes.txt (lines 1-2 of 2)\nhello\nworld" in md
    assert "#### Tool call `run_command` · `x1`" in md and '{"command": "echo checking; exit 3"}' in md
    assert "**Result:** `succeeded` · exit code `3`" in md and "checking" in md
    assert "#### Tool call `write_file` · `w2`" in md and '"report.txt"' in md
    # a call is followed by its own result, before the next call
    assert md.index("`r1`") < md.index("notes.txt (lines 1-2") < md.index("`x1`") < md.index("exit code `3`")

    # host feedback is a quoted host note, placed before the recovery it caused
    assert "> **amos host:** [amos host feedback" in md
    assert md.index("All done.") < md.index("> **amos host:**") < md.index("`w2`")

    # the stop receipt of the latest run
    receipt = md[md.index("## Stop receipt"):]
    assert "✔ VERIFIED_COMPLETE (answer/completed)" in receipt
    for item in ("**Verdict:** ✔ VERIFIED_COMPLETE", "**Cause:** `answer`", "**Reason:** `completed`",
                 "**Steps:** 3", "**Tool calls:** 1", "**Recovery attempts:** 1", "**Completion check:** complete"):
        assert item in receipt, item
    assert "input + " in receipt and "output tokens" in receipt
    assert "## Pending approvals" not in md

    # deterministic: the same session exports the same text
    assert cli("sessions", "export", sid).stdout == md


def test_json_export_round_trips(tmp_path):
    from amos.sessions import Session as SessionModel

    sid = _three_runs(tmp_path)
    result = cli("sessions", "export", sid, "--format", "json")
    assert result.exit_code == 0, result.stderr
    loaded = SessionModel.model_validate_json(result.stdout)
    shown = SessionModel.model_validate_json(cli("sessions", "show", sid, "--json").stdout)
    assert loaded == shown and loaded.id == sid
    assert loaded.model_dump_json(indent=2) == result.stdout.rstrip("\n")
    assert [m.text for m in loaded.messages if m.kind == "prompt"] == PROMPTS


def test_bad_format_and_unknown_session_are_one_clean_line(tmp_path):
    sid = _three_runs(tmp_path)
    bad = cli("sessions", "export", sid, "--format", "html")
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.strip().count("\n") == 0
    assert "'html'" in bad.stderr and "md" in bad.stderr and "json" in bad.stderr
    missing = cli("sessions", "export", "no-such-session")
    assert missing.exit_code == 2 and "no session" in missing.stderr
    assert "Traceback" not in missing.stderr and missing.stdout == ""


def test_output_file_is_written_privately_and_never_overwritten_without_force(tmp_path):
    sid = _three_runs(tmp_path)
    target = tmp_path / "out" / "session.md"
    target.parent.mkdir()
    written = cli("sessions", "export", sid, "-o", str(target))
    assert written.exit_code == 0, written.stderr
    assert written.stdout == "" and str(target) in written.stderr
    assert target.read_text(encoding="utf-8") == cli("sessions", "export", sid).stdout
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert not [p for p in target.parent.iterdir() if p.name != "session.md"]

    before = target.read_text(encoding="utf-8")
    refused = cli("sessions", "export", sid, "--format", "json", "--output", str(target))
    assert refused.exit_code == 2 and "already exists" in refused.stderr and "--force" in refused.stderr
    assert target.read_text(encoding="utf-8") == before

    forced = cli("sessions", "export", sid, "--format", "json", "--output", str(target), "--force")
    assert forced.exit_code == 0, forced.stderr
    assert Session.model_validate_json(target.read_text(encoding="utf-8")).id == sid

    folder = cli("sessions", "export", sid, "-o", str(tmp_path), "--force")
    assert folder.exit_code == 2 and "folder" in folder.stderr


def test_waiting_session_lists_its_pending_approvals(tmp_path):
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
    ])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "write a")
    assert code == 5, doc
    md = cli("sessions", "export", doc["session_id"]).stdout
    assert "**Verdict:** ⏸ WAITING_UNROUTED" in md and "**Cause:** `approval_required`" in md
    pending = md[md.index("## Pending approvals"):]
    assert "`w1` `write_file` — needs a decision" in pending and '"a.txt"' in pending
    assert f"amos resume {doc['session_id']} --approve CALL_ID" in pending
    # the held call has no result yet, and says why
    assert "**Result:** none yet — needs a decision" in md


# --- unit tests on hand-built sessions ------------------------------------------------------------

FENCED = "before\n```python\nprint('x')\n```\nand a longer run: ````` inside\nafter"


def _session() -> Session:
    long_content = "y" * 10_000
    return Session(
        id="20261130-101500-ab12cd", name="demo", title="backticks", created_at="2026-11-30T10:15:00.000+00:00",
        updated_at="2026-11-30T10:20:00.000+00:00",
        host=HostSettings(model="scripted:/s.json", workspace="/w"),
        usage=Usage(input_tokens=100, output_tokens=20, model_calls=2),
        messages=[
            Message.user("show me"),
            Message(role="assistant", kind="turn", parts=(
                TextPart(text="Here:\n```sh\nunclosed block"),
                ToolCallPart(call_id="c1", tool_name="read_file", arguments={"path": "a.md"}),
                ToolCallPart(call_id="c2", tool_name="write_file",
                             arguments={"path": "big.txt", "content": long_content}),
            )),
            Message.tool_result(ToolResultPart(call_id="c1", tool_name="read_file", content=FENCED,
                                               evidence_id="ev-123", evidence={"sha256": "abc"})),
            Message.tool_result(ToolResultPart(call_id="c2", tool_name="write_file", is_error=True,
                                               status="failed", content="disk full\x1b[31m red")),
            Message.user("[amos host feedback] the check said no\nsecond line", kind="feedback"),
            Message(role="assistant", kind="turn", parts=(TextPart(text="ok"),)),
        ],
    )


def _fences(md: str) -> list[tuple[str, str]]:
    return [(t.info, t.content) for t in MarkdownIt("commonmark").parse(md) if t.type == "fence"]


def test_fences_are_longer_than_any_backtick_run_inside():
    md = export_markdown(_session())
    fences = _fences(md)
    assert ("text", FENCED + "\n") in fences  # the whole result is one block, nothing escaped
    assert "``````text\n" + FENCED + "\n``````" in md
    # the assistant's unclosed block is closed after its turn: later sections stay Markdown
    assert ("sh", "unclosed block\n") in fences
    tokens = MarkdownIt("commonmark").parse(md)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "Tool call `read_file` · `c1`" in headings and "Stop receipt" in headings


def test_long_arguments_are_cut_with_their_full_length():
    md = export_markdown(_session())
    args = next(content for info, content in _fences(md) if info == "json" and "big.txt" in content)
    shown = json.loads(args)
    assert shown["content"] == "y" * MAX_ARG_CHARS + "…" and shown["path"] == "big.txt"
    assert f"`$.content` cut to {MAX_ARG_CHARS} of 10000 characters" in md
    assert "y" * (MAX_ARG_CHARS + 1) not in md


def test_results_feedback_and_header_details():
    md = export_markdown(_session())
    assert "**Result:** `succeeded` · evidence `ev-123` (`abc`)" in md
    assert "**Result:** `failed`" in md and "disk full\\x1b[31m red" in md and "\x1b" not in md
    assert "> **amos host:** [amos host feedback] the check said no\n> second line" in md
    assert "- **Name:** demo" in md and "- **Model:** `scripted:/s.json`" in md
    assert "## Stop receipt\n\n*(no run has finished in this session)*" in md
    assert export_markdown(_session()) == md


def test_every_receipt_given_is_rendered_once_latest_last():
    session = _session()

    def receipt(execution: str, verdict: str, started: str) -> StopReceipt:
        return StopReceipt(verdict=verdict, cause="answer", reason="answer_returned", detail=f"run {execution}",
                           execution_id=execution, steps=1, started_at=started, ended_at=started)

    session.last_stop = receipt("e3", "ANSWERED", "2026-11-30T10:19:00")
    md = export_markdown(session, receipts=[receipt("e2", "FALSE_COMPLETE", "2026-11-30T10:18:00"),
                                            receipt("e1", "ANSWERED", "2026-11-30T10:17:00"),
                                            receipt("e3", "ANSWERED", "2026-11-30T10:19:00")])
    assert md.count("## Stop receipt") == 3
    assert md.index("`e1`") < md.index("`e2`") < md.index("## Stop receipt — latest run") < md.index("`e3`")
    assert "**Verdict:** ✘ FALSE_COMPLETE" in md


def test_pending_section_and_raw_arguments():
    session = _session()
    bad = ToolCallPart(call_id="c9", tool_name="run_command", raw_arguments='{"command": "ls", ')
    session.messages.append(Message(role="assistant", kind="turn", parts=(bad,)))
    session.pending = PendingApproval(
        execution=ExecutionRecord(execution_id="ex-1", started_at="2026-11-30T10:19:00"),
        held=[HeldCall(call=bad, needs_approval=True, decision="deny", reason="no")],
        owner="ops@example.com", deadline="2026-12-01T10:19:00", created_at="2026-11-30T10:19:30")
    md = export_markdown(session)
    assert "The arguments were not valid JSON" in md and ("text", '{"command": "ls", \n') in _fences(md)
    pending = md[md.index("## Pending approvals"):]
    assert "owner ops@example.com" in pending and "decide by 2026-12-01T10:19:00" in pending
    assert "`c9` `run_command` — denied: no" in pending
    assert "`20261130-101500-ab12cd:ex-1:c9`" in pending


def test_export_json_is_exactly_loadable():
    session = _session()
    text = export_json(session)
    assert Session.model_validate_json(text) == session
    assert json.loads(text)["messages"][2]["parts"][0]["content"] == FENCED
