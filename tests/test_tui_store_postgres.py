"""The TUI's saved marker and exit line with sessions on PostgreSQL (``store.backend``).

Both read the host's ``save_state`` (stored, writes) rather than a session file's
modification time, so a session kept in a real PostgreSQL server (the ``pg_home``
fixture: a cluster started on 127.0.0.1, skipped with the reason when it cannot start)
says ``saved`` like a file-backed one.
"""

from __future__ import annotations

import json
from pathlib import Path

from amos.host import RunOptions, open_runner
from amos.tui.app import AmosApp
from amos.tui.texts import exit_message
from amos.tui.widgets.status_bar import StatusBar
from tests.support import write_script
from tests.test_tui import submit, wait_for


async def _run_once(app: AmosApp, pilot) -> None:
    await pilot.pause()
    await submit(pilot, app, "hi")
    await wait_for(pilot, lambda: app.receipts and not app.busy)
    await pilot.pause()


async def test_a_postgres_session_is_marked_saved_and_the_exit_line_says_so(tmp_path: Path, pg_home):
    script = write_script(tmp_path, [{"text": "hello"}])
    runner, opened = open_runner(RunOptions(model=f"scripted:{script}", workspace=tmp_path, cwd=tmp_path,
                                            interactive=True))
    assert not str(runner.session_path).startswith("/"), "the session lives in the database"
    app = AmosApp(runner, opened)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            assert app.query_one(StatusBar).status.saved is None, "nothing sent, nothing saved"
            await _run_once(app, pilot)
            assert app.query_one(StatusBar).status.saved == "saved"
        assert exit_message(runner).startswith("session saved — reopen with: amos --session ")
    finally:
        runner.close()


async def test_with_autosave_off_a_postgres_session_is_unsaved_until_saved(tmp_path: Path, pg_home):
    config = pg_home / "config" / "config.json"
    config.write_text(json.dumps({"store": {"backend": "postgres"}, "sessions": {"autosave": False}}))
    script = write_script(tmp_path, [{"text": "hello"}])
    runner, opened = open_runner(RunOptions(model=f"scripted:{script}", workspace=tmp_path, cwd=tmp_path,
                                            interactive=True))
    app = AmosApp(runner, opened)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await _run_once(app, pilot)
            assert app.query_one(StatusBar).status.saved == "unsaved"
            await submit(pilot, app, "/session save")
            await wait_for(pilot, lambda: app.query_one(StatusBar).status.saved == "saved")
    finally:
        runner.close()
