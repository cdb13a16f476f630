// torch.ops.neuron's adaptive-eager ops (see Platform.cpp): the op queue's settings, the ops it
// may fuse, and running it at boundaries the core cannot see (torch_neuronx.adaptive_eager).

#include "aten/OpQueue.h"
#include "runtime/Boundary.h"

#include <torch/library.h>

#include <tuple>

namespace neuron {
namespace {

std::tuple<bool, bool, int64_t> adaptive_eager() {
  return {queue::enabled(), queue::prologue(), queue::limit()};
}

void set_adaptive_eager(bool enabled, bool prologue, int64_t limit) {
  queue::set_limit(limit);
  queue::set_prologue(prologue);
  queue::set_enabled(enabled);
}

// Collectives and Python-side readers of device values are such boundaries.
void run_queue(c10::string_view boundary) {
  for (int b = 0; b < static_cast<int>(Boundary::Count_); ++b) {
    if (boundary == boundary_name(static_cast<Boundary>(b))) {
      reach(static_cast<Boundary>(b));
      return;
    }
  }
  TORCH_CHECK(false, "Unknown queue boundary '", boundary, "'");
}

TORCH_LIBRARY_FRAGMENT(neuron, m) {
  m.def("adaptive_eager() -> (bool enabled, bool prologue, int limit)", &adaptive_eager);
  m.def("set_adaptive_eager(bool enabled, bool prologue, int limit) -> ()", &set_adaptive_eager);
  m.def("set_fusable(str[] ops, str[] dtypes) -> ()", &queue::set_fusable);
  m.def("run_queue(str boundary) -> ()", &run_queue);
}

} // namespace
} // namespace neuron
