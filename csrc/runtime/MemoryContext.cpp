#include "runtime/MemoryContext.h"

#include <Python.h>
#include <torch/csrc/profiler/combined_traceback.h>

namespace neuron::memory_context {

std::shared_ptr<c10::GatheredContext> gather(bool cpp) {
  // Torch's unwinder takes the GIL itself (ops run with it released); this runs before the
  // allocator takes its lock, as CUDA's allocator gathers its context.
  bool python = Py_IsInitialized();
  if (!python && !cpp) {
    return nullptr;
  }
  return torch::CapturedTraceback::gather(python, /*script=*/false, cpp);
}

Symbolized symbolize(const std::vector<c10::GatheredContext*>& contexts) {
  std::vector<torch::CapturedTraceback*> tracebacks;
  std::vector<int64_t> slot; // traceback index of each context, -1 for none
  for (auto* c : contexts) {
    auto* tb = dynamic_cast<torch::CapturedTraceback*>(c);
    slot.push_back(tb ? static_cast<int64_t>(tracebacks.size()) : -1);
    if (tb) {
      tracebacks.push_back(tb);
    }
  }
  Symbolized out;
  auto symbolized = torch::symbolize(tracebacks);
  for (const auto& f : symbolized.all_frames) {
    out.filenames.push_back(f.filename);
    out.names.push_back(f.funcname);
    out.lines.push_back(static_cast<int64_t>(f.lineno));
  }
  out.offsets.push_back(0);
  for (auto s : slot) {
    if (s >= 0) {
      for (auto i : symbolized.tracebacks[s]) {
        out.indices.push_back(static_cast<int64_t>(i));
      }
    }
    out.offsets.push_back(static_cast<int64_t>(out.indices.size()));
  }
  return out;
}

} // namespace neuron::memory_context
