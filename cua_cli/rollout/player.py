"""What plays episodes in one process: the env, model and agent a config names.

A runner process holds one Player for all its episode slots. The player
knows nothing of the queue or the run folder: it is handed a pair and the
writer its steps go to, so it can play where the run folder is not.
"""

from .._util.interrupt import Interrupt
from .._util.redact import Redactor
from ..agents import make_agent
from ..config import Config
from ..envs import make_env
from ..models import make_model
from ..tasks import Task
from .episode import Episode, Limits
from .writes import AttemptWriter


class Player:
    def __init__(self, cfg: Config, env_url: str, secrets: dict, shared=None):
        self.env = make_env(cfg, env_url, secrets)
        self.model = make_model(cfg, secrets, shared)
        self.agent = make_agent(cfg)
        self.limits = Limits(cfg.runner.max_steps, cfg.runner.step_timeout_s, cfg.runner.episode_timeout_s)
        self.redact = Redactor(secrets.values()).text
        self.record_prompt = cfg.model.record_prompt or cfg.model.record_tokens

    async def play(self, item: dict, task: Task, traj: AttemptWriter, interrupt: Interrupt) -> dict:
        """One attempt of a claimed pair, on the runner's event loop; its episode line."""
        return await Episode(item, task, traj, self.env, self.model, self.agent, self.limits, interrupt,
                             self.redact, self.record_prompt).run_episode()
