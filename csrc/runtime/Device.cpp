#include "runtime/Device.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <sstream>
#include <vector>

namespace neuron {
namespace {

constexpr size_t kGiB = size_t(1) << 30;

struct Platform {
  std::string name;
  size_t hbm_per_chip;
  int64_t physical_cores;
  int64_t lnc;
  std::vector<int64_t> visible;  // physical logical-core ids, in device-index order
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

int64_t parse_int(const std::string& text, const char* var) {
  try {
    size_t used = 0;
    int64_t v = std::stoll(text, &used);
    if (used == text.size()) {
      return v;
    }
  } catch (const std::exception&) {
  }
  TORCH_CHECK(false, var, "='", text, "' is not an integer; use e.g. ", var, "=2");
}

// Accepts "2", "0-1" and "0,2-3".
std::vector<int64_t> parse_core_list(const std::string& text, int64_t available) {
  std::vector<int64_t> cores;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto dash = item.find('-');
    int64_t lo = parse_int(item.substr(0, dash), "NEURON_RT_VISIBLE_CORES");
    int64_t hi = dash == std::string::npos
        ? lo
        : parse_int(item.substr(dash + 1), "NEURON_RT_VISIBLE_CORES");
    TORCH_CHECK(lo >= 0 && lo <= hi,
        "NEURON_RT_VISIBLE_CORES='", text, "' has an invalid range '", item,
        "'; use e.g. 0-1 or 2");
    for (int64_t c = lo; c <= hi; ++c) {
      TORCH_CHECK(c < available,
          "NEURON_RT_VISIBLE_CORES='", text, "' names core ", c,
          ", but the emulated chip has ", available, " logical NeuronCores (0-",
          available - 1, ")");
      cores.push_back(c);
    }
  }
  return cores;
}

Platform make_platform() {
  Platform p;
  std::string target = env("NEURON_PLATFORM_TARGET_OVERRIDE");
  if (target.empty() || target == "trn2" || target == "gen3") {
    p.name = "trn2";
    p.hbm_per_chip = 96 * kGiB;
  } else if (target == "trn3" || target == "gen4") {
    p.name = "trn3";
    p.hbm_per_chip = 144 * kGiB;
  } else {
    TORCH_CHECK(false, "NEURON_PLATFORM_TARGET_OVERRIDE='", target,
        "' is not an emulated platform; use trn2 or trn3");
  }
  p.physical_cores = 8;
  std::string lnc = env("NEURON_LOGICAL_NC_CONFIG");
  p.lnc = lnc.empty() ? 2 : parse_int(lnc, "NEURON_LOGICAL_NC_CONFIG");
  TORCH_CHECK(p.lnc == 1 || p.lnc == 2,
      "NEURON_LOGICAL_NC_CONFIG=", p.lnc, " is not supported; use 1 or 2");
  int64_t logical = p.physical_cores / p.lnc;
  std::string visible = env("NEURON_RT_VISIBLE_CORES");
  if (visible.empty()) {
    for (int64_t c = 0; c < logical; ++c) {
      p.visible.push_back(c);
    }
  } else {
    p.visible = parse_core_list(visible, logical);
  }
  std::string num = env("NEURON_RT_NUM_CORES");
  if (!num.empty()) {
    int64_t n = parse_int(num, "NEURON_RT_NUM_CORES");
    TORCH_CHECK(n >= 1 && n <= static_cast<int64_t>(p.visible.size()),
        "NEURON_RT_NUM_CORES=", n, " asks for more cores than the ", p.visible.size(),
        " visible ones");
    p.visible.resize(n);
  }
  return p;
}

const Platform& platform() {
  static const Platform p = make_platform();
  return p;
}

thread_local c10::DeviceIndex tls_current = 0;

} // namespace

c10::DeviceIndex device_count() noexcept {
  try {
    return static_cast<c10::DeviceIndex>(platform().visible.size());
  } catch (...) {
    return 0;
  }
}

const std::string& platform_name() {
  return platform().name;
}

size_t hbm_capacity() {
  const auto& p = platform();
  return p.hbm_per_chip / (p.physical_cores / p.lnc);
}

int64_t physical_core(c10::DeviceIndex index) {
  return platform().visible.at(check_device(index));
}

c10::DeviceIndex current_device() noexcept {
  return tls_current;
}

void set_current_device(c10::DeviceIndex index) {
  tls_current = check_device(index);
}

c10::DeviceIndex check_device(c10::DeviceIndex index) {
  if (index < 0) {
    return tls_current;
  }
  auto count = static_cast<c10::DeviceIndex>(platform().visible.size());
  TORCH_CHECK_INDEX(index < count,
      "Invalid device index neuron:", static_cast<int>(index), ": there are ",
      static_cast<int>(count), " visible NeuronCores (neuron:0 to neuron:",
      static_cast<int>(count) - 1, "). Set NEURON_RT_VISIBLE_CORES to change them.");
  return index;
}

} // namespace neuron
