"""Dynamo's device interface for ``neuron``: how Dynamo and Inductor query the device."""

import torch
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device


class NeuronInterface(DeviceInterface):
    """The emulated NeuronCore as Dynamo sees it: ``torch.neuron`` behind Dynamo's API."""

    device = torch.neuron.device
    Event = torch.neuron.Event
    Stream = torch.neuron.Stream

    class Worker:
        """Property queries that compile workers may make without initialising the device."""

        @staticmethod
        def set_device(device):
            torch.neuron.set_device(device)

        @staticmethod
        def current_device():
            return torch.neuron.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return torch.neuron.get_device_properties(device)

    @staticmethod
    def current_device():
        return torch.neuron.current_device()

    @staticmethod
    def set_device(device):
        torch.neuron.set_device(device)

    @staticmethod
    def exchange_device(device):
        previous = torch.neuron.current_device()
        if device >= 0 and device != previous:
            torch.neuron.set_device(device)
        return previous

    maybe_exchange_device = exchange_device

    @staticmethod
    def device_count():
        return torch.neuron.device_count()

    @staticmethod
    def is_available():
        return torch.neuron.is_available()

    @staticmethod
    def stream(stream):
        return torch.neuron.stream(stream)

    @staticmethod
    def current_stream():
        return torch.neuron.current_stream()

    @staticmethod
    def set_stream(stream):
        torch.neuron.set_stream(stream)

    @staticmethod
    def _set_stream_by_id(stream_id, device_index, device_type):
        torch.neuron.set_stream(
            torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
        )

    @staticmethod
    def get_raw_stream(device_idx):
        # The emulated core runs synchronously; there is no native stream handle.
        return 0

    @staticmethod
    def synchronize(device=None):
        torch.neuron.synchronize(device)

    @staticmethod
    def get_compute_capability(device=None):
        return torch.neuron.get_device_capability(device)

    @staticmethod
    def is_bf16_supported(including_emulation=False):
        return torch.neuron.is_bf16_supported()

    @staticmethod
    def memory_allocated(device=None):
        return torch.neuron.memory_allocated(device)

    @staticmethod
    def is_triton_capable(device=None):
        return False


def register():
    """Registers the interface for ``neuron`` and for each ``neuron:<index>``."""
    register_interface_for_device("neuron", NeuronInterface)
    for index in range(torch.neuron.device_count()):
        register_interface_for_device(f"neuron:{index}", NeuronInterface)
