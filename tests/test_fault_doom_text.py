"""Issue 17 item 15: sentence- and paragraph-level loops in one answer stop the run.

Under ``{"doom_loop": true}`` (amos's config defaults) a response that repeats a
22-token sentence 5 or 20 times, or a cycle of 3 sentences 10 times, used to end
ANSWERED; normal prose must still end ANSWERED. Detection rates and false-alarm rates
are measured by ``benchmarks/doom_text_rung.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .support import cli_json, write_script

SENTENCE = ("I will check the configuration file again to make sure the value of the timeout "
            "setting is correct before running the tests.")
CYCLE = ["Let me look at the failing test once more.",
         "The assertion compares the parsed value with the expected string from the fixture.",
         "I think the fixture is out of date, so I will read it again."]


def _run(tmp_path: Path, text: str) -> tuple[int, dict]:
    cfg = tmp_path / "doom.json"
    cfg.write_text(json.dumps({"doom_loop": True}))
    script = write_script(tmp_path, [{"text": text}])
    return cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(tmp_path), "go")


@pytest.mark.parametrize("text", [
    " ".join([SENTENCE] * 5),
    " ".join([SENTENCE] * 20),
    " ".join(CYCLE * 10),
    "Here is my plan. " + "\n\n".join([" ".join(CYCLE + [SENTENCE])] * 5),  # a paragraph, five times
], ids=["sentence-x5", "sentence-x20", "3-sentence-cycle-x10", "paragraph-x5"])
def test_a_looping_answer_is_stopped_not_answered(tmp_path, text):
    assert len(SENTENCE.split()) == 22
    code, doc = _run(tmp_path, text)
    stop = doc["stop"]
    assert stop["verdict"] != "ANSWERED", stop
    assert (code, stop["verdict"], stop["cause"]) == (6, "BOUNDED_STOP", "doom_loop"), stop
    assert "repeats" in stop["detail"]


def test_normal_prose_still_ends_answered(tmp_path):
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    code, doc = _run(tmp_path, readme[:6000])
    assert code == 0 and doc["stop"]["verdict"] == "ANSWERED", doc["stop"]
