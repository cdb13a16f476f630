#include "runtime/Config.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace neuron::config {

std::vector<std::pair<std::string, std::string>> variables() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& v : {kLogicalCoreConfig, kVirtualCoreSize, kVisibleCores, kNumCores,
           kFallbackEnabled, kPolicy64Bit, kConcatenation, kPrologue, kQueueLimit, kRngSource}) {
    out.emplace_back(v.name, v.fallback);
  }
  return out;
}

std::string text(const Variable& v) {
  const char* value = std::getenv(v.name);
  return value && *value ? std::string(value) : std::string(v.fallback);
}

bool flag(const Variable& v) {
  auto value = text(v);
  std::transform(value.begin(), value.end(), value.begin(),
      [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* yes : {"1", "true", "yes", "on"}) {
    if (value == yes) {
      return true;
    }
  }
  for (const char* no : {"0", "false", "no", "off"}) {
    if (value == no) {
      return false;
    }
  }
  TORCH_CHECK(false, v.name, "='", text(v),
      "' is not a boolean; use 1/0, true/false, yes/no "
      "or on/off");
}

int64_t parse_integer(const std::string& value, const char* name) {
  try {
    size_t used = 0;
    int64_t n = std::stoll(value, &used);
    if (used == value.size()) {
      return n;
    }
  } catch (const std::exception&) {
  }
  TORCH_CHECK(false, name, "='", value, "' is not an integer; use e.g. ", name, "=2");
}

int64_t integer(const Variable& v) {
  return parse_integer(text(v), v.name);
}

const Variable& logical_core_variable() {
  const char* lnc = std::getenv(kLogicalCoreConfig.name);
  const char* virtual_size = std::getenv(kVirtualCoreSize.name);
  return (virtual_size && *virtual_size && !(lnc && *lnc)) ? kVirtualCoreSize : kLogicalCoreConfig;
}

int64_t logical_core_size() {
  int64_t lnc = integer(kLogicalCoreConfig);
  const char* virtual_size = std::getenv(kVirtualCoreSize.name);
  if (!virtual_size || !*virtual_size) {
    return lnc;
  }
  int64_t size = integer(kVirtualCoreSize);
  TORCH_CHECK(&logical_core_variable() == &kVirtualCoreSize || size == lnc, kLogicalCoreConfig.name,
      "=", lnc, " and ", kVirtualCoreSize.name, "=", size,
      " disagree; they name the same logical NeuronCore size, so set one of them");
  return size;
}

} // namespace neuron::config
