"""torchvision on neuron: models, ops, transforms.v2, io, datasets and an examples-style training
step give the CPU's results.

Neuron runs the CPU's kernels on the same values, so results are compared bit for bit.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from pyrun import run_python
from torch import nn
from torch.utils.data import DataLoader

torchvision = pytest.importorskip("torchvision")

import vision_samples  # noqa: E402
from torchvision import datasets, models, ops, transforms, tv_tensors  # noqa: E402
from torchvision.transforms import v2  # noqa: E402

import torch_neuronx  # noqa: E402

# torchvision 0.29 deprecates its image codecs in favour of TorchCodec; they still work.
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")


def _assert_same(neuron, cpu, what):
    assert neuron.device.type == "neuron", what
    assert torch.equal(neuron.detach().cpu(), cpu.detach()), what


MODELS = {
    "resnet18": (lambda: models.resnet18(num_classes=10), (2, 3, 32, 32)),
    "vit": (
        lambda: models.VisionTransformer(
            image_size=32,
            patch_size=8,
            num_layers=2,
            num_heads=2,
            hidden_dim=32,
            mlp_dim=64,
            dropout=0.1,
            num_classes=10,
        ),
        (2, 3, 32, 32),
    ),
    "mobilenet_v3_small": (lambda: models.mobilenet_v3_small(num_classes=10), (2, 3, 32, 32)),
}


def _training_step(model, images, targets, device):
    """{name: tensor}: output, loss, parameter gradients and buffers of one training step."""
    model.to(device)
    # Each device's generator in the same state, so that dropout drops the same elements.
    torch.manual_seed(1)
    output = model(images.to(device))
    loss = F.cross_entropy(output, targets.to(device))
    loss.backward()
    return {
        "output": output,
        "loss": loss,
        **{f"grad {name}": p.grad for name, p in model.named_parameters()},
        **{f"buffer {name}": b for name, b in model.named_buffers()},
    }


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_forward_and_backward_match_cpu(name):
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build().train()
    images, targets = torch.randn(shape), torch.randint(0, 10, (shape[0],))
    on_cpu = _training_step(copy.deepcopy(model), images, targets, "cpu")
    on_neuron = _training_step(model, images, targets, "neuron")
    assert on_neuron.keys() == on_cpu.keys()
    for key, value in on_neuron.items():
        _assert_same(value, on_cpu[key], key)


def _boxes(gen, count, extent=40.0):
    corner = torch.rand(count, 2, generator=gen) * extent
    size = torch.rand(count, 2, generator=gen) * extent / 2 + 1
    return torch.cat([corner, corner + size], 1)


def _rois(gen, count, batch):
    index = torch.randint(0, batch, (count, 1), generator=gen).float()
    return torch.cat([index, _boxes(gen, count, extent=24.0)], 1)


def _features(gen, channels=4):
    return torch.randn(2, channels, 16, 16, generator=gen)


def _deform_inputs(gen):
    kernel = 3
    return (
        torch.randn(2, 4, 8, 8, generator=gen),
        torch.randn(2, 2 * kernel * kernel, 8, 8, generator=gen),
        torch.randn(6, 4, kernel, kernel, generator=gen),
        torch.randn(6, generator=gen),
        torch.rand(2, kernel * kernel, 8, 8, generator=gen),
    )


# name: (function, its inputs, indices of the inputs it differentiates, the torchvision ops run).
OPS = {
    "nms": (
        lambda boxes, scores: ops.nms(boxes, scores, 0.5),
        lambda gen: (_boxes(gen, 40), torch.rand(40, generator=gen)),
        (),
        ["torchvision::nms"],
    ),
    "batched_nms": (
        lambda boxes, scores, classes: ops.batched_nms(boxes, scores, classes, 0.5),
        lambda gen: (
            _boxes(gen, 40),
            torch.rand(40, generator=gen),
            torch.randint(0, 3, (40,), generator=gen),
        ),
        (),
        ["torchvision::nms"],
    ),
    "roi_align": (
        lambda x, rois: ops.roi_align(x, rois, (4, 4), 0.5, sampling_ratio=2, aligned=True),
        lambda gen: (_features(gen), _rois(gen, 6, 2)),
        (0,),
        ["torchvision::roi_align", "torchvision::_roi_align_backward"],
    ),
    "roi_align_adaptive_sampling": (
        lambda x, rois: ops.roi_align(x, rois, 3, 0.5, sampling_ratio=-1, aligned=False),
        lambda gen: (_features(gen), _rois(gen, 6, 2)),
        (0,),
        ["torchvision::roi_align", "torchvision::_roi_align_backward"],
    ),
    "roi_pool": (
        lambda x, rois: ops.roi_pool(x, rois, (3, 3), 0.5),
        lambda gen: (_features(gen), _rois(gen, 6, 2)),
        (0,),
        ["torchvision::roi_pool", "torchvision::_roi_pool_backward"],
    ),
    "ps_roi_align": (
        lambda x, rois: ops.ps_roi_align(x, rois, 2, 0.5, sampling_ratio=2),
        lambda gen: (_features(gen, channels=8), _rois(gen, 6, 2)),
        (0,),
        ["torchvision::ps_roi_align", "torchvision::_ps_roi_align_backward"],
    ),
    "deform_conv2d": (
        lambda x, offset, weight, bias, mask: ops.deform_conv2d(
            x, offset, weight, bias, padding=(1, 1), mask=mask
        ),
        _deform_inputs,
        (0, 1, 2, 3, 4),
        ["torchvision::deform_conv2d", "torchvision::_deform_conv2d_backward"],
    ),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_matches_cpu_and_is_reported_as_a_cpu_fallback(name):
    fn, make_inputs, differentiable, torchvision_ops = OPS[name]
    gen = torch.Generator().manual_seed(0)
    cpu_inputs = list(make_inputs(gen))
    neuron_inputs = [t.to("neuron") for t in cpu_inputs]
    for i in differentiable:
        cpu_inputs[i].requires_grad_()
        neuron_inputs[i].requires_grad_()
    torch_neuronx.clear_op_tracking()
    on_neuron, on_cpu = fn(*neuron_inputs), fn(*cpu_inputs)
    _assert_same(on_neuron, on_cpu, "output")
    if differentiable:
        weights = torch.randn(on_cpu.shape, generator=gen)
        (on_neuron * weights.to("neuron")).sum().backward()
        (on_cpu * weights).sum().backward()
        for i in differentiable:
            _assert_same(neuron_inputs[i].grad, cpu_inputs[i].grad, f"gradient of input {i}")
    # torchvision's ops have no NeuronCore kernels: on Trainium they run on the host.
    assert set(torchvision_ops) <= set(torch_neuronx.get_fallback_ops())


NORMALIZE = v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
PIPELINES = {
    # Resized as float: uint8 images resize differently off the CPU (the test below).
    "geometric": v2.Compose(
        [
            v2.ToDtype(torch.float32, scale=True),
            v2.RandomResizedCrop(24, antialias=True),
            v2.RandomHorizontalFlip(p=1.0),
            NORMALIZE,
        ]
    ),
    "photometric": v2.Compose(
        [
            v2.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1),
            v2.GaussianBlur(5, sigma=(0.1, 2.0)),
            v2.ToDtype(torch.float32, scale=True),
            NORMALIZE,
        ]
    ),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_transforms_v2_pipeline_matches_cpu(name):
    gen = torch.Generator().manual_seed(0)
    image = tv_tensors.Image(torch.randint(0, 256, (3, 40, 48), dtype=torch.uint8, generator=gen))
    boxes = tv_tensors.BoundingBoxes(
        torch.tensor([[4.0, 6.0, 30.0, 28.0], [10.0, 2.0, 44.0, 36.0]]),
        format="XYXY",
        canvas_size=(40, 48),
    )
    results = {}
    for device in ("cpu", "neuron"):
        # The transforms draw their parameters from the CPU generator, whatever the device.
        torch.manual_seed(3)
        results[device] = PIPELINES[name](image.to(device), boxes.to(device))
    for on_neuron, on_cpu in zip(results["neuron"], results["cpu"]):
        assert type(on_neuron) is type(on_cpu)
        _assert_same(on_neuron, on_cpu, type(on_cpu).__name__)


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_uint8_resize_takes_torchvisions_path_for_devices(interpolation):
    # torchvision resizes uint8 natively only on the CPU; on any other device (CUDA, neuron) it
    # resizes a float32 copy and rounds it back, so the two differ by a few levels.
    mode = v2.InterpolationMode(interpolation)
    image = torch.randint(0, 256, (3, 40, 48), dtype=torch.uint8)
    on_neuron = v2.functional.resize(image.to("neuron"), [24, 30], interpolation=mode)
    as_float = v2.functional.resize(image.float(), [24, 30], interpolation=mode)
    _assert_same(on_neuron, as_float.clamp(0, 255).round().to(torch.uint8), "resized image")


def test_io_and_datasets_are_unaffected_by_the_device(tmp_path):
    folder, saved = tmp_path / "folder", tmp_path / "samples.pt"
    vision_samples.write_image_folder(folder)
    with_device = vision_samples.host_samples(folder)
    out = run_python(
        "import sys, torch, vision_samples\n"
        "assert 'torch_neuronx' not in sys.modules\n"
        f"torch.save(vision_samples.host_samples({str(folder)!r}), {str(saved)!r})",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert out.returncode == 0, out.stderr
    without_device = torch.load(saved)
    assert with_device.keys() == without_device.keys()
    for key, value in with_device.items():
        assert torch.equal(value, without_device[key]), key
        _assert_same(value.to("neuron"), value, key)


def test_current_accelerator_is_neuron():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")


MNIST_LIKE = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.25,))])


def _fake_digits(count):
    return datasets.FakeData(
        size=count, image_size=(1, 28, 28), num_classes=10, transform=MNIST_LIKE
    )


def _pinned_loader(dataset, batch_size):
    """The loader pytorch/examples builds when an accelerator is in use."""
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
        num_workers=1,
        persistent_workers=True,
        pin_memory=True,
    )


def test_data_loader_pins_batches_for_the_accelerator():
    device = torch.accelerator.current_accelerator()
    for images, targets in _pinned_loader(_fake_digits(8), batch_size=4):
        assert images.is_pinned() and targets.is_pinned()
        on_device = images.to(device, non_blocking=True)
        torch.accelerator.synchronize()
        _assert_same(on_device, images, "batch")


class SmallCNN(nn.Module):
    """A convolutional digit classifier, shaped like pytorch/examples' MNIST model."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout(0.25),
            nn.Flatten(),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 12 * 12, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 10)
        )

    def forward(self, x):
        return F.log_softmax(self.classifier(self.features(x)), dim=1)


def _train(device, steps):
    """Losses and the model after `steps` steps of Adadelta with a StepLR schedule."""
    torch.manual_seed(0)
    model = SmallCNN().to(device).train()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    # On the CPU, building the model drew from the generator that dropout uses; neuron's
    # dropout has a generator of its own. Reseeding puts either in the same state.
    torch.manual_seed(1)
    losses = []
    for images, targets in _pinned_loader(_fake_digits(8 * steps), batch_size=8):
        images, targets = images.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(images), targets)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses, model


def test_examples_style_training_matches_cpu():
    neuron_losses, neuron_model = _train(torch.accelerator.current_accelerator(), steps=3)
    cpu_losses, cpu_model = _train(torch.device("cpu"), steps=3)
    assert len(neuron_losses) == 3
    assert neuron_losses == cpu_losses
    for (name, on_neuron), on_cpu in zip(neuron_model.named_parameters(), cpu_model.parameters()):
        _assert_same(on_neuron, on_cpu, name)
