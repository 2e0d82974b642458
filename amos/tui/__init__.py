"""The Textual front end of amos: presentation only.

The app calls the host API (:mod:`amos.engine`, :class:`amos.engine.Host`)
and renders the :mod:`amos.events` it yields (DESIGN.md rule 1). Textual is imported
only inside this package; the CLI imports :mod:`amos.tui.app` lazily.
"""
