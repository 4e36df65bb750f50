"""A LeRobot dataset's metadata read as untrusted data: JSON files, episode-table fields, path templates.

Everything here comes from the dataset, not from the user: a value of the wrong type, a template
using more of str.format than LeRobot documents, or a malformed JSON line is a FormatError naming
the file and the field, never a TypeError or a 10 GB string.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ArrayIOError, FormatError

__all__ = ["dataset_errors", "expand_template", "integer_field", "metadata_error", "read_json", "read_jsonl",
           "task_list", "TEMPLATE_FIELDS"]

# The fields LeRobot documents for its path templates; a template may use them plainly or zero-padded
# ({chunk_index:03d}): nothing else of str.format (a width of 10**9 cost 9.7 GB) is honoured.
TEMPLATE_FIELDS = {"video_path": ("video_key", "chunk_index", "file_index", "episode_chunk", "episode_index")}
_PADDED = re.compile(r"0?([0-9]{1,2})d")
MAX_TEMPLATE = 1024


def metadata_error(path: Path | str, field: str, expected: str, found: Any) -> FormatError:
    """A FormatError for a LeRobot dataset's metadata: the file, the field, what was expected."""
    shown = repr(found)
    return FormatError(f"LeRobot: {field}: expected {expected}, found {shown[:80]}{'...' if len(shown) > 80 else ''}",
                       format="LeRobot", field=field, expected=expected, found=shown[:80]).naming(str(path))


def expand_template(template: Any, fields: dict[str, Any], *, name: str, path: Path | str) -> str:
    """``template`` (``info.json``'s ``name``) with its ``{field}`` / ``{field:03d}`` parts filled in.

    Only the fields LeRobot documents and zero-padded integer widths up to 99 are understood; any other
    part of the str.format language, a non-string or a template over MAX_TEMPLATE characters is a
    FormatError. The result is a relative path for the caller to confine to the dataset.
    """
    if not isinstance(template, str) or len(template) > MAX_TEMPLATE:
        raise metadata_error(path, name, f"a path template string of at most {MAX_TEMPLATE} characters", template)
    allowed = TEMPLATE_FIELDS[name]
    parts = []
    try:
        pieces = list(string.Formatter().parse(template))
    except ValueError as error:
        raise metadata_error(path, name, f"a template with balanced braces ({error})", template) from None
    for literal, field, spec, conversion in pieces:
        parts.append(literal)
        if field is None:
            continue
        if field not in allowed or field not in fields or conversion is not None:
            raise metadata_error(path, name, f"a template of the fields {', '.join(allowed)}", template)
        value = fields[field]
        padded = _PADDED.fullmatch(spec or "")
        if spec and (padded is None or not isinstance(value, int)):
            raise metadata_error(path, name, "{field} or {field:0Nd} with N < 100 (an integer field)", template)
        parts.append(str(value).zfill(int(padded.group(1))) if padded else str(value))
    return "".join(parts)


def read_json(path: Path) -> dict:
    """The JSON object in ``path`` ({} when there is no such file); anything else is a FormatError."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as error:
        raise metadata_error(path, "the file", "UTF-8 JSON", str(error)) from None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise metadata_error(path, "the file", "a JSON object", str(error)) from None
    if not isinstance(value, dict):
        raise metadata_error(path, "the file", "a JSON object", type(value).__name__)
    return value


def read_jsonl(path: Path) -> Iterator[dict]:
    """The JSON objects of a JSON Lines file, one per non-blank line."""
    with path.open("r", encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError) as error:
                    raise metadata_error(path, f"line {number}", "a JSON object", str(error)) from None
                if not isinstance(record, dict):
                    raise metadata_error(path, f"line {number}", "a JSON object", type(record).__name__)
                yield record


def integer_field(row: dict, column: str, path: Path, number: int, *, integer: bool = True) -> float:
    """The numeric ``column`` of episode-table row ``number`` (a whole number unless ``integer`` is False)."""
    value = row.get(column)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or (integer and value != int(value)):
        raise metadata_error(path, f"row {number} {column}", "an integer" if integer else "a number", value)
    return value


def task_list(row: dict, path: Path, number: int) -> list[str]:
    """The ``tasks`` of episode-table row ``number``: a list of strings."""
    tasks = row.get("tasks") or []
    if not isinstance(tasks, list) or not all(isinstance(task, str) for task in tasks):
        raise metadata_error(path, f"row {number} tasks", "a list of strings", tasks)
    return tasks


@contextlib.contextmanager
def dataset_errors(path: Path) -> Iterator[None]:
    """Within this block the dataset file ``path`` is read and its values converted: pyarrow's errors on a
    damaged parquet file, and the TypeError/ValueError/KeyError of a column holding values of the wrong
    type, become one FormatError naming the file (arrayio's own errors pass unchanged)."""
    import pyarrow as pa

    try:
        yield
    except ArrayIOError:
        raise
    except (pa.ArrowException, OSError, TypeError, ValueError, KeyError, IndexError, OverflowError) as error:
        raise FormatError(f"LeRobot: {type(error).__name__}: {str(error)[:300]}", format="LeRobot",
                          expected="values of the types LeRobot writes",
                          found=f"{type(error).__name__}: {str(error)[:300]}").naming(str(path)) from None
