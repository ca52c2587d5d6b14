"""OSWorld's VS Code metrics that are not plain text comparisons (those are in general.py; the zip
comparison is in media.py), rewritten for cua.

check_python_file_by_test_suite is the exception to cua's rule that scoring runs on the client:
OSWorld's imports the task's test suite in its own evaluating process, and the suite imports the
Python files the agent edited, so the agent's code would run on the machine that scores. cua never
runs agent-written code on the client. It runs the same test on the desktop instead (the agent's
own machine, where its code ran anyway): the evaluator hands it the episode's EvalContext
(`needs_desktop`), and it copies the files OSWorld's test would find beside it (the episode
folder's .py files the result getter fetched, and the test suite) to a fresh folder there, runs
cua's fixed runner script on them with the desktop's Python, and reads the score it prints.
"""

import json
import posixpath
import uuid
from html.parser import HTMLParser
from pathlib import Path

from ...errors import EnvError
from .textfiles import utf8_text


def compare_result_files(src_path, tgt_path=None) -> float:
    """The agent's result file against the gold one, both stripped. When the gold text is a number
    (as float() reads one): 1 if the gold text is within the result ("The median is 25.3" holds
    "25.3"), or if the result is a number within 1e-4 of it. Otherwise the texts must be equal
    (OSWorld also falls back to that when the result is no number: "25.30001x" is not 25.3)."""
    if not src_path or not tgt_path:
        return 0.0
    src = utf8_text(src_path)
    if src is None:
        return 0.0
    tgt = utf8_text(tgt_path)
    if tgt is None:
        raise ValueError(f"compare_result_files: the gold file {tgt_path!r} is missing or not UTF-8")
    src, tgt = src.strip(), tgt.strip()
    try:
        gold = float(tgt)
        if tgt in src:
            return 1.0
        return float(abs(float(src) - gold) < 1e-4)
    except (ValueError, OverflowError):
        return float(src == tgt)


