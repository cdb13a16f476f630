#include "aten/Policy.h"

#include "aten/Counters.h"
#include "aten/Exclusions.h"
#include "aten/HostView.h"
#include "aten/Upcalls.h"
#include "runtime/Config.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <limits>

namespace neuron {
namespace {

Policy64 read_policy() {
  auto mode = config::text(config::kPolicy64Bit);
  if (mode == "narrow") {
    return Policy64::Narrow;
  }
  if (mode == "native") {
    return Policy64::Native;
  }
  if (mode == "error") {
    return Policy64::Error;
  }
  TORCH_CHECK(false, "TORCH_NEURONX_64BIT='", mode,
      "' is not a 64-bit policy; use narrow, "
      "native or error");
}

std::atomic<bool> g_noticed{false};

void notice_once() {
  if (!g_noticed.exchange(true)) {
    log("WARNING",
        "64-bit data reached a neuron device. Trainium has no 64-bit arithmetic: float64 and "
        "complex128 values are rounded to 32-bit precision and int64 values must fit in int32 "
        "(TORCH_NEURONX_64BIT=narrow). Set TORCH_NEURONX_64BIT=native for full 64-bit "
        "emulation or =error to refuse 64-bit floats; see docs/limitations.md");
  }
}

} // namespace

bool is_64bit(c10::ScalarType t) {
  return t == c10::kDouble || t == c10::kComplexDouble || t == c10::kLong;
}

Policy64 policy_64bit() {
  static const Policy64 policy = read_policy();
  return policy;
}

void check_64bit_dtype(c10::ScalarType dtype, const std::string& source) {
  TORCH_CHECK(
      policy_64bit() != Policy64::Error || !(dtype == c10::kDouble || dtype == c10::kComplexDouble),
      exclusion(Excluded::Float64).message, " (", dtype, ") is not supported on neuron (", source,
      "): Trainium has no 64-bit arithmetic and TORCH_NEURONX_64BIT=error refuses it. ",
      way_out(Excluded::Float64));
}

void enforce_64bit(const at::Tensor& t, const std::string& source) {
  if (is_64bit(t.scalar_type())) {
    narrow_64bit_values(host_view(t), source);
  }
}

void narrow_64bit_values(const at::Tensor& host, const std::string& source) {
  auto dtype = host.scalar_type();
  if (!is_64bit(dtype) || policy_64bit() == Policy64::Native || host.numel() == 0) {
    return;
  }
  check_64bit_dtype(dtype, source);
  notice_once();
  if (dtype == c10::kLong) {
    auto [lo, hi] = host.aminmax();
    auto low = lo.item<int64_t>();
    auto high = hi.item<int64_t>();
    if (observing()) {
      observe("int64", source, "", {host.numel(), low, high});
    }
    constexpr auto kMin = std::numeric_limits<int32_t>::min();
    constexpr auto kMax = std::numeric_limits<int32_t>::max();
    TORCH_CHECK(low >= kMin && high <= kMax, "int64 value ", (low < kMin ? low : high), " from ",
        source, " ", exclusion(Excluded::Int64Range).message, " [", kMin, ", ", kMax,
        "]: Trainium stores int64 as int32 (TORCH_NEURONX_64BIT=narrow). ",
        way_out(Excluded::Int64Range));
    return;
  }
  auto narrow = dtype == c10::kDouble ? c10::kFloat : c10::kComplexFloat;
  host.copy_(host.to(narrow));
  count(Counter::Narrowed64Bit, host.numel());
  if (observing()) {
    observe("float64", source, "", {host.numel()});
  }
}

void fold_random_int64(
    const at::Tensor& host, int64_t low, int64_t high, const std::string& source) {
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t lo = std::max(low, kMin);
  const int64_t hi = std::min(high, kMax + 1);
  if (host.scalar_type() != c10::kLong || policy_64bit() != Policy64::Narrow || lo >= hi ||
      host.numel() == 0) {
    return;
  }
  auto values = host.contiguous();
  auto* data = values.data_ptr<int64_t>();
  const __int128 width = hi - lo;
  int64_t folded = 0;
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (data[i] < lo || data[i] >= hi) {
      __int128 offset = (static_cast<__int128>(data[i]) - lo) % width;
      data[i] = lo + static_cast<int64_t>(offset < 0 ? offset + width : offset);
      ++folded;
    }
  }
  if (folded == 0) {
    return;
  }
  if (!values.is_same(host)) {
    host.copy_(values);
  }
  if (observing()) {
    observe("int64_random", source, "", {folded, low, high});
  }
}

bool fallback_enabled() {
  static const bool enabled = config::flag(config::kFallbackEnabled);
  return enabled;
}

bool is_fp8(c10::ScalarType dtype) {
  return dtype == c10::kFloat8_e4m3fn || dtype == c10::kFloat8_e5m2 ||
         dtype == c10::kFloat8_e4m3fnuz || dtype == c10::kFloat8_e5m2fnuz;
}

std::unordered_set<std::string>& fp8_data_ops() {
  static auto* ops = new std::unordered_set<std::string>();
  return *ops;
}

} // namespace neuron
