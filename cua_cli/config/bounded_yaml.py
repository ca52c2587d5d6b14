"""YAML within bounds: nesting, size after alias expansion, integer width, keys given twice.

Parsing either returns plain data or raises ConfigError naming the source, the
key path and the line, quickly, whatever the input.
"""

import re

import yaml

from ..errors import ConfigError
from .bounds import MAX_DEPTH, MAX_FILE_BYTES, MAX_INT, MAX_NODES, key_text, read_text, show


class _Refused(yaml.MarkedYAMLError):
    """Input beyond a bound, or a scalar Python cannot convert; `key` says where."""

    def __init__(self, problem, mark, path):
        super().__init__(problem=problem, problem_mark=mark)
        self.key = key_text(path)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting, alias bombs and recursive aliases.

    Every node is counted as it is composed, an alias as the whole size of
    its target, so a few hundred bytes cannot expand to megabytes. A key given
    twice in one mapping is refused (`<<` merges may still be overridden). Scalars
    PyYAML fails to convert without a YAML error (a date 2020-13-45, `!!bool x`)
    become YAML errors, and integers beyond 64 bits are refused.
    """

    def __init__(self, text: str, base: tuple = ()):
        super().__init__(text)
        self._path = list(base)  # key of the node being composed; None for a mapping key
        self._keys = {}          # node -> its key, for construction errors
        self._nodes = 0
        self._sizes = {}         # anchored node -> its size, aliases expanded

    def _count(self, n, mark):
        self._nodes += n
        if self._nodes > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES} values once aliases are expanded", mark, self._path)

    def compose_node(self, parent, index):
        event = self.peek_event()
        self._path.append(index.value if isinstance(index, yaml.ScalarNode) else index)
        if len(self._path) > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark, self._path)
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if node not in self._sizes:  # its anchor is still being composed
                raise _Refused("an alias inside its own anchor (recursive data)", event.start_mark, self._path)
            self._count(self._sizes[node], event.start_mark)
            self._path.pop()
            return node
        before = self._nodes
        self._count(1, event.start_mark)
        node = super().compose_node(parent, index)
        self._keys[node] = tuple(self._path)
        self._path.pop()
        if event.anchor is not None:
            self._sizes[node] = self._nodes - before
        return node

    def construct_mapping(self, node, deep=False):
        # YAML lets a later key silently win; in a config that hides a typo or a bad merge.
        seen = set()
        for key, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if key.value in seen:
                    raise _Refused(f"key {show(key.value)} given twice", key.start_mark, self._keys.get(node, ()))
                seen.add(key.value)
        return super().construct_mapping(node, deep)

    def construct_object(self, node, deep=False):
        if node.tag == "tag:yaml.org,2002:int" and len(node.value) > 100:  # 1:59:59:... is quadratic
            raise _Refused("integer literal longer than 100 characters", node.start_mark, self._keys.get(node, ()))
        try:
            data = super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except Exception:  # PyYAML's converters fail in many ways on explicit tags: `!!bool x`, `!!int ''`
            raise _Refused(f"cannot read {show(node.value)} as {node.tag.rsplit(':', 1)[-1]}",
                           node.start_mark, self._keys.get(node, ())) from None
        if type(data) is int and not -MAX_INT - 1 <= data <= MAX_INT:
            raise _Refused("integer beyond 64 bits", node.start_mark, self._keys.get(node, ()))
        return data


def load_yaml(text: str, source: str, base: tuple = ()):
    """Parse one YAML document within the bounds; `source` starts every error message."""
    try:
        loader = _BoundedLoader(text, base)  # already checks the characters
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except _Refused as e:
        raise ConfigError(f"{source}: {e.key}: {e.problem} (line {e.problem_mark.line + 1})") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: malformed YAML: {_yaml_problem(e)}") from None


def _yaml_problem(e: yaml.YAMLError) -> str:
    # PyYAML's own text names a placeholder "<unicode string>" and can quote megabytes.
    mark = getattr(e, "problem_mark", None)
    if mark is not None:
        text = f"line {mark.line + 1}, column {mark.column + 1}: " + ", ".join(filter(None, (e.context, e.problem)))
    elif isinstance(e, yaml.reader.ReaderError):
        text = f"character {e.position}: unacceptable character #x{e.character:04x}"
    else:
        text = str(e)
    return text if len(text) <= 300 else text[:300] + "..."


def read_yaml_mapping(path: str) -> dict:
    """A YAML file whose top level is a mapping (an empty file is an empty one)."""
    raw = load_yaml(read_text(path, MAX_FILE_BYTES, "config"), str(path))
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
    return raw


_KEY_PART = re.compile(r"[A-Za-z0-9_-]{1,100}")


def apply_override(raw: dict, item: str, path: str) -> None:
    """`--set a.b.c=VALUE`: VALUE is read as YAML (within the same bounds) into raw['a']['b']['c']."""
    key, sep, value = item.partition("=")
    source = f"{path}: --set {show(item)}"
    parts = key.split(".")
    if not sep or len(parts) >= MAX_DEPTH or not all(_KEY_PART.fullmatch(p) for p in parts):
        raise ConfigError(f"{source}: expected KEY.PATH=VALUE")
    if len(value) > MAX_FILE_BYTES:
        raise ConfigError(f"{source}: the value is longer than {MAX_FILE_BYTES} characters")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: {part} is not a section")
    node[parts[-1]] = load_yaml(value, source, tuple(parts)) if value else ""
