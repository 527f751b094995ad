"""Text that leaves the program: masked credentials, no control characters, valid XML.

Every message, file, page, mail and webhook that may carry a source location goes through
:func:`mask_urls` (or :func:`mask_url` for one location): a URL's user information
(``https://alice:S3cr3t@host/``) and the credential parameters of a signed URL
(``?X-Amz-Signature=...``) are replaced by ``***`` before the text is printed, logged, stored
or sent.  Credentials belong in the clients' own places (docs/operations/storage.md), and the
schema refuses a source that holds them (:func:`has_credentials`); the masking is what keeps a
password out of the outputs when one gets through anyway (an error message of a client that
quotes the URL it was given, a location read from an older file).

Text from archives is free text: :func:`for_terminal` replaces the control characters a
terminal would act on (escape sequences, bells, carriage returns), :func:`for_xml` the characters
XML 1.0 forbids (a parser refuses the whole file for one of them).
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

MASK = "***"
# scheme://userinfo@ -- userinfo stops at the first '/', '@' or whitespace after the scheme
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#@\s]*@)")
# the credential parameters of signed or token URLs (S3, GCS, Azure SAS, generic tokens)
SECRET_PARAMETERS = ("x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature",
                     "x-goog-credential", "sig", "signature", "token", "access_token", "password", "passwd",
                     "secret", "api_key", "apikey", "key")
_SECRET_QUERY = re.compile(r"(?P<lead>[?&;](?:%s)=)(?P<value>[^&#\s\"'<>]*)" % "|".join(
    re.escape(p) for p in SECRET_PARAMETERS), re.IGNORECASE)
# C0 and C1 controls, DEL; a terminal acts on them (ESC starts a sequence that can rewrite the screen)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_OR_NEWLINE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# what XML 1.0 forbids: C0 controls but tab, newline and carriage return; surrogates; U+FFFE, U+FFFF
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def mask_urls(text: str) -> str:
    """``text`` with the user information of every URL in it and every credential parameter of a
    query masked: ``https://alice:pw@host/x?sig=abc`` -> ``https://***@host/x?sig=***``."""
    if not isinstance(text, str):
        text = str(text)
    text = _USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    return _SECRET_QUERY.sub(lambda m: m.group("lead") + (MASK if m.group("value") else ""), text)


def mask_url(location: str) -> str:
    """One location as it may be shown: a URL's credentials masked; a local path as it is."""
    return mask_urls(location)


def has_credentials(location: str) -> bool:
    """Whether a location carries credentials in itself: a URL's user information, or a
    credential parameter in its query."""
    if not isinstance(location, str) or "://" not in location:
        return False
    try:
        parts = urlsplit(location)
    except ValueError:                          # e.g. an unbalanced IPv6 bracket: judged on the text
        return mask_urls(location) != location
    return bool(parts.username or parts.password or "@" in parts.netloc) or mask_urls(location) != location


def for_terminal(text: str) -> str:
    """``text`` with its control characters (but newline and tab) shown as ``?``: safe to print."""
    return _CONTROL.sub("?", str(text))


def one_line(text: str) -> str:
    """``text`` as one printable line: every control character, newlines too, shown as ``?``."""
    return _CONTROL_OR_NEWLINE.sub("?", str(text))


def for_xml(text: str) -> str:
    """``text`` with the characters XML 1.0 forbids replaced by U+FFFD (a parser would refuse the
    whole file for one of them); escaping markup is the writer's job."""
    return _NOT_XML.sub("\ufffd", str(text))


def control_characters(text: str) -> list[str]:
    """The control characters in ``text`` (newline and tab are not), as ``\\xNN`` codes, once each."""
    return sorted({f"\\x{ord(c):02x}" for c in _CONTROL.findall(str(text))})


def text_problem(flag: str, value: str | None, limit: int, *, required: bool = False) -> str | None:
    """What is wrong with a free-text argument a person types and a log keeps (who decided, why):
    missing or blank when ``required``, longer than ``limit``, or holding control characters (an
    escape sequence would rewrite the terminal of whoever lists the log; a newline would forge a
    line of it).  None when it is fine."""
    if value is None or not value.strip():
        return f"{flag} is required: who takes this decision" if required else None
    if len(value) > limit:
        return f"{flag} is {len(value):,} characters long; at most {limit}"
    bad = control_characters(value) + (["\\n"] if "\n" in value and required else [])
    if bad:
        return f"{flag} holds control characters ({', '.join(bad)}); printable text only"
    return None


def mask_logging() -> None:
    """Every log record made in this process from now on has the credentials of its message
    masked (:func:`mask_urls`), whichever library logs it (fsspec, aiohttp and botocore log the
    URLs they are given at DEBUG).  Installed once by each entry point; idempotent."""
    import logging

    previous = logging.getLogRecordFactory()
    if getattr(previous, "regresslab_masked", False):
        return

    def factory(*args, **kwargs):
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:                   # noqa: BLE001 -- a malformed record is the logger's to report
            return record
        if "://" in message or "=" in message:
            masked = mask_urls(message)
            if masked != message:
                record.msg, record.args = masked, None
        return record

    setattr(factory, "regresslab_masked", True)
    logging.setLogRecordFactory(factory)
