"""Keep secrets out of every file and log line cua writes."""

import os
import re

_URL_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")


def read_secrets(cfg) -> dict:
    """Tokens named by the config, read from the environment (never from files)."""
    out = {}
    for role, var in (("env", cfg.env.token_env), ("model", cfg.model.api_key_env)):
        if var:
            value = os.environ.get(var)
            if not value:
                raise KeyError(var)
            out[role] = value
    return out


class Redactor:
    def __init__(self, secrets):
        # Longest first, so a secret containing another is masked whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def text(self, s: str) -> str:
        for secret in self.secrets:
            s = s.replace(secret, "***")
        return _URL_USERINFO.sub(r"\1***@", s)

    def obj(self, o):
        if isinstance(o, str):
            return self.text(o)
        if isinstance(o, dict):
            return {k: self.obj(v) for k, v in o.items()}
        if isinstance(o, list):
            return [self.obj(v) for v in o]
        return o
