"""A saved session's partial turns are shown cut off when it is reopened (issue 23).

A turn cut short (the provider failed mid-stream, the run was cancelled, or the doom-loop
ladder stopped a repeating stream) is saved with ``partial``; the TUI shows its text and,
under it, a warning line ``partial — WHY: this reply was cut off (…)``, so a reopened
transcript never passes the fragment off as a whole answer. Driven through Textual's
pilot on real runners (fixtures from ``tests/test_tui.py``).
"""

from __future__ import annotations

import json

from amos.messages import Message, TextPart
from amos.tui.app import AmosApp
from amos.tui.widgets.assistant import AssistantText
from amos.tui.widgets.notice import NoticeLine
from tests import test_tui
from tests.test_fault_doom_text import SENTENCE

make_runner = test_tui.make_runner
workspace = test_tui.workspace

SIZE = (120, 40)


def _shown(app: AmosApp) -> list[tuple[str, str]]:
    """The conversation's blocks as (kind, text), top to bottom."""
    blocks = []
    for child in app.conversation.children:
        if isinstance(child, AssistantText):
            blocks.append(("assistant", child.text))
        elif isinstance(child, NoticeLine):
            blocks.append((child.level, child.text))
        elif child.has_class("prompt"):
            blocks.append(("prompt", str(child.render())))
    return blocks


async def test_a_reopened_session_marks_the_turn_the_doom_loop_ladder_cut_off(make_runner, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"doom_loop": True}), encoding="utf-8")
    runner, _ = make_runner([{"text": " ".join([SENTENCE] * 20)}], config_path=config)
    [e async for e in runner.run("go")]
    assert runner.messages()[-1].partial == "doom_loop"
    runner.save("cut")
    runner.close()
    again, opened = make_runner(session="cut", config_path=config)
    app = AmosApp(again, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = _shown(app)
        kinds = [kind for kind, _ in shown]
        assert kinds[-2:] == ["assistant", "warning"], shown
        assert SENTENCE in shown[-2][1]
        assert shown[-1][1] == ("partial — doom_loop: this reply was cut off (amos stopped it because it "
                                "kept repeating itself); it is incomplete")


async def test_each_kind_of_partial_turn_is_marked_and_whole_turns_are_not(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    messages = [
        Message(role="user", parts=(TextPart(text="one"),)),
        Message(role="assistant", parts=(TextPart(text="A build log is a"),), partial="error"),
        Message(role="user", parts=(TextPart(text="two"),)),
        Message(role="assistant", parts=(TextPart(text="Half of an"),), partial="cancelled"),
        Message(role="user", parts=(TextPart(text="three"),)),
        Message(role="assistant", parts=(TextPart(text="A whole answer."),)),
        Message(role="user", parts=(TextPart(text="four"),)),
        Message(role="assistant", parts=(), partial="cancelled"),  # cut before any text
    ]
    async with app.run_test(size=SIZE) as pilot:
        await app.conversation.show_history(messages)
        await pilot.pause()
        error = "partial — error: this reply was cut off (the provider failed mid-stream); it is incomplete"
        cancelled = "partial — cancelled: this reply was cut off (the run was interrupted); it is incomplete"
        assert _shown(app) == [
            ("prompt", "› one"), ("assistant", "A build log is a"), ("warning", error),
            ("prompt", "› two"), ("assistant", "Half of an"), ("warning", cancelled),
            ("prompt", "› three"), ("assistant", "A whole answer."),  # a whole turn: no mark
            ("prompt", "› four"), ("warning", cancelled),
        ]
        assert str(app.conversation.query(NoticeLine).last().render()).startswith("⚠ partial — cancelled")
