"""This host's GPUs through NVML (nvidia-ml-py): utilisation and memory, for the rollout's samples."""


class Gpus:
    """Samples the GPUs NVML sees; on a host without NVML or GPUs, `count` is 0 and `sample` gives nothing."""

    def __init__(self):
        self.handles = []
        try:
            import pynvml  # nvidia-ml-py
            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # no package, no driver, no device: NVMLError has many subclasses
            self.handles = []

    @property
    def count(self) -> int:
        return len(self.handles)

    def sample(self) -> list[dict]:
        """One {"gpu", "util", "mem_used", "mem_total"} per GPU (util in %, memory in bytes);
        a GPU NVML cannot read now is left out of this sample."""
        out = []
        for i, h in enumerate(self.handles):
            try:
                util = self.nvml.nvmlDeviceGetUtilizationRates(h)
                mem = self.nvml.nvmlDeviceGetMemoryInfo(h)
            except Exception:  # a GPU that fell off the bus, a driver reload
                continue
            out.append({"gpu": i, "util": util.gpu, "mem_used": mem.used, "mem_total": mem.total})
        return out

    def close(self) -> None:
        if self.handles:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass
            self.handles = []
