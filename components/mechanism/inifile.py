"""oslo.config INI files rendered with the standard library.

Sections map option names to values; None drops an option, lists join with commas and
booleans render as oslo.config spells them. configparser escapes nothing, so values
containing newlines are refused rather than silently producing a broken file.
"""

from __future__ import annotations

import configparser
import io
from collections.abc import Mapping
from typing import Any

Sections = Mapping[str, Mapping[str, Any]]


def _value(section: str, option: str, value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list | tuple):
        text = ",".join(str(v) for v in value)
    else:
        text = str(value)
    if "\n" in text:
        raise ValueError(f"[{section}] {option}: a value may not span lines")
    return text


def render_ini(sections: Sections) -> str:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # option names are case-sensitive
    for section, options in sections.items():
        if section != "DEFAULT":
            parser.add_section(section)
        for option, value in options.items():
            if value is not None:
                parser.set(section, option, _value(section, option, value))
    out = io.StringIO()
    parser.write(out)
    return out.getvalue()


def parse_ini(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser
