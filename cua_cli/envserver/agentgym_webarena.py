"""AgentGym's WebArena env-server protocol, served over real MiniWoB++ tasks.

AgentGym-RL trains through AgentGym's unchanged WebArena client; these are the
routes it uses, with the shapes AgentGym's WebArena server answers (bare JSON,
not wrapped in {"data": ...}):

GET  /                               "ok"
POST /create                         {"env_idx": N}
POST /reset {env_idx, seed, idx}     {"observation", "sites", "object"}
GET  /observation?env_idx=N          the last observation (a JSON string)
POST /step {env_idx, action}         {"observation", "reward", "terminated", "truncated", "info"}
POST /close {env_idx}                {"closed": "closed"}
GET  /list_envs                      [env_idx, ...]

`idx` picks a (task, seed) pair, task-major. The observation is WebArena's
prompt (OBSERVATION: an accessibility-tree-like listing of the page, URL:,
OBJECTIVE:, PREVIOUS ACTION:) built from the live page by page_tree.js; the
action is the model's whole response, and its first ``` fence holds one
WebArena action (`click [id]`, `type [id] [text] [0|1]`, ...). Model text is
only ever parsed: it reaches the browser as key presses and as values passed
to fixed scripts, never as code.

Errors follow AgentGym's server: a bad action, and any failed step, is an
observation with reward 0 and HTTP 200; a failed reset answers the
observation "TimeoutError" (plus an "error" saying why). Where AgentGym's
server crashes with a 500 (a body without its keys, an unknown env on
/observation), this one answers 500 with {"error": message}.
"""

import json
import logging
import re
import threading
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import parse_qs

from selenium.common.exceptions import WebDriverException

from cua_cli._util.ranges import parse_ranges
from cua_cli._util.text import clip
from cua_cli.envserver.miniwob_backend import MiniWobBrowser, check_task
from cua_cli.envserver.pool import MAX_EPISODE_TIME, MAX_SEED, EnvPool, ErrorReply, Session
from cua_cli.envserver.pyautogui_subset import Command
from cua_cli.pyautogui_vocab import MAX_TEXT_CHARS, canonical_key, untypeable

log = logging.getLogger(__name__)

KIND = "agentgym-webarena"
SITES = ["miniwob"]
DEFAULT_SEEDS = "0-99"
# An LLM agent takes seconds per step, so MiniWoB's 10 s limit would end most
# episodes; the raw reward is not scaled by time, so a long limit changes nothing else.
EPISODE_MAX_TIME = MAX_EPISODE_TIME
MAX_ACTION_CHARS = 4_000  # bounds the regular expressions' work, and ids below int()'s 4,300 digits
SCROLL_CLICKS = 4  # wheel clicks of 50 px: about one task area, as WebArena scrolls one viewport
TREE_JS = (Path(__file__).parent / "page_tree.js").read_text()
# Finds a listed node by id (an argument, never code) and scrolls it into view:
# ["point", x, y] is where to click it, ["option", element] an option of a <select>.
LOCATE_JS = """
var node = window.__cua && window.__cua.nodes.get(arguments[0]);
if (!node || !node.isConnected) return null;
var el = node.nodeType === 1 ? node : node.parentElement;
if (el.tagName === 'OPTION') return ['option', el];
el.scrollIntoView({block: 'nearest', inline: 'nearest'});
var box = node;
if (node.nodeType !== 1) { box = document.createRange(); box.selectNodeContents(node); }
var r = box.getClientRects()[0] || box.getBoundingClientRect();
return ['point', r.left + r.width / 2, r.top + r.height / 2];
"""
FENCE = re.compile(r"```(.*?)```", re.DOTALL)
VERBS = ("click", "type", "hover", "press", "scroll", "new_tab", "tab_focus", "close_tab",
         "goto", "go_back", "go_forward", "stop")
WEBARENA_KEYS = {"backquote": "`", "minus": "-", "equal": "=", "backslash": "\\"}  # names WebArena's keys have
FORMAT_HINT = "Put exactly one action inside triple backticks, every argument in [], e.g. ```click [12]```."


class BadAction(Exception):
    """The response holds no valid action; the message tells the agent why."""


