"""Mixed precision on neuron: ``torch.neuron.amp.autocast`` and ``GradScaler``."""

import torch


class autocast(torch.amp.autocast):
    """``torch.autocast("neuron", ...)``."""

    def __init__(
        self, enabled: bool = True, dtype: torch.dtype = torch.bfloat16, cache_enabled: bool = True
    ) -> None:
        super().__init__("neuron", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("neuron", ...)``."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "neuron", init_scale, growth_factor, backoff_factor, growth_interval, enabled
        )
