"""Model-specific agents: each builds its model's prompt messages and turns the model's text into `cua_cli.actions.Action`s."""
