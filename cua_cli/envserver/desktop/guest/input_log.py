"""Inside a desktop: a person's keys and buttons as the X server gets them, and the screens they
acted on (`cua demo` records a demonstration from them).

The RECORD extension reports every key and button event the server processes, whoever sent it
(x11vnc's XTest for a person at the watch page, or any other input), so each action is recorded
once, as the desktop saw it. A grabber takes the screen every FRAME_S and keeps a frame only when
it differs from the one before; each event is stamped with the frame shown when it came, so the
host can ask for the screen a gesture began on. The host reads events in order (`read(after)`);
frames that no unread event points to are dropped, except the newest.
"""

import threading
import time

from Xlib import XK, X
from Xlib.display import Display
from Xlib.ext import record
from Xlib.protocol import rq

FRAME_S = 0.2         # the screen a person acted on is at most this old
MAX_FRAMES = 12       # raw 1080p frames are 8 MiB each: past this, the oldest go
MAX_EVENTS = 100_000  # unread; past this a host that stopped reading loses the oldest
START_S = 30.0        # for the X server to begin recording, on a loaded host


class InputLog:
    def __init__(self, grab, display_name: str):
        self.grab = grab  # () -> (raw BGRA bytes, width, height, pointer x, pointer y): one screen
        self.display_name = display_name
        self._lock = threading.Lock()
        self._events: list[dict] = []
        self._seq = 0
        self._frames: dict[int, tuple] = {}  # id -> (t, raw, width, height, x, y)
        self._frame_id = -1
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._ctl = self._ctx = None
        self._recording = threading.Event()
        self.lost = 0

    @property
    def running(self) -> bool:
        return bool(self._threads)

    def start(self) -> None:
        self._ctl = Display(self.display_name)
        if not self._ctl.has_extension("RECORD"):
            self._ctl.close()
            raise RuntimeError("the X server has no RECORD extension")
        self._keys = Display(self.display_name)  # keycode -> keysym from its cached keyboard map
        self._ctx = self._ctl.record_create_context(0, [record.AllClients], [{
            "core_requests": (0, 0), "core_replies": (0, 0), "ext_requests": (0, 0, 0, 0),
            "ext_replies": (0, 0, 0, 0), "delivered_events": (0, 0), "device_events": (X.KeyPress, X.ButtonRelease),
            "errors": (0, 0), "client_started": False, "client_died": False}])
        self._ctl.sync()
        self._frame()  # every event has a screen before it
        self._stop.clear()
        self._recording.clear()
        self._threads = [threading.Thread(target=self._record, daemon=True, name="input-record"),
                         threading.Thread(target=self._grab_loop, daemon=True, name="input-frames")]
        for t in self._threads:
            t.start()
        # Answered once the server records: nothing the person does after the answer is missed.
        if not self._recording.wait(START_S):
            self.stop()
            raise RuntimeError(f"the X server did not start recording input within {START_S:.0f} s")

    def stop(self) -> None:
        if not self._threads:
            return
        self._stop.set()
        self._ctl.record_disable_context(self._ctx)
        self._ctl.sync()
        for t in self._threads:
            t.join(10)
        self._ctl.record_free_context(self._ctx)
        self._ctl.close()
        self._keys.close()
        self._threads = []

    def read(self, after: int) -> dict:
        """Events with seq > after (the host has the rest), the frames' times, and the clock now."""
        with self._lock:
            self._events = [e for e in self._events if e["seq"] > after]
            keep = min((e["frame"] for e in self._events), default=self._frame_id)
            for fid in [f for f in self._frames if f < keep and f != self._frame_id]:
                del self._frames[fid]
            return {"events": list(self._events), "frames": sorted((fid, f[0]) for fid, f in self._frames.items()),
                    "now": time.monotonic(), "lost": self.lost}

    def frame(self, fid: int):
        """(raw, width, height, pointer x, pointer y) of a kept frame, or None."""
        with self._lock:
            f = self._frames.get(fid)
        return f and f[1:]

    # -- threads --------------------------------------------------------------------------------------
    def _grab_loop(self) -> None:
        while not self._stop.wait(FRAME_S):
            self._frame()

    def _frame(self) -> None:
        t = time.monotonic()
        raw, width, height, x, y = self.grab()
        with self._lock:
            last = self._frames.get(self._frame_id)
            if last is not None and last[1] == raw and last[4:] == (x, y):
                return  # the same screen: events keep pointing at the frame they had
            self._frame_id += 1
            self._frames[self._frame_id] = (t, raw, width, height, x, y)
            while len(self._frames) > MAX_FRAMES:
                del self._frames[min(self._frames)]

    def _record(self) -> None:
        data = Display(self.display_name)
        try:
            data.record_enable_context(self._ctx, self._on_record)  # returns once stop() disables it
        finally:
            data.close()

    def _on_record(self, reply) -> None:
        if reply.category == record.StartOfData:
            self._recording.set()
        if reply.category != record.FromServer or reply.client_swapped or not reply.data or reply.data[0] < 2:
            return
        data = reply.data
        while len(data):
            ev, data = rq.EventField(None).parse_binary_value(data, self._keys.display, None, None)
            if ev.type not in (X.KeyPress, X.KeyRelease, X.ButtonPress, X.ButtonRelease):
                continue
            rec = {"t": time.monotonic(), "kind": "key" if ev.type in (X.KeyPress, X.KeyRelease) else "button",
                   "down": ev.type in (X.KeyPress, X.ButtonPress), "code": ev.detail, "x": ev.root_x, "y": ev.root_y}
            if rec["kind"] == "key":
                syms = [self._keys.keycode_to_keysym(ev.detail, i) for i in (0, 1)]
                rec["names"] = [_name(s) for s in syms]
                rec["chars"] = [_char(s) for s in syms]
            with self._lock:
                self._seq += 1
                rec["seq"], rec["frame"] = self._seq, self._frame_id
                self._events.append(rec)
                if len(self._events) > MAX_EVENTS:
                    del self._events[0]
                    self.lost += 1


_NAMES: dict[int, str] = {}


def _name(keysym: int) -> str | None:
    """A keysym's name as X spells it (Return, Control_L, a, asciitilde)."""
    if not _NAMES:
        for group in ("miscellany", "latin1", "xkb", "xf86"):
            XK.load_keysym_group(group)
        for name, value in vars(XK).items():
            if name.startswith("XK_") and type(value) is int:
                _NAMES.setdefault(value, name[3:])
    return _NAMES.get(keysym) if keysym else None


def _char(keysym: int) -> str | None:
    """The character a keysym types: Latin-1 keysyms are their code points, Unicode ones 0x1000000 +
    the code point; the rest (Return, F1, Shift) type no character here."""
    if 0x20 <= keysym <= 0x7E or 0xA0 <= keysym <= 0xFF:
        return chr(keysym)
    if 0x1000100 <= keysym <= 0x110FFFF:
        return chr(keysym - 0x1000000)
    return None
