"""torchvision's host-side work (image codecs, datasets) on fixed inputs, to compare a process
that has the neuron device loaded with one that has not."""

import os

import torch
from torchvision import datasets, io, transforms

FOLDER_CLASSES = ("circle", "square")


def _image(seed, height, width):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=gen)


def write_image_folder(root):
    """An ImageFolder tree of PNG and JPEG files, two images per class."""
    for label, name in enumerate(FOLDER_CLASSES):
        os.makedirs(os.path.join(root, name))
        for i in range(2):
            image = _image(10 * label + i, 20, 24)
            path = os.path.join(root, name, f"{i}")
            if i % 2:
                io.write_jpeg(image, path + ".jpg", quality=90)
            else:
                io.write_png(image, path + ".png")


def _stacked(dataset):
    images, targets = zip(*(dataset[i] for i in range(len(dataset))))
    return torch.stack(images), torch.tensor(targets)


def host_samples(folder):
    """{name: tensor} from torchvision.io and torchvision.datasets, all on the CPU."""
    image = _image(0, 32, 40)
    png, jpeg = io.encode_png(image), io.encode_jpeg(image, quality=85)
    fake_images, fake_targets = _stacked(
        datasets.FakeData(size=4, image_size=(3, 16, 16), transform=transforms.PILToTensor())
    )
    folder_images, folder_targets = _stacked(
        datasets.ImageFolder(folder, transform=transforms.PILToTensor())
    )
    return {
        "png": png,
        "png_decoded": io.decode_png(png),
        "jpeg": jpeg,
        "jpeg_decoded": io.decode_jpeg(jpeg),
        "image_decoded": io.decode_image(png, mode=io.ImageReadMode.GRAY),
        "fake_images": fake_images,
        "fake_targets": fake_targets,
        "folder_images": folder_images,
        "folder_targets": folder_targets,
    }
