// The emulated cores' activity profiler for Kineto: PyTorch's profiler runs it as a child of
// its own when a profile asks for ProfilerActivity.PrivateUse1, and the device events it hands
// back are linked to the CPU ops that launched them (through Kineto's correlation ids), so they
// appear as device time in key_averages() and as neuron rows in the exported trace.

#include "runtime/Config.h"
#include "runtime/Device.h"
#include "runtime/Trace.h"

#include <kineto/libkineto.h>
#include <kineto/output_base.h>

#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace neuron::trace {
namespace {

using libkineto::ActivityType;

const std::set<ActivityType>& device_activities() {
  static const std::set<ActivityType> types{
      ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY};
  return types;
}

std::string row_name(int64_t stream) {
  return stream == kCollectiveStream ? std::string("collectives")
                                     : "stream " + std::to_string(stream);
}

// torch_neuronx.profiler.NeuronConfig passes its settings through the experimental config's
// custom_profiler_config as space-separated "neuron_<key>:<value>" fields; "" when absent.
std::string custom_field(const std::string& custom, const std::string& key) {
  const std::string prefix = "neuron_" + key + ":";
  auto at = custom.find(prefix);
  if (at == std::string::npos) {
    return "";
  }
  auto from = at + prefix.size();
  auto end = custom.find_first_of(" \n;", from);
  return custom.substr(from, end == std::string::npos ? end : end - from);
}

// What a profile keeps: the kinds of activity (modes "device": kernels, "runtime": transfers;
// both without the field), the cores (capture_enabled_for_nc, already expanded to a list of
// indices; all without it) and at most how many events of each core (max_events_per_nc).
struct Selection {
  std::set<Kind> kinds;
  std::set<int64_t> cores; // empty: every core
  int64_t max_events_per_core = std::numeric_limits<int64_t>::max();

  bool keeps(const Event& e) const {
    return kinds.count(e.kind) && (cores.empty() || cores.count(e.device));
  }
};

Selection selection(const std::string& custom) {
  Selection s;
  auto modes = custom_field(custom, "modes");
  if (modes.empty() || modes.find("device") != std::string::npos) {
    s.kinds.insert(Kind::Kernel);
  }
  if (modes.empty() || modes.find("runtime") != std::string::npos) {
    s.kinds.insert(Kind::Memcpy);
  }
  auto cores = custom_field(custom, "cores");
  for (size_t from = 0; from < cores.size();) {
    auto comma = cores.find(',', from);
    auto item = cores.substr(from, comma == std::string::npos ? comma : comma - from);
    s.cores.insert(config::parse_integer(item, "capture_enabled_for_nc"));
    from = comma == std::string::npos ? cores.size() : comma + 1;
  }
  auto limit = custom_field(custom, "max_events");
  if (!limit.empty()) {
    s.max_events_per_core = config::parse_integer(limit, "max_events_per_nc");
  }
  return s;
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  explicit Session(Selection selection) : selection_(std::move(selection)) {}

  void start() override { trace::start(!selection_.kinds.empty()); }

  void stop() override { events_ = trace::stop(); }

  std::vector<std::string> errors() override { return {}; }

  // Kineto pushes each profiled CPU op's id (and each record_function range's, as a "user"
  // id) on its thread, so a device activity begun there is linked to the innermost of them.
  void pushCorrelationId(uint64_t id) override { push_correlation(id); }
  void popCorrelationId() override { pop_correlation(); }
  void pushUserCorrelationId(uint64_t id) override { push_correlation(id); }
  void popUserCorrelationId() override { pop_correlation(); }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, std::numeric_limits<int64_t>::max());
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
      int64_t start, int64_t end) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start, end, "neuron");
    buffer_->gpuOpCount = 0;
    std::map<int64_t, int64_t> kept_per_core;
    for (auto& e : events_) {
      if (e.end_ns < start || e.start_ns > end || !selection_.keeps(e) ||
          kept_per_core[e.device] >= selection_.max_events_per_core) {
        continue;
      }
      ++kept_per_core[e.device];
      auto type =
          e.kind == Kind::Memcpy ? ActivityType::GPU_MEMCPY : ActivityType::CONCURRENT_KERNEL;
      auto act = std::make_unique<libkineto::GenericTraceActivity>(buffer_->span, type, e.name);
      act->startTime = e.start_ns;
      act->endTime = e.end_ns;
      act->id = static_cast<int32_t>(e.correlation);
      act->device = e.device;
      act->resource = e.stream;
      act->threadId = static_cast<int32_t>(e.stream);
      act->linked = linked && e.correlation ? linked(static_cast<int32_t>(e.correlation)) : nullptr;
      // Quoted values only: the numeric form formats through fmt, which libtorch does not export.
      act->addMetadataQuoted("device", "neuron:" + std::to_string(e.device));
      act->addMetadataQuoted("stream", std::to_string(e.stream));
      act->addMetadataQuoted("category", e.category);
      if (e.bytes > 0) {
        act->addMetadataQuoted("bytes", std::to_string(e.bytes));
      }
      rows_.insert({e.device, e.stream});
      logger.handleActivity(*act);
      buffer_->activities.push_back(std::move(act));
    }
    events_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (rows_.empty()) {
      return nullptr;
    }
    int64_t device = rows_.begin()->first;
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{device,
        device + kSortAfterHost, "neuron:" + std::to_string(device),
        platform_name() + " NeuronCore " + std::to_string(physical_core(device)) + " (emulated)"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [device, stream] : rows_) {
      infos.push_back(libkineto::ResourceInfo{
          stream, stream, device, "neuron:" + std::to_string(device) + " " + row_name(stream)});
    }
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

 private:
  // Device rows sort below the host's threads, as GPU rows do.
  static constexpr int64_t kSortAfterHost = 0x1000000;

  const Selection selection_;
  std::vector<Event> events_;
  std::set<std::pair<int64_t, int64_t>> rows_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class Profiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<ActivityType>& availableActivities() const override { return device_activities(); }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config& config) override {
    for (auto t : device_activities()) {
      if (types.count(t)) {
        return std::make_unique<Session>(selection(config.getCustomConfig()));
      }
    }
    // A profile without neuron activities still gets neuron memory events
    // (profile_memory=True), as CUDA's allocator reports to any profile.
    return std::make_unique<Session>(Selection{});
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
      const std::set<ActivityType>& types, const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  const std::string name_{"neuron"};
};

const bool g_registered = [] {
  libkineto::api().registerProfilerFactory([]() -> std::unique_ptr<libkineto::IActivityProfiler> {
    return std::make_unique<Profiler>();
  });
  return true;
}();

} // namespace
} // namespace neuron::trace
