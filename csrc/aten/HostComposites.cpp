// Host composites run exactly as on CPU: their CPU implementation, autograd included, runs on
// zero-copy host views of the neuron tensors, and the results come back to the device.

#include "aten/HostComposites.h"
#include "aten/HostView.h"
#include "runtime/Boundary.h"
#include "runtime/CoreScope.h"
#include "runtime/Device.h"
#include "runtime/Trace.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace neuron {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Neuron tensor to a host view; the gradient goes back to the neuron tensor.
struct ToHost : public torch::autograd::Function<ToHost> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& t) {
    ctx->saved_data["device"] = t.device();
    return host_view(t);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {grads[0].to(ctx->saved_data["device"].toDevice())};
  }
};

// Host result to a neuron tensor; the gradient goes back to the host graph.
struct ToDevice : public torch::autograd::Function<ToDevice> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& t, c10::Device device) {
    return t.to(device);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    const auto& g = grads[0];
    return {g.defined() && g.device().type() == kNeuron ? host_view(g) : g, at::Tensor()};
  }
};

bool is_traced(const at::Tensor& t) {
  return t.key_set().has(c10::DispatchKey::Python);
}

template <typename Fn>
void for_each_tensor(c10::IValue& v, Fn fn) {
  if (v.isTensor()) {
    v = fn(v.toTensor());
  } else if (v.isTensorList()) {
    auto list = v.toTensorList();
    for (size_t i = 0; i < list.size(); ++i) {
      list.set(i, fn(list.get(i)));
    }
  } else if (v.isList()) {
    auto list = v.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      c10::IValue e = list.get(i);
      if (e.isTensor()) {
        list.set(i, fn(e.toTensor()));
      }
    }
  }
}

// TorchNeuron runs scaled_dot_product_attention as the "overrideable" fused kernel, so
// sdpa_kernel(SDPBackend.OVERRIDEABLE) selects it. The CPU implementation has no such backend:
// while the overrideable one is enabled, CPU's fused (flash) and math kernels stand in for it.
class OverrideableAttention {
 public:
  explicit OverrideableAttention(const c10::OperatorHandle& op)
      : active_(op.schema().name() == "aten::scaled_dot_product_attention" &&
                at::globalContext().userEnabledOverrideableSDP()),
        flash_(at::globalContext().userEnabledFlashSDP()),
        math_(at::globalContext().userEnabledMathSDP()) {
    if (active_) {
      at::globalContext().setSDPUseFlash(true);
      at::globalContext().setSDPUseMath(true);
    }
  }
  ~OverrideableAttention() {
    if (active_) {
      at::globalContext().setSDPUseFlash(flash_);
      at::globalContext().setSDPUseMath(math_);
    }
  }
  OverrideableAttention(const OverrideableAttention&) = delete;
  OverrideableAttention& operator=(const OverrideableAttention&) = delete;

 private:
  const bool active_;
  const bool flash_;
  const bool math_;
};

} // namespace

void run_like_cpu(
    const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  reach(Boundary::Op);
  const size_t nargs = op.schema().arguments().size();
  const size_t first = stack->size() - nargs;
  std::optional<c10::Device> device;
  bool traced = false;
  for (size_t i = first; i < stack->size(); ++i) {
    for_each_tensor((*stack)[i], [&](const at::Tensor& t) {
      if (t.defined() && t.device().type() == kNeuron && !device) {
        device = t.device();
      }
      traced |= t.defined() && is_traced(t);
      return t;
    });
  }
  if (!device || traced) {
    // Tracing (torch.compile, export) must see the composite itself.
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
    return;
  }
  bool grad = at::GradMode::is_enabled() && keys.has_any(c10::autograd_dispatch_keyset);
  for (size_t i = first; i < stack->size(); ++i) {
    for_each_tensor((*stack)[i], [&](const at::Tensor& t) {
      if (!t.defined() || t.device().type() != kNeuron) {
        return t;
      }
      return grad ? ToHost::apply(t) : host_view(t);
    });
  }
  {
    // Dropout inside these ops draws from the default CPU generator; make that the core's.
    // Results are copied to the device through autograd (ToDevice), so no pool.
    CoreScope core(device->index(), /*pool=*/false, /*rng=*/true);
    OverrideableAttention attention(op);
    trace::Span kernel(trace::Kind::Kernel, device->index(), "host_composite",
        [&] { return "nc::" + c10::toString(op.schema().operator_name()); });
    op.callBoxed(stack);
  }
  const size_t nret = op.schema().returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
    for_each_tensor((*stack)[i], [&](const at::Tensor& t) {
      if (!t.defined()) {
        return t;
      }
      return grad ? ToDevice::apply(t, *device) : t.to(*device);
    });
  }
}

} // namespace neuron
