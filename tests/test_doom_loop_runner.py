"""Doom-loop detection wired into the real runner (issue 9 "What it must show")."""

from __future__ import annotations

import json

from amos.events import Notice

from .support import cli_json, collect, finished, make_runner, write_script


def _config(tmp_path, doom) -> str:
    path = tmp_path / "doom.json"
    path.write_text(json.dumps({"doom_loop": doom}))
    return str(path)


def test_same_command_every_turn_runs_twice_blocks_then_stops(tmp_path):
    (tmp_path / "count.sh").write_text("echo run >> runs.txt\n")
    turn = {"tool_calls": [{"name": "run_command", "arguments": {"command": "sh count.sh"}}]}
    script = write_script(tmp_path, [turn], on_exhausted="repeat_last")
    code, doc = cli_json("run", "--yes", "--config", _config(tmp_path, True), "--script", str(script),
                         "--workspace", str(tmp_path), "loop forever")
    assert code == 6, doc
    stop = doc["stop"]
    assert (stop["verdict"], stop["cause"], stop["reason"]) == ("BOUNDED_STOP", "doom_loop", "doom_loop")
    assert (tmp_path / "runs.txt").read_text().count("run") == 2  # rounds 1 and 2 only
    statuses = [c["status"] for c in doc["tool_calls"]]
    assert statuses == ["succeeded", "succeeded", "blocked", "blocked", "blocked"]  # stop at 5 (issue 17 item 15)
    assert stop["steps"] == 5  # halted before the 6th model request
    assert doc["loop"]["doom_loop"]["last_verdict"]["action"] == "stop"


def test_fan_out_trips_as_one_unit_and_state_survives_a_resume(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    pair = {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}},
                           {"name": "read_file", "arguments": {"path": "b.txt"}}]}
    script = write_script(tmp_path, [pair, pair, {"text": "pause"}, pair, {"text": "done"}])
    cfg = _config(tmp_path, {"ladder": {"observe": 2, "block": 3, "stop": 6}})
    code, first = cli_json("run", "--config", cfg, "--script", str(script), "--workspace", str(tmp_path), "read")
    assert code == 0 and [c["status"] for c in first["tool_calls"]] == ["succeeded"] * 4
    saved = json.loads(open(first["session_path"]).read())["doom_loop"]
    assert saved["detector"]["tools"]["read_file"]["streak"] == 2
    assert len(saved["detector"]["tools"]["read_file"]["round_fingerprints"]) == 2
    # a new process continues the streak: the third identical fan-out is blocked as a unit
    code, second = cli_json("run", "--session", first["session_id"], "again")
    assert code == 0
    assert [c["status"] for c in second["tool_calls"]] == ["blocked", "blocked"]


def test_superset_round_resets_the_round_streak(tmp_path):
    for name in "abc":
        (tmp_path / f"{name}.txt").write_text(name)
    pair = [{"name": "read_file", "arguments": {"path": "a.txt"}}, {"name": "read_file", "arguments": {"path": "b.txt"}}]
    triple = [*pair, {"name": "read_file", "arguments": {"path": "c.txt"}}]
    script = write_script(tmp_path, [{"tool_calls": pair}, {"tool_calls": pair}, {"tool_calls": triple},
                                     {"text": "done"}])
    cfg = _config(tmp_path, {"ladder": {"observe": False, "block": 9, "stop": 10}})
    code, doc = cli_json("run", "--config", cfg, "--script", str(script), "--workspace", str(tmp_path), "read")
    assert code == 0
    state = json.loads(open(doc["session_path"]).read())["doom_loop"]["detector"]["tools"]["read_file"]
    assert state["streak"] == 1 and len(state["round_fingerprints"]) == 3


def test_steer_message_reaches_the_model_before_the_next_request(tmp_path):
    call = {"tool_calls": [{"name": "list_dir", "arguments": {}}]}
    script = write_script(tmp_path, [
        call, call,
        {"expect": {"any_message_contains": "doom-loop steer"}, "text": "changing approach"},
    ])
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"doom_loop": {"ladder": {"observe": False, "steer": 2, "block": 5, "stop": 8}}}))
    runner, _ = make_runner(script, tmp_path, config_path=cfg)
    try:
        events = collect(runner, "list")
    finally:
        runner.close()
    assert finished(events).receipt.verdict == "ANSWERED"
    assert any(isinstance(e, Notice) and "steer" in e.text for e in events)


def test_one_response_repeating_a_sentence_trips_the_ladder(tmp_path):
    sentence = "I will now check the file again. "
    script = write_script(tmp_path, [{"text": sentence * 8}])
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"doom_loop": True}))
    runner, _ = make_runner(script, tmp_path, config_path=cfg)
    try:
        events = collect(runner, "go")
    finally:
        runner.close()
    done = finished(events)
    assert (done.receipt.verdict, done.receipt.cause) == ("BOUNDED_STOP", "doom_loop")
    assert done.loop.doom_loop["last_verdict"]["detector"] == "text-repetition"


