"""What one desktop may take of its host, and whether it has hit that.

Model-written code runs on the desktops by design, so one runaway episode (a script that allocates
without end, a fork bomb, a disk filler) must not take the host or its peers down. Memory, processes
and a CPU share are a cgroup per desktop: v2 where the host has the unified hierarchy with those
controllers, v1 otherwise (as this project's CI machine). Disk is a file system of the desktop's own
(the launcher mounts an ext4 image holding its home and /tmp). A hit is read from the kernel's own
counters: an OOM kill in the group (memory), a fork the group refused (processes), a full disk.
"""

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

GIB = 1 << 30
DISK_FULL_BYTES = 16 << 20  # less free than this on a desktop's disk is a full disk
CONTROLLERS = ("memory", "pids", "cpu")


@dataclass(frozen=True)
class DesktopQuota:
    memory: int = 2 * GIB        # bytes of RAM (page cache and tmpfs files included)
    processes: int = 2048        # tasks (threads count, as the kernel counts them)
    # cgroup v2's cpu.weight, 100 being one busy process's share: a desktop weighs as its X server, shell
    # and app, so that it starts and plays as fast on a busy host as before, and a fork bomb no more
    cpu_weight: int = 300
    disk: int = 4 * GIB          # home and /tmp together
    min_free_memory: int = 1 * GIB  # the host's MemAvailable below which no new desktop is started
    min_free_disk: int = 4 * GIB    # free bytes where desktops keep their files, likewise
    enforce: bool = True         # False: no cgroup and no disk image (a host without cgroups or loop devices)


class LimitSetupError(RuntimeError):
    """This host cannot give desktops their limits (no controller, no permission)."""


def describe_bytes(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.0f} MiB"


# -- the host -----------------------------------------------------------------------------------------


def host_shortage(limits: DesktopQuota, workdir: Path) -> str | None:
    """Why a new desktop would not fit on this host now (None: it would)."""
    available = _mem_available()
    if available is not None and available < limits.min_free_memory:
        return (f"host short of memory: {describe_bytes(available)} available, a new desktop needs "
                f"{describe_bytes(limits.min_free_memory)} free")
    free = shutil.disk_usage(workdir).free
    if free < limits.min_free_disk:
        return (f"host short of disk: {describe_bytes(free)} free under {workdir}, a new desktop needs "
                f"{describe_bytes(limits.min_free_disk)}")
    return None


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# -- cgroups ------------------------------------------------------------------------------------------


