"""The doom-loop text rung scores text while it streams (issue 23).

A response that repeats itself is stopped mid-stream by the ladder's ``stop`` (cause
``doom_loop``, BOUNDED_STOP, exit 6) instead of running to its output limit: through the
real CLI on the scripted provider, and on the runaway stream recorded from a real
llama-cpp-python server (tests/data/providers/llamacpp/README.md, ``runaway_1``). The
partial answer is kept, marked partial, and goes back to the model marked incomplete.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from amos.doom_guard import repeats_like_a_runaway
from amos.policy.doom_loop import DoomLoopMonitor, resolve_doom_loop_option
from amos.policy.doom_loop_config import AMOS_DOOM_LOOP_LADDER, AMOS_TEXT_OPTIONS
from amos.policy.doom_loop_stream import SCAN_EVERY_CHARS, TextStreamWatch
from tests.llamacpp_replay import LlamaCppPythonReplay
from tests.support import cli, cli_json, write_script
from tests.test_fault_doom_text import SENTENCE

RUNAWAY = "including the build time, the build process, and the build results"


def _monitor() -> DoomLoopMonitor:
    """The detector ``{"doom_loop": true}`` gives (amos's defaults: stop at 5, text stop at 4 copies,
    800-token window)."""
    return DoomLoopMonitor(resolve_doom_loop_option(
        {"ladder": AMOS_DOOM_LOOP_LADDER.to_dict(), "text": AMOS_TEXT_OPTIONS.to_dict()}))


def _words(text: str) -> list[str]:
    return [w + " " for w in text.split()]


def test_a_repeating_stream_is_stopped_after_the_fourth_copy_not_at_its_end():
    monitor = _monitor()
    watch = TextStreamWatch(monitor.preview_text_repetition, monitor.config.text.max_window_tokens)
    fed = 0
    verdict = None
    for word in _words(" ".join([SENTENCE] * 20)):
        fed += 1
        verdict = watch.feed(word)
        if verdict is not None:
            break
    assert verdict is not None and verdict.action == "stop" and verdict.detector == "text-repetition"
    assert verdict.streak == 4  # text.stop_repeats 4, below ladder.stop 5
    assert 4 * 22 <= fed < 4 * 22 + SCAN_EVERY_CHARS  # within one scan of the fourth copy
    assert monitor.get_state().get("text") is None  # previewing changed no state


REPO = Path(__file__).parents[1]
LONG_REAL_TEXTS = ("README.md", "docs/architecture.md", "config.example.json", "amos/policy/doom_loop.py",
                   "amos/tui/widgets/conversation.py", "amos/providers/openai.py", "tests/test_doom_loop.py",
                   "tests/data/providers/llamacpp/README.md")
"""Long real answers a model may stream: prose with tables and code spans, JSON, code."""


def test_weaker_rungs_never_stop_a_stream():
    monitor = _monitor()
    watch = TextStreamWatch(monitor.preview_text_repetition, monitor.config.text.max_window_tokens)
    assert all(watch.feed(w) is None for w in _words(" ".join([SENTENCE] * 3)))  # 3 copies: observe at 2 only


def test_long_real_answers_are_never_stopped_whatever_the_delta_size():
    """No false stop on long non-repetitive text (markdown with tables and fences, JSON,
    Python), scanned as a stream at three delta sizes so the scans fall at different
    token boundaries: one word, 7 characters, 3 characters."""
    for name in LONG_REAL_TEXTS:
        text = (REPO / name).read_text(encoding="utf-8")
        assert len(text) > 3_000, name
        for deltas in (_words(text), [text[i:i + 7] for i in range(0, len(text), 7)],
                       [text[i:i + 3] for i in range(0, len(text), 3)]):
            monitor = _monitor()
            watch = TextStreamWatch(monitor.preview_text_repetition, monitor.config.text.max_window_tokens)
            stopped = next((d for d in deltas if watch.feed(d) is not None), None)
            assert stopped is None, (name, len(deltas))
            assert watch.scans > len(text) // 200, name  # it did scan throughout


def test_the_text_stop_only_ever_comes_earlier_than_the_ladders():
    """``text.stop_repeats`` lowers *stop* for copies within one response; ``ladder.stop``
    false still means never stop, a lower ``ladder.stop`` wins, null follows the ladder,
    and identical turns (``text-streak``) keep ``ladder.stop``."""
    four = " ".join([SENTENCE] * 4)

    def verdict(doom: dict, text: str = four):
        return DoomLoopMonitor(resolve_doom_loop_option(doom)).preview_text_repetition(text)

    amos = {"ladder": AMOS_DOOM_LOOP_LADDER.to_dict(), "text": AMOS_TEXT_OPTIONS.to_dict()}
    assert verdict(amos).action == "stop"
    assert verdict({**amos, "ladder": {**amos["ladder"], "stop": False}}).action == "observe"
    assert verdict({**amos, "text": {**amos["text"], "stop_repeats": None}}).action == "observe"  # ladder's 5
    later = {**amos, "text": {**amos["text"], "stop_repeats": 6}}
    assert (verdict(later).action, verdict(later, " ".join([SENTENCE] * 5)).action) == ("observe", "stop")
    reference = {"text": {**AMOS_TEXT_OPTIONS.to_dict(), "stop_repeats": None}}  # the reference ladder: stop 6
    assert verdict(reference).action == "observe"
    assert verdict({"text": {**AMOS_TEXT_OPTIONS.to_dict(), "stop_repeats": 4}}).action == "stop"
    monitor = _monitor()
    streak = [monitor.record_assistant_text("Done. The tests pass now.") for _ in range(5)]
    assert [v.action if v else None for v in streak] == [None, "observe", "observe", "observe", "stop"]


def test_a_half_streamed_word_never_hides_a_repetition():
    """The scan ends at the last whitespace of the delta: "… the tests. I wi" is not scanned."""
    seen: list[str] = []
    watch = TextStreamWatch(lambda text: seen.append(text), 800, scan_every_chars=1)
    watch.feed("one two thr")
    watch.feed("ee four")
    watch.feed("five")  # no whitespace: no scan
    assert seen == ["one two", "one two three"]


def test_work_per_delta_is_bounded_by_the_window_not_by_the_response():
    lengths: list[int] = []
    watch = TextStreamWatch(lambda text: lengths.append(len(text)), 10)  # 640 characters of tail
    words = [f"w{n} " for n in range(200_000)]  # about 1.4 MB, no repetition
    started = time.perf_counter()
    for word in words:
        watch.feed(word)
    elapsed = time.perf_counter() - started
    assert max(lengths) <= 2 * 640 and watch.scans <= len("".join(words)) // SCAN_EVERY_CHARS + 1
    assert elapsed < 5  # a few microseconds per delta whatever the response length
    one = TextStreamWatch(lambda text: lengths.append(len(text)), 10)
    one.feed("x " * 1_000_000)  # one huge delta: still one bounded scan
    assert one.scans == 1 and lengths[-1] <= 640


def test_the_real_cli_stops_a_looping_answer_mid_stream_and_keeps_it_partial(tmp_path):
    cfg = tmp_path / "doom.json"
    cfg.write_text(json.dumps({"doom_loop": True}))
    text = " ".join([SENTENCE] * 20)
    script = write_script(tmp_path, [
        {"text": text},
        {"expect": {"any_message_contains": "[amos host: this reply was cut off (amos stopped it because it kept "
                                            "repeating itself); it is incomplete]"},
         "text": "Sorry, here is a short answer."},
    ])
    code, doc = cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(tmp_path), "go")
    stop = doc["stop"]
    assert (code, stop["verdict"], stop["cause"], stop["reason"]) == (6, "BOUNDED_STOP", "doom_loop", "doom_loop")
    assert stop["stop_condition"]["doom_loop"]["detector"] == "text-repetition"
    assert SENTENCE in doc["output_text"] and len(doc["output_text"]) < len(text) // 3  # stopped early
    assert doc["usage"]["model_calls"] == 1 and doc["usage"]["estimated"] is True
    session = json.loads(cli("sessions", "show", doc["session_id"], "--json").stdout)
    last = session["messages"][-1]
    assert last["role"] == "assistant" and last["partial"] == "doom_loop"
    assert "partial" not in session["messages"][0]  # whole messages keep the session shape
    # the next prompt is a fresh user turn: the stop is cleared and the model sees the cut-off answer marked
    code, doc = cli_json("run", "--config", str(cfg), "--session", doc["session_id"], "--workspace", str(tmp_path),
                         "try again")
    assert (code, doc["stop"]["verdict"]) == (0, "ANSWERED"), doc["stop"]


def test_the_recorded_runaway_stream_is_stopped_mid_stream_by_the_defaults(tmp_path):
    """``runaway_1``: 256 tokens from llama-cpp-python, ending ``length``. Its loop is a
    39-token paragraph copied 4 times by token 214, and the copy cut by the output limit
    ("… the build results" without its full stop) hides it from an end-of-turn score at
    ``ladder.stop`` 5 (README: ``text_streak 1``, no stop). ``{"doom_loop": true}`` alone
    (``text.stop_repeats`` 4) stops it while it streams."""
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = tmp_path / "amos.json"
    cfg.write_text(json.dumps({"doom_loop": True,
                               "providers": {"openai-compatible": {"max_retries": 0, "max_tokens": 256}}}))
    with LlamaCppPythonReplay() as server:
        server.serve("runaway_1")
        recorded = server.recording("runaway_1").body.decode()
        result = cli("run", "--config", str(cfg), "--model", "openai-compatible:smollm2", "--base-url",
                     f"{server.url}/v1", "--workspace", str(ws), "--json", "Tell me about the build log.")
    out = json.loads(result.stdout)
    assert (result.exit_code, out["stop"]["verdict"], out["stop"]["cause"]) == (6, "BOUNDED_STOP", "doom_loop")
    assert out["stop"]["stop_condition"]["doom_loop"]["streak"] == 4
    whole = _streamed_text(recorded)
    assert whole.count(RUNAWAY) == 10 and '"finish_reason": "length"' in recorded
    assert whole.startswith(out["output_text"]) and out["output_text"].count(RUNAWAY) == 8  # cut at 4 copies
    assert len(out["output_text"]) < len(whole)  # stopped before the output limit ended it
    assert "stopped mid-stream" in result.stderr
    assert out["usage"]["model_calls"] == 1 and out["usage"]["estimated"] is True
    assert server.requests[0].json["max_tokens"] == 256


def test_the_recorded_runaway_ran_to_its_limit_with_the_text_stop_at_the_ladders(tmp_path):
    """The same stream with ``text.stop_repeats`` null (the ladder's ``stop`` 5, as before
    issue 23's decision) runs to the server's output limit: why the default is 4."""
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = tmp_path / "amos.json"
    cfg.write_text(json.dumps({"doom_loop": {"text": {"stop_repeats": None}},
                               "providers": {"openai-compatible": {"max_retries": 0, "max_tokens": 256}}}))
    with LlamaCppPythonReplay() as server:
        server.serve("runaway_1")
        code, out = cli_json("run", "--config", str(cfg), "--model", "openai-compatible:smollm2", "--base-url",
                             f"{server.url}/v1", "--workspace", str(ws), "Tell me about the build log.")
    assert (code, out["stop"]["verdict"], out["stop"]["cause"]) == (6, "BOUNDED_STOP", "output_limit")


LONG_LOOP = "including the build command, the build process, and the build results"


def test_a_long_recorded_runaway_is_stopped_at_its_fourth_copy_not_its_1024th_token(tmp_path):
    """``runaway_long_1``: the same prompt and server with ``max_tokens`` 1024; the model
    writes one 39-token paragraph over and over for all 1,024 tokens (20 paragraphs, 40 copies of the
    clause). Off, it runs to the limit; ``{"doom_loop": true}`` stops it at the fourth
    copy (chunk 221); with the text stop at the ladder's 5 it would have gone on to chunk 268."""
    ws = tmp_path / "ws"
    ws.mkdir()
    outs = {}
    for name, doom in (("off", None), ("default", True), ("ladder", {"text": {"stop_repeats": None}})):
        cfg = tmp_path / f"{name}.json"
        cfg.write_text(json.dumps({"doom_loop": doom,
                                   "providers": {"openai-compatible": {"max_retries": 0, "max_tokens": 1024}}}))
        with LlamaCppPythonReplay() as server:
            server.serve("runaway_long_1")
            whole = _streamed_text(server.recording("runaway_long_1").body.decode())
            outs[name] = cli_json("run", "--config", str(cfg), "--model", "openai-compatible:smollm2", "--base-url",
                                  f"{server.url}/v1", "--workspace", str(ws), "Tell me about the build log.")
    assert whole.count(LONG_LOOP) == 40
    code, off = outs["off"]
    assert (code, off["stop"]["cause"], off["output_text"]) == (6, "output_limit", whole)
    for name, streak in (("default", 4), ("ladder", 5)):
        code, out = outs[name]
        assert (code, out["stop"]["cause"], out["stop"]["stop_condition"]["doom_loop"]["streak"]) == (
            6, "doom_loop", streak), name
        assert whole.startswith(out["output_text"]) and out["output_text"].count(LONG_LOOP) == 2 * streak, name
    assert len(outs["default"][1]["output_text"]) < len(whole) // 4


def _streamed_text(sse: str) -> str:
    pieces = []
    for line in sse.splitlines():
        if line.startswith("data: {"):
            delta = json.loads(line[6:])["choices"][0]["delta"]
            pieces.append(delta.get("content") or "")
    return "".join(pieces)


def test_the_runaway_hint_judges_finished_text_as_the_stream_would():
    looping = "Intro sentence here. " + " ".join([SENTENCE] * 6)
    assert repeats_like_a_runaway(looping)
    assert not repeats_like_a_runaway(" ".join(f"word{n}" for n in range(2000)))
    assert not repeats_like_a_runaway(" ".join([SENTENCE] * 3)), "three copies are below text.stop_repeats 4"
    assert not repeats_like_a_runaway("")


def test_an_output_limit_without_repetition_gets_no_doom_loop_hint(tmp_path):
    script = write_script(tmp_path, [{"text": " ".join(f"word{n}" for n in range(300)), "finish_reason": "length"}])
    result = cli("run", "--script", str(script), "--workspace", str(tmp_path), "--output-format", "stream-json", "go")
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert result.exit_code == 6 and events[-1]["stop"]["cause"] == "output_limit"
    assert not [e for e in events if e["type"] == "notice" and "doom_loop" in e["text"]]
    looping = write_script(tmp_path, [{"text": " ".join([SENTENCE] * 8), "finish_reason": "length"}], name="loop.json")
    result = cli("run", "--script", str(looping), "--workspace", str(tmp_path), "--output-format", "stream-json", "go")
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert [e for e in events if e["type"] == "notice" and "doom_loop" in e["text"]], "a repeating one gets it"