class UnknownEnv(Exception):
    pass


@dataclass(frozen=True)
class WebArenaAction:
    verb: str
    element: int = 0  # click, hover, type: the id
    arg: str = ""  # type: the text; press: the keys; scroll: up|down; goto: the URL; stop: the answer
    enter: bool = False  # type: press Enter after
    keys: tuple[str, ...] = ()  # press: canonical key names (pyautogui_vocab)


def parse_action(response: str) -> WebArenaAction:
    """The action in the first ``` fence of a model's response, read as WebArena reads it."""
    fenced = FENCE.search(response)
    if not fenced:
        raise BadAction(f"No action found in your response. {FORMAT_HINT}")
    text = fenced.group(1).strip()
    if not text:
        raise BadAction(f"The ``` fence in your response is empty. {FORMAT_HINT}")
    if len(text) > MAX_ACTION_CHARS:
        raise BadAction(f"Your action is longer than {MAX_ACTION_CHARS} characters. {FORMAT_HINT}")
    verb = text.split("[")[0].strip() if "[" in text else text.split()[0]
    if verb not in VERBS:
        raise BadAction(f'Invalid action "{clip(text, 203)}": unknown action "{clip(verb, 43)}". '
                        f"Valid actions: {', '.join(VERBS)}. {FORMAT_HINT}")

    def match(pattern: str, usage: str) -> re.Match:
        found = re.search(pattern, text, re.ASCII)
        if not found:
            raise BadAction(f'Invalid {verb} action "{clip(text, 203)}": write it as ```{usage}```.')
        return found

    if verb in ("click", "hover"):
        return WebArenaAction(verb, int(match(verb + r" ?\[(\d+)\]", f"{verb} [id]").group(1)))
    if verb == "type":
        # WebArena's rule: without a final [0] or [1], Enter is pressed after typing.
        found = re.search(r"type ?\[(\d+)\] ?\[(.+)\] ?\[(\d+)\]",
                          text if text.endswith(("[0]", "[1]")) else text + " [1]", re.ASCII)
        if not found:
            raise BadAction(f'Invalid type action "{clip(text, 203)}": write it as ```type [id] [text] [0|1]```.')
        content = found.group(2)
        if len(content) > MAX_TEXT_CHARS:
            raise BadAction(f"type: the text is longer than {MAX_TEXT_CHARS} characters.")
        bad = untypeable(content)
        if bad is not None:
            raise BadAction(f"type: the character U+{ord(bad):04X} cannot be typed.")
        return WebArenaAction(verb, int(found.group(1)), content, found.group(3) == "1")
    if verb == "press":
        combo = match(r"press ?\[(.+)\]", "press [key_comb]").group(1)
        return WebArenaAction(verb, arg=combo, keys=_keys(combo))
    if verb == "scroll":
        return WebArenaAction(verb, arg=match(r"scroll ?\[?(up|down)\]?", "scroll [up|down]").group(1))
    if verb == "goto":
        return WebArenaAction(verb, arg=match(r"goto ?\[(.+)\]", "goto [url]").group(1))
    if verb == "tab_focus":
        return WebArenaAction(verb, arg=match(r"tab_focus ?\[(\d+)\]", "tab_focus [tab_index]").group(1))
    if verb == "stop":
        answer = re.search(r"stop ?\[(.+)\]", text)
        return WebArenaAction(verb, arg=answer.group(1) if answer else "")
    return WebArenaAction(verb)


def _keys(combo: str) -> tuple[str, ...]:
    keys = []
    for part in ["+"] if combo.strip() == "+" else combo.split("+"):
        part = part.strip()
        name = canonical_key(WEBARENA_KEYS.get(part.lower(), part))
        if name is None:
            raise BadAction(f'press [{clip(combo, 203)}]: unknown key "{clip(part, 43)}". '
                            "Use key names such as Enter, Tab, ArrowDown, Control+a.")
        keys.append("ctrl" if name == "win" else name)  # as WebArena does off a Mac: Meta is Control
    return tuple(keys)




def parse_seeds(spec: str) -> list[range]:
    """"0-99" or "1,5,10-12" into ranges; each seed once."""
    try:
        return parse_ranges(spec, MAX_SEED)
    except ValueError as e:
        raise ValueError(f"bad seed list {clip(spec, 203)!r}: {e}") from None


