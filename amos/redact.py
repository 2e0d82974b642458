"""Keeping credentials out of files and off the screen (DESIGN.md "Storage").

URLs are where secrets hide in otherwise harmless settings: a base URL may carry a
password (``https://user:pass@proxy/v1``) or a key in its query (``?api_key=…``).
"""

from __future__ import annotations

import base64
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

_SECRET_WORDS = ("key", "token", "secret", "sig", "auth", "pass")
MASK = "****"


def _secret_param(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _rewrite(url: str, *, keep_masked: bool) -> str | None:
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:  # userinfo: a password, or a token given as the user name
            host = netloc.rsplit("@", 1)[1]
            user = parts.username or ""
            if not keep_masked:
                netloc = host
            elif parts.password is not None:
                netloc = f"{user}:{MASK}@{host}"
            else:
                netloc = f"{MASK}@{host}"
        pairs = []
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if _secret_param(name):
                if keep_masked:
                    pairs.append((name, MASK))
            else:
                pairs.append((name, value))
        return urlunsplit((parts.scheme, netloc, parts.path, urlencode(pairs, safe="*"), parts.fragment))
    except ValueError:
        return None


def mask_url(url: str) -> str:
    """``url`` for display: a password (or a user name standing alone, often a token) and
    secret-looking query values become ``****``."""
    masked = _rewrite(url, keep_masked=True)
    return masked if masked is not None else MASK


def strip_url_secrets(url: str | None) -> str | None:
    """``url`` as it may be stored: without user information (a password, or a token
    given as the user name) or secret-looking query parameters.

    Returns None for a URL that cannot be parsed (it is then not stored at all).
    """
    if not url:
        return url
    return _rewrite(url, keep_masked=False)


MIN_CREDENTIAL_CHARS = 4
"""Shorter user names or passwords are not masked on their own (masking every ``x`` of a
transcript would hide nothing and ruin it); their Basic-auth form still is."""


def url_credentials(url: str | None) -> set[str]:
    """The secrets a URL's user information turns into on the wire and in echoes.

    An HTTP client sends ``https://user:pass@host/`` as ``Authorization: Basic
    base64(user:pass)``, and a server may echo that header in an error body, so the
    base64 form is a secret too, besides the password (as written and percent-decoded)
    and a user name standing alone (often a token). Issue 21 break-it finding.

    Args:
        url: a base URL, or None.

    Returns:
        The values to mask (empty for a URL without user information or unparsable).
    """
    if not url or "@" not in url:
        return set()
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return set()
    found: set[str] = set()
    pairs = {(user or "", password)} | {(unquote(user or ""), unquote(password) if password is not None else None)}
    for name, secret in pairs:
        if secret is None:
            if len(name) >= MIN_CREDENTIAL_CHARS:
                found.add(name)
            found.add(base64.b64encode(f"{name}:".encode()).decode())
            continue
        if len(secret) >= MIN_CREDENTIAL_CHARS:
            found.add(secret)
        found.add(base64.b64encode(f"{name}:{secret}".encode()).decode())
    return found
