"""The YAML subset MaxText configs use, read the way PyYAML (YAML 1.1) reads it.

Flat ``key: value`` mappings, flow lists (``[a, "b"]``), block lists
(``- item``), quoted strings, comments.  Scalars resolve like PyYAML's
safe loader: ``true``/``False`` are booleans, ``500_000`` is an int, ``1.0e-5``
a float, ``1e-5`` (no dot) stays a string.
"""
from __future__ import annotations

import re
from typing import Any

_BOOL_TRUE = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}
_BOOL_FALSE = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}
_NULL = {"", "~", "null", "Null", "NULL"}
_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*)$")
_FLOAT = re.compile(r"[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?$")
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)\s*:(?:\s+|$)(.*)$")


class YamlError(ValueError):
    def __init__(self, lineno: int, message: str) -> None:
        super().__init__(f"while parsing a block mapping, line {lineno}: {message}")
        self.lineno = lineno


def scalar(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in _NULL:
        return None
    if text in _BOOL_TRUE:
        return True
    if text in _BOOL_FALSE:
        return False
    if _INT.match(text):
        return int(text.replace("_", ""))
    if _FLOAT.match(text) and any(c.isdigit() for c in text):
        return float(text.replace("_", ""))
    if text in {".inf", "+.inf", ".Inf"}:
        return float("inf")
    if text in {".nan", ".NaN", ".NAN"}:
        return float("nan")
    return text


def strip_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index]
    return line


def flow_list(text: str, lineno: int) -> list[Any]:
    inner = text.strip()[1:-1]
    items: list[str] = []
    current = ""
    quote = ""
    for char in inner:
        if quote:
            current += char
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
            current += char
        elif char == ",":
            items.append(current)
            current = ""
        elif char in "[]{}":
            raise YamlError(lineno, "nested collections are not supported here")
        else:
            current += char
    if quote:
        raise YamlError(lineno, "unterminated quoted string")
    if current.strip() or items:
        items.append(current)
    return [scalar(item) for item in items]


def loads(text: str) -> dict[str, Any]:
    result: dict[str, Any] = {}
    list_key: str | None = None
    empty_keys: set[str] = set()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = strip_comment(raw).rstrip()
        if not line.strip() or line.strip() == "---":
            continue
        stripped = line.lstrip()
        if stripped.startswith("- "):
            if list_key is None:
                raise YamlError(lineno, f"a list item outside a list: {raw.strip()!r}")
            result[list_key].append(scalar(stripped[2:]))
            continue
        if line != stripped:
            raise YamlError(lineno, f"unexpected indentation (nested mappings are not MaxText config): {raw.strip()!r}")
        match = _KEY.match(line)
        if not match:
            raise YamlError(lineno, f"expected '<key>: <value>', found {raw.strip()!r}")
        key, value = match.group(1), match.group(2).strip()
        if key in result:
            raise YamlError(lineno, f"found duplicate key {key!r}")
        list_key = None
        if value.startswith("["):
            if not value.endswith("]"):
                raise YamlError(lineno, f"unterminated flow list for {key!r}")
            result[key] = flow_list(value, lineno)
        elif value.startswith("{"):
            raise YamlError(lineno, f"mappings are not MaxText config values: {key!r}")
        elif value == "":
            result[key] = []
            list_key = key
            empty_keys.add(key)
        else:
            if value[0] in "'\"" and (len(value) < 2 or value[-1] != value[0]):
                raise YamlError(lineno, f"unterminated quoted string for {key!r}")
            result[key] = scalar(value)
    for key in empty_keys:
        if result[key] == []:
            result[key] = None
    return result
