"""Builds torch_neuronx._C (the emulated device and its ATen integration) and
torch_neuronx._C_dist (the c10d backend, the only module that uses pybind)."""

import glob
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

core = sorted(
    glob.glob("csrc/runtime/*.cpp") + glob.glob("csrc/aten/*.cpp") + glob.glob("csrc/api/*.cpp")
)
distributed = sorted(glob.glob("csrc/distributed/*.cpp"))
# No debug info (-g0): with it, a clean build took 148 s instead of 86 s on 2 cores.
# -Wno-interference-size: torch's own headers use std::hardware_destructive_interference_size,
# which GCC warns about in every file that includes them; our code never uses it.
COMPILE_ARGS = ["-O2", "-g0", "-fvisibility=hidden", "-Wno-interference-size"]
# Objects built against one torch never serve another: each torch version keeps its own build
# directory, so moving between the supported versions relinks instead of recompiling.
BUILD_DIR = f"build/torch-{torch.__version__.split('+')[0]}"

# `make install` installs the package editable with TORCH_NEURONX_BUILD_EXTENSION=0 and then
# builds the extension once with build_ext into the lane's build directory; without the switch,
# the editable install would compile every source a first time.
BUILD_EXTENSION = os.environ.get("TORCH_NEURONX_BUILD_EXTENSION", "1") != "0"

setup(
    ext_modules=[
        CppExtension(
            "torch_neuronx._C",
            core,
            include_dirs=[os.path.abspath("csrc")],
            extra_compile_args=COMPILE_ARGS,
        ),
        CppExtension(
            "torch_neuronx._C_dist",
            distributed,
            include_dirs=[os.path.abspath("csrc")],
            extra_compile_args=COMPILE_ARGS,
        ),
    ]
    if BUILD_EXTENSION
    else [],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    # On `build`, which build_ext and bdist_wheel both take their directories from: a wheel packs
    # what `build` placed in its build_lib. `make wheel-check` gives the wheel a build_lib of its
    # own (the Python files it holds must not shadow the checkout's) and keeps build_temp, so
    # ninja reuses the lane's objects.
    options={
        "build": {
            "build_temp": f"{BUILD_DIR}/temp",
            "build_lib": os.environ.get("TORCH_NEURONX_BUILD_LIB", f"{BUILD_DIR}/lib"),
        }
    },
)