def parse_tasks(spec: str) -> list[str]:
    """"click-test-2,enter-text" into MiniWoB task names; each known and listed once."""
    tasks = [t.strip() for t in spec.split(",")]
    for task in tasks:
        check_task(task)
        if tasks.count(task) > 1:
            raise ValueError(f"task {task!r} is listed twice")
    return tasks


@dataclass
class ServedEpisode:
    """One env's episode: what its observation says, and how it ended."""

    task: str
    seed: int
    objective: str
    title: str = ""
    url: str = ""
    tree: str = ""
    lines: dict[int, str] = field(default_factory=dict)  # id -> its line in the last listing, without "[id] "
    previous_action: str = "None"
    mouse: tuple[float, float] | None = None  # where the last click or hover went: scrolls happen there
    terminated: bool = False
    reward: float = 0.0
    raw_reward: float = 0.0
    done: bool = False  # MiniWoB ended the episode (stop ends ours without it)

    def prompt(self) -> str:
        return (f"OBSERVATION:\nTab 0 (current): {self.title}\n\n{self.tree}\nURL: {self.url}\n"
                f"OBJECTIVE: {self.objective}\nPREVIOUS ACTION: {self.previous_action}")

    def observe(self, browser: MiniWobBrowser, fresh: bool = False) -> None:
        page = browser.driver.execute_script(TREE_JS, fresh)
        self.title, self.url = page["title"], page["url"]
        self.lines = {node_id: _line(role, name, props) for node_id, _, role, name, props in page["rows"]}
        self.tree = "\n".join("\t" * depth + f"[{node_id}] {self.lines[node_id]}"
                              for node_id, depth, *_ in page["rows"])

    def info(self, fail_error: str = "") -> dict:
        return {"page": {"url": self.url}, "fail_error": fail_error,
                "miniwob": {"task": self.task, "seed": self.seed, "done": self.done, "raw_reward": self.raw_reward}}


def _line(role: str, name: str, props: list) -> str:
    # WebArena's shape: role 'name' key: value ...; names and values quoted as Python's repr does.
    return f"{role} {name!r}" + "".join(f" {k}: {v!r}" if k == "value" else f" {k}: {v}" for k, v in props)


def step_episode(browser: MiniWobBrowser, ep: ServedEpisode, response: Any) -> dict:
    """Act on the model's response; the /step answer."""
    if ep.terminated:
        return {"observation": ep.prompt(), "reward": ep.reward, "terminated": True, "truncated": False,
                "info": {**ep.info(), "error": "the episode is over; POST /reset to start another"}}
    fail_error = ""
    try:
        if not isinstance(response, str):
            raise BadAction("The action must be text: the model's response.")
        action = parse_action(response)
    except BadAction as e:
        action, ep.previous_action = None, str(e)
    if action:
        ep.previous_action = _describe(action, ep)
        try:
            _perform(browser, ep, action)
        except BadAction as e:
            ep.previous_action = str(e)
        except WebDriverException as e:  # the page refused it (say, a point outside the window)
            fail_error = _one_line(e)
    ep.done, ep.raw_reward = browser.status()
    if ep.done or (action and action.verb == "stop"):
        # WebArena rewards only the end: success 1, else 0. MiniWoB's raw reward is in info.
        ep.terminated, ep.reward = True, 1.0 if ep.done and ep.raw_reward > 0 else 0.0
    ep.observe(browser)
    return {"observation": ep.prompt(), "reward": ep.reward, "terminated": ep.terminated, "truncated": False,
            "info": ep.info(fail_error)}


def _describe(action: WebArenaAction, ep: ServedEpisode) -> str:
    """The PREVIOUS ACTION line for an action, in WebArena's words."""
    verb, node = action.verb, action.element
    if verb in ("click", "hover", "type"):
        if node not in ep.lines:
            return _no_match(action)
        typed = f" [{action.arg}]" if verb == "type" else ""
        return f"{verb} [{node}]{typed} where [{node}] is {ep.lines[node]}"
    if verb in ("scroll", "press", "goto", "stop"):
        return f"{verb} [{action.arg}]"
    if verb == "tab_focus":
        return f"page_focus [{action.arg}]"
    return verb


