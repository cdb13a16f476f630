"""Does one porting problem per command-line word, on the accelerator when there is one (else
on the CPU), for the `torchneuron check` tests. Each problem is one line that the report must
name."""

import sys

import torch

if torch.accelerator.is_available():
    device = torch.accelerator.current_accelerator()
else:
    device = torch.device("cpu")


def fallback():
    """A data-dependent shape: the CPU-fallback tier, three calls."""
    x = torch.arange(12.0, device=device)
    for _ in range(3):
        torch.nonzero(x > 5)


def float64():
    """float64 values on the device are held at float32 precision."""
    third = torch.ones(10, dtype=torch.float64, device=device) / 3
    return third.sum().item()


def int64():
    """int64 indices that fit in int32: nothing to change."""
    table = torch.randn(8, 4, device=device)
    return table[torch.tensor([1, 2, 3], device=device)]


def int64_overflow():
    """An int64 value beyond int32: refused on the device."""
    return torch.tensor([2**40], device=device) + 1


def random():
    """Dropout on the device, and an int64 seed drawn beyond int32 (transformers' way)."""
    torch.nn.functional.dropout(torch.ones(64, device=device), 0.5)
    return torch.randint(0, 2**32 - 1, (64,), dtype=torch.int64, device=device).max().item()


def sparse():
    """An excluded feature: sparse tensors."""
    return torch.eye(3, device=device).to_sparse()


def sparse_caught():
    """The same, caught by the script, which carries on."""
    try:
        sparse()
    except NotImplementedError:
        pass


def channels_last():
    """Fine on the CPU, refused on neuron."""
    return torch.ones(2, 3, 4, 4, device=device).contiguous(memory_format=torch.channels_last)


def no_kernel():
    """An op that exists only for CUDA."""
    x = torch.ones(1, 1, 4, 4, device=device)
    return torch.cudnn_convolution(x, x, [0, 0], [1, 1], [1, 1], 1, False, False, False)


def compiled():
    """A graph break, and a recompile for a new input shape (the static-shape rule)."""

    def step(x):
        y = torch.sin(x) * 2
        torch._dynamo.graph_break()
        return y

    compiled_step = torch.compile(step, backend="neuron")
    compiled_step(torch.ones(4, device=device))
    compiled_step(torch.ones(8, device=device))


def elementwise():
    """A chain of elementwise ops, which adaptive eager execution fuses when it is on."""
    x = torch.randn(1024, 512, device=device)
    return ((x * 2 + 1).tanh() * x).sum().item()


def nki_kernel():
    """An NKI kernel that breaks a hardware rule: 256 partitions, where there are 128."""
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def copy_tall(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray((256, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=a)
        nisa.dma_copy(dst=out, src=tile)
        return out

    return copy_tall(torch.ones(256, 64, device=device))


if __name__ == "__main__":
    for word in sys.argv[1:]:
        globals()[word.replace("-", "_")]()
    print("done")
