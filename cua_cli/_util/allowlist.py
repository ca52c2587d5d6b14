"""A list of hosts a sandbox may reach: `host` or `host:port` (an IPv6 address in brackets),
`*.domain` (the domain and its subdomains) or `*` (any host)."""


class HostAllowList:
    """Patterns as above; a pattern that is none raises ValueError naming it."""

    def __init__(self, patterns: list[str]):
        self.patterns = [_pattern(p) for p in patterns]

    def allows(self, host: str, port: int) -> bool:
        host = host.lower()
        return any((want is None or want == port) and _matches(name, host) for name, want in self.patterns)

    def names_address(self, address: str) -> bool:
        """Whether the allow-list names this very address (so an address of the host's may be reached)."""
        return any(name == address for name, _ in self.patterns)


def _matches(name: str, host: str) -> bool:
    if name.startswith("*."):
        return host == name[2:] or host.endswith(name[1:])
    return name in ("*", host)


def _pattern(text: str) -> tuple[str, int | None]:
    p = text.strip().lower()
    if p.startswith("["):
        host, _, rest = p[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"not a host or host:port: {text!r}")
        port = rest[1:]
    else:
        host, _, port = p.partition(":")
    if not host or any(c.isspace() or c in "/@" for c in host) or (port and not (port.isdigit()
                                                                             and 0 < int(port) < 65536)):
        raise ValueError(f"not a host or host:port: {text!r}")
    return host, int(port) if port else None