def test_without_doom_loop_config_nothing_changes(tmp_path):
    turn = {"tool_calls": [{"name": "list_dir", "arguments": {}}]}
    script = write_script(tmp_path, [turn] * 7 + [{"text": "ok"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "x")
    assert code == 0 and all(c["status"] == "succeeded" for c in doc["tool_calls"])
    assert doc["loop"]["doom_loop"] is None


def test_stop_verdict_and_steer_survive_the_session_blob_and_a_new_turn_clears_stop():
    from amos.doom_guard import DoomLoopGuard

    guard = DoomLoopGuard.from_config({"ladder": {"observe": False, "steer": 1, "stop": 2}}, None)
    guard.declare(1, [("t", {"x": 1})])
    guard.score_call("t", {"x": 1}, {"x": 1}, 1)
    guard.declare(2, [("t", {"x": 1})])
    verdict, _ = guard.score_call("t", {"x": 1}, {"x": 1}, 2)
    assert verdict.action == "stop" and guard.pending_steer
    blob = json.loads(json.dumps(guard.state()))
    again = DoomLoopGuard.from_config({"ladder": {"observe": False, "steer": 1, "stop": 2}}, blob)
    assert again.stop_verdict is not None and again.pending_steer == guard.pending_steer
    again.new_user_turn()
    assert again.stop_verdict is None
    broken = DoomLoopGuard.from_config(True, {"detector": "garbage", "stop_verdict": 3, "pending_steer": "x"})
    assert broken.stop_verdict is None and broken.pending_steer == []


def test_escalate_runs_the_next_turn_on_the_escalation_model_once(tmp_path):
    esc = write_script(tmp_path, [{"text": "escalated model: try a different approach"}], name="esc.json")
    turn = {"tool_calls": [{"name": "list_dir", "arguments": {}}]}
    script = write_script(tmp_path, [turn, turn, turn, {"text": "main model again"}])
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"doom_loop": {
        "ladder": {"observe": False, "escalate": 2, "block": False, "stop": 9},
        "escalation": {"model": f"scripted:{esc}", "max_escalations": 1}}}))
    code, doc = cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(tmp_path), "x")
    assert code == 0 and doc["output_text"] == "escalated model: try a different approach"
    assert doc["stop"]["steps"] == 3
    saved = json.loads(open(doc["session_path"]).read())["doom_loop"]
    assert saved["detector"]["escalations_used"] == 1 and saved["escalate_next"] is False
    # budget spent: the next loop does not escalate again, the main script answers
    code, again = cli_json("run", "--session", doc["session_id"], "go on")
    assert code == 0 and again["output_text"] == "main model again"


def test_hostile_doom_loop_settings_and_state(tmp_path):
    from .support import cli

    script = write_script(tmp_path, [{"text": "hi"}], on_exhausted="repeat_last")
    for doom, path in (({"text": {"max_window_tokens": 200000}}, "doom_loop.text.max_window_tokens"),
                       ({"ladder": {"stop": 10**30}}, "doom_loop.ladder.stop"),
                       ({"ladder": {"escalate": 2}, "escalation": {"model": f"scripted:{tmp_path}/missing.json"}},
                        "doom_loop.escalation.model")):
        result = cli("run", "--config", _config(tmp_path, doom), "--script", str(script), "--workspace",
                     str(tmp_path), "x")
        assert result.exit_code == 2 and path in result.stderr, (doom, result.stderr)
    # a session whose doom_loop section is garbage still resumes, with a warning
    cfg = _config(tmp_path, {"ladder": {"observe": 5, "block": 3, "stop": False}})
    code, doc = cli_json("run", "--config", cfg, "--script", str(script), "--workspace", str(tmp_path), "x")
    data = json.loads(open(doc["session_path"]).read())
    data["doom_loop"] = "garbage"
    open(doc["session_path"], "w").write(json.dumps(data))
    runner, _ = make_runner(script, tmp_path, session=doc["session_id"], config_path=tmp_path / "doom.json")
    try:
        events = collect(runner, "again")
    finally:
        runner.close()
    texts = [e.text for e in events if isinstance(e, Notice)]
    assert finished(events).receipt.verdict == "ANSWERED"
    assert any("not an object" in t for t in texts)
    assert any("observe" in t and "block" in t for t in texts)  # the dead-rung warning is shown


def test_call_ids_stay_unique_when_two_models_reuse_them(tmp_path):
    esc = write_script(tmp_path, [{"tool_calls": [{"name": "list_dir", "arguments": {"depth": 2}}]}],
                       name="esc.json")
    turn = {"tool_calls": [{"name": "list_dir", "arguments": {}}]}
    script = write_script(tmp_path, [turn, turn, {"text": "done"}])
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"doom_loop": {"ladder": {"observe": False, "escalate": 2, "block": False, "stop": 9},
                                             "escalation": {"model": f"scripted:{esc}"}}}))
    code, doc = cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(tmp_path), "x")
    ids = [c["call_id"] for c in doc["tool_calls"]]
    assert code == 0 and len(ids) == len(set(ids)) == 3


def test_no_approval_is_asked_for_a_call_an_armed_stop_will_refuse(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    read = {"name": "read_file", "arguments": {"path": "a.txt"}}
    write = {"id": "w", "name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}
    script = write_script(tmp_path, [{"tool_calls": [read]}, {"tool_calls": [read, write]}, {"text": "never"}])
    cfg = _config(tmp_path, {"ladder": {"observe": False, "block": False, "stop": 2}})
    code, doc = cli_json("run", "--config", cfg, "--script", str(script), "--workspace", str(tmp_path), "go")
    assert code == 6 and doc["stop"]["cause"] == "doom_loop"
    assert [c["status"] for c in doc["tool_calls"]] == ["succeeded", "blocked", "blocked"]
    assert not (tmp_path / "b.txt").exists()
