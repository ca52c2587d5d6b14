"""Stand-ins for AgentGym's env servers, for tests (stdlib only).

AgentGym (github.com/WooooDyy/AgentGym) runs one HTTP server per env kind:
`agentenv-<env>/agentenv_<env>/server.py` (FastAPI; WebArena's is Quart) in
front of a wrapper (`environment.py` / `env_wrapper.py` /
`<tool>_environment.py`) that holds the env instances. Most of those servers
need data sets, Java, a browser farm or a GPU, so cua's tests talk to these
stand-ins instead. Each one follows its real server's protocol (routes, id
field, body and answer shapes, error answers, HTTP statuses) as read from
those files and summarised in `shared/notes/agentgym.md`; the game behind it
is a tiny deterministic one, so a test can drive rewards.

    with AgentGymStandIn("babyai") as url:      # "http://127.0.0.1:PORT"
        ...

One preset per protocol family (ENVS lists every name):
  textcraft  agentenv-textcraft (ADaPT's TextCraft). id `id`. /create needs a
             JSON body (all fields optional) and answers {id, observation, done,
             reward}; the new instance already holds task number `id`.
             /observation answers a bare string. Steps never refuse: after the
             goal, further steps answer done false.
  babyai     agentenv-babyai. id `id`. /observation answers an object; the reward
             is `score`, MiniGrid's discounted 1 - 0.9 * steps / max_steps
             (0.8875 for a goal reached in one high-level action). A step, or an
             observation, after done answers {"error": ...} with HTTP 200.
  sciworld   agentenv-sciworld (ScienceWorld). id `id`. `score` 0-100; /close on
             an unknown or closed id is an unhandled error (HTTP 500).
  alfworld   agentenv-alfworld. id `id`. reset {id, game, world_type}. No /close.
  webshop, sqlgym
             agentenv-webshop / agentenv-sqlgym. id `env_idx`. /create answers a
             bare random int (sqlgym keeps only 8 instances and then hands out
             existing ids again); reset answers [observation, null]; step
             answers {state, reward, done, info}. No /close. Unknown ids are not
             caught: HTTP 500.
  searchqa and the tool envs (weather, movie, academia, todo, sheet)
             id `env_idx`. /create {id} answers a bare int; reset {env_idx, id}
             answers a bare string. searchqa's step answers {observation,
             reward, done, info} and has /close; the tool envs' step answers
             {observation, reward, done} (no info) and have no /close.
  maze, wordle
             agentenv-lmrlgym (LMRL-Gym): one server, every route under /maze/
             or /wordle/. reset {id, game} / {id, seed}.
  webarena   agentenv-webarena (Quart). id `env_idx`. create {} -> {env_idx};
             reset {env_idx, seed, idx} -> {observation, sites, object}, or
             observation "TimeoutError" when anything fails; step {env_idx,
             action: raw model text} -> {observation, reward, terminated,
             truncated, info}. The evaluator's reward comes only with
             terminated; a non-final step's reward is 1.0 when the browser
             action ran (WebArena's float(success)). Bad bodies are HTTP 500
             (no pydantic, so no 422).

The game: task number i is won by `winning_action(env, i)` (mostly
`f"win {i}"`), which ends the episode with `SUCCESS_REWARD[env]`; any other
action leaves the game as it was, with the real env's wording where the source
shows it. Every task's first observation contains `f"This is task {i}."`
(webarena: the OBJECTIVE line too).

FastAPI's own answers are copied: HTTP 422 {"detail": [{type, loc, msg,
input}]} for a bad body or query (pydantic v2 wording, checked against FastAPI
0.136), 404 {"detail": "Not Found"}, 405 {"detail": "Method Not Allowed"}, and
a plain-text "Internal Server Error" for an uncaught exception. The wrappers'
own caught errors are {"error": "..."} with HTTP 200.

API:
  AgentGymStandIn(env, *, tasks=100, seed=0, pool_size=None, max_steps=50);
  `with standin as url` starts it (also .start() / .stop(); .url; .base is
  "/maze" or "/wordle" or ""; .id_field is "id" or "env_idx").
  Fault knobs, set on the running stand-in from a test (a route is "step",
  "/step" or "/maze/step"):
    fail_next(route, n=1, status=500)  the next n requests (None: until
        cleared) answer `status` without reaching the env: 500 as the
        framework's own error page, 422 as FastAPI's {"detail": [...]}
    delay(route, seconds)              every request waits first (0 clears)
    timeout_next_reset(n=1)            webarena: reset answers "TimeoutError"
    clear_faults()
  Records: .log (LoggedRequest(method, path, query dict, JSON body or raw
  text or None), oldest first), .requests_to(route, method=None),
  .instances (id -> state).
  Helpers: ENVS, TOOL_ENVS, ID_FIELD, SUCCESS_REWARD, winning_action(env, i),
  partial_action(i) (sciworld: score 50), task_marker(i).
"""

import ast
import json
import random
import re
import string
import threading
import time
from collections import namedtuple
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

TOOL_ENVS = ("weather", "movie", "academia", "todo", "sheet")
ENVS = ("textcraft", "babyai", "sciworld", "alfworld", "webshop", "sqlgym", "searchqa", "maze", "wordle",
        "webarena") + TOOL_ENVS

# What the winning action's step answers as its reward (babyai: `score`, after one high-level action).
SUCCESS_REWARD = {
    "textcraft": 1, "babyai": 0.8875, "sciworld": 100, "alfworld": 1.0, "webshop": 1.0, "sqlgym": 1.0,
    "searchqa": 1.0, "maze": 1.0, "wordle": 1, "webarena": 1.0, **{t: 1.0 for t in TOOL_ENVS},
}

# The key under which each env's id travels.
ID_FIELD = {e: ("env_idx" if e in ("webarena", "webshop", "sqlgym", "searchqa") + TOOL_ENVS else "id") for e in ENVS}

LoggedRequest = namedtuple("LoggedRequest", "method path query body")


