"""The rollout config (`cua rollout CONFIG`) as pydantic models: every key, its type, range,
default and description. The descriptions are the one source of each key's documentation
(`cua config schema`, the config reference page)."""

import os
from pathlib import Path
from typing import Literal, Optional

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from .._util.allowlist import HostAllowList
from ..kinds import AGENTGYM_ENVS, AGENTS, BACKENDS, DESKTOP_APPS, ENVS, PROVIDERS
from .bounds import DAY_S, MAX_INT
from .fields import (
    Duration,
    EnvUrl,
    EnvVarName,
    HttpUrl,
    MiniwobTaskName,
    Name,
    NonEmpty,
    Retries,
    RunName,
    Section,
    Text,
    between,
    one_of,
)


class RunConfig(Section):
    """The run and where its folder goes."""
    name: RunName = Field("run", description="The run's name: its folder is <results_dir>/<name>-<YYYYmmdd-HHMMSS>. "
                                             "Any characters but NUL (the folder name encodes them).")
    results_dir: NonEmpty = Field("results", description="Where run folders go (relative to the config file).")


class MiniwobTasks(Section):
    """tasks.kind miniwob: MiniWoB++ task names x seeds."""
    names: list[Text] = Field([], description="MiniWoB++ task names, e.g. click-test-2 (no miniwob/ prefix, no -v1).")
    seeds: list[between(int, 0, 2 ** 31 - 1)] = Field(
        [0], description="One task per (name, seed); its task id is e.g. click-test-2@0.")
    episode_max_time: Optional[between(float, 0, 3600, above=True)] = Field(
        None, description="MiniWoB's own time limit per episode, s (null: MiniWoB's default of 10 s; the env server "
                          "allows up to an hour).")


class OsworldTasks(Section):
    """tasks.kind osworld: OSWorld-style task list and example files."""
    task_list: Text = Field("", description='The task list, {"domain": [task_id, ...]}, e.g. '
                                            "evaluation_examples/test_all.json; or a folder of task files "
                                            "(<domain>/<task_id>.json, or task files whose domain is the folder's "
                                            "name); or one task file.")
    examples_dir: Text = Field("", description="With a task list: the examples folder, "
                                               "<examples_dir>/<domain>/<task_id>.json (empty: `examples` beside "
                                               "the list).")
    domains: Optional[list[Text]] = Field(None, description="Play only these domains, e.g. [chrome, gimp] "
                                                            "(null: all).")
    ids: Optional[list[Text]] = Field(None, description="Play only these task ids (OSWorld's id, or "
                                                        "<domain>/<id> for an id several domains share; "
                                                        "null: all).")


class AgentgymTasks(Section):
    """tasks.kind agentgym: task numbers of an AgentGym env server."""
    indices: NonEmpty = Field("0", description='Task numbers of env.agentgym.env\'s server: ranges and lists, '
                                               'e.g. "0-99,200-210".')


class AdaptiveTasks(Section):
    """DART's adaptive rollouts (cua_cli/dart/adaptive.py): with --watch, after each round every task gets the
    samples the rule gives for its recent scores. The defaults are DART's."""
    rounds: between(int, 0, 1_000_000) = Field(0, description="Rounds to play (0: adaptive rollouts are off). "
                                                              "Needs --watch.")
    rollout_n: between(int, 0, 10_000, above=True) = Field(
        8, description="Samples per task in the first round, and for tasks below the threshold.")
    threshold: between(float, 0, 1) = Field(
        1.0, description="A task at least this successful gets max(min_n, int(9 / rate - 7)) samples.")
    min_n: between(int, 0, 10_000, above=True) = Field(1, description="The fewest samples a task gets in a round.")
    min_failure_steps: between(int, 0, 10_000) = Field(
        4, description="A failure of fewer steps does not count (DART stores none).")


