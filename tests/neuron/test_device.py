import os
import time

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
    assert (props.major, props.minor, props.multi_processor_count) == (3, 0, 2)
    assert not props.is_integrated and props.index == 0
    assert torch.neuron.get_arch_list() == ["trn2", "trn3"]


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
        "print(torch.neuron.device_count(), p.physical_core, p.total_memory, "
        "p.multi_processor_count)\n"
        "try:\n"
        f"    torch.empty({gib} * 2**30 + 1, dtype=torch.uint8, device='neuron:7')\n"
        "except torch.OutOfMemoryError:\n"
        "    print('out of memory')\n"
    )
    out = run_python(
        code, env={"NEURON_LOGICAL_NC_CONFIG": "1", "NEURON_PLATFORM_TARGET_OVERRIDE": platform}
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [f"8 7 {gib * 2**30} 1", "out of memory"]


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


def test_peer_access_and_copies_between_cores():
    assert torch.neuron.can_device_access_peer(0, 1)
    assert torch.neuron.can_device_access_peer("neuron:3", torch.device("neuron:2"))
    assert not torch.neuron.can_device_access_peer(1, 1)
    with pytest.raises(ValueError, match="peer_device neuron:4 is not a visible core"):
        torch.neuron.can_device_access_peer(0, 4)
    x = torch.arange(4.0, device="neuron:0")
    assert torch.equal(x.to("neuron:1").cpu(), torch.arange(4.0))


def test_device_memory_used_is_the_reserved_hbm():
    free, total = torch.neuron.mem_get_info()
    assert torch.neuron.device_memory_used() == total - free
    before = torch.neuron.device_memory_used(1)
    x = torch.empty(64 * 2**20, dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.device_memory_used(1) >= before + x.numel()
    assert torch.neuron.device_memory_used(1) == torch.neuron.memory_reserved(1)


def test_ipc_collect_holds_nothing_for_other_processes():
    x = torch.ones(1024, device="neuron")
    reserved = torch.neuron.memory_reserved()
    torch.neuron.ipc_collect()
    assert torch.neuron.memory_reserved() == reserved and x.sum().item() == 1024


def test_utilization_is_the_busy_share_of_wall_time():
    torch.neuron.utilization()  # starts counting
    time.sleep(0.05)
    assert torch.neuron.utilization() <= 5  # idle
    x = torch.randn(512, 512, device="neuron")
    start = time.monotonic()
    while time.monotonic() - start < 0.2:
        x = (x @ x).tanh()
    assert torch.neuron.utilization() >= 50  # busy almost all the time
    with pytest.raises(IndexError, match="Invalid device index"):
        torch.neuron.utilization(7)


def test_capability_flags():
    assert torch.neuron.is_tf32_supported() and torch.neuron.has_half


def _converts(dtype, others):
    x = torch.zeros(2, dtype=dtype, device="neuron")
    return all(x.to(other).dtype == other for other in others)


def test_accelerator_capability_lists_the_dtypes_neuron_holds():
    supported = torch.accelerator.get_device_capability()["supported_dtypes"]
    assert supported == torch.accelerator.get_device_capability("neuron:1")["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.float8_e4m3fn, torch.float64} <= supported
    for dtype in supported:
        assert _converts(dtype, supported), dtype
    for dtype in (torch.qint8, torch.quint8, torch.bits8, torch.bits16):
        assert dtype not in supported
        with pytest.raises((RuntimeError, NotImplementedError)):
            _converts(dtype, supported)
    with pytest.raises(IndexError, match="Invalid device index neuron:7"):
        torch.accelerator.get_device_capability(7)


def test_accelerator_capability_follows_the_64bit_policy():
    code = (
        "import torch\n"
        "s = torch.accelerator.get_device_capability()['supported_dtypes']\n"
        "print(torch.float64 in s, torch.complex128 in s, torch.int64 in s)\n"
        "try:\n"
        "    torch.zeros(1, dtype=torch.float64, device='neuron')\n"
        "except RuntimeError:\n"
        "    print('refused')\n"
    )
    out = run_python(code, env={"TORCH_NEURONX_64BIT": "error"})
    assert out.stdout.split("\n")[:2] == ["False False True", "refused"], out.stderr


@pytest.mark.parametrize("name", sorted(torch.neuron._tensors.TENSOR_TYPES))
def test_typed_tensor_classes(name):
    cls = getattr(torch.neuron, name)
    cpu_cls = getattr(torch, name)
    x = cls(2, 3)
    # torch names a neuron tensor's legacy type itself: it must be this class's name.
    assert x.type() == f"torch.neuron.{name}" and x.shape == (2, 3)
    assert isinstance(x, cls) and not isinstance(x.cpu(), cls) and isinstance(x.cpu(), cpu_cls)
    assert cls().shape == (0,) and cls(torch.Size([4])).device == torch.device("neuron:0")
    data = [[1, 0], [0, 1]]
    assert torch.equal(cls(data).cpu(), cpu_cls(data))
    assert torch.ones(2).type(cls).type() == f"torch.neuron.{name}"
    assert repr(cls) == f"<class 'torch.neuron.{name}'>"


@pytest.mark.parametrize("name", sorted(torch.neuron._tensors.STORAGE_TYPES))
def test_typed_storage_classes(name):
    cls = getattr(torch.neuron, name)
    storage = cls(3)
    assert storage.device.type == "neuron" and storage.size() == 3
    assert storage.dtype == getattr(torch, name).dtype
    assert isinstance(storage, cls) and not isinstance(getattr(torch, name)(3), cls)
    x = torch.ones(4, dtype=storage.dtype, device="neuron")
    assert isinstance(x.storage(), cls)
    assert cls([1, 0]).tolist() == getattr(torch, name)([1, 0]).tolist()


def test_typed_tensor_over_a_storage():
    storage = torch.neuron.FloatStorage([1.0, 2.0, 3.0])
    x = torch.neuron.FloatTensor(storage)
    assert x.device.type == "neuron" and torch.equal(x.cpu(), torch.tensor([1.0, 2.0, 3.0]))


def test_forked_child_of_an_initialised_parent_gets_the_bad_fork_error():
    """The torch.neuron reference (awsdocs-neuron .../torch/reference/api/
    torch-neuron-module.html) states lazy initialisation with a fork check, as CUDA's: a child
    forked after the parent initialised the device cannot use it; a child of a parent that never
    did can."""
    code = (
        "import os, torch\n"
        "{parent}"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        print('child', torch.ones(2, device='neuron').sum().item())\n"
        "    except RuntimeError as e:\n"
        "        print('child error:', e)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('parent', (torch.ones(2, device='neuron') * 2).sum().item())\n"
    )
    initialised = run_python(code.format(parent="torch.ones(1, device='neuron')\n"))
    assert "child error: Cannot re-initialize the neuron runtime in a forked subprocess" in (
        initialised.stdout
    ), initialised.stderr
    assert "parent 4.0" in initialised.stdout
    fresh = run_python(code.format(parent=""))
    assert "child 2.0" in fresh.stdout and "parent 4.0" in fresh.stdout, fresh.stderr