class Cgroup:
    """One desktop's group: a folder per controller (v1) or one folder (v2)."""

    def __init__(self, dirs: dict[str, Path], v2: bool, limits: DesktopQuota):
        self.dirs, self.v2, self.limits = dirs, v2, limits

    def add(self, pid: int) -> None:
        """Move a process in; its children are born inside."""
        for d in set(self.dirs.values()):
            (d / "cgroup.procs").write_text(f"{pid}\n")

    def hit(self) -> str | None:
        """The limit the group has hit, as "kind: what happened" (None: none)."""
        # Processes first: a fork bomb runs into the memory limit too, but the processes are its cause.
        if _counter(self.dirs["pids"] / "pids.events", "max"):
            return f"processes: a new process was refused at the desktop's process limit of {self.limits.processes}"
        memory_events = "memory.events" if self.v2 else "memory.oom_control"
        if _counter(self.dirs["memory"] / memory_events, "oom_kill"):
            return (f"memory: a process was killed at the desktop's memory limit of "
                    f"{describe_bytes(self.limits.memory)}")
        return None

    def remove(self) -> None:
        """Remove the (empty) group; one the kernel still holds busy a moment longer is retried."""
        for d in set(self.dirs.values()):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _counter(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class Cgroups:
    """The folders under which this server's desktops get their groups, one per desktop."""

    def __init__(self, parents: dict[str, Path], v2: bool):
        self.parents, self.v2 = parents, v2

    @classmethod
    def here(cls, name: str, mountinfo: str = "/proc/self/mountinfo", own: str = "/proc/self/cgroup") -> "Cgroups":
        """Make `name` under this process's own groups (so limits nest inside whatever holds the server)."""
        mounts = _cgroup_mounts(Path(mountinfo).read_text())
        paths = _own_paths(Path(own).read_text())

        def own_dir(controller: str) -> Path:
            point, root = mounts[controller]
            return point / os.path.relpath(paths.get(controller, "/"), root)

        if "" in mounts and set(CONTROLLERS) <= _v2_controllers(mounts[""][0]):
            return cls._make_v2(own_dir(""), name)
        parents = {}
        for c in CONTROLLERS:
            if c not in mounts:
                raise LimitSetupError(f"no cgroup {c} controller is mounted (v1) nor enabled in a unified "
                                      "hierarchy (v2)")
            parents[c] = own_dir(c) / name
        for d in parents.values():
            _mkdir(d)
        return cls(parents, v2=False)

    @classmethod
    def _make_v2(cls, own: Path, name: str) -> "Cgroups":
        parent = own / name
        _mkdir(parent)
        try:
            # Children of a v2 group get a controller only if their parent hands it down, and a group
            # that holds processes itself cannot (the "no internal processes" rule).
            for d in (own, parent):
                (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(CONTROLLERS)))
        except OSError as e:
            parent.rmdir()
            raise LimitSetupError(
                f"cgroup v2: cannot hand memory, pids and cpu down from {own} ({e.strerror}); run the server "
                "in a group of its own with delegation, e.g. systemd-run --scope -p Delegate=yes") from None
        return cls({c: parent for c in CONTROLLERS}, v2=True)

    def create(self, name: str, limits: DesktopQuota) -> Cgroup:
        dirs = {c: self.parents[c] / name for c in CONTROLLERS}
        for d in set(dirs.values()):
            _mkdir(d)
        group = Cgroup(dirs, self.v2, limits)
        try:
            if self.v2:
                _write(dirs["memory"] / "memory.max", limits.memory)
                _write(dirs["memory"] / "memory.swap.max", 0, optional=True)
                _write(dirs["pids"] / "pids.max", limits.processes)
                _write(dirs["cpu"] / "cpu.weight", limits.cpu_weight)
            else:
                _write(dirs["memory"] / "memory.limit_in_bytes", limits.memory)
                _write(dirs["memory"] / "memory.memsw.limit_in_bytes", limits.memory, optional=True)  # no swap
                _write(dirs["pids"] / "pids.max", limits.processes)
                _write(dirs["cpu"] / "cpu.shares", max(2, limits.cpu_weight * 1024 // 100))
        except BaseException:
            group.remove()
            raise
        return group

    def close(self) -> None:
        for d in set(self.parents.values()):
            try:
                d.rmdir()
            except OSError:
                pass  # a desktop group left behind by a crash: the next server's is another folder



def _cgroup_mounts(mountinfo: str) -> dict[str, tuple[Path, str]]:
    """(mount point, the group mounted there) per v1 controller, and "" for the unified (v2) hierarchy.
    In a container the mount's root is the container's own group, not the hierarchy's root."""
    found: dict[str, tuple[Path, str]] = {}
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        mount = (Path(fields[4].replace("\\040", " ")), fields[3])
        if rest[0] == "cgroup2":
            found.setdefault("", mount)
        elif rest[0] == "cgroup":
            for option in rest[2].split(","):
                if option in CONTROLLERS:
                    found.setdefault(option, mount)
    return found


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """This process's group per v1 controller, and "" for v2, from /proc/self/cgroup."""
    paths = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for c in parts[1].split(",") if parts[1] else [""]:
                paths[c] = parts[2]
    return paths


def _v2_controllers(root: Path) -> set[str]:
    try:
        return set((root / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def _mkdir(d: Path) -> None:
    try:
        d.mkdir(exist_ok=True)
    except OSError as e:
        raise LimitSetupError(f"cannot make the cgroup {d}: {e.strerror}") from None


def _write(path: Path, value: int, optional: bool = False) -> None:
    try:
        path.write_text(f"{value}\n")
    except FileNotFoundError:
        if not optional:
            raise LimitSetupError(f"the cgroup file {path} is missing") from None
    except OSError as e:
        raise LimitSetupError(f"cannot set {path.name} to {value}: {e.strerror}") from None