class _Styles(HTMLParser):
    """The text of each <style> element, as BeautifulSoup's html.parser builder sees it (the same
    parser, character references left alone as bs4 leaves them)."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.styles: list[list[str]] = []
        self.open: list[list[str]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "style":
            self.styles.append([])
            self.open.append(self.styles[-1])

    def handle_startendtag(self, tag, attrs):
        if tag == "style":
            self.styles.append([])

    def handle_endtag(self, tag):
        if tag == "style" and self.open:
            self.open.pop()

    def handle_data(self, data):
        if self.open:
            self.open[-1].append(data)


def check_html_background_image(src_path, rule=None) -> float:
    """1 when a <style> element of the HTML file holds `background-image: url('<value>')` verbatim
    (OSWorld's BeautifulSoup with html.parser; the same parser here)."""
    if not src_path:
        return 0.0
    if not isinstance(rule, dict) or not isinstance(rule.get("value"), str):
        raise ValueError("check_html_background_image: the rule needs a text 'value'")
    html = utf8_text(src_path)
    if html is None:
        return 0.0
    parser = _Styles()
    try:
        parser.feed(html)
        parser.close()
    except AssertionError:  # html.parser refuses the markup: bs4 raises, OSWorld crashes
        return 0.0
    wanted = f"background-image: url('{rule['value']}')"
    return float(any(wanted in "".join(parts) for parts in parser.styles))


# -- the test suite, run on the desktop

TEST_LIMIT_S = 90  # within the desktop server's 120 s for a command; OSWorld has no limit
MAX_UPLOAD_BYTES = 32 << 20

# cua's own runner, run by the desktop's Python: what OSWorld's metric does in its process. The test
# module is loaded from its file with its folder as working directory and first on sys.path, its test
# function called; True/False score 1/0, a number is clipped to [0, 1] (NaN gives 1, as min/max give
# it), anything else counts by its truth. Any failure scores 0; so does a test that exits or outlasts
# the limit (OSWorld would have no score then at all). The test's output is dropped; the score is
# printed after a random marker.
RUNNER = r"""
import importlib.util, json, os, signal, sys

folder, name, function, marker, limit = sys.argv[1:6]


class OutOfTime(BaseException):
    pass


def on_alarm(signum, frame):
    raise OutOfTime()


def score():
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        return 0.0
    os.chdir(folder)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location("cua_test_suite_" + marker[:8], path)
        if spec is None or spec.loader is None:
            return 0.0
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        if not hasattr(module, function):
            return 0.0
        test = getattr(module, function)
        if not callable(test):
            return 0.0
        result = test()
        if isinstance(result, bool):
            return 1.0 if result else 0.0
        if isinstance(result, (int, float)):
            return max(0.0, min(1.0, float(result)))
        return 1.0 if bool(result) else 0.0
    except Exception:
        return 0.0


answer = os.dup(1)  # the test's own output goes nowhere: it cannot swamp the answer (nor write a score)
quiet = os.open(os.devnull, os.O_WRONLY)
os.dup2(quiet, 1)
os.dup2(quiet, 2)
signal.signal(signal.SIGALRM, on_alarm)
signal.alarm(int(limit))
try:
    value = score()
except BaseException:
    value = 0.0
signal.alarm(0)
os.write(answer, (marker + " " + json.dumps(value) + "\n").encode())
os._exit(0)
"""


def _suite_files(folder: Path, test_file: Path) -> dict[str, bytes]:
    """What OSWorld's test finds beside it in its cache folder: the .py files the getters fetched
    (at the top of the episode folder), and the test suite itself."""
    files: dict[str, bytes] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.is_symlink() and path.name.endswith(".py"):
            files[path.name] = path.read_bytes()
    files[test_file.name] = test_file.read_bytes()
    if sum(len(data) for data in files.values()) > MAX_UPLOAD_BYTES:
        raise ValueError("check_python_file_by_test_suite: the files to test are larger than "
                         f"{MAX_UPLOAD_BYTES} bytes")
    return files


def check_python_file_by_test_suite(actual_files, test_file=None, *, desktop_ctx=None, **options) -> float:
    """The task's test suite's `test_function_name` (default "test") run on the desktop over the
    agent's files (see the module's docstring). The result getter's own value is not used (nor is
    it by OSWorld: its test imports the files from the folder they were fetched to)."""
    if desktop_ctx is None:
        raise ValueError("check_python_file_by_test_suite runs on the desktop: it needs the evaluator's context")
    function = options.get("test_function_name", "test")
    if not isinstance(function, str) or not function.isidentifier():
        raise ValueError(f"check_python_file_by_test_suite: test_function_name {function!r} is no name")
    if not test_file or not Path(test_file).is_file():
        return 0.0  # as OSWorld: no test suite, no score
    ctx = desktop_ctx
    files = _suite_files(Path(ctx.folder), Path(test_file))
    remote = f"/tmp/cua-test-suite-{uuid.uuid4().hex}"
    marker = uuid.uuid4().hex
    desktop, budget = ctx.desktop, ctx.budget
    made = desktop.execute(["mkdir", "-p", remote], budget)
    if made.get("returncode") not in (0, None):
        raise EnvError(f"check_python_file_by_test_suite: cannot make {remote} on the desktop: {made.get('error')!r}")
    try:
        for name, data in files.items():
            desktop.upload(posixpath.join(remote, name), data, budget)
        ran = desktop.execute(["python", "-c", RUNNER, remote, Path(test_file).name, function, marker,
                               str(TEST_LIMIT_S)], budget)
    finally:
        desktop.execute(["rm", "-rf", remote], budget)
    for line in reversed(str(ran.get("output") or "").splitlines()):
        head, _, value = line.partition(" ")
        if head == marker:
            try:
                score = json.loads(value)
            except ValueError:
                break
            if isinstance(score, float) and 0.0 <= score <= 1.0:
                return score
            break
    return 0.0  # the runner was killed (the server's limit, the test's own doing) before it printed


check_python_file_by_test_suite.needs_desktop = True

METRICS = {fn.__name__: fn for fn in (compare_result_files, check_html_background_image,
                                      check_python_file_by_test_suite)}
EXTRA = None