def _no_match(action: WebArenaAction) -> str:
    return (f'Attempt to perform "{action.verb}" on element "[{clip(str(action.element), 43)}]" but no matching '
            "element found. Please check the observation more carefully.")


def _perform(browser: MiniWobBrowser, ep: ServedEpisode, action: WebArenaAction) -> None:
    verb = action.verb
    if verb in ("click", "hover", "type"):
        target = browser.driver.execute_script(LOCATE_JS, action.element) if action.element in ep.lines else None
        if target is None:  # not listed, or gone from the page since
            raise BadAction(_no_match(action))
        if target[0] == "option":
            if verb != "hover":  # a closed <select> shows no option to hover
                target[1].click()  # WebDriver selects the option as a user does
        else:
            ep.mouse = (target[1], target[2])
            browser.point(*ep.mouse, click=verb != "hover")
        if verb == "type":
            browser.perform([Command("write", text=action.arg + ("\n" if action.enter else ""))])
    elif verb == "press":
        browser.perform([Command("hotkey", keys=action.keys)])
    elif verb == "scroll":
        x, y = ep.mouse or (browser.width / 2, browser.height / 2)
        browser.perform([Command("scroll", x=x, y=y, clicks=SCROLL_CLICKS if action.arg == "up" else -SCROLL_CLICKS)])
    elif verb == "goto":
        if action.arg.strip() != ep.url:
            raise BadAction(f"goto [{clip(action.arg, 203)}] was refused: this task is the single page {ep.url}; "
                            "no other page may be opened.")
    elif verb in ("go_back", "go_forward"):
        raise BadAction(f"{verb} did nothing: this task is a single page, there is no other page to go to.")
    elif verb in ("new_tab", "tab_focus", "close_tab"):
        raise BadAction(f"{verb} did nothing: tabs are not supported here; the task is the single page in tab 0.")


