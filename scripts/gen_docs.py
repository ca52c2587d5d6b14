#!/usr/bin/env python3
"""Writes the generated pages of the docs site from the code, so they cannot drift.

    docs/reference/cli.md      every command and subcommand of `cua` (the click tree)
    docs/reference/config.md   every config key, from the config's JSON Schema

    python scripts/gen_docs.py            write the pages that changed
    python scripts/gen_docs.py --check    write nothing; exit 1 naming each page that is stale

The config page needs `cua_cli.config.json_schema() -> dict` (pydantic's
`model_json_schema()` of the root model). Until that function exists the page
is skipped, with a message, and the page in the repo is left as it is.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLI_PAGE = Path("docs/reference/cli.md")
CONFIG_PAGE = Path("docs/reference/config.md")
REGENERATE = "python scripts/gen_docs.py"
GENERATED = f"<!-- Generated from {{source}} by scripts/gen_docs.py: do not edit; run `{REGENERATE}`. -->\n\n"


# --------------------------------------------------------------------------- markdown helpers

def cell(text) -> str:
    """Text that is safe inside one cell of a markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def prose(text: str) -> str:
    """Text from a docstring or a description, as markdown: `<` outside code spans would start HTML."""
    parts = str(text).split("`")
    return "`".join(p.replace("<", "&lt;") if i % 2 == 0 else p for i, p in enumerate(parts))


def code(value: str) -> str:
    """Inline code that survives backticks inside it."""
    value = str(value)
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) if c else " " for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the CLI page

def help_to_markdown(text: str) -> str:
    """click help text -> markdown.

    Paragraphs are rewrapped, as click does on a terminal. A paragraph that
    starts with click's no-rewrap marker (a line holding only \\b) is kept as
    it is: its heading line ("Examples:") becomes bold text and the lines
    under it a code block.
    """
    import inspect

    out = []
    for para in inspect.cleandoc(text).split("\n\n"):
        lines = para.strip("\n").splitlines()
        if not lines:
            continue
        if lines[0].strip() == "\b":
            lines = lines[1:]
            if lines and not lines[0].startswith(" ") and lines[0].rstrip().endswith(":"):
                out.append(f"**{lines[0].strip()}**")
                lines = lines[1:]
            body = list(lines)
            while body and not body[-1].strip():
                body.pop()
            indent = min((len(line) - len(line.lstrip()) for line in body if line.strip()), default=0)
            if body:
                out.append("```bash\n" + "\n".join(line[indent:].rstrip() for line in body) + "\n```")
        else:
            out.append(prose(" ".join(line.strip() for line in lines)))
    return "\n\n".join(out) + "\n"


def _default(param) -> str:
    import click

    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return "on" if param.default is True else ""
    value = param.default
    if type(value).__name__ == "Sentinel":  # click's UNSET: no default
        return ""
    if callable(value) or value is None or value == () or value == [] or value == "":
        return ""
    if isinstance(value, (tuple, list)):
        return code(" ".join(map(str, value)))
    if isinstance(param.type, click.types.FloatParamType) or isinstance(value, float):
        return code(repr(float(value)) if isinstance(value, (int, float)) else value)
    return code(value)


def _option_names(param) -> str:
    names = list(param.opts) + list(param.secondary_opts)
    return ", ".join(code(n) for n in names)


def _kind(param) -> str:
    """What value an option or argument takes: a type name, a choice, or nothing for a flag."""
    import click

    if getattr(param, "is_flag", False):
        return "flag"
    t = param.type
    if isinstance(t, click.Choice):
        return " | ".join(code(c) for c in t.choices)
    metavar = getattr(param, "metavar", None)
    name = metavar or {click.types.INT: "integer", click.types.FLOAT: "number", click.types.STRING: "text",
                       click.types.BOOL: "boolean", click.types.UNPROCESSED: "text"}.get(t)
    if name is None:
        if isinstance(t, click.Path):
            name = "file" if not t.dir_okay else "folder" if not t.file_okay else "path"
        elif isinstance(t, (click.IntRange, click.FloatRange)):
            name = "integer" if isinstance(t, click.IntRange) else "number"
            lo, hi = t.min, t.max
            bounds = []
            if lo is not None:
                bounds.append((">" if t.min_open else "≥") + f" {lo}")
            if hi is not None:
                bounds.append(("<" if t.max_open else "≤") + f" {hi}")
            name += (", " + ", ".join(bounds)) if bounds else ""
        else:
            name = t.name
    if getattr(param, "multiple", False):
        name += ", repeatable"
    return name


