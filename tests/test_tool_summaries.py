"""Result summaries used as evidence projections: bounded, keep the identifying lines."""

from __future__ import annotations

from amos.tools.summaries import (
    MAX_SUMMARY_CHARS,
    summarize_list_dir,
    summarize_read_file,
    summarize_run_command,
    summarize_search_text,
)


def test_read_file_keeps_header_and_first_lines():
    text = "big.txt (lines 1-5000 of 5000)\n" + "\n".join(f"line {i}" for i in range(5000))
    summary = summarize_read_file(text)
    assert summary.startswith("big.txt (lines 1-5000 of 5000)")
    assert "line 0" in summary and "4988 more lines" in summary and len(summary) <= MAX_SUMMARY_CHARS


def test_list_dir_counts_entries():
    text = "./\n" + "\n".join(f"f{i}.py" for i in range(100))
    assert "100 entries" in summarize_list_dir(text)


def test_search_keeps_totals():
    text = "\n".join(f"a.py:{i}: hit" for i in range(200)) + "\n[200 matches in 1 files; 3 files searched]\n"
    summary = summarize_search_text(text)
    assert "[200 matches in 1 files; 3 files searched]" in summary and "a.py:0: hit" in summary


def test_run_command_keeps_exit_code_and_tails():
    result = {"exit_code": 2, "stdout": "\n".join(f"out {i}" for i in range(1000)), "stderr": "boom",
              "timed_out": False}
    summary = summarize_run_command(result)
    assert summary.startswith("exit code: 2") and "out 999" in summary and "boom" in summary
    assert len(summarize_run_command({"exit_code": 0, "stdout": "x" * 100_000, "stderr": ""})) <= MAX_SUMMARY_CHARS