class WebArenaRoutes:
    """AgentGym's WebArena routes over the server's pool of MiniWoB browsers."""

    routes = {"/": "GET", "/create": "POST", "/reset": "POST", "/observation": "GET", "/step": "POST",
              "/close": "POST", "/list_envs": "GET"}

    def __init__(self, pool: EnvPool, tasks: Sequence[str], seeds: Sequence[range]):
        self.pool = pool
        self.tasks = list(tasks)
        self.seeds = list(seeds)
        self._seed_ends = list(accumulate(len(r) for r in self.seeds))
        self.n_seeds = self._seed_ends[-1] if self.seeds else 0
        self.size = len(self.tasks) * self.n_seeds  # idx runs over 0 .. size - 1
        self._lock = threading.Lock()
        self._next_env = 0

    def handle(self, method: str, path: str, query: str, body: Any) -> tuple[int, bytes, str]:
        """(status, body, content type) of a request to one of `routes`."""
        if not self.size:
            raise ErrorReply(404, "this env server was started without --agentgym-tasks: "
                                 "AgentGym's WebArena routes are off")
        if method != self.routes[path]:
            raise ErrorReply(405, f"use {self.routes[path]}")
        if path == "/":
            return 200, b"ok", "text/html; charset=utf-8"  # what AgentGym's Quart server answers
        if path == "/create":
            reply = self.create()
        elif path == "/reset":
            reply = self.reset(body)
        elif path == "/observation":
            reply = self.observation(parse_qs(query).get("env_idx", [""])[0])
        elif path == "/step":
            reply = self.step(body)
        elif path == "/close":
            reply = self.close(body)
        else:
            reply = sorted(s["task_id"] for s in self.pool.sessions(KIND))
        return 200, json.dumps(reply).encode(), "application/json"

    def pair(self, idx: Any) -> tuple[str, int]:
        """The (task, seed) of idx: task-major, idx = task_index * n_seeds + seed_index."""
        if type(idx) is not int or not 0 <= idx < self.size:
            raise ValueError(f"idx must be an integer in [0, {self.size}): "
                             f"{len(self.tasks)} tasks x {self.n_seeds} seeds; got {clip(repr(idx), 53)}")
        task_index, seed_index = divmod(idx, self.n_seeds)
        part = bisect_right(self._seed_ends, seed_index)
        seeds = self.seeds[part]
        return self.tasks[task_index], seeds[seed_index - self._seed_ends[part] + len(seeds)]

    def create(self) -> dict:
        with self._lock:
            env_idx = self._next_env
            self._next_env += 1
        # Counts against --max-envs like any env: a full server answers 503.
        self.pool.open(_server_id(env_idx), KIND, KIND, lambda browser: None, task_id=env_idx)
        return {"env_idx": env_idx}

    def reset(self, body: Any) -> dict:
        if not isinstance(body, dict) or "idx" not in body:
            raise ErrorReply(500, 'body must be {"env_idx": N, "seed": 0, "idx": N}')
        try:
            task, seed = self.pair(body["idx"])
        except ValueError as e:
            return _failed_reset(str(e))

        def start(session: Session) -> ServedEpisode:
            session.state = None  # a failed reset leaves no episode behind
            ep = ServedEpisode(task, seed, session.browser.reset(task, seed, EPISODE_MAX_TIME))
            ep.observe(session.browser, fresh=True)
            session.state, session.env = ep, f"miniwob/{task}"
            return ep

        try:
            ep = self._use(body.get("env_idx"), start)
        except UnknownEnv as e:
            return _failed_reset(str(e))
        except Exception as e:  # AgentGym's server, too, answers any failed reset this way
            log.exception("AgentGym reset of env %s failed", body.get("env_idx"))
            return _failed_reset(_one_line(e))
        return {"observation": ep.prompt(), "sites": SITES, "object": ep.objective}

    def observation(self, env_idx: str) -> str:
        try:
            prompt = self._use(_int(env_idx), lambda s: s.state and s.state.prompt())
        except UnknownEnv as e:
            raise ErrorReply(500, str(e)) from None
        if prompt is None:
            raise ErrorReply(500, f"env {env_idx} has not been reset: POST /reset first")
        return prompt

    def step(self, body: Any) -> dict:
        if not isinstance(body, dict) or "env_idx" not in body or "action" not in body:
            raise ErrorReply(500, "body must be {\"env_idx\": N, \"action\": \"<the model's response>\"}")

        def act(session: Session) -> dict:
            if session.state is None:
                return _no_step(f"env {body['env_idx']} has not been reset: POST /reset first")
            return step_episode(session.browser, session.state, body["action"])

        try:
            return self._use(body["env_idx"], act)
        except UnknownEnv as e:
            return _no_step(str(e))
        except Exception as e:  # AgentGym's server answers a failed step as an observation too
            log.exception("AgentGym step of env %s failed", body["env_idx"])
            return _no_step(_one_line(e))

    def close(self, body: Any) -> dict:
        if not isinstance(body, dict) or "env_idx" not in body:
            raise ErrorReply(500, 'body must be {"env_idx": N}')
        env_idx = body["env_idx"]
        if type(env_idx) is int:
            try:
                self.pool.release(_server_id(env_idx), KIND)
            except ErrorReply as e:
                if e.status != 404:
                    raise
        # Closing an env it does not know is no error for AgentGym's server either.
        return {"closed": "closed"}

    def _use(self, env_idx: Any, action: Callable[[Session], Any]) -> Any:
        """Run action(session) under the env's lock; UnknownEnv if there is no such env."""
        unknown = UnknownEnv(f"unknown env_idx {clip(repr(env_idx), 53)}: never created, closed, "
                             "or released after --idle-timeout; POST /create for a new one")
        if type(env_idx) is not int:
            raise unknown
        try:
            return self.pool.use_session(_server_id(env_idx), action, KIND)
        except ErrorReply as e:
            if e.status == 404:
                raise unknown from None
            raise


def _server_id(env_idx: int) -> str:
    return f"{KIND}-{env_idx}"


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:  # also for thousands of digits
        return None


def _one_line(e: Exception) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"


def _failed_reset(why: str) -> dict:
    return {"observation": "TimeoutError", "sites": "Error", "object": "Error", "error": why}


def _no_step(why: str) -> dict:
    return {"observation": why, "reward": 0.0, "terminated": False, "truncated": False, "info": None}
