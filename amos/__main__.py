"""Console entry point: ``amos`` and ``python -m amos``.

``amos --version`` is answered before the CLI framework is imported, so it costs
only the interpreter's start-up.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the ``amos`` command line."""
    if sys.argv[1:] == ["--version"]:
        from amos import __version__

        print(f"amos {__version__}")
        return
    from amos.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
