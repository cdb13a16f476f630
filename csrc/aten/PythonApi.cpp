// The torch.ops.neuron API: what the Python layer and compiled graphs call into the core library
// (it has no pybind).

#include "aten/Counters.h"
#include "aten/Exclusions.h"
#include "aten/Fallback.h"
#include "aten/HostView.h"
#include "aten/OpQueue.h"
#include "aten/Policy.h"
#include "aten/Routing.h"
#include "aten/Upcalls.h"
#include "runtime/Allocator.h"
#include "runtime/Boundary.h"
#include "runtime/Config.h"
#include "runtime/CoreScope.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/HostAllocator.h"
#include "runtime/MemoryContext.h"
#include "runtime/Trace.h"

#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <memory>
#include <vector>

namespace neuron {
namespace {

at::Tensor as_cpu(const at::Tensor& self) {
  reach(Boundary::HostAccess);
  return host_view(self);
}

at::Tensor as_cpu_identity(const at::Tensor& self) {
  return self.alias();
}

// A compiled graph's result, computed on the host, as a tensor of neuron `device`.
at::Tensor to_device_alias(const at::Tensor& host, int64_t device) {
  auto index = check_device(static_cast<c10::DeviceIndex>(device));
  return tensor_over(device_alias(host.storage(), index), host, c10::DispatchKey::PrivateUse1);
}

// Compiled graphs run all their kernels on the host, as the core (see CoreScope); to a profiler
// each call of a graph is one kernel of the core, named after the graph.
struct GraphCall {
  CoreScope core;
  trace::Span span;
};

thread_local std::vector<std::unique_ptr<GraphCall>> core_scopes;

void enter_core(int64_t device, c10::string_view graph) {
  reach(Boundary::CompiledGraph);
  auto index = check_device(static_cast<c10::DeviceIndex>(device));
  auto call = std::unique_ptr<GraphCall>(new GraphCall{CoreScope(index, true, true), {}});
  if (trace::collecting()) {
    call->span.begin(trace::Kind::Kernel, index, "compiled_graph",
        "nc::graph " + (graph.empty() ? std::string("compiled") : std::string(graph)));
  }
  core_scopes.push_back(std::move(call));
}

void exit_core() {
  TORCH_CHECK(!core_scopes.empty(), "neuron::exit_core called without neuron::enter_core");
  core_scopes.pop_back();
}

// The address of the trace::Api (see runtime/Trace.h), for ctypes and the c10d module.
int64_t trace_api() {
  return reinterpret_cast<int64_t>(trace::api());
}

// The 64-bit policy inside a compiled graph: the compiler inserts this after each op that
// yields 64-bit values, as eager applies it after every neuron op. The result takes the strides
// eager gives the op's result when the compiler knows them (static shapes): Inductor may lay out
// the op's result otherwise on size-1 dimensions.
at::Tensor narrow_64bit(
    const at::Tensor& self, c10::string_view source, at::OptionalIntArrayRef stride) {
  auto out =
      stride ? at::empty_strided(self.sizes(), *stride, self.options()) : at::empty_like(self);
  out.copy_(self);
  narrow_64bit_values(out, std::string(source));
  return out;
}

at::Tensor narrow_64bit_meta(
    const at::Tensor& self, c10::string_view, at::OptionalIntArrayRef stride) {
  return stride ? at::empty_strided_symint(
                      self.sym_sizes(), c10::fromIntArrayRefSlow(*stride), self.options())
                : at::empty_like(self);
}

std::string policy_64bit_name() {
  switch (policy_64bit()) {
    case Policy64::Narrow:
      return "narrow";
    case Policy64::Native:
      return "native";
    case Policy64::Error:
      return "error";
  }
  return "";
}

// Reports the CPU-fallback-tier ops a compiled graph is about to run, once per call each.
void record_compiled_fallback(std::vector<std::string> ops) {
  for (const auto& op : ops) {
    announce_fallback(op, /*compiled=*/true);
    observe("fallback", op, "compiled", {0, 0});
  }
}

// Reports a call of a compiled graph that draws random numbers (its seeds come from the core's
// default generator, or the CPU's under TORCH_NEURONX_RNG=cpu), for check and parity.
void record_compiled_random(c10::string_view graph) {
  if (observing()) {
    observe("random", "compiled graph " + std::string(graph),
        rng_source() == RngSource::Cpu ? "cpu" : "device", {0});
  }
}

std::vector<int64_t> route(std::vector<std::string> cpu_fallback_ops,
    std::vector<std::string> mask_ops, std::vector<std::string> device_selecting_ops,
    std::vector<std::string> host_composite_ops, std::vector<std::string> fp8_ops,
    std::vector<std::string> namespaces) {
  fp8_data_ops().insert(fp8_ops.begin(), fp8_ops.end());
  add_native_namespaces(namespaces);
  auto counts = route_ops({std::move(cpu_fallback_ops), std::move(mask_ops),
      std::move(device_selecting_ops), std::move(host_composite_ops)});
  return {counts.native, counts.cpu_fallback, counts.mask_dependent, counts.host_composite};
}

std::tuple<std::vector<std::string>, std::vector<int64_t>> counters() {
  std::vector<std::string> names;
  std::vector<int64_t> values;
  for (auto& [name, value] : counter_values()) {
    names.push_back(name);
    values.push_back(value);
  }
  return {names, values};
}

// Pinned host memory statistics, with the keys torch.cuda.host_memory_stats uses.
std::tuple<std::vector<std::string>, std::vector<int64_t>> host_memory_stats() {
  auto stats = host_allocator()->get_stats();
  std::vector<std::string> names;
  std::vector<int64_t> values;
  for (const auto& [name, stat] : {std::pair{"active_requests", stats.active_requests},
           std::pair{"active_bytes", stats.active_bytes},
           std::pair{"allocations", stats.allocations},
           std::pair{"allocated_bytes", stats.allocated_bytes}}) {
    for (const auto& [field, value] :
        {std::pair{"current", stat.current}, std::pair{"peak", stat.peak},
            std::pair{"allocated", stat.allocated}, std::pair{"freed", stat.freed}}) {
      names.push_back(std::string(name) + "." + field);
      values.push_back(value);
    }
  }
  names.emplace_back("num_host_alloc");
  values.push_back(stats.num_host_alloc);
  names.emplace_back("num_host_free");
  values.push_back(stats.num_host_free);
  return {names, values};
}

void record_memory_history(
    bool on, bool trace_all, int64_t context_level, bool cpp, int64_t max_entries, bool clear) {
  TORCH_CHECK(max_entries >= 0, "max_entries must be >= 0, got ", max_entries);
  neuron::record_memory_history(
      on, trace_all, static_cast<int>(context_level), cpp, static_cast<size_t>(max_entries), clear);
}

// The allocator's snapshot, flattened (see MemorySnapshot), with the stack traces symbolized:
// context i holds frames indices[offsets[i] : offsets[i + 1]] of the frame table.
std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>,
    std::vector<std::string>, std::vector<std::string>, std::vector<int64_t>>
memory_snapshot() {
  auto snap = neuron::memory_snapshot();
  std::vector<c10::GatheredContext*> contexts;
  for (auto& c : snap.contexts) {
    contexts.push_back(c.get());
  }
  auto frames = memory_context::symbolize(contexts);
  return {std::move(snap.segments), std::move(snap.entries), std::move(frames.offsets),
      std::move(frames.indices), std::move(frames.filenames), std::move(frames.names),
      std::move(frames.lines)};
}

void set_memory_fraction(int64_t device, double fraction) {
  neuron::set_memory_fraction(static_cast<c10::DeviceIndex>(device), fraction);
}

int64_t raw_alloc(int64_t nbytes, int64_t device) {
  TORCH_CHECK(nbytes >= 0, "caching_allocator_alloc: size must be >= 0, got ", nbytes);
  return reinterpret_cast<int64_t>(
      neuron::raw_alloc(static_cast<size_t>(nbytes), static_cast<c10::DeviceIndex>(device)));
}

void raw_delete(int64_t ptr) {
  TORCH_CHECK(neuron::raw_free(reinterpret_cast<void*>(ptr)), "caching_allocator_delete: ", ptr,
      " is not an address that caching_allocator_alloc returned (or it was already deleted)");
}

void reset_host_memory_stats(bool peak) {
  if (peak) {
    host_allocator()->reset_peak_stats();
  } else {
    host_allocator()->reset_accumulated_stats();
  }
}

void reset_counters() {
  clear_counters();
}

void set_platform(
    std::string name, int64_t hbm_per_chip, int64_t physical_cores, std::string error) {
  configure_platform(
      std::move(name), static_cast<size_t>(hbm_per_chip), physical_cores, std::move(error));
}

std::tuple<std::vector<std::string>, std::vector<std::string>> config_variables() {
  std::vector<std::string> names;
  std::vector<std::string> defaults;
  for (auto& [name, fallback] : config::variables()) {
    names.push_back(name);
    defaults.push_back(fallback);
  }
  return {names, defaults};
}

using Strings = std::vector<std::string>;

std::tuple<Strings, Strings, Strings, Strings> exclusion_table() {
  Strings ids, features, messages, ways_out;
  for (const auto& row : exclusions()) {
    ids.emplace_back(row.id);
    features.emplace_back(row.feature);
    messages.emplace_back(row.message);
    ways_out.emplace_back(row.way_out);
  }
  return {ids, features, messages, ways_out};
}

// Raises the platform's configuration error, where device_count() alone would report 0 cores.
int64_t count() {
  platform_name();
  return device_count();
}

std::tuple<std::string, int64_t, int64_t> platform(int64_t device) {
  auto index = check_device(static_cast<c10::DeviceIndex>(device));
  return {platform_name(), static_cast<int64_t>(hbm_capacity()), physical_core(index)};
}

void manual_seed(int64_t device, int64_t seed) {
  auto gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(static_cast<uint64_t>(seed));
}

int64_t seed(int64_t device) {
  auto gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return static_cast<int64_t>(gen.seed());
}

int64_t initial_seed(int64_t device) {
  return static_cast<int64_t>(
      default_generator(static_cast<c10::DeviceIndex>(device)).current_seed());
}

at::Tensor get_rng_state(int64_t device) {
  auto gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::Tensor(gen.get_state());
}

void set_rng_state(int64_t device, const at::Tensor& state) {
  auto gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

std::string rng_source_name() {
  return rng_source() == RngSource::Cpu ? "cpu" : "device";
}

void set_rng_source_name(c10::string_view name) {
  TORCH_CHECK(name == "cpu" || name == "device", "'", name,
      "' is not a random source; use 'device' (each core's own generator, as on Trainium) or "
      "'cpu' (the CPU's default generator)");
  set_rng_source(name == "cpu" ? RngSource::Cpu : RngSource::Device);
}

std::tuple<bool, bool, int64_t> adaptive_eager() {
  return {queue::enabled(), queue::prologue(), queue::limit()};
}

void set_adaptive_eager(bool enabled, bool prologue, int64_t limit) {
  queue::set_limit(limit);
  queue::set_prologue(prologue);
  queue::set_enabled(enabled);
}

// Runs the queued ops at a boundary the core cannot see (collectives, Python-side readers).
void run_queue(c10::string_view boundary) {
  for (int b = 0; b < static_cast<int>(Boundary::Count_); ++b) {
    if (boundary == boundary_name(static_cast<Boundary>(b))) {
      reach(static_cast<Boundary>(b));
      return;
    }
  }
  TORCH_CHECK(false, "Unknown queue boundary '", boundary, "'");
}

TORCH_LIBRARY(neuron, m) {
  m.def("as_cpu(Tensor(a) self) -> Tensor(a)");
  m.def("to_device_alias(Tensor host, int device) -> Tensor", &to_device_alias);
  m.def("enter_core(int device, str graph=\"\") -> ()", &enter_core);
  m.def("trace_api() -> int", &trace_api);
  m.def(
      "record_memory_history(bool on, bool trace_all, int context_level, bool cpp, "
      "int max_entries, bool clear) -> ()",
      &record_memory_history);
  m.def(
      "memory_snapshot() -> (int[] segments, int[] entries, int[] offsets, int[] indices, "
      "str[] filenames, str[] names, int[] lines)",
      &memory_snapshot);
  m.def("set_memory_fraction(int device, float fraction) -> ()", &set_memory_fraction);
  m.def("raw_alloc(int nbytes, int device) -> int", &raw_alloc);
  m.def("raw_delete(int ptr) -> ()", &raw_delete);
  m.def("set_caching(bool enabled) -> ()", &neuron::set_caching);
  m.def("caching() -> bool", &neuron::caching);
  m.def("reset_host_memory_stats(bool peak) -> ()", &reset_host_memory_stats);
  m.def("exit_core() -> ()", &exit_core);
  m.def("busy_ns(int device) -> int",
      [](int64_t device) { return busy_ns(static_cast<c10::DeviceIndex>(device)); });
  m.def("narrow_64bit(Tensor self, str source, int[]? stride=None) -> Tensor");
  m.def("policy_64bit() -> str", &policy_64bit_name);
  m.def("record_compiled_fallback(str[] ops) -> ()", &record_compiled_fallback);
  m.def("record_compiled_random(str graph) -> ()", &record_compiled_random);
  m.def(
      "route(str[] cpu_fallback_ops, str[] mask_ops, str[] device_selecting_ops, "
      "str[] host_composite_ops, str[] fp8_ops, str[] native_namespaces) -> int[]",
      &route);
  m.def("add_native_namespaces(str[] namespaces) -> ()",
      [](std::vector<std::string> namespaces) { add_native_namespaces(namespaces); });
  m.def("takes_library_fallback(str op) -> bool",
      [](std::string op) { return takes_library_fallback(op); });
  m.def("route_device_kernels(str[] ops) -> int",
      [](std::vector<std::string> ops) { return route_device_kernels(ops); });
  m.def("counters() -> (str[], int[])", &counters);
  m.def("set_observing(bool on) -> ()", &set_observing);
  m.def("clear_counters() -> ()", &reset_counters);
  m.def("host_memory_stats() -> (str[], int[])", &host_memory_stats);
  m.def("device_count() -> int", &count);
  m.def("set_platform(str name, int hbm_per_chip, int physical_cores, str error) -> ()",
      &set_platform);
  m.def("config_variables() -> (str[], str[])", &config_variables);
  m.def(
      "exclusions() -> (str[] id, str[] feature, str[] message, str[] way_out)", &exclusion_table);
  m.def("platform(int device) -> (str, int, int)", &platform);
  m.def("manual_seed(int device, int seed) -> ()", &manual_seed);
  m.def("seed(int device) -> int", &seed);
  m.def("initial_seed(int device) -> int", &initial_seed);
  m.def("get_rng_state(int device) -> Tensor", &get_rng_state);
  m.def("set_rng_state(int device, Tensor state) -> ()", &set_rng_state);
  m.def("rng_source() -> str", &rng_source_name);
  m.def("set_rng_source(str source) -> ()", &set_rng_source_name);
  m.def("set_fusable(str[] ops, str[] dtypes) -> ()", &queue::set_fusable);
  m.def("adaptive_eager() -> (bool enabled, bool prologue, int limit)", &adaptive_eager);
  m.def("set_adaptive_eager(bool enabled, bool prologue, int limit) -> ()", &set_adaptive_eager);
  m.def("run_queue(str boundary) -> ()", &run_queue);
}

TORCH_LIBRARY_IMPL(neuron, PrivateUse1, m) {
  m.impl("as_cpu", TORCH_FN(as_cpu));
}

TORCH_LIBRARY_IMPL(neuron, CPU, m) {
  m.impl("as_cpu", TORCH_FN(as_cpu_identity));
  m.impl("narrow_64bit", TORCH_FN(narrow_64bit));
}

TORCH_LIBRARY_IMPL(neuron, Meta, m) {
  m.impl("narrow_64bit", TORCH_FN(narrow_64bit_meta));
}

} // namespace
} // namespace neuron
