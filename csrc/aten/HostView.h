#pragma once
// Zero-copy bridges between neuron tensors and the CPU tensors that host kernels run on.

#include <ATen/Tensor.h>
#include <c10/core/Storage.h>

namespace neuron {

// A CPU storage over the memory of a neuron storage; it keeps the neuron storage alive.
// It is resizable through the CPU allocator so that host kernels can grow out= tensors.
c10::Storage host_storage(c10::StorageImpl* device_storage);
// A CPU tensor with `t`'s sizes, strides, offset and math bits, over `storage`.
at::Tensor tensor_over(const c10::Storage& storage, const at::Tensor& t, c10::DispatchKey key);
// A CPU tensor viewing the memory of neuron tensor `t`.
at::Tensor host_view(const at::Tensor& t);
// A neuron tensor on `device` holding the data of host tensor `t`: its memory is taken over
// when nothing else references it, copied otherwise.
at::Tensor to_device(at::Tensor&& t, c10::DeviceIndex device);
// Like to_device, but a tensor whose memory a host kernel took from a device pool becomes a
// neuron tensor in place, with no new allocation.
at::Tensor claim_or_move(at::Tensor&& t, c10::DeviceIndex device);
// A neuron storage on `device` sharing the memory of host storage `host` when that memory came
// from `device`'s pool (the host storage stays valid and can no longer grow); a copy otherwise.
c10::Storage device_alias(const c10::Storage& host, c10::DeviceIndex device);
// A neuron storage on `device` holding the bytes of host storage `s`, taken over when unshared.
c10::Storage device_storage_from(const c10::Storage& s, c10::DeviceIndex device);

} // namespace neuron
