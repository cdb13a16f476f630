import os

import pytest
import torch
from pyrun import run_python


def test_neuron_is_the_accelerator():
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == torch.accelerator.device_count() == 4


def test_default_platform_is_trn2_lnc2():
    props = torch.neuron.get_device_properties(0)
    assert props.name == "trn2"
    assert props.total_memory == 24 * 2**30
    assert torch.neuron.get_device_properties().name == "trn2"
    assert torch.neuron.get_device_name(1) == "neuron:1"
    assert torch.neuron.get_device_capability() == (3, 0)


def test_trn3_override():
    out = run_python(
        "import torch; p = torch.neuron.get_device_properties(0);"
        "print(p.name, p.total_memory, torch.neuron.device_count())",
        env={"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"},
    )
    assert out.stdout.split() == ["trn3", str(36 * 2**30), "4"], out.stderr


@pytest.mark.parametrize("platform, gib", [("trn2", 12), ("trn3", 18)])
def test_logical_core_size_one(platform, gib):
    # LNC=1: the chip's 8 physical cores are 8 logical ones, each with an eighth of its HBM.
    code = (
        "import torch\n"
        "p = torch.neuron.get_device_properties(7)\n"
        "print(torch.neuron.device_count(), p.physical_core, p.total_memory)\n"
        "try:\n"
        f"    torch.empty({gib} * 2**30 + 1, dtype=torch.uint8, device='neuron:7')\n"
        "except torch.OutOfMemoryError:\n"
        "    print('out of memory')\n"
    )
    out = run_python(
        code, env={"NEURON_LOGICAL_NC_CONFIG": "1", "NEURON_PLATFORM_TARGET_OVERRIDE": platform}
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [f"8 7 {gib * 2**30}", "out of memory"]


@pytest.mark.parametrize(
    "env, count, core",
    [
        ({"NEURON_RT_VISIBLE_CORES": "0-1"}, 2, 0),
        ({"NEURON_RT_VISIBLE_CORES": "2"}, 1, 2),
        ({"NEURON_RT_VISIBLE_CORES": "1,3"}, 2, 1),
        ({"NEURON_RT_NUM_CORES": "3"}, 3, 0),
    ],
)
def test_visible_cores(env, count, core):
    out = run_python(
        "import torch; print(torch.neuron.device_count(),"
        " torch.neuron.get_device_properties(0).physical_core)",
        env=env,
    )
    assert out.stdout.split() == [str(count), str(core)], out.stderr


def test_bad_core_environment_is_a_clear_error():
    out = run_python(
        "import torch; torch.neuron.device_count()", env={"NEURON_RT_VISIBLE_CORES": "7"}
    )
    assert out.returncode != 0
    assert "NEURON_RT_VISIBLE_CORES='7' names core 7" in out.stderr


def test_out_of_range_index_is_an_error():
    with pytest.raises(IndexError, match=r"Invalid device index neuron:9: there are 4 visible"):
        torch.empty(2, device="neuron:9")
    with pytest.raises(IndexError, match="neuron:4"):
        torch.neuron.set_device(4)


def test_device_context_and_current_device():
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(2):
        assert torch.neuron.current_device() == 2
        assert torch.empty(1, device="neuron").device == torch.device("neuron:2")
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device("neuron:1")
    assert torch.accelerator.current_device_index() == 1
    with torch.accelerator.device_index(3):
        assert torch.ones(2, device="neuron").device.index == 3
    x = torch.ones(1, device="neuron:3")
    with torch.neuron.device_of(x):
        assert torch.neuron.current_device() == 3


def test_tensors_on_second_core():
    x = torch.arange(6.0).reshape(2, 3)
    y = x.to("neuron:1")
    assert y.device == torch.device("neuron:1")
    assert torch.equal((y * 2 + 1).cpu(), x * 2 + 1)
    z = y.to("neuron:2")
    assert z.device.index == 2 and torch.equal(z.cpu(), x)


def test_init_and_fork_detection():
    torch.neuron.init()
    assert torch.neuron.is_initialized()
    assert not torch.neuron._is_in_bad_fork()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, b"1" if torch.neuron._is_in_bad_fork() else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b"1"


def test_amp_capabilities():
    assert torch.bfloat16 in torch.neuron.get_amp_supported_dtype()
    assert torch.float16 in torch.neuron.get_amp_supported_dtype()
    assert torch.neuron.is_bf16_supported()


def test_generated_methods():
    x = torch.ones(2)
    assert x.neuron().is_neuron and x.neuron(2).device.index == 2
    assert not x.is_neuron
    m = torch.nn.Linear(2, 2).neuron()
    assert m.weight.device.type == "neuron"
    assert x.untyped_storage().neuron().device.type == "neuron"
    assert x.neuron().type() == "torch.neuron.FloatTensor"


def test_autoload_and_opt_out():
    on = run_python("import torch; print(torch.accelerator.current_accelerator())")
    assert on.stdout.strip() == "neuron", on.stderr
    off = run_python(
        "import torch; print(hasattr(torch, 'neuron'))", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    )
    assert off.stdout.strip() == "False", off.stderr


def test_hugging_face_detection():
    # What transformers itself asks to pick the neuron device and bf16 training.
    import_utils = pytest.importorskip("transformers.utils.import_utils")
    assert import_utils.is_torch_neuron_available(check_device=True)
    assert import_utils.is_torch_bf16_gpu_available()


def test_importing_the_package_first_works():
    out = run_python("import torch_neuronx, torch; print(torch.neuron.device_count())")
    assert out.stdout.strip() == "4", out.stderr
