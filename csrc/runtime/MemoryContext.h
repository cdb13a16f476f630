#pragma once
// The stack traces that the allocator's history keeps with each event
// (torch.neuron.memory._record_memory_history), as CUDA's caching allocator keeps them.

#include <c10/core/Allocator.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace neuron::memory_context {

// The calling thread's Python stack, plus C++ frames with `cpp`.
std::shared_ptr<c10::GatheredContext> gather(bool cpp);

// A frame table and, per context, the frames it holds (innermost first).
struct Symbolized {
  std::vector<std::string> filenames;
  std::vector<std::string> names;
  std::vector<int64_t> lines;
  // Context i holds frames indices[offsets[i] : offsets[i + 1]].
  std::vector<int64_t> offsets;
  std::vector<int64_t> indices;
};

Symbolized symbolize(const std::vector<c10::GatheredContext*>& contexts);

} // namespace neuron::memory_context
