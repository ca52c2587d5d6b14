"""Keep secrets out of every file and log line cua writes.

A secret leaks in more spellings than its own, so `Redactor.text` masks them
all: percent-encoded (either hex case, `+` for a space, encoded twice),
escaped for JSON or Python (`\\u0061`, `\\x61`, `\\"`, escaped again when
JSON holds JSON), as HTML character references, in upper or lower case, and
inside base64 or base64url (a Basic-auth header holds `user:secret`), at any
alignment. Mixed spellings (`quote` leaves some characters as they are) are
masked too: each character of a secret may take any of its spellings.
The userinfo of URLs is masked without being known, malformed URLs too.
"""

import base64
import os
import re
from urllib.parse import unquote

from ..errors import InputError

# URL userinfo, in URLs that are malformed too: after a scheme (`://`, also percent-encoded),
# everything up to the LAST `@` (or `%40`) of the word, so a password holding `/`, `@`, `#` or `?`
# is masked whole; without a scheme, a whole word `user:password@host`. A word ends at white
# space, a double quote or an angle bracket. Masking too much is the price of never masking too little.
_WORD = r'[^\s"<>]'
_URL_USERINFO = re.compile(rf"([A-Za-z][A-Za-z0-9+.-]*(?:://|%3A%2F%2F)){_WORD}*(?:@|%40)", re.IGNORECASE)
_BARE_USERINFO = re.compile(rf"""(^|[\s"'=(<,\[{{]|%20)([^\s"'<>:@/]+):(?!//){_WORD}*@""")
_MIN_URL_SECRET = 6  # a shorter password, also masked wherever it appears, would mask common words
_HTML_NAMES = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos"}
_SHORT_ESCAPES = {"\n": "n", "\t": "t", "\r": "r", "\b": "b", "\f": "f", '"': '"', "\\": "\\", "/": "/", "'": "'"}
_BACKSLASHES = r"\\{1,8}"  # one escape, or one per level of escaped-again text; bounded, so no backtracking blowup
_BASE64_URLSAFE = str.maketrans("-_", "+/")


def read_secrets(cfg) -> dict:
    """Tokens named by the config, read from the environment (never from files)."""
    out = {}
    for role, var in (("env", cfg.env.token_env), ("model", cfg.model.api_key_env),
                      ("mysql", cfg.storage.mysql.url_env)):
        if var:
            value = os.environ.get(var)
            if not value:
                raise InputError(f"{cfg.source}: environment variable {var} (named in the config) is not set")
            if role != "mysql" and not (value.isascii() and value.isprintable() and " " not in value):
                # sent as an HTTP bearer token: the value itself is never shown
                raise InputError(f"{cfg.source}: environment variable {var} must hold a token of printable "
                                 "ASCII without spaces")
            out[role] = value
    # Passwords in URLs of the config: masked in every spelling, wherever they appear.
    urls = [("env.url", cfg.env.url), ("storage.mysql", out.get("mysql"))]
    urls += [(f"model.endpoints[{i}]", u) for i, u in enumerate(cfg.model.endpoints)]
    for where, url in urls:
        for n, secret in enumerate(url_passwords(url or "")):
            out[f"{where} password {n}"] = secret
    return out


def url_passwords(url: str) -> list[str]:
    """The password of a URL's userinfo (malformed URLs too), as written and percent-decoded;
    none shorter than _MIN_URL_SECRET characters."""
    m = _URL_USERINFO.match(url)
    userinfo = url[m.end(1):m.end()].removesuffix("@").removesuffix("%40") if m else ""
    password = userinfo.partition(":")[2]
    return [p for p in dict.fromkeys((password, unquote(password))) if len(p) >= _MIN_URL_SECRET]


def mask_userinfo(s: str) -> str:
    """`s` with the userinfo of every URL in it masked, malformed URLs and `user:password@host` too."""
    return _BARE_USERINFO.sub(r"\1\2:***@", _URL_USERINFO.sub(r"\1***@", s))


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")  # a lone surrogate in a secret is still a secret


def _char(c: str) -> str:
    """A regex matching one character of a secret in any of its spellings (the pattern ignores case)."""
    code, raw = ord(c), _utf8(c)
    forms = [re.escape(c), "".join(f"%(?:25)?{b:02x}" for b in raw)]
    if c == " ":
        forms.append(r"\+")
    if code < 0x10000:
        forms.append(f"{_BACKSLASHES}u{code:04x}")
    else:  # JSON spells it as a surrogate pair, Python as \U0001XXXX
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms += [f"{_BACKSLASHES}u{high:04x}{_BACKSLASHES}u{low:04x}", f"{_BACKSLASHES}U{code:08x}"]
    if code < 0x100:
        forms.append(f"{_BACKSLASHES}x{code:02x}")
    if code >= 0x80:  # the UTF-8 bytes in a bytes repr
        forms.append("".join(f"{_BACKSLASHES}x{b:02x}" for b in raw))
    if c in _SHORT_ESCAPES:
        forms.append(_BACKSLASHES + re.escape(_SHORT_ESCAPES[c]))
    forms += [f"&#0*{code};", f"&#x0*{code:x};"] + ([f"&{_HTML_NAMES[c]};"] if c in _HTML_NAMES else [])
    return "(?:" + "|".join(forms) + ")"


def _merge(spans) -> list[tuple[int, int]]:
    merged = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


class Redactor:
    def __init__(self, secrets):
        # Longest first, so a secret containing another is masked whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._spelled = re.compile("|".join("".join(map(_char, s)) for s in self.secrets), re.IGNORECASE)
        self._raw = [_utf8(s) for s in self.secrets]
        # A run of base64 characters holds a secret only if it has enough bits for it.
        fewest = -(-8 * min(map(len, self._raw), default=1) // 6)
        self._base64_run = re.compile(f"[A-Za-z0-9+/_-]{{{fewest},}}=*")

    def text(self, s: str) -> str:
        if not self.secrets:
            return mask_userinfo(s)
        spans = [m.span() for m in self._spelled.finditer(s)] + self._base64_spans(s)
        out, last = [], 0
        for start, end in _merge(spans):
            out += [s[last:start], "***"]
            last = end
        out.append(s[last:])
        return mask_userinfo("".join(out))

    def _base64_spans(self, s: str) -> list[tuple[int, int]]:
        """Runs of base64 text (padding included) that decode to bytes holding a secret.

        The encoded string may start anywhere in a run of base64 characters
        (glued to other words), so each run is decoded from each of the four
        character offsets; the secret may sit at any byte inside.
        """
        spans = []
        for m in self._base64_run.finditer(s):
            run = m.group().rstrip("=").translate(_BASE64_URLSAFE)
            for offset in range(4):
                chunk = run[offset:]
                chunk = chunk[:len(chunk) - (len(chunk) % 4 == 1)]  # a lone last character holds no whole byte
                data = base64.b64decode(chunk + "=" * (-len(chunk) % 4))
                if any(secret in data for secret in self._raw):
                    spans.append(m.span())
                    break
        return spans

    def obj(self, o):
        if isinstance(o, str):
            return self.text(o)
        if isinstance(o, dict):
            return {self.obj(k): self.obj(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [self.obj(v) for v in o]
        return o
