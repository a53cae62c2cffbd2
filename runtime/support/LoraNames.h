//===- LoraNames.h - The names of a LoRA run's adapters ---------*- C++ -*-===//
//
// PEFT's naming: a target module `M` gets the trainable `M.lora_A.weight`
// [rank, in] and `M.lora_B.weight` [out, rank]. The one definition that the
// frontend names the adapters with (frontend/Models.cpp), the compiler's
// memory models find them by (analysis/), and the runtime computes and
// exports them by (runtime/models, runtime/checkpoint). Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_SUPPORT_LORANAMES_H
#define PLAN_RUNTIME_SUPPORT_LORANAMES_H

#include <optional>
#include <string_view>

namespace plan::rt {

inline constexpr std::string_view kLoraASuffix = ".lora_A.weight";
inline constexpr std::string_view kLoraBSuffix = ".lora_B.weight";

/// Whether `param` is a lora_A (the adapter whose shape gives the rank and
/// the module's input width).
inline bool isLoraA(std::string_view param) {
  return param.ends_with(kLoraASuffix);
}

/// The module `M` of an adapter parameter `M.lora_A.weight` or
/// `M.lora_B.weight`; nullopt for any other parameter.
inline std::optional<std::string_view>
loraAdapterModule(std::string_view param) {
  for (std::string_view suffix : {kLoraASuffix, kLoraBSuffix})
    if (param.ends_with(suffix))
      return param.substr(0, param.size() - suffix.size());
  return std::nullopt;
}

} // namespace plan::rt

#endif // PLAN_RUNTIME_SUPPORT_LORANAMES_H