class TasksConfig(Section):
    """What to play: the task set and how many samples of each task."""
    kind: Literal["miniwob", "osworld", "jsonl", "agentgym"] = Field(
        "miniwob", description="Where tasks come from: MiniWoB++ names x seeds, an OSWorld-style task list, "
                               "a JSONL file, or AgentGym task numbers.")
    miniwob: MiniwobTasks = Field(default_factory=MiniwobTasks, description="kind miniwob: names and seeds.")
    osworld: OsworldTasks = Field(default_factory=OsworldTasks, description="kind osworld: task list and examples.")
    agentgym: AgentgymTasks = Field(default_factory=AgentgymTasks, description="kind agentgym: task numbers.")
    adaptive: AdaptiveTasks = Field(default_factory=AdaptiveTasks,
                                    description="DART's adaptive rollouts (with --watch).")
    jsonl: Text = Field("", description='kind jsonl: a file of one task object per line '
                                        '({"task_id", "domain", "instruction", "config", "evaluator"}).')
    rollout_n: between(int, 0, 10_000, above=True) = Field(1, description="Samples per task.")
    limit: Optional[between(int, 0, 1_000_000)] = Field(None, description="Play only the first N tasks "
                                                                          "(null: all).")


class LocalEnvServer(Section):
    """env.url local: the env server `cua rollout` starts on this host for the run."""
    max_envs: between(int, 0, 1024, above=True) = Field(4, description="Browsers (desktops, for kind osworld) of the local "
                                                                        "server.")
    port: between(int, 0, 65535) = Field(0, description="Its port (0: a free port).")
    agentgym_tasks: list[MiniwobTaskName] = Field(
        [], description="env.kind agentgym: the MiniWoB tasks behind the server's AgentGym WebArena routes.")
    agentgym_seeds: NonEmpty = Field("0", description='env.kind agentgym: the seeds of those tasks, e.g. "0-99". '
                                                      "Task number i is their i-th (task, seed) pair, task-major.")


class AgentgymEnv(Section):
    """env.kind agentgym: which AgentGym env server env.url is."""
    env: one_of(AGENTGYM_ENVS) = Field("webarena", description="The AgentGym env behind env.url.")


class DesktopLimits(Section):
    """env.url local: what each desktop may take of this host (cgroups and a disk of its own)."""
    memory_gib: between(float, 0.25, 1024) = Field(2.0, description="Memory; an OOM kill inside ends the episode "
                                                                    "with stop reason desktop_limit.")
    processes: between(int, 64, 1_000_000) = Field(2048, description="Processes and threads (a fork bomb stops "
                                                                    "there).")
    disk_gib: between(float, 0.25, 16_384) = Field(4.0, description="Home and /tmp together.")
    cpu_weight: between(int, 1, 10_000) = Field(300, description="CPU share (cgroup v2's cpu.weight: 100 weighs "
                                                                 "as one busy process; 300, its X server, shell "
                                                                 "and app).")
    enforce: bool = Field(True, description="false: no limits (a host without cgroups or loop devices).")


