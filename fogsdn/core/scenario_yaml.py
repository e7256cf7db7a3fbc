"""The YAML dialect scenario files are read in, and where to blame a syntax error; kept
apart from the schema (`fogsdn.core.scenario`), which says what a valid scenario is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml


class ScenarioLoader(yaml.SafeLoader):
    """Safe YAML with two fixes for scenario files: a duplicate key is an error (PyYAML
    keeps the last one silently), and `1e9` is a number, as in YAML 1.2 (YAML 1.1 reads
    a float without a dot as a string)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


ScenarioLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def yaml_problem(text: str, err: yaml.YAMLError) -> tuple[int | None, str]:
    """The 1-based line to blame and the problem. PyYAML reports where it noticed the
    problem: for a missing ':' that is the line after the fault, so blame the start of
    the plain value that ran on into it; name the enclosing collection's first line."""
    mark = getattr(err, "problem_mark", None)
    problem = str(getattr(err, "problem", None) or "invalid YAML")
    if mark is None:
        return None, problem
    line = int(mark.line)
    last: Any = None
    try:
        for token in yaml.scan(text, Loader=ScenarioLoader):
            last = token
    except yaml.YAMLError:
        pass
    if (isinstance(last, yaml.ScalarToken) and last.plain
            and last.start_mark.line < line <= last.end_mark.line):
        line = int(last.start_mark.line)
        problem += f" (is a ':' missing after {str(last.value).split()[0]!r}?)"
    ctx, ctx_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if ctx and ctx_mark is not None and ctx_mark.line != line and "flow" in str(ctx):
        problem += f" ({ctx} that starts on line {ctx_mark.line + 1})"
    return line + 1, problem


class YamlFileError(ValueError):
    """A YAML file that cannot be read as a document: one line naming the file (and the
    line, where YAML says which)."""


def read_yaml_file(path: str | Path) -> Any:
    """The document in `path`, read in the scenario dialect; YamlFileError for a file that
    cannot be read, is not UTF-8 text, is not YAML, or nests deeper than Python can follow
    (all of a program's YAML inputs come through here)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise YamlFileError(f"{p}: cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise YamlFileError(f"{p}: not a text file (UTF-8)") from None
    try:
        return yaml.load(text, Loader=ScenarioLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        line, problem = yaml_problem(text, err)
        where = f" line {line}" if line is not None else ""
        raise YamlFileError(f"{p}:{where}: {problem}") from None
    except RecursionError:
        raise YamlFileError(f"{p}: nested too deeply to read") from None