def _command_doc(cmd, ctx, level: int) -> list[str]:
    import click

    path = ctx.command_path
    parts = [f"{'#' * level} {code(path)} {{ #{anchor(path)} }}\n"]
    if cmd.help:
        parts.append(help_to_markdown(cmd.help.split("\f")[0]))
    usage = " ".join([path] + cmd.collect_usage_pieces(ctx))
    parts.append(f"**Usage:**\n\n```text\n{usage}\n```\n")
    params = [p for p in cmd.get_params(ctx) if not getattr(p, "hidden", False)]
    args = [p for p in params if isinstance(p, click.Argument)]
    opts = [p for p in params if isinstance(p, click.Option)]
    if args:
        rows = [[code(a.human_readable_name), _kind(a),
                 ("required" if a.required else "optional")
                 + (", any number" if a.nargs == -1 else f", {a.nargs} values" if a.nargs > 1 else "")]
                for a in args]
        parts.append("**Arguments:**\n\n" + table(["argument", "takes", "notes"], rows))
    if opts:
        rows = [[_option_names(o), _kind(o), _default(o),
                 ("required. " if o.required else "") + prose(o.help or "")] for o in opts]
        parts.append("**Options:**\n\n" + table(["option", "takes", "default", "description"], rows))
    if isinstance(cmd, click.Group):
        subs = [(name, cmd.get_command(ctx, name)) for name in cmd.list_commands(ctx)]
        rows = [[f"[{code(f'{path} {name}')}](#{anchor(f'{path} {name}')})", prose(sub.get_short_help_str(limit=200))]
                for name, sub in subs if sub is not None and not sub.hidden]
        parts.append("**Commands:**\n\n" + table(["command", "what it does"], rows))
    return parts


def anchor(command_path: str) -> str:
    return command_path.replace(" ", "-")


def cli_page() -> str:
    import click

    from cua_cli.cli import main

    intro = ("Every command of `cua`, with its arguments and options, as `cua COMMAND --help` prints them. "
             "Every command also takes `-h` / `--help`. Exit codes are on "
             "[Stop reasons and exit codes](stop-reasons.md).\n")
    out = [GENERATED.format(source="the click commands in cua_cli/"), "# CLI reference\n", intro]

    def walk(cmd, ctx, level):
        out.extend(_command_doc(cmd, ctx, level))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, context(sub, name, ctx), min(level + 1, 4))

    def context(cmd, name, parent=None):
        # As click makes it when the command runs: its context_settings (e.g. -h for help) apply.
        return cmd.context_class(cmd, info_name=name, parent=parent, **cmd.context_settings)

    walk(main, context(main, "cua"), 2)
    return "\n".join(out)


# --------------------------------------------------------------------------- the config page

CONFIG_INTRO = """\
# Config reference

A rollout config is one YAML file. This page lists every key, its type, its
default and what it does; [Getting started](../index.md) shows a whole
config and the guides show the keys of each topic at work.

How a config is read:

- **Nothing unknown passes.** An unknown key, a wrong type, a value out of
  range or a file that cannot be read stops `cua rollout` before anything
  starts, with exit code 2 and a message that names the file and the key
  path (for example `exp.yaml: unknown key 'runner.num_envz'`).
- **Overrides.** `cua rollout CONFIG --set runner.num_envs=8` sets any key
  from the command line; the value is read as YAML. Repeat `--set` for more.
- **Paths** in a config are relative to the config file.
- **Secrets never go in a config.** Keys such as `env.token_env`,
  `model.api_key_env` and `storage.mysql.url_env` name an environment
  variable; `cua` reads its value at start and masks it in every file and
  log line it writes.
- **Bounds.** A config file may be at most 256 KiB, 20 levels deep and
  10,000 values once YAML aliases are expanded; a key given twice in one
  mapping is an error, not a silent override.
"""


