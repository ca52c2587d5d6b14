"""The screen recorded to an mp4 by ffmpeg, as OSWorld's /start_recording and /end_recording do: one
recording at a time per desktop, its answers and status codes OSWorld's."""

import os
import signal
import subprocess
import threading

PATH = "/tmp/recording.mp4"  # OSWorld's own path; the desktop's /tmp is its own


class Recorder:
    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None

    def start(self, width: int, height: int) -> dict:
        with self._lock:
            if self._proc is not None:
                return {"http": 400, "json": {"status": "error", "message": "Recording is already in progress."}}
            # ultrafast: ffmpeg keeps up with the screen on a loaded host and costs a desktop little CPU
            self._proc = subprocess.Popen(
                ["ffmpeg", "-y", "-loglevel", "error", "-f", "x11grab", "-draw_mouse", "1", "-framerate", "30",
                 "-video_size", f"{width}x{height}", "-i", os.environ["DISPLAY"] + ".0", "-c:v", "libx264",
                 "-preset", "ultrafast", "-pix_fmt", "yuv420p", PATH],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        return {"http": 200, "json": {"status": "success", "message": "Started recording."}}

    def stop(self) -> dict:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return {"http": 400, "json": {"status": "error", "message": "No recording in progress to stop."}}
        proc.send_signal(signal.SIGINT)  # ffmpeg writes the file's index and ends
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        try:
            with open(PATH, "rb") as f:
                return {"http": 200, "type": "video/mp4", "body": f.read()}
        except OSError:
            return {"http": 404, "text": "Recording failed"}
