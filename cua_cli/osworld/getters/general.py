"""OSWorld's evaluator getters that need only the in-VM HTTP API or nothing at all: commands, the
terminal, the accessibility tree, files on the desktop and on the web, the wallpaper, rules and relative
times."""

import copy
import datetime
from typing import Any, Callable, Optional

from ..._util.atomic import place_file, write_atomic
from ...errors import BadTask
from ..local_files import safe_name
from .context import EvalContext, given, many, need, pull


def get_rule(ctx: EvalContext, config: dict):
    return config.get("rules")


def get_vm_command_line(ctx: EvalContext, config: dict) -> str:
    return ctx.desktop.execute(need(config, "command", (list, str)), ctx.budget,
                               shell=bool(config.get("shell", False)))["output"]


def get_vm_command_error(ctx: EvalContext, config: dict) -> str:
    return ctx.desktop.execute(need(config, "command", (list, str)), ctx.budget,
                               shell=bool(config.get("shell", False)))["error"]


def get_vm_terminal_output(ctx: EvalContext, config: dict) -> Optional[str]:
    return ctx.desktop.terminal(ctx.budget)


def get_accessibility_tree(ctx: EvalContext, config: dict) -> Optional[str]:
    return ctx.desktop.accessibility(ctx.budget)


def get_list_directory(ctx: EvalContext, config: dict) -> Optional[dict]:
    return ctx.desktop.list_directory(need(config, "path"), ctx.budget)


def get_vm_screen_size(ctx: EvalContext, config: dict) -> dict:
    return ctx.desktop.screen_size(ctx.budget)


def get_vm_window_size(ctx: EvalContext, config: dict) -> Optional[dict]:
    return ctx.desktop.window_size(need(config, "app_class_name"), ctx.budget)


def _with_time(name: str, fmt: str) -> str:
    """OSWorld's `time_suffix`: today's date before the first dot, keeping one extension."""
    if "." not in name:
        return name
    head, _, rest = name.partition(".")
    return head + datetime.datetime.now().strftime(fmt) + "." + rest.split(".")[0]


def get_vm_file(ctx: EvalContext, config: dict):
    """Pull files through `/file` into the episode folder: their local paths, None for a missing one."""
    paths, dests, gives = many(config, "vm_file")
    if config.get("time_suffix") and not config.get("multi", False):
        fmt = config.get("time_format", "%Y_%m_%d")
        paths, dests = [_with_time(p, fmt) for p in paths], [_with_time(d, fmt) for d in dests]
    out = []
    for i, (path, dest) in enumerate(zip(paths, dests)):
        data = pull(ctx, path)
        local = ctx.folder / safe_name(dest)
        if data is not None:
            write_atomic(local, data)
        if i in gives:
            out.append(None if data is None else str(local))
    return given(out)


def get_vm_wallpaper(ctx: EvalContext, config: dict) -> str:
    """The desktop's wallpaper image saved as `dest` in the episode folder: its local path. As in
    OSWorld, a desktop that has none (or answers nothing) leaves an empty file there, for the image
    metric to score."""
    local = ctx.folder / safe_name(need(config, "dest"))
    write_atomic(local, ctx.desktop.wallpaper(ctx.budget) or b"")
    return str(local)


def get_cloud_file(ctx: EvalContext, config: dict):
    """Fetch files from URLs (the gold files of most tasks) through the download cache, each then
    named `dest`, as OSWorld names them: a metric may look for a file beside the one it is given
    (compare_table's `sheet_print` reads `<book>-<sheet>.csv`). They go to the episode folder's
    `expected/`, apart from the desktop's files: where a task gives a result and its gold file one
    name, OSWorld's one cache folder has the gold file replace the agent's, and scores it against
    itself."""
    paths, dests, gives = many(config, "cloud_file")
    folder = ctx.folder / "expected"
    folder.mkdir(exist_ok=True)
    out = []
    for i, (url, dest) in enumerate(zip(paths, dests)):
        local = folder / safe_name(dest)
        place_file(ctx.downloads.fetch(url, dest, ctx.budget), local)
        if i in gives:
            out.append(str(local))
    return given(out)


