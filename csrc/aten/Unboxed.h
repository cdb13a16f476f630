#pragma once
// The host-kernel path without boxing, for the ops eager code calls most. A boxed kernel copies
// each argument onto a stack, and the first C++ copy of a tensor that Python owns takes the GIL
// to keep its Python object alive (twice per tensor, with the release); these kernels take
// their arguments as the dispatcher passes them. Each runs an op exactly as the boxed path
// would, and hands anything it does not cover to that path (Fallback.h).

#include <torch/library.h>

#include <optional>

namespace neuron {

// The unboxed kernel of `op`, if it has one.
std::optional<torch::CppFunction> unboxed_kernel(const c10::OperatorName& op);

} // namespace neuron
