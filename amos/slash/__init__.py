"""Slash commands: one line grammar for the TUI and ``amos run`` (spec/slash-commands.md)."""

from amos.slash.commands import COMMANDS, SlashResult, custom_commands, execute_line
from amos.slash.custom import CustomCommand, Skipped, expand, load_custom_commands
from amos.slash.lines import LineOutcome, run_line
from amos.slash.parser import ParsedLine, parse_line

__all__ = ["COMMANDS", "SlashResult", "execute_line", "ParsedLine", "parse_line", "CustomCommand", "Skipped",
           "custom_commands", "expand", "load_custom_commands", "LineOutcome", "run_line"]