class OsworldEnv(Section):
    """env.kind osworld: OSWorld desktops, one fresh desktop per episode through DART's allocation protocol."""
    servers: list[HttpUrl] = Field([], description="More allocation servers after env.url (DART-GUI's "
                                                   "GUI-Docker-Env, or `cua env-server --backend desktop` hosts), "
                                                   "tried in order; env.token_env holds their token.")
    desktops: list[HttpUrl] = Field([], description="A fixed list of running desktops' in-VM APIs (VMs you "
                                                    "started, a cloud pool), e.g. [http://10.0.0.5:5000], served "
                                                    "one episode at a time each; leave env.url at local.")
    reset: Optional[list[Text]] = Field(None, description="desktops: a command (argv) each desktop runs before "
                                                          "every episode, e.g. [bash, /opt/reset.sh] (null: no "
                                                          "reset: an episode finds what the last one left).")
    screen: Literal["1920x1080", "1280x720", "1366x768", "1600x900", "2560x1440"] = Field(
        "1920x1080", description="env.url local: the desktops' screen size.")
    session: Literal["gnome", "openbox"] = Field(
        "gnome", description="env.url local: the desktops' session. gnome: Ubuntu's GNOME as on OSWorld's image "
                             "(top bar, dock, Ctrl+Alt+T, the overview); openbox: a bare window manager, lighter, "
                             "but not the screen agents trained on OSWorld know.")
    record: bool = Field(False, description="Keep a video of each episode: episode.mp4 in its trajectory folder "
                                            "(the desktop's /start_recording after setup, /end_recording at the "
                                            "end), played beside the steps by cua view.")
    limits: DesktopLimits = Field(default_factory=DesktopLimits, description="env.url local: each desktop's "
                                                                             "limits.")
    network: Literal["none", "allow"] = Field(
        "none", description="env.url local: none: the desktops have no network, and tasks that open or score live "
                            "web pages are not played (counted apart); allow: they reach the hosts of allow_hosts "
                            "through a proxy on this host, and nothing else.")
    allow_hosts: list[NonEmpty] = Field([], description="network allow: the hosts, e.g. [www.wikipedia.org, "
                                                        "'*.github.com', 'localhost:8000'] ('*': any public host).")

    apps: Optional[list[one_of(DESKTOP_APPS)]] = Field(
        None, description="The apps the desktops have, by OSWorld's related_apps names; a task that names "
                          "another is not played (listed as unsupported). null: for cua's own desktops (env.url "
                          "local, no desktops list) the apps installed on this host, else all of OSWorld's image.")
    warm: between(int, 0, 1024) = Field(0, description="env.url local: desktops kept started before they are "
                                                       "asked for, so an allocation answers at once.")
    pause_s: between(float, 0, 60) = Field(2.0, description="After each action, before the next screenshot, s "
                                                            "(OSWorld's step pause); also how long WAIT waits.")
    settle_s: between(float, 0, 600) = Field(0.0, description="After the task's setup steps, before the first "
                                                              "screenshot, s (DART waits 60).")
    cache_dir: Optional[NonEmpty] = Field(None, description="Where files the tasks download are kept between "
                                                            "episodes (null: a temporary folder per runner).")
    files_dir: Optional[NonEmpty] = Field(None, description="Files given beforehand: downloads looked up here "
                                                            "first (offline runs), and the only folder upload_file "
                                                            "steps may read.")

    @model_validator(mode="after")
    def _network(self):
        HostAllowList(self.allow_hosts)  # a ValueError names the pattern
        if self.network == "allow" and not self.allow_hosts:
            raise ValueError("allow_hosts: network allow needs the hosts the desktops may reach ('*': any)")
        return self


class EnvConfig(Section):
    """Where episodes are played, and how requests to it are made."""
    kind: one_of(ENVS) = Field("cluster", description="The protocol the env speaks: cluster (the env-cluster "
                                                      "protocol, screenshots), agentgym (an AgentGym env server, "
                                                      "text) or osworld (OSWorld desktops, allocated as DART does).")
    url: EnvUrl = Field("local", description="The env server (kind osworld: a desktop allocation server): "
                                             "http(s)://host:port, or local to start the built-in server "
                                             "(`cua env-server`: MiniWoB++, or desktops for kind osworld) for "
                                             "this run.")
    local: LocalEnvServer = Field(default_factory=LocalEnvServer, description="url local: the local server.")
    agentgym: AgentgymEnv = Field(default_factory=AgentgymEnv, description="kind agentgym: which env.")
    osworld: OsworldEnv = Field(default_factory=OsworldEnv, description="kind osworld: where desktops come from.")
    token_env: Optional[EnvVarName] = Field(None, description="NAME of the environment variable holding the env "
                                                              "server's token (the token never goes in a config).")
    os: Name = Field("linux", description="The OS asked for in every allocation.")
    timeout_s: Duration = Field(60.0, description="Per request, the whole of it, s (cut to runner.step_timeout_s).")
    retries: Retries = Field(3, description="Retries per request, with exponential backoff and jitter.")
    allocate_wait_s: between(float, 0, DAY_S) = Field(
        300.0, description="How long to wait for a free env while the server answers 503, s.")


