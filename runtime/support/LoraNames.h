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

/// A block module's name within its block: what follows the layer index
/// ("model.layers.3.self_attn.q_proj" -> "self_attn.q_proj",
/// "bert.encoder.layer.0.output.dense" -> "output.dense"); the whole name
/// when it has none.
inline std::string_view moduleInBlock(std::string_view module) {
  for (size_t dot = module.find('.'); dot != std::string_view::npos;
       dot = module.find('.', dot + 1)) {
    size_t next = module.find('.', dot + 1);
    if (next == std::string_view::npos || next == dot + 1)
      continue;
    std::string_view part = module.substr(dot + 1, next - dot - 1);
    if (part.find_first_not_of("0123456789") == std::string_view::npos)
      return module.substr(next + 1);
  }
  return module;
}

} // namespace plan::rt

#endif // PLAN_RUNTIME_SUPPORT_LORANAMES_H
