"""The stop receipt of one run as a small panel, coloured by verdict.

What a person should conclude comes first (glyph + verdict), then why control flow
stopped (cause/reason and the detail sentence), then the counts (steps, tool
calls, tokens). Field meanings: spec/stop-receipts.md "StopReceipt fields".
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from amos.engine import StopReceipt
from amos.render import check_line, failing_output, token_counts, verdict_glyph
from amos.safe_text import printable

CSS_PATH = Path(__file__).with_suffix(".tcss")

VERDICT_TONES = {
    "VERIFIED_COMPLETE": "good",
    "ANSWERED": "neutral",
    "FAILED": "bad",
    "FALSE_COMPLETE": "bad",
    "WAITING": "wait",
    "WAITING_UNROUTED": "wait",
    "BOUNDED_STOP": "warn",
    "STUCK": "warn",
    "UNCERTAIN": "warn",
}
"""The colour family of each verdict (CSS class ``-tone-<tone>``)."""


def verdict_text(receipt: StopReceipt) -> Text:
    """The panel's first line: glyph, verdict and ``cause/reason``.

    Args:
        receipt: the run's stop receipt.
    """
    text = Text()
    text.append(f"{verdict_glyph(receipt.verdict)} {receipt.verdict}", style="bold")
    text.append(f"  {receipt.cause or 'no cause'}/{receipt.reason}")
    if receipt.sandbox is not None and receipt.sandbox.plan:
        text.append("  · plan run", style="bold")
    return text


def receipt_text(receipt: StopReceipt) -> Text:
    """The panel body under the verdict line (plain text, no markup).

    Args:
        receipt: the run's stop receipt.

    Returns:
        Two or more lines: detail, counts (and pending approvals, if any).
    """
    text = Text()
    text.append(receipt.detail + "\n")
    counts = (f"{receipt.steps} step{'s' if receipt.steps != 1 else ''} · "
              f"{receipt.tool_call_count} tool call{'s' if receipt.tool_call_count != 1 else ''} · "
              f"{token_counts(receipt.usage)} tokens")
    if receipt.recovery_attempts:
        counts += f" · {receipt.recovery_attempts} recovery attempts"
    text.append(counts, style="dim")
    check = check_line(receipt)
    if check:
        text.append(f"\n{printable(check)}", style="dim")
    output = failing_output(receipt)
    if output:
        text.append("\nthe check's output ended with:", style="dim")
        for line in output.splitlines():
            text.append(f"\n  │ {printable(line)}", style="dim")
    for pending in receipt.pending_approvals:
        text.append(f"\n⏸ {pending.tool} ({pending.call_id}) awaits a decision", style="italic")
        if pending.resume_token:
            text.append(f" · token {pending.resume_token}", style="dim")
    return text


class ReceiptPanel(Vertical):
    """A bordered panel showing one stop receipt.

    Args:
        receipt: the receipt to show.
    """

    def __init__(self, receipt: StopReceipt) -> None:
        self.receipt = receipt
        tone = VERDICT_TONES.get(receipt.verdict, "warn")
        super().__init__(classes=f"-tone-{tone}")
        self.border_title = "stop receipt"

    def compose(self) -> ComposeResult:
        """The verdict line, then the detail and counts."""
        yield Static(verdict_text(self.receipt), classes="receipt-verdict")
        yield Static(receipt_text(self.receipt), classes="receipt-body")
