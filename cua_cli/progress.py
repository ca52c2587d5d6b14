"""The live progress bar of a rollout, fed from the run folder itself.

Reading the folder (not messages from runners) keeps the bar honest: it
shows what is on disk, including work done by other hosts on the same queue.
"""

import sys

from tqdm import tqdm

from .results import RunReader


class Progress:
    def __init__(self, run_path, queue):
        self.reader = RunReader(run_path)
        self.queue = queue
        self.bar = tqdm(total=0, unit="ep", dynamic_ncols=True, file=sys.stderr,
                        mininterval=0.5 if sys.stderr.isatty() else 10.0,
                        bar_format="{l_bar}{bar}| {n}/{total} [{elapsed}<{remaining}] {postfix}")

    def update(self) -> dict:
        self.reader.refresh()
        counts = self.queue.counts()
        s = self.reader.summary()
        done = counts["done"] + counts["failed"]
        self.bar.total = sum(counts.values())
        self.bar.n = done
        judged = s["success"] + s["failure"]
        rate = f"{100 * s['success'] / judged:.0f}%" if judged else "-"
        self.bar.set_postfix_str(f"running={counts['claimed']} success={rate} errors={s['errors']}",
                                 refresh=False)
        self.bar.refresh()
        return counts

    def close(self) -> None:
        self.bar.close()