def get_cache_file(ctx: EvalContext, config: dict) -> str:
    """A file a step captured (`stdout`/`stderr`) in the episode folder."""
    local = ctx.folder / safe_name(need(config, "path"))
    if not local.is_file():
        raise FileNotFoundError(f"no captured file {config['path']!r} (did the postconfig step run?)")
    return str(local)


def get_time_diff_range(ctx: EvalContext, config: dict):
    return config.get("diff_range_in_minutes")


_DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]


def relative_day(name: str, now: datetime.datetime, start: Optional[str] = None) -> datetime.datetime:
    """The day OSWorld's relative time names mean; `start` is the "from" name when `name` is a "to"."""
    weekday = now.weekday()
    next_month = datetime.datetime(now.year + (now.month == 12), now.month % 12 + 1, 1)
    if name == "tomorrow":
        return now + datetime.timedelta(days=1)
    if name in ("5th next month", "10th next month", "11th next month"):
        return next_month.replace(day=int(name.split("th")[0]))
    if name == "this month":
        return now
    if name == "this Saturday":
        return now + datetime.timedelta(days=5 - weekday)
    if name == "this Sunday":
        return now + datetime.timedelta(days=6 - weekday)
    if name == "next Monday":
        return now + datetime.timedelta(days=7 - weekday)
    if name == "next Friday":
        if weekday < 4 and start == "next Monday":
            return now + datetime.timedelta(days=4 - weekday + 7)
        return now + datetime.timedelta(days=4 - weekday if weekday < 4 else 6 - weekday + 5)
    if name == "first monday four months later":
        month = (now.month + 3) % 12 + 1
        first = datetime.datetime(now.year + (month < now.month), month, 1)
        return first + datetime.timedelta(days=(7 - first.weekday()) % 7)
    raise BadTask(f"rule_relativeTime: unknown relative time {name!r}")


def time_format(template: str, day: datetime.datetime) -> str:
    """OSWorld's date placeholders, each replaced once: {DoW} {Month} {DayD} {Year} {Month0D}
    {month} {MonthFull} {Day0D}."""
    for key, value in (("{DoW}", _DAYS[day.weekday()]), ("{Month}", _MONTHS[day.month - 1][:3]),
                       ("{DayD}", str(day.day)), ("{Year}", str(day.year)), ("{Month0D}", f"{day.month:02d}"),
                       ("{month}", _MONTHS[day.month - 1].lower()), ("{MonthFull}", _MONTHS[day.month - 1]),
                       ("{Day0D}", f"{day.day:02d}")):
        template = template.replace(key, value, 1)
    return template


def get_rule_relativeTime(ctx: EvalContext, config: dict, now: Optional[datetime.datetime] = None):
    """The rules with `expected`'s time templates filled for the relative days named in `relativeTime`."""
    rules = copy.deepcopy(need(config, "rules", dict))
    relative, expected = rules.get("relativeTime"), rules.get("expected")
    if not isinstance(relative, dict) or not isinstance(expected, dict) or "from" not in relative:
        raise BadTask("rule_relativeTime: rules need 'relativeTime' {'from', ...} and 'expected'")
    now = now or datetime.datetime.now()
    if "to" not in relative:
        expected["time"] = time_format(expected["time"], relative_day(relative["from"], now))
    else:
        expected["from"] = time_format(expected["from"], relative_day(relative["from"], now))
        expected["to"] = time_format(expected["to"], relative_day(relative["to"], now, start=relative["from"]))
    return rules


GETTERS: dict[str, Callable[[EvalContext, dict], Any]] = {
    name[len("get_"):]: fn for name, fn in dict(globals()).items() if name.startswith("get_") and callable(fn)}
EXTRA = None
