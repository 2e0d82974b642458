"""The Textual front end of amos: presentation only.

The app calls the runner's host API (:mod:`amos.host`, :class:`amos.runner.AgentRunner`)
and renders the :mod:`amos.events` it yields (DESIGN.md rule 1). Textual is imported
only inside this package; the CLI imports :mod:`amos.tui.app` lazily.
"""
