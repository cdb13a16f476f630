#pragma once
// What TorchNeuron leaves out or refuses, as one table: for each row, the part of its error
// that every occurrence contains, and the way out the error offers. The raise sites build their
// errors from it; torchneuron check, the OpInfo sweep and the docs test read the same rows
// through torch.ops.neuron.exclusions.

#include <string>
#include <vector>

namespace neuron {

enum class Excluded {
  Sparse,
  Nested,
  Quantized,
  ForwardAD,
  ChannelsLast,
  FP8Compute,
  Int64Range,
  Float64,
  FallbackDisabled,
  DynamicShapes, // raised by the compiler, in Python
};

struct Exclusion {
  Excluded which;
  const char* id;      // the name events and reports use
  const char* feature; // the row's title in reports and docs/limitations.md
  const char* message; // a part of every error of this row
  const char* way_out; // what to do instead
};

const std::vector<Exclusion>& exclusions();
const Exclusion& exclusion(Excluded which);

// "<way out>; see docs/limitations.md": how every such error ends.
std::string way_out(Excluded which);

// Raises the NotImplementedError for a feature TorchNeuron leaves out (sparse, nested,
// quantized tensors, forward-mode AD), naming the op that met it, and reports it to check.
[[noreturn]] void refuse_excluded(Excluded which, const std::string& op);

} // namespace neuron
