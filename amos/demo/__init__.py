"""The bundled demo: a scripted session that fixes a tiny project (package data only)."""
