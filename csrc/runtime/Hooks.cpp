// Accelerator hooks: what torch.accelerator, pinned memory and storage resizing call into.

#include "runtime/Allocator.h"
#include "runtime/Boundary.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/HostAllocator.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/utils/device_lazy_init.h>

#include <atomic>
#include <cstring>

namespace neuron {
namespace {

std::atomic<bool> g_initialized{false};

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }

  bool isAvailable() const override { return device_count() > 0; }

  bool hasPrimaryContext(c10::DeviceIndex) const override { return g_initialized.load(); }

  void init() const override { g_initialized = true; }

  c10::DeviceIndex deviceCount() const override { return device_count(); }

  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }

  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto old = current_device();
    set_current_device(device);
    return old;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return at::make_generator<NeuronGenerator>(check_device(device), /*is_default=*/false);
  }

  c10::Allocator* getPinnedMemoryAllocator() const override { return host_allocator(); }

  bool isPinnedPtr(const void* data) const override { return host_allocator()->is_pinned(data); }

  c10::Device getDeviceFromPtr(void* data) const override {
    auto index = device_allocator()->device_of(data);
    TORCH_CHECK(index >= 0, "Pointer ", data, " is not neuron device memory");
    return c10::Device(kNeuron, index);
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    reach(Boundary::Op);
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    auto device = impl->device().index();
    c10::DataPtr fresh;
    if (nbytes > 0) {
      fresh = device_allocator()->allocate_on(nbytes, device);
      size_t keep = std::min(nbytes, impl->nbytes());
      if (keep > 0) {
        std::memcpy(fresh.get(), impl->data(), keep);
      }
    } else {
      fresh = c10::DataPtr(nullptr, c10::Device(kNeuron, device));
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(nbytes);
  }
};

const bool g_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  // A child forked after the parent initialised the device initialises it again on first use,
  // as CUDA does: torch.neuron._lazy_init then raises the bad-fork error.
  torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
  return true;
}();

} // namespace
} // namespace neuron
