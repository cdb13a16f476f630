"""diffusers unchanged on neuron: a UNet2DModel training step with DDPMScheduler, and DDPMPipeline,
against the same runs on the CPU."""

import numpy as np
import pytest
import torch
from hf_tiny import assert_same_weights, on_cpu

diffusers = pytest.importorskip("diffusers")


def tiny_unet():
    """A two-level UNet2DModel with attention, for 8x8 RGB images; the same weights every call."""
    torch.manual_seed(0)
    return diffusers.UNet2DModel(
        sample_size=8,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=4,
        attention_head_dim=8,
    )


def train_denoiser(device):
    """Two AdamW steps of noise prediction; returns the losses and the weights."""
    model = tiny_unet().to(device)
    scheduler = diffusers.DDPMScheduler(num_train_timesteps=50)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(2):
        clean = torch.randn(2, 3, 8, 8, generator=generator).to(device)
        noise = torch.randn(2, 3, 8, 8, generator=generator).to(device)
        timesteps = torch.randint(0, 50, (2,), generator=generator).to(device)
        noisy = scheduler.add_noise(clean, noise, timesteps)
        loss = torch.nn.functional.mse_loss(model(noisy, timesteps).sample, noise)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, on_cpu(model.state_dict())


# torch 2.13's group_norm backward makes a channels_last input contiguous on every device but the
# CPU (and XPU): its derivatives.yaml picks the memory format by device. On neuron the CPU kernel
# then runs its contiguous path, a few ulps from its channels_last path, which AdamW scales up.
# torch 2.14 keeps the input's format on every device.
UNET_TOLERANCE = 0.0 if torch.__version__ >= (2, 14) else 1e-4


def test_unet_training_step_matches_cpu():
    losses, weights = train_denoiser("neuron")
    cpu_losses, cpu_weights = train_denoiser("cpu")
    torch.testing.assert_close(losses, cpu_losses, rtol=UNET_TOLERANCE, atol=UNET_TOLERANCE)
    assert_same_weights(weights, cpu_weights, rtol=UNET_TOLERANCE, atol=UNET_TOLERANCE)


def sample(device):
    """Two DDPM inference steps from a seeded CPU generator; returns the image as a NumPy array."""
    pipeline = diffusers.DDPMPipeline(
        unet=tiny_unet(), scheduler=diffusers.DDPMScheduler(num_train_timesteps=50)
    ).to(device)
    pipeline.set_progress_bar_config(disable=True)
    assert pipeline.device.type == device
    generator = torch.Generator().manual_seed(3)
    return pipeline(
        batch_size=2, generator=generator, num_inference_steps=2, output_type="np"
    ).images


def test_ddpm_pipeline_matches_cpu():
    images = sample("neuron")
    assert images.shape == (2, 8, 8, 3)
    np.testing.assert_array_equal(images, sample("cpu"))
