"""The live progress bar of a rollout, fed from the run folder itself.

Reading the folder (not messages from runners) keeps the bar honest: it
shows what is on disk, including work done by other hosts on the same queue.
"""

import sys
import time

from tqdm import tqdm

from ..runfolder.reader import RunReader


class Progress:
    def __init__(self, run_path, queue):
        self.reader = RunReader(run_path)
        self.queue = queue
        # In a log (CI, nohup) a redrawn bar is noise: print a plain line now and then instead.
        self.tty = sys.stderr.isatty()
        self.bar = tqdm(total=0, unit="ep", dynamic_ncols=True, file=sys.stderr, disable=not self.tty,
                        bar_format="{l_bar}{bar}| {n}/{total} [{elapsed}<{remaining}] {postfix}")
        self.last_line, self.last_done = 0.0, -1

    def update(self) -> dict:
        self.reader.refresh()
        counts = self.queue.counts()
        s = self.reader.summary()
        done = counts["done"] + counts["failed"]
        self.bar.total = sum(counts.values())
        self.bar.n = done
        judged = s["success"] + s["failure"]
        rate = f"{100 * s['success'] / judged:.0f}%" if judged else "-"
        status = f"running={counts['claimed']} success={rate} errors={s['errors']}"
        if self.tty:
            self.bar.set_postfix_str(status, refresh=False)
            self.bar.refresh()
        elif time.monotonic() - self.last_line > 10 or (done == self.bar.total and done != self.last_done):
            self.last_line, self.last_done = time.monotonic(), done
            print(f"progress: {done}/{self.bar.total} done, {status}", file=sys.stderr, flush=True)
        return counts

    def write(self, message: str) -> None:
        tqdm.write(message, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()
