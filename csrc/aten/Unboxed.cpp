#include "aten/Unboxed.h"

#include "aten/Counters.h"
#include "aten/Fallback.h"
#include "aten/HostView.h"
#include "aten/OpQueue.h"
#include "aten/Policy.h"
#include "aten/Upcalls.h"
#include "runtime/CoreScope.h"
#include "runtime/Device.h"
#include "runtime/Trace.h"

#include <ATen/Operators.h>
#include <ATen/core/stack.h>

#include <array>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace neuron {
namespace {

template <class T>
constexpr bool is_tensor = std::is_same_v<std::decay_t<T>, at::Tensor>;

// Per argument, the index of its host tensor among the op's tensor arguments, or -1.
template <class... Args>
constexpr std::array<int, sizeof...(Args)> tensor_slots() {
  std::array<int, sizeof...(Args)> slots{};
  int tensors = 0;
  size_t i = 0;
  ((slots[i++] = is_tensor<Args> ? tensors++ : -1), ...);
  return slots;
}

// Whether the call is one the boxed path would run natively with nothing to record: the queue
// is off, nobody observes or traces, and the tensors are strided neuron tensors of one core,
// of dtypes with no policy of their own (64-bit narrowing, FP8), or 0-dim CPU tensors (Python
// numbers arrive as those), which kernels read as scalars. Sets the core.
bool plain_call(const at::Tensor* const* tensors, size_t n, c10::DeviceIndex& device) {
  if (queue::enabled() || observing() || trace::collecting()) {
    return false;
  }
  device = -1;
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& t = *tensors[i];
    if (t.defined() && t.device().type() == c10::DeviceType::CPU && t.dim() == 0) {
      continue;
    }
    if (!t.defined() || t.device().type() != kNeuron || t.layout() != c10::kStrided ||
        (device >= 0 && t.device().index() != device) || is_64bit(t.scalar_type()) ||
        is_fp8(t.scalar_type())) {
      return false;
    }
    device = t.device().index();
  }
  return device >= 0;
}

// The CPU tensors over the device tensors' memory (CPU scalars stay as they are). As on the
// boxed path, arguments that are one tensor get one host tensor, and tensors of one storage
// share its host storage, so that ATen's identity and overlap checks see what they would see on
// the CPU.
void host_tensors(const at::Tensor* const* tensors, size_t n, at::Tensor* hosts) {
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& t = *tensors[i];
    if (t.device().type() != kNeuron) {
      hosts[i] = t;
      continue;
    }
    const c10::Storage* shared = nullptr;
    bool same = false;
    for (size_t j = 0; j < i && !same; ++j) {
      if (tensors[j]->unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        hosts[i] = hosts[j];
        same = true;
      } else if (tensors[j]->storage().unsafeGetStorageImpl() ==
                 t.storage().unsafeGetStorageImpl()) {
        shared = &hosts[j].storage();
      }
    }
    if (!same) {
      hosts[i] = tensor_over(shared ? *shared : host_storage(t.storage().unsafeGetStorageImpl()), t,
          c10::DispatchKey::CPU);
    }
  }
}

// The op's fresh result as a neuron tensor, checked as the boxed path checks results.
at::Tensor device_result(at::Tensor&& host, c10::DeviceIndex device, const std::string& op) {
  auto t = claim_or_move(std::move(host), device);
  if (is_64bit(t.scalar_type()) && policy_64bit() != Policy64::Native) {
    enforce_64bit(t, op);
  }
  return t;
}

// An op that returns a fresh tensor (never a view or one of its arguments), or an in-place op
// that returns its self; it takes tensors, scalars and options, no optional tensors or lists.
template <class Op, class Schema = typename Op::schema>
struct Unboxed;

template <class Op, class Ret, class... Args>
struct Unboxed<Op, Ret(Args...)> {
  static constexpr bool kInplace = std::is_same_v<Ret, at::Tensor&>;
  static_assert(kInplace || std::is_same_v<Ret, at::Tensor>);
  static constexpr auto kSlots = tensor_slots<Args...>();
  static constexpr size_t kTensors = (static_cast<size_t>(is_tensor<Args>) + ... + 0);

  static const std::string& name() {
    static const std::string qualified =
        c10::toString(c10::OperatorName(Op::name, Op::overload_name));
    return qualified;
  }

  static Ret call(c10::DispatchKeySet, Args... args) {
    return call_on(std::index_sequence_for<Args...>{}, args...);
  }

