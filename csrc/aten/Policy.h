#pragma once
// Trainium behaviours that the emulated device reproduces: 64-bit narrowing, the CPU-fallback
// switch and FP8 compute.

#include <ATen/Tensor.h>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

namespace neuron {

enum class Policy64 { Narrow, Native, Error };

// float64, complex128 and int64: the dtypes Trainium stores in 32 bits.
bool is_64bit(c10::ScalarType dtype);

// TORCH_NEURONX_64BIT: narrow (default), native or error.
Policy64 policy_64bit();
// Applies the 64-bit policy to a neuron tensor that just received data from `source`
// (an op name or a transfer).
void enforce_64bit(const at::Tensor& t, const std::string& source);
// The same for a host tensor holding values the device just produced: int64 values are checked
// against the int32 range, float64 and complex128 values rounded to 32-bit precision in place.
void narrow_64bit_values(const at::Tensor& host, const std::string& source);
// Random integers drawn into an int64 neuron tensor under `narrow` come from the part of
// [low, high) that int32 holds: a host kernel drew `host` as on the CPU (the same numbers from
// the generator, so the stream stays in step with a CPU run), and each value outside that part
// is folded into it, modulo its width. A range with no int32 part is left for the narrowing
// check to refuse.
void fold_random_int64(
    const at::Tensor& host, int64_t low, int64_t high, const std::string& source);
// Refuses 64-bit floating tensors on the device under TORCH_NEURONX_64BIT=error.
void check_64bit_dtype(c10::ScalarType dtype, const std::string& source);

// NEURON_FALLBACK_ENABLED (default 1).
bool fallback_enabled();

bool is_fp8(c10::ScalarType dtype);
// Ops that only move or reinterpret FP8 data, set once by the op policy.
std::unordered_set<std::string>& fp8_data_ops();

} // namespace neuron
