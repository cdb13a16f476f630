#pragma once
// The core library's calls up into Python, through ops that the Python layer defines: log lines
// for the `torch_neuronx` logger, and the events `torchneuron check` listens to.

#include <cstdint>
#include <string>
#include <vector>

namespace neuron {

// Sends a record to the Python `torch_neuronx` logger.
void log(const std::string& level, const std::string& message);

// `torchneuron check` listens to these policies at work. While observing (set by
// torch.ops.neuron.set_observing), each event calls the Python op neuron::observe(kind, op,
// detail, values), which can name the user's source line. Kinds and their values:
//   fallback: bytes copied, host nanoseconds (detail "compiled": a compiled graph's call);
//   int64: values, min, max; float64: values rounded to 32-bit precision;
//   excluded: none (detail: the exclusion's id, Exclusions.h); no_kernel: none;
//   random: elements drawn (detail: the source, "device", "cpu" or "generator");
//   int64_random: values folded into int32, the range's low and high (exclusive).
// Calls on per-op paths check observing() first, so no event is built while nobody listens.
bool observing();
void set_observing(bool on);
void observe(const char* kind, const std::string& op, const std::string& detail = "",
    std::vector<int64_t> values = {});

} // namespace neuron
