#include "aten/Exclusions.h"
#include "aten/Upcalls.h"

#include <ATen/Tensor.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace neuron {

const std::vector<Exclusion>& exclusions() {
  static const std::vector<Exclusion> table = {
      {Excluded::Sparse, "sparse", "Sparse tensors",
          "Sparse tensors (COO, CSR, CSC, BSR, BSC) are not supported on neuron",
          "Keep sparse tensors on the CPU and move dense tensors to neuron"},
      {Excluded::Nested, "nested", "Nested tensors", "Nested tensors are not supported on neuron",
          "Pad to a dense batch, or keep nested tensors on the CPU"},
      {Excluded::Quantized, "quantized", "Quantized tensors",
          "Quantized tensors are not supported on neuron",
          "Quantize on the CPU; on Trainium use FP8 with NKI kernels"},
      {Excluded::ForwardAD, "forward_ad", "Forward-mode automatic differentiation",
          "Forward-mode automatic differentiation (forward_ad dual tensors, torch.func.jvp, "
          "jacfwd) is not supported on neuron tensors",
          "Use reverse mode (backward, torch.func.vjp, jacrev), or run the forward-mode part on "
          "the CPU"},
      {Excluded::ChannelsLast, "channels_last", "channels_last",
          "Neuron tensors only support contiguous or preserve memory format",
          "Keep neuron tensors contiguous (torch.contiguous_format)"},
      {Excluded::FP8Compute, "fp8_compute", "FP8 compute",
          "FP8 compute on Trainium needs NKI kernels",
          "Cast to bfloat16 first, or write the computation as an NKI kernel"},
      {Excluded::Int64Range, "int64_range", "int64 beyond int32", "does not fit in int32",
          "Keep values in range, or set TORCH_NEURONX_64BIT=native"},
      {Excluded::Float64, "float64", "64-bit floating point", "64-bit floating point",
          "Use float32, or set TORCH_NEURONX_64BIT=narrow"},
      {Excluded::FallbackDisabled, "fallback_disabled", "CPU fallback disabled",
          "the CPU fallback is disabled (NEURON_FALLBACK_ENABLED=0)",
          "Unset NEURON_FALLBACK_ENABLED to let it run on the host, or avoid the op"},
      {Excluded::DynamicShapes, "dynamic_shapes", "dynamic shapes",
          "torch.compile(backend='neuron') supports static shapes only",
          "Compile without dynamic=True or mark_dynamic, and pad or bucket inputs to a few fixed "
          "shapes (each new shape compiles once and is cached)"},
  };
  return table;
}

const Exclusion& exclusion(Excluded which) {
  for (const auto& row : exclusions()) {
    if (row.which == which) {
      return row;
    }
  }
  TORCH_INTERNAL_ASSERT(false, "no row for an exclusion in csrc/aten/Exclusions.cpp");
}

std::string way_out(Excluded which) {
  return std::string(exclusion(which).way_out) + "; see docs/limitations.md";
}

void refuse_excluded(Excluded which, const std::string& op) {
  const auto& row = exclusion(which);
  observe("excluded", op, row.id);
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, row.message, " (", op, "): TorchNeuron leaves this out. ", way_out(which));
}

namespace {

// TorchNeuron's exclusions, refused where the dispatcher sends them.
template <Excluded kWhich>
void refuse(const c10::OperatorHandle& op, torch::jit::Stack*) {
  refuse_excluded(kWhich, c10::toString(op.schema().operator_name()));
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse<Excluded::Sparse>>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse<Excluded::Sparse>>());
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse<Excluded::Nested>>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse<Excluded::Quantized>>());
}

at::Tensor refuse_dual(const at::Tensor& primal, const at::Tensor&, int64_t) {
  refuse_excluded(Excluded::ForwardAD, "aten::_make_dual");
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_make_dual", TORCH_FN(refuse_dual));
}

} // namespace

} // namespace neuron