def winning_action(env: str, i: int) -> str:
    """The action text that wins task `i` of `env` (what the client must send as `action`)."""
    if env == "babyai":
        return f"go to red ball {i}"
    if env == "searchqa":
        return f"<answer> win {i} </answer>"
    if env in TOOL_ENVS:
        return f'Action: finish with Action Input: {{"answer": "win {i}"}}'
    if env == "webarena":
        return f"In summary, the next action I will perform is ```stop [win {i}]```"
    return f"win {i}"


def partial_action(i: int) -> str:
    """sciworld only: half the task, score 50 (once)."""
    return f"half {i}"


def task_marker(i: int) -> str:
    return f"This is task {i}."


# ---------------------------------------------------------------------------------------------------------------
# HTTP answers

_FASTAPI_500 = b"Internal Server Error"
_WERKZEUG_PAGES = {
    400: ("Bad Request", "The browser (or proxy) sent a request that this server could not understand."),
    404: ("Not Found", "The requested URL was not found on the server. If you entered the URL manually please "
                       "check your spelling and try again."),
    405: ("Method Not Allowed", "The method is not allowed for the requested URL."),
    500: ("Internal Server Error", "The server encountered an internal error and was unable to complete your "
                                   "request. Either the server is overloaded or there is an error in the "
                                   "application."),
}
_PHRASES = {400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 422: "Unprocessable Entity",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout"}


class _Reply:
    __slots__ = ("status", "ctype", "data")

    def __init__(self, status, ctype, data: bytes):
        self.status, self.ctype, self.data = status, ctype, data


def _json(obj, status=200) -> _Reply:
    return _Reply(status, "application/json", json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def _error_reply(flavor: str, status: int) -> _Reply:
    """The framework's own answer for `status` (FastAPI or Quart/werkzeug)."""
    if flavor == "quart":
        title, text = _WERKZEUG_PAGES.get(status, (_PHRASES.get(status, "Error"), ""))
        page = f"<!doctype html>\n<html lang=en>\n<title>{status} {title}</title>\n<h1>{title}</h1>\n<p>{text}</p>\n"
        return _Reply(status, "text/html; charset=utf-8", page.encode())
    if status == 500:
        return _Reply(500, "text/plain; charset=utf-8", _FASTAPI_500)
    if status == 422:
        return _json({"detail": [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]}, 422)
    return _json({"detail": _PHRASES.get(status, "Error")}, status)


# ---------------------------------------------------------------------------------------------------------------
# FastAPI/pydantic v2 validation, the few types AgentGym's models use

_REQUIRED = object()


class _Invalid(Exception):
    def __init__(self, errors):
        super().__init__(errors)
        self.errors = errors


def _coerce(kind: str, value, loc):
    """Pydantic v2 lax mode: (value, None) or (None, error dict)."""
    optional = kind.endswith("?")
    base = kind.rstrip("?")
    if value is None and optional:
        return None, None
    if base == "int":
        if isinstance(value, bool):
            return int(value), None
        if isinstance(value, int):
            return value, None
        if isinstance(value, float):
            if value.is_integer():
                return int(value), None
            return None, {"type": "int_from_float", "loc": loc,
                          "msg": "Input should be a valid integer, got a number with a fractional part", "input": value}
        if isinstance(value, str):
            m = re.fullmatch(r"\s*([+-]?[0-9_]+)(\.0*)?\s*", value)   # "3", " 7 ", "3.0", "1_000"
            try:
                return int(m.group(1)), None
            except (AttributeError, ValueError):
                return None, {"type": "int_parsing", "loc": loc,
                              "msg": "Input should be a valid integer, unable to parse string as an integer",
                              "input": value}
        return None, {"type": "int_type", "loc": loc, "msg": "Input should be a valid integer", "input": value}
    if isinstance(value, str):
        return value, None
    return None, {"type": "string_type", "loc": loc, "msg": "Input should be a valid string", "input": value}


def _fields(data: dict, spec: dict, where: str) -> dict:
    out, errors = {}, []
    for name, (kind, default) in spec.items():
        if name not in data:
            if default is _REQUIRED:
                errors.append({"type": "missing", "loc": [where, name], "msg": "Field required",
                               "input": data if where == "body" else None})
            else:
                out[name] = default
            continue
        value, err = _coerce(kind, data[name], [where, name])
        if err:
            errors.append(err)
        else:
            out[name] = value
    if errors:
        raise _Invalid(errors)
    return out


def _is_json(ctype: str) -> bool:
    main = ctype.split(";")[0].strip().lower()
    return main == "application/json" or (main.startswith("application/") and main.endswith("+json"))


def _validate_body(raw: bytes, ctype: str, spec: dict) -> dict:
    """What FastAPI does with a pydantic body model (always a required parameter in AgentGym's servers)."""
    if not raw:
        raise _Invalid([{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}])
    if _is_json(ctype):
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            pos, msg = (e.pos, e.msg) if isinstance(e, json.JSONDecodeError) else (0, str(e))
            raise _Invalid([{"type": "json_invalid", "loc": ["body", pos], "msg": "JSON decode error", "input": {},
                             "ctx": {"error": msg}}])
    else:
        data = raw.decode("utf-8", "replace")
    if data is None:   # a JSON null body counts as no body
        raise _Invalid([{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}])
    if not isinstance(data, dict):
        raise _Invalid([{"type": "model_attributes_type", "loc": ["body"],
                         "msg": "Input should be a valid dictionary or object to extract fields from", "input": data}])
    return _fields(data, spec, "body")


# ---------------------------------------------------------------------------------------------------------------
# env instances

class _Instance:
    def __init__(self, iid):
        self.id = iid
        self.task = None          # task index after reset (None: not reset yet)
        self.done = False
        self.deleted = False
        self.observation = None   # what GET /observation answers (the last observation)
        self.reward = 0           # babyai / tool envs: the env's sticky reward
        self.score = 0
        self.steps = 0            # maze: moves made; wordle: tries; babyai: low-level steps
        self.half = False         # sciworld: partial credit taken
        self.history = ["None"]   # webarena: action history for the prompt
        self.page = None          # webarena: page text


def _check(inst, iid, is_reset=False, done_check=True):
    """The wrappers' _check_id: raises with their wording."""
    if inst is None:
        raise NameError(f"The id {iid} is not valid.")
    if inst.deleted:
        raise NameError(f"The task with environment {iid} has been deleted.")
    if done_check and not is_reset and inst.done:
        raise NameError(f"The task with environment {iid} has finished.")


def _caught(fn):
    """The wrappers' `except Exception as e: return {"error": str(e)}`."""
    def wrapped(self, *args):
        try:
            return fn(self, *args)
        except Exception as e:  # noqa: BLE001 - that is what the real wrappers do
            return {"error": str(e)}
    return wrapped


def _list_index(n: int, size: int) -> int:
    """Python list indexing, as `self.games[data_idx]` does (negative indexes work)."""
    if not -size <= n < size:
        raise IndexError("list index out of range")
    return n % size


def _normalize_answer(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


# ---------------------------------------------------------------------------------------------------------------
# the server

class AgentGymStandIn:
    """A stand-in AgentGym env server for `env` (one of ENVS) on 127.0.0.1, in a daemon thread.

    tasks: how many tasks the data set has (index range; textcraft wraps modulo it, like its 544 goals).
    seed: seeds the random ids webshop/sqlgym hand out and webshop's random session.
    pool_size: webshop/sqlgym's instance cap after which /create hands out existing ids (8000 / 8).
    max_steps: maze's step limit (50) after which a step answers "Failure" with reward -1.
    """

    def __init__(self, env: str, *, tasks: int = 100, seed: int = 0, pool_size: int | None = None,
                 max_steps: int = 50):
        if env not in ENVS:
            raise ValueError(f"unknown env {env!r}; one of {', '.join(ENVS)}")
        self.env = env
        self.family = "tool" if env in TOOL_ENVS else env
        self.flavor = "quart" if env == "webarena" else "fastapi"
        self.base = {"maze": "/maze", "wordle": "/wordle"}.get(env, "")
        self.id_field = ID_FIELD[env]
        self.tasks = tasks
        self.max_steps = max_steps
        self.pool_size = pool_size if pool_size is not None else {"webshop": 8000, "sqlgym": 8}.get(env)
        self.instances: dict = {}
        self.log: list = []
        self._rng = random.Random(seed)
        self._next_id = 0
        self._pool: list = []
        self._pool_now = -1
        self._lock = threading.Lock()
        self._fail: dict = {}      # route -> [remaining (None: forever), status]
        self._delay: dict = {}     # route -> seconds
        self._reset_timeouts = 0
        self._routes = self._build_routes()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True,
                                        name=f"agentgym-standin-{env}")
        self._started = False

    # -- life -----------------------------------------------------------------------------------------------
    def start(self) -> str:
        if not self._started:
            self._started = True
            self._thread.start()
        return self.url

    def stop(self) -> None:
        if self._started:
            self._server.shutdown()
            self._started = False
        self._server.server_close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- knobs ----------------------------------------------------------------------------------------------
    def _key(self, route: str) -> str:
        route = route.strip()
        if self.base and route.startswith(self.base + "/"):
            route = route[len(self.base):]
        return route.strip("/")

    def fail_next(self, route: str, n: int | None = 1, status: int = 500) -> None:
        """The next `n` requests to `route` (e.g. "step", "/step", "/maze/step"; None: all until cleared)
        answer HTTP `status` without reaching the env: 500 as the framework's own error page, 422 as
        FastAPI's {"detail": [...]}, any other as {"detail": phrase}."""
        with self._lock:
            if n == 0:
                self._fail.pop(self._key(route), None)
            else:
                self._fail[self._key(route)] = [n, status]

    def delay(self, route: str, seconds: float) -> None:
        """Every request to `route` waits `seconds` before it is handled (0 clears)."""
        with self._lock:
            if seconds:
                self._delay[self._key(route)] = seconds
            else:
                self._delay.pop(self._key(route), None)

    def timeout_next_reset(self, n: int = 1) -> None:
        """webarena: the next `n` resets answer {"observation": "TimeoutError", "sites": "Error", "object":
        "Error"} (what its server answers when loading the task fails)."""
        with self._lock:
            self._reset_timeouts = n

    def clear_faults(self) -> None:
        with self._lock:
            self._fail.clear()
            self._delay.clear()
            self._reset_timeouts = 0

    def requests_to(self, route: str, method: str | None = None) -> list:
        """The logged requests to `route`, oldest first."""
        key = self._key(route)
        with self._lock:
            return [r for r in self.log if self._key(r.path) == key and (method is None or r.method == method)]

    # -- dispatch -------------------------------------------------------------------------------------------
    def _handle(self, method: str, raw_path: str, headers, raw: bytes) -> _Reply:
        parts = urlsplit(raw_path)
        path = parts.path
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        ctype = headers.get("Content-Type", "") or ""
        logged_body = None
        if raw:
            try:
                logged_body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                logged_body = raw.decode("utf-8", "replace")
        if path == "/":
            key = ""
        elif self.base and not path.startswith(self.base + "/"):
            key = None
        else:
            key = path[len(self.base):].strip("/") or None
        with self._lock:
            self.log.append(LoggedRequest(method, path, query, logged_body))
            wait = self._delay.get(key, 0)
        if wait:
            time.sleep(wait)
        with self._lock:
            fault = self._fail.get(key)
            if fault is not None:
                remaining, status = fault
                if remaining is not None:
                    if remaining <= 1:
                        del self._fail[key]
                    else:
                        fault[0] = remaining - 1
                return _error_reply(self.flavor, status)
        route = self._routes.get((method, key))
        if route is None:
            known = any(k == key for (_, k) in self._routes)
            return _error_reply(self.flavor, 405 if known else 404)
        where, spec, fn = route
        if self.flavor == "quart":
            args = None
            if raw and _is_json(ctype):
                try:
                    args = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    return _error_reply("quart", 400)
            if where == "query":
                args = query
        else:
            try:
                if where == "body":
                    args = _validate_body(raw, ctype, spec)
                elif where == "query":
                    args = _fields(query, spec, "query")
                else:
                    args = None
            except _Invalid as e:
                return _json({"detail": e.errors}, 422)
        with self._lock:
            try:
                result = fn(args)
            except Exception:  # noqa: BLE001 - an uncaught error in the real server: the framework's 500
                return _error_reply(self.flavor, 500)
        return result if isinstance(result, _Reply) else _json(result)

    # -- routes ---------------------------------------------------------------------------------------------
    def _build_routes(self) -> dict:
        INT, STR = ("int", _REQUIRED), ("str", _REQUIRED)
        fam = self.family
        idf = self.id_field
        r = {}

        def post(name, spec, fn):
            r[("POST", name)] = ("body" if spec is not None else None, spec, fn)

        def get(name, spec, fn):
            r[("GET", name)] = ("query" if spec is not None else None, spec, fn)

        if self.flavor == "quart":
            get("", None, lambda a: "ok")
            get("list_envs", None, lambda a: sorted(self.instances))
            post("create", None, self._wa_create)
            post("reset", None, self._wa_reset)
            get("observation", {}, self._wa_observation)
            post("step", None, self._wa_step)
            post("close", None, self._wa_close)
            return r

        greeting = {"textcraft": "This is environment TextCraft.", "babyai": "This is environment BabyAI.",
                    "sciworld": "This is environment ScienceWorld.", "alfworld": "This is environment AlfWorld.",
                    "maze": "This is environment LMRL-Gym.", "wordle": "This is environment LMRL-Gym."}
        get("", None, lambda a: greeting.get(fam, "ok"))
        if fam in ("webshop", "sqlgym", "tool"):
            get("list_envs", None, lambda a: list(self.instances))
        step_spec = {idf: INT, "action": STR}
        obs_spec = {idf: INT}
        if fam == "textcraft":
            post("create", {"commands": ("str?", None), "goal": ("str?", None)}, self._tc_create)
            post("reset", {"id": INT, "data_idx": ("int?", 0)}, self._tc_reset)
            get("observation", obs_spec, self._tc_observation)
            post("step", step_spec, self._tc_step)
            post("close", {"id": INT}, self._close_bool)
        elif fam == "babyai":
            post("create", None, self._create_obj)
            post("reset", {"id": INT, "data_idx": INT}, self._ba_reset)
            get("observation", obs_spec, self._ba_observation)
            post("step", step_spec, self._ba_step)
            post("close", {"id": INT}, self._close_bool)
        elif fam == "sciworld":
            post("create", None, self._create_obj)
            post("reset", {"id": INT, "data_idx": INT}, self._sw_reset)
            get("observation", obs_spec, self._observation_checked)
            post("step", step_spec, self._sw_step)
            post("close", {"id": INT}, self._sw_close)
        elif fam == "alfworld":
            post("create", None, self._create_obj)
            post("reset", {"id": INT, "game": INT, "world_type": STR}, self._af_reset)
            get("observation", obs_spec, self._observation_checked)
            get("available_actions", obs_spec, self._af_available)
            post("step", step_spec, self._af_step)
        elif fam in ("webshop", "sqlgym"):
            post("create", None, self._create_pooled)
            if fam == "webshop":
                post("reset", {"env_idx": INT, "session_id": ("int?", None)}, self._ws_reset)
                post("step", step_spec, self._ws_step)
            else:
                post("reset", {"env_idx": INT, "item_id": INT}, self._sq_reset)
                post("step", step_spec, self._sq_step)
            get("observation", obs_spec, self._observation_uncaught)
        elif fam == "searchqa":
            post("create", {"id": INT}, self._create_int_with_item)
            post("reset", {"env_idx": INT, "id": ("int?", None)}, self._qa_reset)
            get("observation", obs_spec, self._qa_observation)
            post("step", step_spec, self._qa_step)
            post("close", {"env_idx": INT}, self._close_bool)
        elif fam == "tool":
            post("create", {"id": INT}, self._create_int_with_item)
            post("reset", {"env_idx": INT, "id": ("int?", None)}, self._tool_reset)
            get("observation", obs_spec, self._tool_observation)
            post("step", step_spec, self._tool_step)
        elif fam == "maze":
            post("create", None, self._create_obj)
            post("reset", {"id": INT, "game": INT}, self._mz_reset)
            get("available_actions", None, lambda a: ["move left", "move right", "move up", "move down"])
            get("observation", obs_spec, self._observation_checked)
            post("step", step_spec, self._mz_step)
        elif fam == "wordle":
            post("create", None, self._create_obj)
            post("reset", {"id": INT, "seed": INT}, self._wd_reset)
            get("observation", obs_spec, self._observation_checked)
            post("step", step_spec, self._wd_step)
        return r

    # -- shared handlers ------------------------------------------------------------------------------------
    def _new(self) -> _Instance:
        iid = self._next_id
        self._next_id += 1
        inst = self.instances[iid] = _Instance(iid)
        return inst

    def _create_obj(self, a):
        return {"id": self._new().id}

    def _create_pooled(self, a):
        """webshop/sqlgym: a random id in the real range; once the pool is full, existing ids in turn."""
        if len(self.instances) == self.pool_size:
            self._pool_now = (self._pool_now + 1) % self.pool_size
            return self._pool[self._pool_now]
        top = 48950076 if self.family == "webshop" else 489576
        iid = self._rng.randint(0, top)
        while iid in self.instances:
            iid = self._rng.randint(0, top)
        inst = self.instances[iid] = _Instance(iid)
        self._pool.append(iid)
        if self.family == "webshop":  # its create already resets to a random session
            self._ws_load(inst, self._rng.randrange(self.tasks))
        return iid

    def _create_int_with_item(self, a):
        """searchqa / tool envs: POST /create {id} -> bare int; the item is loaded at once (bad item: 500)."""
        task = self._item(a["id"])
        inst = self._new()
        self._load(inst, task)
        return inst.id

    def _item(self, n):
        if self.family == "searchqa":
            if n is None:
                raise TypeError("'<=' not supported between instances of 'int' and 'NoneType'")
            if not 0 <= n < self.tasks:
                raise ValueError(f"Item id {n} is out of range.")
            return n
        return _list_index(n, self.tasks)

    def _load(self, inst, task):
        inst.task, inst.done, inst.reward, inst.score, inst.steps = task, False, 0, 0, 0
        if self.family == "tool":
            inst.observation = "New trial starts. Once you have finished the goal, please remember to take " \
                               "'finish' action to end this goal."

    def _close_bool(self, a):
        iid = a[self.id_field]
        return self.instances.pop(iid, None) is not None

    def _observation_checked(self, a):
        return self._observation_checked_inner(a["id"])

    @_caught
    def _observation_checked_inner(self, iid):
        inst = self.instances.get(iid)
        _check(inst, iid)
        if inst.observation is None:
            raise KeyError("observation")
        return inst.observation

    def _observation_uncaught(self, a):
        inst = self.instances[a["env_idx"]]
        if inst.observation is None:   # sqlgym before reset: None.observation
            raise AttributeError("'NoneType' object has no attribute 'observation'")
        return inst.observation

    # -- textcraft ------------------------------------------------------------------------------------------
    def _tc_text(self, t):
        return (f"Crafting commands:\nwin {t}: craft 1 task {t} trophy using nothing\n"
                f"craft 1 stick using 2 oak planks\n\nGoal: craft task {t} trophy. {task_marker(t)}")

    def _tc_create(self, a):
        inst = self._new()
        inst.task = inst.id % self.tasks   # the real create resets with data_idx=id
        inst.observation = self._tc_text(inst.task)
        return {"id": inst.id, "observation": inst.observation, "done": False, "reward": 0}

    @_caught
    def _tc_reset(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid, done_check=False)
        if a["data_idx"] is None:
            raise TypeError("unsupported operand type(s) for %: 'NoneType' and 'int'")
        inst.task = a["data_idx"] % self.tasks
        inst.observation, inst.done, inst.reward = self._tc_text(inst.task), False, 0
        return {"id": iid, "observation": inst.observation, "done": False, "reward": 0}

    @_caught
    def _tc_observation(self, a):
        inst = self.instances.get(a["id"])
        _check(inst, a["id"], done_check=False)
        return inst.observation

    @_caught
    def _tc_step(self, a):
        iid, action = a["id"], a["action"]
        inst = self.instances.get(iid)
        _check(inst, iid, done_check=False)   # textcraft never refuses a step
        if action == winning_action("textcraft", inst.task):
            obs, reward, done = f"Crafted 1 minecraft:task_{inst.task}_trophy", 1, True
        else:
            obs, reward, done = f"Could not execute {action}", 0, False
        inst.observation, inst.reward, inst.done = obs, reward, done
        return {"observation": obs, "reward": reward, "done": done}

    # -- babyai ---------------------------------------------------------------------------------------------
    def _ba_actions(self, t):
        acts = ["turn left", "turn right", winning_action("babyai", t), "check available actions"]
        return acts, "\nAvailable actions: [" + ", ".join(f'"{x}"' for x in acts) + "]"

    def _ba_view(self, t):
        return (f"In front of you in this room, you can see several objects: There is a red ball {t} 1 steps in "
                f"front of you and 2 steps to your left. The room has walls around you. You are facing a wall "
                f"3 steps away. You are not carrying anything. {task_marker(t)}")

    @_caught
    def _ba_reset(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid, is_reset=True)
        t = a["data_idx"]
        inst.task, inst.done, inst.reward, inst.score, inst.steps = t, False, 0, 0, 0
        inst.observation = self._ba_view(t)   # the env's last state (without goal line and action list)
        obs = f"Your goal: go to the red ball {t}\n" + inst.observation + self._ba_actions(t)[1]
        return {"observation": obs, "reward": 0, "score": 0, "deleted": False, "done": False}

    @_caught
    def _ba_observation(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid)
        if inst.task is None:
            return {"observation": "Environment not initialized", "reward": 0, "score": 0, "done": False,
                    "deleted": inst.deleted}
        obs = f"Your goal: go to the red ball {inst.task}\n" + inst.observation + self._ba_actions(inst.task)[1]
        return {"observation": obs, "reward": inst.reward, "score": inst.score, "done": inst.done,
                "deleted": inst.deleted}

    @_caught
    def _ba_step(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid)
        if inst.task is None:
            raise KeyError(iid)
        t = inst.task
        acts, suffix = self._ba_actions(t)
        action = a["action"].lower().strip()
        if action == winning_action("babyai", t):
            inst.steps += 8                      # the path's low-level MiniGrid steps
            inst.reward = 1 - 0.9 * (min(inst.steps, 64) / 64)
            inst.done = True
            inst.observation = self._ba_view(t) + "\n The task is completed."
        elif action in ("turn left", "turn right"):
            inst.steps += 1
            inst.observation = self._ba_view(t)
        elif "check" in action:
            inst.observation = "You can take the following actions: " + ", ".join(acts)
        elif action == "":
            inst.observation = "No change in state."
        else:
            inst.observation = "The action is not recognized. Please check valid actions."
        inst.score = inst.score + inst.reward
        return {"observation": inst.observation + suffix, "reward": inst.reward, "score": inst.score,
                "done": inst.done}

    # -- sciworld -------------------------------------------------------------------------------------------
    @_caught
    def _sw_reset(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid, is_reset=True)
        t = _list_index(a["data_idx"], self.tasks)
        inst.task, inst.done, inst.score, inst.half = t, False, 0, False
        inst.observation = (f"This room is called the workshop. In it, you see: the agent, a table, a stand-in "
                            f"for task {t}. {task_marker(t)}")
        return {"task_name": "standin", "var_num": t,
                "task_description": f"Your task is to finish task {t}. To do so, type: win {t}.",
                "observation": inst.observation, "reward": 0, "score": 0, "deleted": False, "done": False}

    @_caught
    def _sw_step(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid)
        if inst.task is None:
            raise RuntimeError("stand-in: no task loaded (reset first)")
        t, action = inst.task, a["action"].strip()
        reward = 0
        if action == winning_action("sciworld", t):
            reward, inst.score, inst.done = 100 - inst.score, 100, True
            obs = f"You finish task {t}."
        elif action == partial_action(t) and not inst.half:
            inst.half, reward, inst.score = True, 50, 50
            obs = f"You are half way through task {t}."
        else:
            obs = "No known action matches that input."
        inst.observation = obs
        return {"observation": obs, "reward": reward, "score": inst.score, "done": inst.done}

    def _sw_close(self, a):
        inst = self.instances[a["id"]]       # unknown id: KeyError, uncaught (HTTP 500)
        if inst.deleted:
            raise ValueError(f"The task with environment {a['id']} has been deleted.")
        inst.deleted = True
        return True

    # -- alfworld -------------------------------------------------------------------------------------------
    def _af_actions(self, t):
        return ["look", "inventory", "go to table 1", winning_action("alfworld", t)]

    @_caught
    def _af_reset(self, a):
        if a["world_type"] not in ["Text", "Embody", "Hybrid"]:
            return {"error": 'world_type must be one of "Text", "Embody" and "Hybrid"'}
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid, is_reset=True)
        t = _list_index(a["game"], self.tasks)
        inst.task, inst.done, inst.reward = t, False, 0
        inst.observation = (f"You are in the middle of a room. Looking quickly around you, you see a table 1.\n\n"
                            f"Your task is to: finish task {t}. {task_marker(t)}")
        return {"id": iid, "observation": inst.observation, "available_actions": self._af_actions(t),
                "task_type": f"standin_task-{t}/trial_{t}"}

    @_caught
    def _af_available(self, a):
        inst = self.instances.get(a["id"])
        _check(inst, a["id"])
        if inst.task is None:
            raise KeyError("available_actions")
        return self._af_actions(inst.task)

    @_caught
    def _af_step(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid)
        if inst.task is None:
            raise KeyError(iid)
        t = inst.task
        if a["action"] == winning_action("alfworld", t):
            obs, reward, inst.done = f"You finish task {t}.", 1.0, True
        else:
            obs, reward = "Nothing happens.", 0.0
        inst.observation, inst.reward = obs, reward
        return {"observation": obs, "reward": reward, "available_actions": self._af_actions(t), "done": inst.done}

    # -- webshop --------------------------------------------------------------------------------------------
    def _ws_load(self, inst, t):
        inst.task, inst.done = t, False
        inst.observation = (f"WebShop [SEP] Instruction: [SEP] i need the win {t} item, {task_marker(t)} "
                            f"[SEP] Search")

    def _ws_reset(self, a):
        inst = self.instances[a["env_idx"]]
        sid = a["session_id"]
        self._ws_load(inst, self._rng.randrange(self.tasks) if sid is None else _list_index(sid, self.tasks))
        return [inst.observation, None]

    def _ws_step(self, a):
        inst = self.instances[a["env_idx"]]
        if a["action"] == winning_action("webshop", inst.task):
            inst.observation = f"Thank you for shopping with us! [SEP] task {inst.task} [SEP] Purchased"
            return {"state": inst.observation, "reward": 1.0, "done": True, "info": None}
        return {"state": inst.observation, "reward": 0.0, "done": False, "info": None}

    # -- sqlgym ---------------------------------------------------------------------------------------------
    def _sq_reset(self, a):
        inst = self.instances.get(a["env_idx"])
        if inst is None:
            raise IndexError(f"Env {a['env_idx']} not found")
        n = a["item_id"]
        if not 0 <= n < self.tasks:
            raise ValueError(f"Item id {n} is out of range.")
        inst.task = n
        inst.observation = f"Question {n}: what does task {n} answer? {task_marker(n)}"
        return [inst.observation, None]

    def _sq_step(self, a):
        inst = self.instances.get(a["env_idx"])
        if inst is None:
            raise IndexError(f"Env {a['env_idx']} not found")
        if inst.task is None:
            raise AttributeError("'NoneType' object has no attribute 'step'")
        win = winning_action("sqlgym", inst.task)
        state = f"[('task {inst.task} answer',)]" if a["action"] == win else "[]"
        if len(state) > 100:
            state = state[:100] + "..."
        # SqlGym's single-query mode: every step ends the episode
        return {"state": state, "reward": 1.0 if a["action"] == win else 0.0, "done": True,
                "info": {"ground_truth": win}}

    # -- searchqa -------------------------------------------------------------------------------------------
    def _qa_prompt(self, t):
        return ("You must reason inside <think>...</think> first. If you do not have enough knowledge, issue a "
                "<search>...</search> and then STOP. [...] For example, <answer> Beijing </answer>. Follow this "
                f"process every time.\n\n Question: {task_marker(t)} What is its magic phrase?")

    def _qa_reset(self, a):
        inst = self.instances[a["env_idx"]]
        self._load(inst, self._item(a["id"]))
        return self._qa_prompt(inst.task)

    def _qa_observation(self, a):
        return self._qa_prompt(self.instances[a["env_idx"]].task)

    def _qa_step(self, a):
        inst = self.instances[a["env_idx"]]
        response = a["action"]
        m = re.search(r"<(search|answer)>(.*?)</\1>", response, re.DOTALL)
        reward, done = 0.0, False
        if m and m.group(1) == "search":
            obs = (f"<information>Doc 1(Title: Task {inst.task}) The magic phrase of task {inst.task} is "
                   f"win {inst.task}.\n</information>")
        elif m:
            answers = re.findall(r"<answer>(.*?)</answer>", response, re.DOTALL)
            if _normalize_answer(answers[-1].strip()) == _normalize_answer(f"win {inst.task}"):
                reward, done = 1.0, True
                obs = "Congratulations! You have answered the question correctly."
            else:
                obs = "Sorry, your answer is incorrect. Please try again."
        else:
            obs = ("Your previous action is invalid. If you want to search, you should put the query between "
                   "<search> and </search>. If you want to give the final answer, you should put the answer "
                   "between <answer> and </answer>. Please try again.")
        return {"observation": obs, "reward": reward, "done": done, "info": None}

    # -- tool envs ------------------------------------------------------------------------------------------
    def _tool_goal(self, t):
        return f"{task_marker(t)} Finish with the answer win {t}."

    def _tool_reset(self, a):
        inst = self.instances[a["env_idx"]]
        self._load(inst, inst.task if a["id"] is None else self._item(a["id"]))
        return self._tool_observation(a)

    def _tool_observation(self, a):
        inst = self.instances[a["env_idx"]]
        if "New trial starts." in inst.observation:
            return ("Now new trial starts.\nYou should perform actions to accomplish the goal: "
                    + self._tool_goal(inst.task) + "\nGive me one action.")
        return "Observation: " + inst.observation

    def _tool_step(self, a):
        inst = self.instances[a["env_idx"]]
        m = re.search(r"\s*(.*?)\s*with\s*Action Input:\s*(.*?)$", a["action"])
        if m is None:
            obs = 'Format error, please response in the format of  "Action: [your action] with Action Input: ' \
                  '[your action input]'
            return {"observation": obs, "reward": 1.0 if inst.reward > 0 else float(inst.reward), "done": False}
        action = m.group(1) + " with Action Input: " + m.group(2)
        parsed = re.match(r".*?Action:\s*(.*?)\s*with\s*Action Input:\s*(.*?)$", action, re.MULTILINE | re.DOTALL)
        obs = None
        if parsed is None:
            obs = "ERROR | TypeError(cannot unpack non-iterable NoneType object)"
        else:
            try:
                params = ast.literal_eval(parsed.group(2))   # the real env eval()s it
            except (ValueError, SyntaxError):
                obs = ("ERROR | Exception(Parameters in action input are not valid, please change your action "
                       "input.)")
        if obs is not None:   # the env returns early, without touching done
            inst.observation = obs
            return {"observation": "Observation: " + obs + "\nGive me one action.",
                    "reward": 1.0 if inst.reward > 0 else float(inst.reward), "done": inst.done}
        kind = parsed.group(1)
        if kind == "finish" and isinstance(params, dict) and "answer" in params:
            obs = str(params["answer"])
            if obs == f"win {inst.task}":
                inst.reward = 1.0
        else:
            obs = f"ERROR | Invalid action: {kind}."
        inst.done = "Finish" in action or "finish" in action
        inst.observation = obs
        return {"observation": "Observation: " + obs + "\nGive me one action.",
                "reward": 1.0 if inst.reward > 0 else float(inst.reward), "done": inst.done}

    # -- maze -----------------------------------------------------------------------------------------------
    def _mz_text(self, t, moves):
        return (f"The goal is at position 8, 6. Your current position is at position 1, {t}. {task_marker(t)} "
                f"Moves so far: {moves}. There are walls above you, below you.")

    @_caught
    def _mz_reset(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid, is_reset=True)
        game = a["game"]
        if game >= self.tasks:
            raise NameError(f"The game {game} is not valid.")
        t = _list_index(game, self.tasks)
        inst.task, inst.done, inst.steps, inst.reward = t, False, 0, 0
        inst.observation = self._mz_text(t, 0)
        return {"observation": inst.observation}

    @_caught
    def _mz_step(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid)
        if inst.task is None:
            raise KeyError(iid)
        if inst.steps >= self.max_steps:
            obs, reward, done = "Failure\n", -1.0, True
        elif a["action"] == winning_action("maze", inst.task):
            obs, reward, done = "Success\n", 1.0, True
        else:
            inst.steps += 1
            obs, reward, done = self._mz_text(inst.task, inst.steps), 0, False
        inst.observation, inst.done = obs, done
        inst.reward += reward
        return {"observation": obs, "reward": reward, "done": done}

    # -- wordle ---------------------------------------------------------------------------------------------
    @_caught
    def _wd_reset(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid, is_reset=True)
        inst.task, inst.done, inst.steps, inst.reward = a["seed"], False, 0, 0
        inst.observation = f"Let's start Wordle! {task_marker(a['seed'])}"
        return {"id": iid, "observation": inst.observation}

    @_caught
    def _wd_step(self, a):
        iid = a["id"]
        inst = self.instances.get(iid)
        _check(inst, iid)
        t = inst.task if inst.task is not None else 0
        action = a["action"]
        inst.steps += 1
        if action == winning_action("wordle", t):
            obs, reward, done = "g g g g g\n", 1, True
        else:
            word = action.strip().replace(" ", "")
            ok = len(word) == 5 and all(c in string.ascii_lowercase for c in word)
            obs, reward, done = ("b b b b b\n" if ok else "invalid word"), 0, inst.steps >= 6
        inst.observation, inst.done = obs, done
        inst.reward += reward
        return {"observation": obs, "reward": reward, "done": done}

    # -- webarena -------------------------------------------------------------------------------------------
    _WA_NODES = {"1": "RootWebArea 'Task {t}' focused: True",
                 "2": "StaticText '{marker} Answer with stop [win {t}].'",
                 "3": "textbox 'Answer' required: False", "4": "button 'Submit'"}
    _WA_SITES = ("shopping", "shopping_admin", "gitlab", "reddit", "map")

    def _wa_node(self, t, nid):
        return self._WA_NODES[nid].format(t=t, marker=task_marker(t))

    def _wa_prompt(self, inst):
        t = inst.task
        tree = "\n".join(f"[{nid}] {self._wa_node(t, nid)}" for nid in self._WA_NODES)
        return (f"OBSERVATION:\n{tree}\nURL: http://standin.local/task/{t}\n"
                f"OBJECTIVE: {self._wa_intent(t)}\nPREVIOUS ACTION: {inst.history[-1]}")

    def _wa_intent(self, t):
        return f"{task_marker(t)} Answer with the magic phrase win {t}."

    def _wa_create(self, a):
        return {"env_idx": self._new().id}

    def _wa_reset(self, q):
        q["options"] = {"config_file": f"./config_files/{q['idx']}.json"}   # outside the try: KeyError -> 500
        failed = {"observation": "TimeoutError", "sites": "Error", "object": "Error"}
        if self._reset_timeouts > 0:
            self._reset_timeouts -= 1
            return failed
        try:
            inst = self.instances[q["env_idx"]]
            _ = q["seed"]
            t = q["idx"]
            if not isinstance(t, int) or not 0 <= t < self.tasks:
                raise FileNotFoundError(q["options"]["config_file"])
        except Exception:  # noqa: BLE001 - the real reset turns any failure into this answer
            return failed
        inst.task, inst.done, inst.history = t, False, ["None"]
        return {"observation": self._wa_prompt(inst), "sites": [self._WA_SITES[t % len(self._WA_SITES)]],
                "object": self._wa_intent(t)}

    def _wa_observation(self, q):
        try:
            iid = int(q.get("env_idx"))
        except (TypeError, ValueError):
            iid = None
        inst = self.instances[iid]
        if inst.task is None:
            raise IndexError("list index out of range")
        return self._wa_prompt(inst)

    def _wa_step(self, q):
        iid, response = q["env_idx"], q["action"]       # outside the try: KeyError -> 500
        try:
            return self._wa_step_inner(iid, response)
        except Exception as e:  # noqa: BLE001 - the real step answers any failure this way
            return {"observation": str(e), "reward": 0, "terminated": False, "truncated": False, "info": None}

    _WA_PATTERNS = {"click": r"click ?\[(\d+)\]", "hover": r"hover ?\[(\d+)\]",
                    "type": r"type ?\[(\d+)\] ?\[(.+)\] ?\[(\d+)\]", "press": r"press ?\[(.+)\]",
                    "scroll": r"scroll ?\[?(up|down)\]?", "goto": r"goto ?\[(.+)\]",
                    "tab_focus": r"tab_focus ?\[(\d+)\]"}

    def _wa_step_inner(self, iid, response):
        # 1. the first ``` fence; 2. WebArena's create_id_based_action; 3. only then the env's state
        m = re.search(r"```((.|\n)*?)```", response)
        if not m:
            raise ValueError(f"Cannot parse action from response {response}")
        act = m.group(1).strip()
        name = act.split("[")[0].strip() if "[" in act else act.split()[0].strip()   # "" -> IndexError
        if name == "type" and not (act.endswith("[0]") or act.endswith("[1]")):
            act += " [1]"
        pm = None
        if name in self._WA_PATTERNS:
            pm = re.search(self._WA_PATTERNS[name], act)
            if not pm:
                raise ValueError(f"Invalid {name} action {act}")
        elif name == "stop":
            pm = re.search(r"stop ?\[(.+)\]", act)
        elif name not in ("new_tab", "go_back", "go_forward", "close_tab"):
            raise ValueError(f"Invalid action {act}")
        inst = self.instances.get(iid)
        if inst is None or inst.task is None:
            raise KeyError(iid)
        t = inst.task
        fail_error, success = "", True
        if name in ("click", "hover", "type"):
            element = pm.group(1)
            if element in self._WA_NODES:
                desc = self._wa_node(t, element)
                if name == "type":
                    text = pm.group(2) + (" " if pm.group(3) == "1" else "")
                    said = f"type [{element}] [{text}] where [{element}] is {desc}"
                else:
                    said = f"{name} [{element}] where [{element}] is {desc}"
            else:
                success, fail_error = False, f"Element [{element}] not found on the page."
                said = (f'Attempt to perfom "{name}" on element "[{element}]" but no matching element found. '
                        f"Please check the observation more carefully.")
        elif name == "stop":
            said = f"stop [{pm.group(1) if pm else ''}]"
        elif pm is not None:
            said = f"{name} [{pm.group(1)}]"
        else:
            said = name
        inst.history.append(said)
        info = {"page": {"url": f"http://standin.local/task/{t}", "content": f"<html>task {t}</html>"},
                "fail_error": fail_error, "observation_metadata": {"text": {"obs_nodes_info": {}}}}
        prompt = self._wa_prompt(inst)
        if name == "stop":
            answer = pm.group(1).strip() if pm else ""
            inst.done = True
            return {"observation": prompt, "reward": 1.0 if answer == f"win {t}" else 0.0, "terminated": True,
                    "truncated": False, "info": info}
        return {"observation": prompt, "reward": float(success), "terminated": False, "truncated": False,
                "info": info}

    def _wa_close(self, q):
        self.instances.pop(q["env_idx"], None)   # missing key: KeyError -> 500; unknown id: still "closed"
        return {"closed": "closed"}


def _make_handler(standin: AgentGymStandIn):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers, body are 2 writes: avoid 40 ms delayed-ACK stalls

        def log_message(self, *args):   # keep test output quiet
            pass

        def _any(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            reply = standin._handle(self.command, self.path, self.headers, raw)
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.ctype)
                self.send_header("Content-Length", str(len(reply.data)))
                self.end_headers()
                self.wfile.write(reply.data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

    return Handler
