"""Passwords in storage URLs and tracking URIs: redacted wherever shown or stored, resolved at the edge.

A URL may carry its secret three ways, none of which puts it in the study
file, on a command line or in ``study.json``:

- the libraries' own: a URL without password and libpq's ``PGPASSWORD`` or
  ``~/.pgpass`` (``PGPASSFILE``) for PostgreSQL, MLflow's
  ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` for a server;
- ``${NAME}`` anywhere in the URL: the environment variable ``NAME``
  (``storage: ${RLTUNE_STORAGE_URL}``, ``postgresql://rltune:${DB_PASSWORD}@db/rltune``);
- ``${file:PATH}``: the content of a file, trailing newline removed
  (``postgresql://rltune:${file:~/.rltune_db_password}@db/rltune``).

:func:`resolve_url` expands the references where the URL is used (opening
the storage, the tracking client); everything stored or printed keeps the
references and goes through :func:`redact_url` / :func:`redact_text`, which
mask a literal password as ``***``.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote, urlsplit, urlunsplit

from rltune.errors import ConfigError

MASK = "***"
_REFERENCE = re.compile(r"\$\{(file:[^}]+|[A-Za-z_][A-Za-z0-9_]*)\}")
# scheme://user:password@ in free text (an exception message, a log line)
_USERINFO_SPAN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://((?:\$\{[^}]*\}|[^/@])*)@")  # user:password, references kept
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@'\"]*:)([^\s@'\"/]+)@")


def has_references(url: str | None) -> bool:
    """Whether ``url`` holds ``${NAME}`` or ``${file:PATH}`` references."""
    return bool(url) and _REFERENCE.search(str(url)) is not None


def resolve_url(url: str | None, where: str = "storage") -> str | None:
    """``url`` with its ``${NAME}`` / ``${file:PATH}`` references replaced by their values.

    Raises :class:`ConfigError` (naming the reference, never a value) when a
    variable is unset or a file cannot be read.
    """
    if not url:
        return url

    def value(match: re.Match[str]) -> str:
        ref = match.group(1)
        if ref.startswith("file:"):
            path = os.path.expanduser(ref[len("file:"):].strip())
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read().rstrip("\r\n")
            except OSError as exc:
                raise ConfigError(f"${{{ref}}}: the file cannot be read ({type(exc).__name__}: {exc.strerror})",
                                  where=where) from None
            return text
        if ref not in os.environ:
            raise ConfigError(f"${{{ref}}}: the environment variable {ref} is not set", where=where)
        return os.environ[ref]

    text = str(url)
    userinfo = _USERINFO_SPAN.match(text)
    start, end = userinfo.span(1) if userinfo else (0, 0)
    # a password from a reference is URL-quoted, so that an '@', '/' or ':' in it stays part of the password
    return _REFERENCE.sub(lambda m: quote(value(m), safe="") if start <= m.start() < end else value(m), text)


def redact_url(url: str | None) -> str | None:
    """``url`` with a literal password masked: ``postgresql://user:***@host/db``.

    References (``${NAME}``, ``${file:PATH}``) are kept: they are no secret.
    Paths and URLs without a password come back unchanged.
    """
    if not url or "://" not in str(url):
        return url
    text = str(url)
    scheme = text.split("://", 1)[0].lower()
    try:
        if scheme in ("http", "https"):
            parts = urlsplit(text)
            if parts.password is None or _REFERENCE.fullmatch(parts.password):
                return text
            netloc = f"{parts.username or ''}:{MASK}@{parts.hostname or ''}"
            if parts.port is not None:
                netloc += f":{parts.port}"
            return urlunsplit(parts._replace(netloc=netloc))
        from sqlalchemy.engine import make_url

        parsed = make_url(text)
        if parsed.password is None or _REFERENCE.fullmatch(str(parsed.password)):
            return text
        return parsed.render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not parseable as a URL: mask any user:password@ in it as text
        return redact_text(text)


def redact_text(text: str, *urls: str | None) -> str:
    """``text`` (a message, a traceback) with every ``scheme://user:password@`` masked.

    The passwords of ``urls`` (as given and as resolved) are masked wherever
    they appear, also outside a URL.
    """
    for url in urls:
        if not url:
            continue
        for password in _passwords(str(url)):
            text = text.replace(password, MASK)
    return _USERINFO.sub(lambda m: m.group(0) if _REFERENCE.fullmatch(m.group(2)) else f"{m.group(1)}{MASK}@",
                         text)


def _passwords(url: str) -> set[str]:
    """The literal password of ``url`` (raw and URL-quoted forms), if any."""
    found: set[str] = set()
    try:
        if url.split("://", 1)[0].lower() in ("http", "https"):
            password = urlsplit(url).password
        else:
            from sqlalchemy.engine import make_url

            password = make_url(url).password
    except Exception:  # noqa: BLE001 - not a URL: the regex of redact_text still applies
        return found
    if password and len(str(password)) >= 3 and not _REFERENCE.fullmatch(str(password)):
        found.update({str(password), quote(str(password), safe="")})
    return found


def drop_masked_password(url: str) -> str:
    """``url`` without a password that was masked (``***``), so libpq's ``PGPASSWORD`` / ``~/.pgpass`` apply."""
    if "://" not in url or f":{MASK}@" not in url:
        return url
    return url.replace(f":{MASK}@", "@", 1)
