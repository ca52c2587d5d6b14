"""The client's own files for OSWorld tasks: a work folder per episode, and the download cache.

Names from task files (task ids, `dest`, `stdout`, `cache_file` paths) are data:
they become file names only through `safe_name`, which is injective and never
yields a separator, `.` or `..`.

Downloads (`download` steps, `cloud_file` getters) are fetched by cua, as
OSWorld's client fetches them, and kept under OSWorld's own cache key
`<uuid5(URL)>_<file name>`, so a cache folder filled by OSWorld serves cua
unchanged. An offline folder given in the config is looked in first; a host
without internet runs every task whose files are there.
"""

import hashlib
import re
import time
import uuid
from pathlib import Path
from typing import Optional
from urllib.parse import urljoin, urlsplit

from .._util.atomic import write_atomic
from .._util.budget import Budget
from .._util.httpclient import BadStatus, Client
from .._util.retry import with_retries
from .._util.text import clip
from ..errors import BadTask, EnvError, EpisodeTimeout

_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,119}")
_KEEP = re.compile(r"[A-Za-z0-9_.-]")
MAX_NAME = 120
MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)


def safe_name(name: str) -> str:
    """A file name for `name`: itself when plain, else percent-encoded UTF-8 (a leading dot too);
    long names are cut and end in a hash. The empty name becomes `%`."""
    if _SAFE.fullmatch(name):
        return name
    out = "".join(c if _KEEP.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                  for c in name) or "%"
    if out.startswith("."):
        out = "%2E" + out[1:]
    if len(out) > MAX_NAME:
        out = out[:MAX_NAME - 17] + "~" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return out


def episode_folder(root: Path, task_id: str, episode: str) -> Path:
    """`root/<task>/<episode>`, created: where `vm_file` copies and `stdout` captures of one
    episode go (`episode` keeps concurrent samples and attempts of a task apart)."""
    path = Path(root) / safe_name(task_id) / safe_name(episode)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_key(url: str, file_name: str) -> str:
    """OSWorld's cache key for a download; a file name no file system takes is hashed instead."""
    base = file_name.rsplit("/", 1)[-1]
    if "\0" in base or len(base.encode("utf-8", "surrogatepass")) > 200 or not base.isprintable():
        base = hashlib.sha256(base.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_{base}"


class Downloads:
    """Files fetched from URLs for the client: the offline folder first, then the cache, then the web.

    Fetches follow up to five redirects (Google Drive and Hugging Face answer with them) and
    get three tries; proxies are not used (cua's HTTP client reads none from the environment)."""

    def __init__(self, cache_dir: Path, offline_dir: Optional[Path] = None, timeout_s: float = 600.0,
                 retries: int = 2, http: Optional[Client] = None):
        self.cache_dir = Path(cache_dir)
        self.offline_dir = Path(offline_dir) if offline_dir else None
        self.timeout_s = timeout_s
        self.retries = retries
        self.http = http or Client()

    def fetch(self, url: str, file_name: str, budget: Budget) -> Path:
        """The local copy of `url` (named after `file_name`); EnvError naming the URL when it cannot be had."""
        scheme = urlsplit(url).scheme.lower() if isinstance(url, str) else ""
        if scheme not in ("http", "https"):
            raise BadTask(f"download: {clip(str(url), 200)!r} is not an http(s) URL")
        key = cache_key(url, file_name)
        for folder in (self.offline_dir, self.cache_dir):
            if folder is not None and (folder / key).is_file():
                return folder / key
        data = with_retries(lambda: self._get(url, budget), self.retries, f"download {clip(url, 200)}",
                            budget.should_stop, error=EnvError, deadline=budget.deadline)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.cache_dir / key, data)  # concurrent fetches of one URL: the last rename wins, both whole
        return self.cache_dir / key

    def _get(self, url: str, budget: Budget) -> bytes:
        """GET with redirects, all within one deadline (the step limit does not apply: files are large)."""
        deadline = min(budget.deadline, time.monotonic() + self.timeout_s)
        for _ in range(MAX_REDIRECTS + 1):
            left = deadline - time.monotonic()
            if left <= 0:
                raise EpisodeTimeout(f"download {clip(url, 200)}: the deadline was reached")
            r = self.http.get(url, left)
            location = r.headers.get("location")
            if r.status in REDIRECTS and location:
                url = urljoin(url, location)
                if urlsplit(url).scheme.lower() not in ("http", "https"):
                    raise EnvError(f"download redirected to {clip(url, 200)!r}, not an http(s) URL")
                continue
            if r.status >= 400:
                raise BadStatus(r)
            return r.content
        raise EnvError(f"download {clip(url, 200)}: more than {MAX_REDIRECTS} redirects")
