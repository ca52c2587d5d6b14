"""The name of every pluggable kind, and the class each one is ("module:Class").

A leaf: the config checks kind names (and which agents can play which envs)
against these tables without importing a single plug-in, and a kind's module
is imported only when a run uses it (`_util.registry.load`). A new kind is one
module plus one line here (and, for an env or an agent, one in its MODALITIES).
"""

# env.kind: the protocol the env speaks
ENVS = {
    "cluster": "cua_cli.envs.env_cluster:ClusterEnv",
    "agentgym": "cua_cli.envs.agentgym:AgentGymEnv",
    "osworld": "cua_cli.envs.osworld:OSWorldEnv",
}

# What each env kind serves and each agent kind plays: "gui" (screenshots in, GUI actions out) or
# "text" (text in, text actions out). An agent plays only envs of its own modality.
ENV_MODALITIES = {
    "cluster": "gui",
    "agentgym": "text",
    "osworld": "gui",
}

# agent.kind: a model family's prompt and answer format
AGENTS = {
    "uitars": "cua_cli.agents.uitars:UITarsAgent",
    "react": "cua_cli.agents.react:ReactAgent",
    "webarena": "cua_cli.agents.webarena:WebArenaAgent",
    "osworld": "cua_cli.agents.osworld:OSWorldAgent",
}

AGENT_MODALITIES = {
    "uitars": "gui",
    "react": "text",
    "webarena": "text",
    "osworld": "gui",
}

# model.provider: where answers come from
PROVIDERS = {
    "openai": "cua_cli.models.openai_chat:OpenAIChat",
    "random": "cua_cli.models.random_actions:RandomActions",
    "replay": "cua_cli.models.replay:Replay",
    "script": "cua_cli.models.script:Script",
}

# runner.backend: where runners run
BACKENDS = {
    "local": "cua_cli.rollout.backends.local:LocalProcesses",
    "ray": "cua_cli.rollout.backends.ray:RayActors",
}

# env.osworld.apps: the desktop apps OSWorld's tasks ask for (osworld/apps.py reads them from a task's
# related_apps and finds them on a host)
DESKTOP_APPS = ("chrome", "libreoffice_calc", "libreoffice_writer", "libreoffice_impress", "gimp", "vs_code",
                "thunderbird", "vlc")

# env.env with env.kind agentgym: the AgentGym env servers cua speaks to, each with a preset
# (envs/agentgym_presets.py) and, but for WebArena, a ReAct prompt (agents/agentgym_prompts.py)
AGENTGYM_ENVS = ("webarena", "textcraft", "babyai", "sciworld", "alfworld", "webshop", "sqlgym", "searchqa",
                 "maze", "wordle", "weather", "movie", "academia", "todo", "sheet")
