#include "aten/Upcalls.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <atomic>

namespace neuron {

void log(const std::string& level, const std::string& message) {
  // torch_neuronx defines neuron::log in Python when it loads; before that, warn.
  auto op = c10::Dispatcher::singleton().findSchema({"neuron::log", ""});
  if (op && op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
    op->typed<void(std::string, std::string)>().call(level, message);
  } else {
    TORCH_WARN(message);
  }
}

namespace {
std::atomic<bool> g_observing{false};
} // namespace

bool observing() {
  return g_observing.load(std::memory_order_relaxed);
}

void set_observing(bool on) {
  if (on) {
    auto op = c10::Dispatcher::singleton().findSchema({"neuron::observe", ""});
    TORCH_CHECK(op && op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd),
        "set_observing(True) needs the op neuron::observe(str kind, str op, str detail, int[] "
        "values) defined first (torch_neuronx/cli/_observe.py defines it)");
  }
  g_observing.store(on);
}

void observe(const char* kind, const std::string& op, const std::string& detail,
    std::vector<int64_t> values) {
  if (!observing()) {
    return;
  }
  auto handle = c10::Dispatcher::singleton().findSchema({"neuron::observe", ""});
  if (handle) {
    handle->typed<void(std::string, std::string, std::string, std::vector<int64_t>)>().call(
        kind, op, detail, std::move(values));
  }
}

} // namespace neuron