class ModelConfig(Section):
    """Where answers come from, and what is recorded of each model call."""
    provider: one_of(PROVIDERS) = Field("random", description="openai: OpenAI-compatible servers; random: the "
                                                              "random-action baseline; replay: a run's answers again; "
                                                              "script: answers from a file.")
    endpoints: list[HttpUrl] = Field([], description="provider openai: the servers' base URLs, "
                                                     "e.g. [http://127.0.0.1:8000/v1].")
    fleet: Optional[NonEmpty] = Field(None, description="A `cua start-models` fleet file (as --fleet): its servers "
                                                        "become the endpoints, and its model name the name.")
    name: Name = Field("ui-tars", description="The served model name.")
    api_key_env: Optional[EnvVarName] = Field(None, description="NAME of the environment variable holding the "
                                                                "API key.")
    temperature: between(float, 0, 10) = Field(0.0, description="Sampling temperature.")
    max_tokens: between(int, 0, 1_000_000, above=True) = Field(512, description="Most tokens of one answer.")
    timeout_s: Duration = Field(120.0, description="Per request, the whole of it, s (cut to "
                                                   "runner.step_timeout_s).")
    retries: Retries = Field(3, description="Retries per request, with exponential backoff and jitter.")
    guided: bool = Field(False, description="Hold answers to the agent's action grammar (vLLM structured_outputs).")
    image_uuids: Literal["auto", True, False] = Field(
        "auto", description="Send each screenshot's bytes once per server, then only its uuid (vLLM's multimodal "
                            "cache); auto: on for endpoints whose /v1/models says vLLM.")
    routing: Literal["sticky", "round_robin"] = Field(
        "sticky", description="sticky: one server per episode, least-loaded first (its prefix cache); "
                              "round_robin: spread the requests.")
    record_prompt: bool = Field(False, description="RL: store the exact messages sent (images by file name).")
    record_logprobs: bool = Field(False, description="RL: store the sampled token ids and their logprobs.")
    record_tokens: bool = Field(False, description="RL (vLLM): store prompt and response token ids, response "
                                                   "logprobs, finish reason and sampling parameters (and the "
                                                   "prompt).")
    reload_from: Optional[Literal["mysql"]] = Field(
        None, description="mysql: with --watch, roll the fleet onto each new row of storage.mysql's `checkpoint` "
                          "table (DART-GUI's trainer).")
    seed: between(int, -MAX_INT - 1, MAX_INT) = Field(0, description="provider random: the same seed makes the "
                                                                     "same moves.")
    replay_run: Optional[NonEmpty] = Field(None, description="provider replay: the run folder whose answers to "
                                                             "replay.")
    script: Optional[NonEmpty] = Field(None, description='provider script: a JSON file {"task_id": [answer, ...]}, '
                                                         "one answer per step (oracle checks of task files).")