class SchemaRenderer:
    """A JSON Schema (as pydantic's `model_json_schema()` writes it) -> markdown.

    One section per object, reached from the root through properties; each
    section has a table of key | type | default | description. `$ref`s are
    followed (also inside `anyOf`, `oneOf`, `allOf`, array items and
    mapping values), enums and ranges are shown in the type column, and an
    object met again under another path links to its first section.
    """

    def __init__(self, schema: dict):
        self.schema = schema
        self.defs = schema.get("$defs", {}) or schema.get("definitions", {})
        self.sections = []          # (path, schema), in reading order
        self.placed = {}            # $ref -> the anchor of its first section

    # -- schema navigation

    def resolve(self, node: dict) -> dict:
        seen = set()
        while isinstance(node, dict) and "$ref" in node and node["$ref"] not in seen:
            seen.add(node["$ref"])
            ref = node["$ref"]
            target = self.defs.get(ref.rsplit("/", 1)[-1], {}) if ref.startswith("#/") else {}
            extra = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **extra}
        return node

    @staticmethod
    def is_section(node: dict) -> bool:
        return isinstance(node, dict) and "properties" in node

    def alternatives(self, node: dict) -> list[dict]:
        """The schemas a value may match: the members of anyOf / oneOf, a single allOf, or itself."""
        for key in ("anyOf", "oneOf"):
            if key in node:
                return [a for a in node[key]]
        if "allOf" in node and len(node["allOf"]) == 1:
            return [{**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}]
        return [node]

    # -- type column

    def type_text(self, node: dict, path: str) -> str:
        alts = self.alternatives(node)
        many = len([a for a in alts if a.get("type") != "null"]) > 1
        texts, nullable = [], False
        for alt in alts:
            if alt.get("type") == "null":
                nullable = True
                continue
            texts.append(self.one_type(alt, path, many, node))
        text = " or ".join(dict.fromkeys(t for t in texts if t)) or "any"
        return text + (" or `null`" if nullable else "")

    def one_type(self, node: dict, path: str, many: bool = False, field: dict | None = None) -> str:
        target = self.resolve(node)
        if self.is_section(target):
            sub_path = self.alt_path(node, path, field) if many else path
            return f"section: [{code(sub_path)}](#{self.anchor_for(sub_path)})"
        if "const" in target:
            return self.literal(target["const"])
        if "enum" in target:
            values = target["enum"]
            return self.literal(values[0]) if len(values) == 1 else \
                "one of " + ", ".join(self.literal(v) for v in values)
        t = target.get("type")
        if isinstance(t, list):
            return " or ".join(self.one_type({**target, "type": x}, path) for x in t)
        if t == "array":
            items = target.get("items")
            inner = self.type_text(items, path + "[]") if isinstance(items, dict) and items else "any"
            return f"list of {inner}" + self.bounds(target, "minItems", "maxItems", "items")
        if t == "object" or (t is None and "additionalProperties" in target):
            values = target.get("additionalProperties")
            if isinstance(values, dict) and values:
                return f"mapping of names to {self.type_text(values, path + '.<name>')}"
            return "mapping"
        names = {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean"}
        if t in names:
            text = names[t]
            if t == "string":
                text += self.bounds(target, "minLength", "maxLength", "characters")
                if "pattern" in target:
                    text += f", matching {code(target['pattern'])}"
                if "format" in target:
                    text += f" ({target['format']})"
            else:
                text += self.range(target)
            return text
        if "anyOf" in target or "oneOf" in target or "allOf" in target:
            return self.type_text(target, path)
        return "any"

    @staticmethod
    def literal(v) -> str:
        return code(v if isinstance(v, str) else json.dumps(v))

    @staticmethod
    def number(v) -> str:
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
            v = int(v)
        return f"{v:,}" if isinstance(v, int) and abs(v) >= 10_000 else str(v)

    def range(self, node: dict) -> str:
        if node.get("minimum") == -2 ** 63 and node.get("maximum") == 2 ** 63 - 1:
            return " (64-bit)"
        parts = []
        if "exclusiveMinimum" in node:
            parts.append(f"> {self.number(node['exclusiveMinimum'])}")
        elif "minimum" in node:
            parts.append(f"≥ {self.number(node['minimum'])}")
        if "exclusiveMaximum" in node:
            parts.append(f"< {self.number(node['exclusiveMaximum'])}")
        elif "maximum" in node:
            parts.append(f"≤ {self.number(node['maximum'])}")
        return (", " + " and ".join(parts)) if parts else ""

    def bounds(self, node: dict, lo: str, hi: str, unit: str) -> str:
        if lo in node and hi in node:
            return f", {self.number(node[lo])}-{self.number(node[hi])} {unit}"
        if node.get(lo):
            return f", at least {self.number(node[lo])} {unit}"
        if hi in node:
            return f", at most {self.number(node[hi])} {unit}"
        return ""

    # -- default column

    def default_text(self, node: dict, required: bool) -> str:
        if "default" not in node:
            if any(self.is_section(self.resolve(a)) for a in self.alternatives(node)):
                return "(section)"
            return "required" if required else ""
        value = node["default"]
        if isinstance(value, dict) and value and self.is_section(self.resolve(node)):
            return "(section)"
        return code(json.dumps(value, ensure_ascii=False))

    # -- sections

    @staticmethod
    def anchor_for(path: str) -> str:
        slug = "".join(c if c.isalnum() else "-" for c in path.lower())
        while "--" in slug:
            slug = slug.replace("--", "-")
        return "key-" + slug.strip("-") if slug.strip("-") else "key-top"

    def collect(self, node: dict, path: str) -> None:
        """Walks the schema depth first and lists the sections in reading order."""
        self.sections.append((path, node))
        for key, prop in node.get("properties", {}).items():
            sub = f"{path}.{key}" if path else key
            alts = self.alternatives(prop)
            many = len([a for a in alts if a.get("type") != "null"]) > 1
            for alt in alts:
                self.follow(alt, sub, many, prop)
            for extra in ("items", "additionalProperties"):
                inner = self.resolve(prop).get(extra)
                if isinstance(inner, dict):
                    for alt in self.alternatives(inner):
                        self.follow(alt, sub + ("[]" if extra == "items" else ".<name>"), False)

    def follow(self, node: dict, path: str, many: bool, field: dict | None = None) -> None:
        target = self.resolve(node)
        if not self.is_section(target):
            return
        ref = node.get("$ref")
        shown = self.alt_path(node, path, field) if many else path
        if ref and ref in self.placed:
            self.sections.append((shown, {"_same_as": self.placed[ref]}))
            return
        if ref:
            self.placed[ref] = shown
        own = self.resolve({"$ref": ref}) if ref else target  # the object's own description, not the field's
        description = own.get("description") or (field or {}).get("description")
        self.collect({**target, "description": description}, shown)

    def alt_path(self, node: dict, path: str, field: dict | None) -> str:
        """The path of one alternative of a union: `env (kind: cluster)` when a discriminator tells them
        apart, else `env (ClusterEnv)`."""
        target = self.resolve(node)
        key = ((field or {}).get("discriminator") or {}).get("propertyName")
        tag = target.get("properties", {}).get(key, {}) if key else {}
        if "const" in tag or len(tag.get("enum", ())) == 1:
            value = tag["const"] if "const" in tag else tag["enum"][0]
            return f"{path} ({key}: {value if isinstance(value, str) else json.dumps(value)})"
        ref = node.get("$ref")
        return f"{path} ({target.get('title') or (ref.rsplit('/', 1)[-1] if ref else 'object')})"

    def render(self) -> str:
        self.collect(self.schema, "")
        out = []
        for path, node in self.sections:
            heading = code(path) if path else "Top level"
            out.append(f"## {heading} {{ #{self.anchor_for(path)} }}\n")
            if "_same_as" in node:
                first = node["_same_as"]
                out.append(f"The same keys as [{code(first)}](#{self.anchor_for(first)}).\n")
                continue
            description = node.get("description")
            if description:
                out.append(prose(" ".join(description.split())) + "\n")
            rows = []
            required = set(node.get("required", ()))
            for key, prop in node.get("properties", {}).items():
                sub = f"{path}.{key}" if path else key
                desc = prose(prop.get("description") or self.resolve(prop).get("description") or "")
                rows.append([code(key), self.type_text(prop, sub), self.default_text(prop, key in required), desc])
            if rows:
                out.append(table(["key", "type", "default", "description"], rows))
        return "\n".join(out)


def schema_page(schema: dict, intro: str = CONFIG_INTRO, source: str = "the config models in cua_cli/") -> str:
    return GENERATED.format(source=source) + intro + "\n" + SchemaRenderer(schema).render()


def config_page() -> str | None:
    from cua_cli import config

    if not hasattr(config, "json_schema"):
        return None
    return schema_page(config.json_schema())


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated page is stale")
    args = ap.parse_args(argv)

    pages = {CLI_PAGE: cli_page()}
    config = config_page()
    if config is None:
        print(f"gen_docs: skipped {CONFIG_PAGE}: cua_cli.config has no json_schema() yet "
              f"(the config moves to pydantic); the page in the repo is kept as it is", file=sys.stderr)
    else:
        pages[CONFIG_PAGE] = config

    stale = []
    for rel, text in pages.items():
        path = ROOT / rel
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(rel)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"gen_docs: wrote {rel}")
    for rel in stale:
        print(f"gen_docs: {rel} is stale (it differs from what the code generates); run `{REGENERATE}`",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
