"""The installed distribution answers to TorchNeuron's name, ``torch-neuronx``.

AWS's troubleshooting page (awsdocs-neuron .../torch/troubleshooting.html) starts with
``pip show torch-neuronx``; diffusers' ``is_torch_neuronx_available()`` reads the distribution
that provides ``torch_neuronx``. The version scheme is docs/package.md's."""

import importlib.metadata

import packaging.version
import torch
from diffusers.utils import import_utils as diffusers_imports

import torch_neuronx


def test_distribution_name_and_version():
    dist = importlib.metadata.distribution("torch-neuronx")
    assert dist.metadata["Name"] == "torch-neuronx"
    assert importlib.metadata.version("torch-neuronx") == torch_neuronx.__version__
    version = packaging.version.Version(torch_neuronx.__version__)
    # The public part is the TorchNeuron release whose API this implements (2.14.3.0 is the
    # public beta's, for PyTorch 2.14); the local label says it is this emulator.
    assert version.release[:2] == (2, 14) and len(version.release) == 4
    assert version.local is not None and version.local.startswith("torchneuron.")
    assert str(version) == torch_neuronx.__version__


def test_the_torchneuron_command_and_the_entry_points_stay():
    entry_points = importlib.metadata.distribution("torch-neuronx").entry_points
    by_group = {(e.group, e.name): e.value for e in entry_points}
    assert by_group[("console_scripts", "torchneuron")] == "torch_neuronx.cli:main"
    assert by_group[("torch.backends", "torch_neuronx")] == "torch_neuronx:_autoload"
    assert ("torch_dynamo_backends", "neuron") in by_group


def test_no_distribution_of_the_old_name_remains():
    names = {d.metadata["Name"] for d in importlib.metadata.distributions()}
    assert "torchneuron" not in names


def test_diffusers_sees_torch_neuronx():
    available, version = diffusers_imports._is_package_available("torch_neuronx")
    assert available and version == torch_neuronx.__version__
    assert diffusers_imports.is_torch_neuronx_available()
    assert torch.neuron.is_available()