class AgentConfig(Section):
    """The model family's prompt and answer format."""
    kind: one_of(AGENTS) = Field("uitars", description="uitars and osworld (OSWorld's code blocks) play "
                                                       "screenshots (env.kind cluster, osworld); react and "
                                                       "webarena play text envs (env.kind agentgym).")
    coord_mode: Literal["qwen25vl", "qwen2vl"] = Field(
        "qwen25vl", description="qwen25vl: coordinates are pixels of the smart_resize'd image; qwen2vl: 0-1000.")
    history_images: between(int, 0, 100, above=True) = Field(
        5, description="Screenshots in the prompt, the current one included (agent.kind osworld: observations, "
                       "accessibility trees too).")
    observation: Literal["screenshot", "a11y_tree", "screenshot_a11y_tree"] = Field(
        "screenshot", description="agent.kind osworld: what the model gets each step, as OSWorld's observation_type: "
                                  "the screenshot, the desktop's accessibility tree as a table (env.kind osworld then "
                                  "also fetches /accessibility), or both. OSWorld's som is not offered.")
    a11y_tree_max_tokens: between(int, 0, 1_000_000, above=True) = Field(
        10_000, description="agent.observation with a11y_tree: the table is cut after this many tokens, counted as "
                            "GPT-4's tokenizer splits text before merging (words, numbers of up to 3 digits, "
                            "punctuation runs), as OSWorld cuts it at 10,000.")
    language: Name = Field("English", description="The language of the Thought.")
    parse_retries: Retries = Field(2, description="Ask the model again this often when an answer does not parse.")
    history_chars: between(int, 1000, 10_000_000) = Field(
        32_000, description="Text agents: the conversation kept, in characters; the oldest turns go first, the "
                            "task statement stays.")


class RayRunner(Section):
    """runner.backend ray: runner actors on a Ray cluster (pip install -e '.[ray]')."""
    address: Optional[NonEmpty] = Field(None, description="The cluster to join: auto, or HOST:6379 (null: "
                                                          "RAY_ADDRESS, else start a local one).")
    actors: Optional[between(int, 0, 10_000, above=True)] = Field(
        None, description="Runner actors (null: one per node with num_cpus free, and one per 256 episode slots).")
    num_cpus: between(float, 0, 1024) = Field(1.0, description="CPUs each runner actor reserves.")
    lost_after_s: between(float, 3, DAY_S) = Field(
        90.0, description="An actor that streams nothing and answers no ping for this long is lost (a node cut off, "
                          "a hung worker): its episodes are played again elsewhere, s.")


class RunnerConfig(Section):
    """How episodes run: where, how many at once, and their limits."""
    backend: one_of(BACKENDS) = Field("local", description="Where runners run: local processes on this host, or "
                                                           "ray actors on a Ray cluster.")
    num_envs: between(int, 0, 100_000, above=True) = Field(4, description="Concurrent episodes overall.")
    processes: Optional[between(int, 0, 1024, above=True)] = Field(
        None, description="backend local: runner processes (null: one per 256 episode slots, at most one per CPU).")
    ray: RayRunner = Field(default_factory=RayRunner, description="backend ray: the cluster and its actors.")
    max_steps: between(int, 0, 10_000, above=True) = Field(15, description="Steps of an episode at most.")
    step_timeout_s: Duration = Field(180.0, description="Any one request of an episode, start to end, s (a "
                                                        "desktop's start, which waits for it to boot, has its "
                                                        "own limit within the episode's).")
    episode_timeout_s: Duration = Field(1800.0, description="A whole episode, s.")
    max_attempts: between(int, 0, 100, above=True) = Field(
        3, description="Infrastructure errors before a pair is given up (queue/failed/).")
    lease_ttl_s: Duration = Field(60.0, description="A claim whose heartbeat is older than this is taken back, s.")
    poll_s: Duration = Field(1.0, description="--watch: how often to look for new task files, s.")
    sample_s: between(float, 0, 3600) = Field(
        0.5, description="How often the model servers' /metrics and this host's GPUs are sampled into the run's "
                         "metrics.jsonl, s (0: never).")


class DartStorage(Section):
    """DART-GUI's trajectory folders."""
    root: Optional[NonEmpty] = Field(None, description="Write DART's trajectory folders here (null: don't).")


