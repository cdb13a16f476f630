#include "aten/HostView.h"

#include "runtime/Allocator.h"
#include "runtime/Device.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/COW.h>

#include <cstring>

namespace neuron {
namespace {

void release_storage(void* ctx) {
  c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx));
}

c10::Storage new_device_storage(size_t nbytes, c10::DeviceIndex device) {
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
      nbytes, device_allocator()->allocate_on(nbytes, device), device_allocator(), true));
}

c10::Storage device_copy(const c10::StorageImpl* host, c10::DeviceIndex device) {
  size_t nbytes = host->nbytes();
  auto out = new_device_storage(nbytes, device);
  if (nbytes > 0) {
    std::memcpy(out.mutable_data(), host->data(), nbytes);
  }
  return out;
}

} // namespace

c10::Storage host_storage(c10::StorageImpl* device_storage) {
  void* data = device_storage->nbytes() ? device_storage->mutable_data() : nullptr;
  c10::raw::intrusive_ptr::incref(device_storage);
  c10::DataPtr ptr(data, device_storage, &release_storage, c10::Device(c10::DeviceType::CPU));
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
      device_storage->nbytes(), std::move(ptr), c10::GetCPUAllocator(), true));
}

at::Tensor tensor_over(const c10::Storage& storage, const at::Tensor& t, c10::DispatchKey key) {
  auto keys = c10::DispatchKeySet(key);
  if (t._is_zerotensor()) {
    keys = keys.add(c10::DispatchKey::ZeroTensor);
  }
  auto out = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), keys, t.dtype());
  auto* impl = out.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) {
    impl->_set_conj(true);
  }
  if (t.is_neg()) {
    impl->_set_neg(true);
  }
  return out;
}

at::Tensor host_view(const at::Tensor& t) {
  return tensor_over(host_storage(t.storage().unsafeGetStorageImpl()), t, c10::DispatchKey::CPU);
}

c10::Storage device_storage_from(const c10::Storage& s, c10::DeviceIndex device) {
  auto* impl = s.unsafeGetStorageImpl();
  size_t nbytes = impl->nbytes();
  if (impl->data() == nullptr) {
    // Storage without memory, such as an efficient zero tensor's.
    return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
        nbytes, c10::DataPtr(nullptr, c10::Device(kNeuron, device)), device_allocator(), false));
  }
  if (s.use_count() == 1 && claim_for_device(impl)) {
    return s;
  }
  if (s.use_count() == 1 && impl->data_ptr().device().is_cpu() && nbytes > 0 &&
      !c10::impl::cow::is_cow_data_ptr(impl->data_ptr())) {
    auto host = impl->set_data_ptr(c10::DataPtr());
    auto data = device_allocator()->adopt(std::move(host), nbytes, device);
    return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), nbytes, std::move(data), device_allocator(), true));
  }
  return device_copy(impl, device);
}

c10::Storage device_alias(const c10::Storage& host, c10::DeviceIndex device) {
  auto* impl = host.unsafeGetStorageImpl();
  size_t nbytes = impl->nbytes();
  // A host view (host_storage) of this core's memory aliases the device storage it views.
  const auto& data = impl->data_ptr();
  if (data.device().is_cpu() && data.get_deleter() == &release_storage) {
    auto* viewed = static_cast<c10::StorageImpl*>(data.get_context());
    if (viewed->device() == c10::Device(kNeuron, device)) {
      return c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(viewed));
    }
  }
  if (pool_device_of(impl) != device) {
    return device_copy(impl, device);
  }
  // Growing the host storage would free the memory that the neuron storage shares.
  impl->set_resizable(false);
  c10::raw::intrusive_ptr::incref(impl);
  c10::DataPtr ptr(impl->mutable_data(), impl, &release_storage, c10::Device(kNeuron, device));
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, std::move(ptr), device_allocator(), true));
}

at::Tensor claim_or_move(at::Tensor&& t, c10::DeviceIndex device) {
  if (t.defined() && t.use_count() == 1 && t.storage().use_count() == 1 &&
      claim_for_device(t.storage().unsafeGetStorageImpl())) {
    auto* impl = t.unsafeGetTensorImpl();
    impl->_change_backend_component_keys(t.storage().device());
    impl->set_storage_keep_dtype(t.storage());
    return std::move(t);
  }
  return to_device(std::move(t), device);
}

at::Tensor to_device(at::Tensor&& t, c10::DeviceIndex device) {
  if (!t.defined()) {
    return t;
  }
  const auto& storage = t.storage();
  // A tensor that is a small window on a large shared buffer is copied compactly.
  bool exclusive = t.use_count() == 1 && storage.use_count() == 1;
  if (exclusive) {
    auto dev = device_storage_from(storage, device);
    return tensor_over(dev, t, c10::DispatchKey::PrivateUse1);
  }
  auto compact = t.contiguous().clone();
  auto dev = device_storage_from(compact.storage(), device);
  return tensor_over(dev, compact, c10::DispatchKey::PrivateUse1);
}

} // namespace neuron
