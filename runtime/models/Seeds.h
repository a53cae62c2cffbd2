//===- Seeds.h - Counter-based seeds for weights and synthetic data -*- C++
//-*-===//
//
// Initial weights and synthetic tokens are functions of (seed, name) and
// (seed, sequence index) alone, never of a generator's history, so every
// rank, world size and strategy draws the same values. docs/models.md spells
// out both recipes so that the Python reference reproduces them.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_MODELS_SEEDS_H
#define PLAN_RUNTIME_MODELS_SEEDS_H

#include <cstdint>
#include <string>
#include <string_view>

namespace plan::rt {

/// Steele, Lea and Flood's SplitMix64 finaliser (as in
/// java.util.SplittableRandom).
inline uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// 64-bit FNV-1a of the bytes of `s`.
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

/// The seed of parameter `name`'s generator.
inline uint64_t parameterSeed(uint64_t seed, std::string_view name) {
  return splitmix64(seed ^ fnv1a64(name));
}

/// The seed of the LoRA dropout mask of adapted module `module` (its HF name,
/// "model.layers.0.self_attn.q_proj") for global sequence `sequence`: a
/// function of the run's seed, the module and the sequence alone, so a
/// forward and its recompute, and every rank and micro-batch split, draw the
/// same mask.
inline uint64_t loraDropoutSeed(uint64_t seed, std::string_view module,
                                int64_t sequence) {
  std::string name(module);
  name += ".lora_dropout";
  return splitmix64(parameterSeed(seed, name) ^
                    static_cast<uint64_t>(sequence));
}

} // namespace plan::rt

#endif // PLAN_RUNTIME_MODELS_SEEDS_H
