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

from amos.policy.doom_loop import DoomLoopMonitor, resolve_doom_loop_option
from amos.policy.doom_loop_config import AMOS_DOOM_LOOP_LADDER, AMOS_TEXT_OPTIONS
from amos.policy.doom_loop_stream import SCAN_EVERY_CHARS, TextStreamWatch
from tests.llamacpp_replay import LlamaCppPythonReplay
from tests.support import cli, cli_json, write_script
from tests.test_fault_doom_text import SENTENCE

RUNAWAY = "including the build time, the build process, and the build results"


def _monitor() -> DoomLoopMonitor:
    """The detector ``{"doom_loop": true}`` gives (amos's defaults: stop at 5, 800-token window)."""
    return DoomLoopMonitor(resolve_doom_loop_option(
        {"ladder": AMOS_DOOM_LOOP_LADDER.to_dict(), "text": AMOS_TEXT_OPTIONS.to_dict()}))


def _words(text: str) -> list[str]:
    return [w + " " for w in text.split()]


def test_a_repeating_stream_is_stopped_after_the_fifth_copy_not_at_its_end():
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
    assert verdict.streak == 5
    assert 5 * 22 <= fed < 5 * 22 + SCAN_EVERY_CHARS  # within one scan of the fifth copy
    assert monitor.get_state().get("text") is None  # previewing changed no state


def test_weaker_rungs_and_prose_never_stop_a_stream():
    monitor = _monitor()
    watch = TextStreamWatch(monitor.preview_text_repetition, monitor.config.text.max_window_tokens)
    assert all(watch.feed(w) is None for w in _words(" ".join([SENTENCE] * 4)))  # block at 3, stop at 5
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    watch = TextStreamWatch(monitor.preview_text_repetition, monitor.config.text.max_window_tokens)
    assert all(watch.feed(readme[i:i + 7]) is None for i in range(0, len(readme), 7))


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


def test_the_recorded_runaway_stream_is_stopped_mid_stream(tmp_path):
    """``runaway_1``: 256 tokens from llama-cpp-python, ending ``length``. Its loop is a
    39-token paragraph copied 4 times by token 214, and the copy cut by the output limit
    ("… the build results" without its full stop) hides it from the end-of-turn score
    (README: ``text_streak 1``, no stop). With ``ladder.stop`` 4 the watch stops it while
    it streams; the end-of-turn rung alone could not."""
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = tmp_path / "amos.json"
    cfg.write_text(json.dumps({"doom_loop": {"ladder": {"stop": 4}},
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
    assert "stopped mid-stream" in result.stderr
    assert out["usage"]["model_calls"] == 1 and out["usage"]["estimated"] is True
    assert server.requests[0].json["max_tokens"] == 256


def _streamed_text(sse: str) -> str:
    pieces = []
    for line in sse.splitlines():
        if line.startswith("data: {"):
            delta = json.loads(line[6:])["choices"][0]["delta"]
            pieces.append(delta.get("content") or "")
    return "".join(pieces)