  template <size_t... I>
  static Ret call_on(std::index_sequence<I...>, Args... args) {
    std::array<const at::Tensor*, kTensors> tensors{};
    size_t k = 0;
    auto collect = [&](const auto& a) {
      if constexpr (is_tensor<decltype(a)>) {
        tensors[k++] = &a;
      }
    };
    (collect(args), ...);
    c10::DeviceIndex device = -1;
    if (!plain_call(tensors.data(), kTensors, device)) {
      return boxed(args...);
    }
    static OpCounts* counts = op_counts(name());
    counts->native.fetch_add(1, std::memory_order_relaxed);
    std::array<at::Tensor, kTensors> hosts;
    host_tensors(tensors.data(), kTensors, hosts.data());
    at::Tensor result;
    {
      CoreScope core(device, /*pool=*/true, /*rng=*/false);
      result =
          Op::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), argument<I>(hosts, args)...);
    }
    if constexpr (kInplace) {
      // The kernel wrote into self's memory through its host tensor.
      return std::get<0>(std::forward_as_tuple(args...));
    } else {
      return device_result(std::move(result), device, name());
    }
  }

  // The host tensor in place of a tensor argument, with the argument's own constness.
  template <size_t I, class A>
  static decltype(auto) argument(std::array<at::Tensor, kTensors>& hosts, const A& a) {
    if constexpr (kSlots[I] >= 0) {
      return static_cast<std::tuple_element_t<I, std::tuple<Args...>>>(hosts[kSlots[I]]);
    } else {
      return (a);
    }
  }

  static Ret boxed(Args... args) {
    static const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    torch::jit::Stack stack;
    stack.reserve(sizeof...(Args));
    torch::jit::push(stack, args...);
    run_native(op, &stack);
    if constexpr (kInplace) {
      return std::get<0>(std::forward_as_tuple(args...));
    } else {
      return std::move(stack.back()).toTensor();
    }
  }

  static std::pair<c10::OperatorName, torch::CppFunction (*)()> kernel() {
    return {c10::OperatorName(Op::name, Op::overload_name),
        [] { return torch::CppFunction::makeFromUnboxedFunction(TORCH_FN(Unboxed::call)); }};
  }
};

} // namespace

// Ops with a CPU kernel of their own: an overload without one (add.Scalar, sum) decomposes into
// one that has, above the device, and the user's tools name what reaches the device.
std::optional<torch::CppFunction> unboxed_kernel(const c10::OperatorName& op) {
  static const std::unordered_map<c10::OperatorName, torch::CppFunction (*)()> kernels = {
      Unboxed<at::_ops::add_Tensor>::kernel(),
      Unboxed<at::_ops::sub_Tensor>::kernel(),
      Unboxed<at::_ops::mul_Tensor>::kernel(),
      Unboxed<at::_ops::div_Tensor>::kernel(),
      Unboxed<at::_ops::neg>::kernel(),
      Unboxed<at::_ops::relu>::kernel(),
      Unboxed<at::_ops::exp>::kernel(),
      Unboxed<at::_ops::tanh>::kernel(),
      Unboxed<at::_ops::sigmoid>::kernel(),
      Unboxed<at::_ops::sqrt>::kernel(),
      Unboxed<at::_ops::rsqrt>::kernel(),
      Unboxed<at::_ops::where_self>::kernel(),
      Unboxed<at::_ops::sum_dim_IntList>::kernel(),
      Unboxed<at::_ops::mean_dim>::kernel(),
      Unboxed<at::_ops::mm>::kernel(),
      Unboxed<at::_ops::bmm>::kernel(),
      Unboxed<at::_ops::addmm>::kernel(),
      Unboxed<at::_ops::gelu>::kernel(),
      Unboxed<at::_ops::_softmax>::kernel(),
      Unboxed<at::_ops::_log_softmax>::kernel(),
      Unboxed<at::_ops::gt_Scalar>::kernel(),
      Unboxed<at::_ops::lt_Scalar>::kernel(),
      Unboxed<at::_ops::eq_Scalar>::kernel(),
      Unboxed<at::_ops::add__Tensor>::kernel(),
      Unboxed<at::_ops::sub__Tensor>::kernel(),
      Unboxed<at::_ops::mul__Tensor>::kernel(),
      Unboxed<at::_ops::div__Tensor>::kernel(),
      Unboxed<at::_ops::relu_>::kernel(),
      Unboxed<at::_ops::zero_>::kernel(),
      Unboxed<at::_ops::fill__Scalar>::kernel(),
  };
  auto it = kernels.find(op);
  if (it == kernels.end()) {
    return std::nullopt;
  }
  return it->second();
}

} // namespace neuron
