// Transfers between host and device, and reading a scalar back.

#include "aten/Counters.h"
#include "aten/HostView.h"
#include "aten/Policy.h"
#include "runtime/Boundary.h"
#include "runtime/Device.h"
#include "runtime/Trace.h"

#include <ATen/ops/_local_scalar_dense_native.h>
#include <torch/library.h>

namespace neuron {
namespace {

at::Tensor host_side(const at::Tensor& t) {
  return t.device().type() == kNeuron ? host_view(t) : t;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.device().type() == kNeuron || self.device().is_cpu(), "Cannot copy from ",
      self.device(), " to ", dst.device(), "; go through the CPU");
  TORCH_CHECK(dst.device().type() == kNeuron || dst.device().is_cpu(), "Cannot copy from ",
      self.device(), " to ", dst.device(), "; go through the CPU");
  bool from_device = self.device().type() == kNeuron;
  bool to_device = dst.device().type() == kNeuron;
  reach(to_device ? Boundary::Op : Boundary::Read);
  auto nbytes = static_cast<int64_t>(dst.numel() * dst.element_size());
  if (from_device && to_device) {
    count(Counter::DeviceToDeviceCopies);
    count(Counter::DeviceToDeviceBytes, nbytes);
  } else if (to_device) {
    count(Counter::HostToDeviceCopies);
    count(Counter::HostToDeviceBytes, nbytes);
  } else {
    count(Counter::DeviceToHostCopies);
    count(Counter::DeviceToHostBytes, nbytes);
  }
  trace::Span span(trace::Kind::Memcpy, (to_device ? dst : self).device().index(), "copy", [&] {
    return std::string(from_device && to_device ? "Memcpy DtoD (neuron -> neuron)"
                       : to_device              ? "Memcpy HtoD (host -> neuron)"
                                                : "Memcpy DtoH (neuron -> host)");
  });
  span.add_bytes(nbytes);
  if (from_device && to_device && self.storage().is_alias_of(dst.storage())) {
    // One host storage for both sides, so that the CPU copy sees their overlap as on CPU.
    auto host = host_storage(dst.storage().unsafeGetStorageImpl());
    tensor_over(host, dst, c10::DispatchKey::CPU)
        .copy_(tensor_over(host, self, c10::DispatchKey::CPU), non_blocking);
  } else {
    host_side(dst).copy_(host_side(self), non_blocking);
  }
  span.finish();
  if (to_device) {
    // A copy that changes the dtype (a cast) produces values, as any op does.
    enforce_64bit(dst, from_device ? "aten::copy_" : "the copy to neuron");
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  // Reading a value back (item()) is a device-to-host transfer, as on CUDA.
  reach(Boundary::Read);
  trace::Span span(trace::Kind::Memcpy, self.device().index(), "copy",
      [] { return std::string("Memcpy DtoH (neuron -> host)"); });
  span.add_bytes(static_cast<int64_t>(self.element_size()));
  return at::native::_local_scalar_dense_cpu(host_view(self));
}

// The host copy_ honours conjugate and negative bits itself; materialising them first would
// clone, which copies, which calls _copy_from again.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

} // namespace
} // namespace neuron
