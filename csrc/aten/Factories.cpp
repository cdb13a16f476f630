// Tensor creation in device memory.

#include "aten/Exclusions.h"
#include "aten/Policy.h"
#include "aten/Upcalls.h"
#include "runtime/Allocator.h"
#include "runtime/Device.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace neuron {
namespace {

void check_memory_format(std::optional<c10::MemoryFormat> format) {
  auto f = format.value_or(c10::MemoryFormat::Contiguous);
  bool supported = f == c10::MemoryFormat::Contiguous || f == c10::MemoryFormat::Preserve;
  if (!supported) {
    observe("excluded", "aten::empty.memory_format", exclusion(Excluded::ChannelsLast).id);
  }
  TORCH_CHECK(supported, exclusion(Excluded::ChannelsLast).message, ", got ", f, ". ",
      way_out(Excluded::ChannelsLast));
}

c10::DeviceIndex device_index(std::optional<c10::Device> device) {
  return check_device(device.has_value() ? device->index() : -1);
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
    std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  check_memory_format(memory_format);
  check_64bit_dtype(c10::dtype_or_default(dtype), "tensor creation");
  c10::DeviceGuard guard(c10::Device(kNeuron, device_index(device)));
  return at::detail::empty_generic(size, device_allocator(),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::dtype_or_default(dtype),
      memory_format);
}

// Strides are kept exactly, as CPU keeps them (clone, *_like and .to preserve a permuted
// layout): they decide the order of reductions, and so the bits of their results. Only an
// explicit channels_last request is refused (empty.memory_format).
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
    std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
    std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_64bit_dtype(c10::dtype_or_default(dtype), "tensor creation");
  c10::DeviceGuard guard(c10::Device(kNeuron, device_index(device)));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::dtype_or_default(dtype));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
}

} // namespace
} // namespace neuron
