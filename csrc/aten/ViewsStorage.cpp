// Views, storage and tensor-identity kernels. These touch only metadata, or grow storage
// through the device allocator, so they run directly on neuron tensors.

#include "aten/Exclusions.h"
#include "aten/Policy.h"
#include "aten/Upcalls.h"
#include "runtime/Boundary.h"
#include "runtime/Device.h"

#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

namespace neuron {
namespace {

const at::Tensor& resize_(
    const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  auto f = memory_format.value_or(c10::MemoryFormat::Contiguous);
  bool supported = f == c10::MemoryFormat::Contiguous || f == c10::MemoryFormat::Preserve;
  if (!supported) {
    observe("excluded", "aten::resize_", exclusion(Excluded::ChannelsLast).id);
  }
  TORCH_CHECK(supported, exclusion(Excluded::ChannelsLast).message, ", got ", f, ". ",
      way_out(Excluded::ChannelsLast));
  reach(Boundary::Op);
  return at::native::resize_(self, size, memory_format);
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset,
    c10::IntArrayRef size, c10::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kNeuron,
      "set_: cannot make a neuron tensor use storage on ", source.device());
  reach(Boundary::Op);
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  reach(Boundary::Op);
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, self.storage().allocator(), true);
  return set_storage(self, std::move(storage), 0, {0}, {});
}

// Without this, `param.data = neuron_tensor` is refused and Module.to() replaces Parameters.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided &&
           (t.device().type() == kNeuron || t.device().type() == c10::DeviceType::CPU);
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense(self) && dense(from));
}

void record_stream(at::Tensor&, c10::Stream) {}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("record_stream", TORCH_FN(record_stream));
}

} // namespace
} // namespace neuron
