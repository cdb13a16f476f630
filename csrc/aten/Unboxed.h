#pragma once
// The host-kernel path without boxing, for the ops eager code calls most. A boxed kernel copies
// each argument onto a stack, and the first C++ copy of a tensor that Python owns takes the GIL
// to keep its Python object alive (twice per tensor, with the release); these kernels take
// their arguments as the dispatcher passes them. Each runs an op exactly as the boxed path
// would, and hands anything it does not cover to that path (Fallback.h).

#include <torch/library.h>

#include <string>
#include <vector>

namespace neuron {

struct UnboxedKernel {
  std::string name; // "name.overload", as op_policy.json names ops
  torch::CppFunction (*make)();
};

const std::vector<UnboxedKernel>& unboxed_kernels();

} // namespace neuron
