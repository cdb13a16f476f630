#include "runtime/Device.h"

#include "runtime/Config.h"

#include <c10/util/Exception.h>

#include <sstream>
#include <vector>

namespace neuron {
namespace {

struct Platform {
  std::string name;
  size_t hbm_per_chip;
  int64_t physical_cores;
  int64_t lnc;
  std::vector<int64_t> visible; // physical logical-core ids, in device-index order
};

// What torch_neuronx/_platforms.py chose (configure_platform); an error is raised at first use.
struct Chosen {
  std::string name;
  size_t hbm_per_chip = 0;
  int64_t physical_cores = 0;
  std::string error = "torch_neuronx has not configured the emulated platform";
};

Chosen& chosen() {
  static Chosen c;
  return c;
}

// Accepts "2", "0-1" and "0,2-3".
std::vector<int64_t> parse_core_list(const std::string& text, int64_t available) {
  const char* var = config::kVisibleCores.name;
  std::vector<int64_t> cores;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto dash = item.find('-');
    int64_t lo = config::parse_integer(item.substr(0, dash), var);
    int64_t hi = dash == std::string::npos ? lo : config::parse_integer(item.substr(dash + 1), var);
    TORCH_CHECK(lo >= 0 && lo <= hi, var, "='", text, "' has an invalid range '", item,
        "'; use e.g. 0-1 or 2");
    for (int64_t c = lo; c <= hi; ++c) {
      TORCH_CHECK(c < available, var, "='", text, "' names core ", c,
          ", but the emulated chip has ", available, " logical NeuronCores (0-", available - 1,
          ")");
      cores.push_back(c);
    }
  }
  return cores;
}

Platform make_platform() {
  const auto& c = chosen();
  TORCH_CHECK(c.error.empty(), c.error);
  Platform p{c.name, c.hbm_per_chip, c.physical_cores, config::logical_core_size(), {}};
  TORCH_CHECK(p.lnc == 1 || p.lnc == 2, config::logical_core_variable().name, "=", p.lnc,
      " is not supported; use 1 or 2");
  int64_t logical = p.physical_cores / p.lnc;
  std::string visible = config::text(config::kVisibleCores);
  if (visible.empty()) {
    for (int64_t core = 0; core < logical; ++core) {
      p.visible.push_back(core);
    }
  } else {
    p.visible = parse_core_list(visible, logical);
  }
  std::string num = config::text(config::kNumCores);
  if (!num.empty()) {
    int64_t n = config::parse_integer(num, config::kNumCores.name);
    TORCH_CHECK(n >= 1 && n <= static_cast<int64_t>(p.visible.size()), config::kNumCores.name, "=",
        n, " asks for more cores than the ", p.visible.size(), " visible ones");
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

void configure_platform(
    std::string name, size_t hbm_per_chip, int64_t physical_cores, std::string error) {
  chosen() = Chosen{std::move(name), hbm_per_chip, physical_cores, std::move(error)};
}

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
  TORCH_CHECK_INDEX(index < count, "Invalid device index neuron:", static_cast<int>(index),
      ": there are ", static_cast<int>(count),
      " visible NeuronCores (neuron:0 to neuron:", static_cast<int>(count) - 1,
      "). Set NEURON_RT_VISIBLE_CORES to change them.");
  return index;
}

} // namespace neuron
