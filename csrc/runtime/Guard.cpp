// Device guard, streams and events. Execution is synchronous, so streams only carry identity
// and events carry the host time at which they were recorded.

#include "runtime/Boundary.h"
#include "runtime/Config.h"
#include "runtime/Device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <unordered_map>

namespace neuron {
namespace {

struct Event {
  c10::DeviceIndex device;
  bool recorded = false;
  double time_ms = 0;
};

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

constexpr c10::StreamId kPoolSize = 32;
std::atomic<c10::StreamId> g_next_stream{kPoolSize + 1};
std::atomic<uint32_t> g_pool_cursor{0};
thread_local std::unordered_map<c10::DeviceIndex, c10::StreamId> tls_streams;

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device), id);
}

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = current_device();
    set_current_device(d.index());
    return c10::Device(kNeuron, old);
  }

  c10::Device getDevice() const override { return c10::Device(kNeuron, current_device()); }

  void setDevice(c10::Device d) const override { set_current_device(d.index()); }

  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_current_device(d.index());
    } catch (...) {
    }
  }

  c10::Stream getStream(c10::Device d) const override {
    auto index = check_device(d.index());
    auto it = tls_streams.find(index);
    return make_stream(index, it == tls_streams.end() ? 0 : it->second);
  }

  c10::Stream getDefaultStream(c10::Device d) const override {
    return make_stream(check_device(d.index()), 0);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return make_stream(check_device(d.index()), 1 + g_pool_cursor++ % kPoolSize);
  }

  c10::Stream getNewStream(c10::Device d, int) const override {
    return make_stream(check_device(d.index()), g_next_stream++);
  }

  c10::Stream exchangeStream(c10::Stream s) const override {
    auto index = check_device(s.device_index());
    auto old = getStream(c10::Device(kNeuron, index));
    if (old != s) {
      reach(Boundary::Stream);
    }
    tls_streams[index] = s.id();
    return old;
  }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
      const c10::EventFlag) const override {
    auto index = check_device(device_index < 0 ? stream.device_index() : device_index);
    TORCH_CHECK(stream.device_index() == index, "Event device neuron:", static_cast<int>(index),
        " does not match the recording stream's device neuron:",
        static_cast<int>(stream.device_index()));
    reach(Boundary::Event);
    if (*event == nullptr) {
      *event = new Event{index};
    }
    auto* e = static_cast<Event*>(*event);
    e->recorded = true;
    e->time_ms = now_ms();
  }

  void block(void*, const c10::Stream&) const override { reach(Boundary::Event); }

  bool queryEvent(void*) const override {
    reach(Boundary::Synchronize);
    return true;
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<Event*>(event);
  }

  bool queryStream(const c10::Stream&) const override {
    reach(Boundary::Synchronize);
    return true;
  }

  void synchronizeStream(const c10::Stream&) const override { reach(Boundary::Synchronize); }

  void synchronizeEvent(void*) const override { reach(Boundary::Synchronize); }

  void synchronizeDevice(const c10::DeviceIndex) const override { reach(Boundary::Synchronize); }

  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}

  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    auto* a = static_cast<Event*>(start);
    auto* b = static_cast<Event*>(end);
    TORCH_CHECK(a && b && a->recorded && b->recorded,
        "elapsed_time needs both events to have been recorded; call event.record() first");
    return b->time_ms - a->time_ms;
  }

  // torch.accelerator.get_device_capability: every dtype a neuron tensor can hold and convert,
  // that is all but the quantized, bit-packed and sub-byte ones (which have no copy kernels),
  // and no 64-bit floating point where TORCH_NEURONX_64BIT=error refuses it.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    check_device(d.index());
    c10::DeviceCapability capability;
    auto& types = capability.capability_data.supported_scalar_types;
    types.has_QInt8 = types.has_QUInt8 = types.has_QInt32 = 0;
    types.has_QUInt4x2 = types.has_QUInt2x4 = 0;
    types.has_Bits1x8 = types.has_Bits2x4 = types.has_Bits4x2 = 0;
    types.has_Bits8 = types.has_Bits16 = types.has_Float4_e2m1fn_x2 = 0;
    types.has_UInt1 = types.has_UInt2 = types.has_UInt3 = types.has_UInt4 = 0;
    types.has_UInt5 = types.has_UInt6 = types.has_UInt7 = 0;
    types.has_Int1 = types.has_Int2 = types.has_Int3 = types.has_Int4 = 0;
    types.has_Int5 = types.has_Int6 = types.has_Int7 = 0;
    if (config::text(config::kPolicy64Bit) == "error") {
      types.has_Double = types.has_ComplexDouble = 0;
    }
    return capability;
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

} // namespace
} // namespace neuron
