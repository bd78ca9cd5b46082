"""Text that can always be written: what a kernel hands us (an exception message holding an undecodable file
name, whose os.fsdecode has lone surrogates) must not break a report, a record, the store or an xdist worker's
channel. Torch-free: the nightly's records and reports use it too."""
from __future__ import annotations

from typing import Any


def safe_text(text: Any) -> str:
    """`text` as a str that encodes to UTF-8: lone surrogates and other unencodable characters become backslash
    escapes (\\udcff), so that writing, shipping or storing it never fails."""
    if not isinstance(text, str):
        text = str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def safe_strings(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, tuples, strings, numbers) with every string, keys included, made safe."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_strings(k): safe_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(safe_strings(v) for v in value)
    return value


def clipped(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, saying how much was cut: a kernel's 10 MB exception message must not
    become a 10 MB reason in every record, store row and terminal."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters cut)"
