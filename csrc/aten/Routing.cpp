// Decides which kernel each ATen op uses on neuron tensors. Ops with a CPU kernel and a
// composite kernel (explicit or implicit, e.g. mish_backward) would otherwise run the composite,
// which differs numerically from CPU; they are sent to the host-kernel path, as are the ops
// the op policy names (torch_neuronx/op_policy.json): the CPU-fallback tier, composites that
// pick a backend by device type and so would never reach a CPU kernel, and the host composites.

#include "aten/Routing.h"
#include "aten/Fallback.h"
#include "aten/HostComposites.h"
#include "aten/Unboxed.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace neuron {
namespace {

std::string overload_name(const c10::OperatorName& name) {
  std::string base = name.name.substr(name.name.find("::") + 2);
  return name.overload_name.empty() ? base : base + "." + name.overload_name;
}

bool is_aten(const c10::OperatorName& name) {
  return name.name.rfind("aten::", 0) == 0;
}

bool is_mask(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == c10::kBool || t.scalar_type() == c10::kByte);
}

// Indexing with a boolean mask has a data-dependent result shape; with integers it does not.
void run_indexing(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t first = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& v = (*stack)[first + i];
    if (args[i].name() != "indices" || !v.isList()) {
      continue;
    }
    for (const auto& e : v.toListRef()) {
      if (e.isTensor() && is_mask(e.toTensor())) {
        return run_cpu_fallback(op, stack);
      }
    }
  }
  run_native(op, stack);
}

} // namespace

RouteCounts route_ops(const Routes& routes) {
  static std::once_flag once;
  static RouteCounts counts;
  std::call_once(once, [&] {
    // Kept alive for the life of the process: the registrations belong to it.
    static auto* lib = new torch::Library(
        torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    static auto* autograd_lib = new torch::Library(
        torch::Library::IMPL, "aten", c10::DispatchKey::AutogradPrivateUse1, __FILE__, __LINE__);
    for (const auto& name : routes.host_composite) {
      lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_like_cpu>());
      autograd_lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_like_cpu>());
      ++counts.host_composite;
    }
    std::unordered_set<std::string> fallback(
        routes.cpu_fallback.begin(), routes.cpu_fallback.end());
    std::unordered_set<std::string> masked(
        routes.mask_dependent.begin(), routes.mask_dependent.end());
    std::unordered_set<std::string> by_name(
        routes.device_selecting.begin(), routes.device_selecting.end());
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const auto& name : dispatcher.getAllOpNames()) {
      if (!is_aten(name)) {
        continue;
      }
      auto op = dispatcher.findOp(name);
      if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
        continue;
      }
      auto qualified = overload_name(name);
      if (masked.count(qualified)) {
        lib->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_indexing>());
        ++counts.mask_dependent;
        continue;
      }
      if (fallback.count(qualified)) {
        lib->impl(
            qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_cpu_fallback>());
        ++counts.cpu_fallback;
        continue;
      }
      bool cpu = op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
      bool composite =
          op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
          op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
          op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
      // The hottest ops the policy leaves native have an unboxed version of the host-kernel
      // path; an op with no CPU kernel of its own decomposes before it reaches the device.
      if (cpu && !by_name.count(qualified)) {
        if (auto kernel = unboxed_kernel(name)) {
          lib->impl(qualified.c_str(), std::move(*kernel));
          continue;
        }
      }
      if ((cpu && composite) || by_name.count(qualified)) {
        lib->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_native>());
        ++counts.native;
      }
    }
  });
  return counts;
}

int64_t route_device_kernels(const std::vector<std::string>& ops) {
  static std::mutex mutex;
  // One registration block per namespace, kept for the life of the process.
  static auto* libraries = new std::unordered_map<std::string, std::unique_ptr<torch::Library>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& dispatcher = c10::Dispatcher::singleton();
  int64_t registered = 0;
  for (const auto& qualified : ops) {
    const auto separator = qualified.find("::");
    TORCH_CHECK(separator != std::string::npos && separator > 0, "route_device_kernels: '",
        qualified,
        "' is not an op name; name it as 'namespace::name' or 'namespace::name.overload'");
    const auto dot = qualified.find('.', separator);
    const std::string ns = qualified.substr(0, separator);
    const std::string base = qualified.substr(0, dot);
    const std::string overload = dot == std::string::npos ? "" : qualified.substr(dot + 1);
    auto op = dispatcher.findSchema({base, overload});
    TORCH_CHECK(op, "route_device_kernels: no op '", qualified,
        "' is registered; load the library that defines it first");
    if (op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      continue;
    }
    auto& lib = (*libraries)[ns];
    if (!lib) {
      lib = std::make_unique<torch::Library>(
          torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    }
    lib->impl(qualified.substr(separator + 2).c_str(),
        torch::CppFunction::makeFromBoxedFunction<&run_native>());
    ++registered;
  }
  return registered;
}

} // namespace neuron
