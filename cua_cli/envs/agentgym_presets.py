"""What differs between AgentGym's env servers, as data (see ../shared/notes/agentgym.md).

Every server has /create, /reset, /observation and /step (and most /close);
a preset says how its bodies and answers are spelled and how its reward
becomes a score. The client (`agentgym.py`) has one code path for all.
"""

import re
from dataclasses import dataclass, field

IDX = "$idx"  # stands for the task's index in a reset body


@dataclass(frozen=True)
class Preset:
    id_field: str = "id"                   # the env instance's id in every body: "id" or "env_idx"
    create_body: dict = field(default_factory=dict)
    create_answers_int: bool = False       # /create answers a bare int, not an object holding the id
    reset_body: dict = field(default_factory=lambda: {"data_idx": IDX})
    observation_key: str | None = None     # GET /observation answers a bare string, or an object with this key
    reset_observation: tuple = ()          # the first observation joins these keys of the reset answer instead
    actions_key: str | None = None         # the answers list the actions the env takes now under this key
    step_observation: str = "observation"  # the step answer's observation key ("state" for some)
    done_keys: tuple = ("done",)           # the step answer's end flags (any of them true ends the episode)
    reward_key: str = "reward"             # the step answer's reward ("score" where the env scores)
    reward_scale: float = 1.0              # score = reward / scale, clamped to [0, 1] ...
    binary: bool = False                   # ... or 1 for any positive reward (a completed goal)
    reward_when_done: bool = False         # a step's reward counts only when it ends the episode
    has_close: bool = True
    base: str = ""                         # path prefix of every route
    # How the action travels, as AgentGym's own client for the env sends it:
    action_fence: bool = False             # inside a ``` fence (WebArena's server reads the first one)
    action_prefix: str = ""                # after this label (the tool envs parse `Action: NAME with ...`)
    action_plain: bool = False             # letters, digits, commas and spaces only (TextCraft, BabyAI)
    action_unfenced: bool = False          # the inside of a ``` fence, when the agent wrote one (SQLGym)


_TOOL = Preset(id_field="env_idx", create_body={"id": 0}, create_answers_int=True, reset_body={"id": IDX},
               binary=True, has_close=False, action_prefix="Action: ")

PRESETS = {
    # WebArena's reward of a step that is not the last only says the browser action ran.
    "webarena": Preset(id_field="env_idx", reset_body={"seed": 0, "idx": IDX}, done_keys=("terminated", "truncated"),
                       binary=True, reward_when_done=True, action_fence=True),
    "textcraft": Preset(binary=True, action_plain=True),
    "babyai": Preset(observation_key="observation", reward_key="score", binary=True, action_plain=True),
    "sciworld": Preset(reward_key="score", reward_scale=100.0, reset_observation=("task_description", "observation")),
    "alfworld": Preset(reset_body={"game": IDX, "world_type": "Text"}, reset_observation=("observation",),
                       actions_key="available_actions", binary=True, has_close=False),
    "webshop": Preset(id_field="env_idx", create_answers_int=True, reset_body={"session_id": IDX},
                      step_observation="state", has_close=False),
    "sqlgym": Preset(id_field="env_idx", create_answers_int=True, reset_body={"item_id": IDX},
                     step_observation="state", binary=True, has_close=False, action_unfenced=True),
    "searchqa": Preset(id_field="env_idx", create_body={"id": 0}, create_answers_int=True,
                       reset_body={"id": IDX}, binary=True),
    "maze": Preset(reset_body={"game": IDX}, binary=True, has_close=False, base="/maze"),
    "wordle": Preset(reset_body={"seed": IDX}, binary=True, has_close=False, base="/wordle"),
    "weather": _TOOL,
    "movie": _TOOL,
    "academia": _TOOL,
    "todo": _TOOL,
    "sheet": _TOOL,
}


_NOT_PLAIN = re.compile(r"[^A-Za-z0-9, ]+")
_FENCED = re.compile(r"```(?:sql)?([^`]*)```")


def wire_action(preset: Preset, action: str) -> str:
    """The action as the env's server takes it."""
    if preset.action_fence:
        return f"```{action}```"
    if preset.action_plain:
        action = " ".join(_NOT_PLAIN.sub("", action).split())
    if preset.action_unfenced:
        fenced = _FENCED.search(action)
        action = fenced[1].strip() if fenced else action
    return preset.action_prefix + action