class MysqlStorage(Section):
    """DART-GUI's MySQL tables: `rollout_run` rows written, `checkpoint` rows read."""
    url_env: Optional[EnvVarName] = Field(None, description="NAME of the environment variable holding "
                                                            "mysql://user:pass@host:port/db (null: no database).")
    run_id: Optional[Name] = Field(None, description="DART's run id: rollout_run rows carry it and checkpoint rows "
                                                     "are looked up by it (null: the cua run's id).")
    min_steps_for_zero: between(int, 0, 10_000) = Field(
        4, description="DART's rule: a reward of 0 needs this many steps.")
    skip_errors: bool = Field(True, description="Give infrastructure failures no row (DART never inserts them).")


class StorageConfig(Section):
    """Where finished trajectories go besides the run folder (DART-GUI's trainer reads these)."""
    dart: DartStorage = Field(default_factory=DartStorage, description="DART's trajectory folders.")
    mysql: MysqlStorage = Field(default_factory=MysqlStorage, description="DART's MySQL tables.")


class Config(Section):
    """A rollout config: `cua rollout CONFIG`. Paths in it are relative to the config file; secrets never go in
    it (keys ending in _env name the environment variable that holds one).

    Checks across keys: the openai provider needs model.endpoints or model.fleet; model.reload_from mysql needs
    storage.mysql.url_env and a fleet; runner.backend ray needs an env.url other than local; the replay provider
    needs model.replay_run. `cua rollout` also needs an agent.kind that plays env.kind's envs (screenshots or
    text), agent.kind and env.kind osworld for an agent.observation other than screenshot, --watch for
    tasks.adaptive.rounds, env.agentgym.env webarena and env.local.agentgym_tasks for an AgentGym env on
    env.url local, and a fleet file that lists a healthy server."""
    model_config = ConfigDict(title="cua rollout config")

    run: RunConfig = Field(default_factory=RunConfig, description="The run and where its folder goes.")
    tasks: TasksConfig = Field(default_factory=TasksConfig, description="What to play.")
    env: EnvConfig = Field(default_factory=EnvConfig, description="Where episodes are played.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="Where answers come from.")
    agent: AgentConfig = Field(default_factory=AgentConfig, description="The prompt and answer format.")
    runner: RunnerConfig = Field(default_factory=RunnerConfig, description="How episodes run.")
    storage: StorageConfig = Field(default_factory=StorageConfig,
                                   description="Copies of finished trajectories for DART-GUI's trainer.")
    _source: str = PrivateAttr("")  # the YAML file read

    @property
    def source(self) -> str:
        """The config file this was read from ('' if built in code)."""
        return self._source

    @model_validator(mode="after")
    def _across_keys(self):
        """Checks across keys; each key's own range is checked by its type."""
        model = self.model
        if self.env.osworld.desktops and self.env.url != "local":
            raise ValueError("env.osworld.desktops: give either a list of desktops or env.url, not both")
        if model.provider == "openai" and not model.endpoints and not model.fleet:
            raise ValueError("model.endpoints: the openai provider needs endpoints or model.fleet")
        if model.reload_from == "mysql" and not (self.storage.mysql.url_env and model.fleet):
            raise ValueError("model.reload_from: mysql needs storage.mysql.url_env and a fleet "
                             "(model.fleet or --fleet) to reload")
        if self.runner.backend == "ray" and self.env.url == "local":
            raise ValueError("env.url: 'local' starts an env server on this host only; with runner.backend: ray, "
                             "start `cua env-server` where every Ray node can reach it and set env.url to it")
        if model.provider == "replay" and not model.replay_run:
            raise ValueError("model.replay_run: the replay provider needs a run folder")
        if model.provider == "script" and not model.script:
            raise ValueError("model.script: the script provider needs an answers file")
        return self

    def to_dict(self) -> dict:
        """Every key with its value, defaults included: plain data (run.json holds it)."""
        return self.model_dump()

    def resolve_path(self, p: str) -> Path:
        """Paths in a config are relative to the config file."""
        path = Path(os.path.expanduser(p))
        if not path.is_absolute() and self.source:
            path = Path(self.source).parent / path
        return Path(os.path.normpath(path))
