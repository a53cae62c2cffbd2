//===- Models.h - Model presets, parameter lists, device table --*- C++ -*-===//
//
// Presets reproduce the HuggingFace config.json of each model exactly, and
// `enumerateUnits` lists its parameters with HuggingFace tensor names and
// shapes in the order of the model's state_dict, so that HF weights load by
// name and every parameter count the compiler reports is the real one.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_MODELS_H
#define PLAN_FRONTEND_MODELS_H

#include "frontend/PlanSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <vector>

namespace plan {

struct ModelPreset {
  llvm::StringRef name; // the .plan spelling: "llama3_8b"
  llvm::StringRef
      hfRepo; // "meta-llama/Meta-Llama-3-8B"; "" for our own tiny ones
  llvm::StringRef summary;
  ModelSpec spec;
};

llvm::ArrayRef<ModelPreset> modelPresets();
const ModelPreset *lookupModelPreset(llvm::StringRef name);

llvm::ArrayRef<DeviceSpec> deviceTable();
const DeviceSpec *lookupDevice(llvm::StringRef name);

/// The host side of a typical node with a device: its memory bandwidth
/// (bytes/s, all channels) and CPU cores, which the ranks of the node share
/// (offloaded optimizer steps, host copies). `cluster.host_bandwidth` and
/// `cluster.host_cores` override them.
struct HostSpec {
  double bandwidth = 0;
  int64_t cores = 0;
};
HostSpec typicalHost(llvm::StringRef deviceName);

// UnitKind (embedding, llama_block, gpt2_block, bert_block, llama_head,
// gpt2_head, bert_head) is generated from dialects/plan/PlanEnums.td: the
// natural building blocks of a model, in execution order. Wrap policies (a
// pass) group these; they are never split.

/// How tensor parallelism divides a parameter (the IR's #plan.split):
/// dimension `dim` is `chunks` equal parts, each cut between the ranks of a
/// tensor group; dim -1: the parameter is whole on every rank.
struct TensorSplit {
  int64_t dim = -1;
  int64_t chunks = 1;
  bool operator==(const TensorSplit &) const = default;
};

struct ParamInfo {
  std::string name; // HF state_dict name
  llvm::SmallVector<int64_t, 2> shape;
  std::string tiedTo; // HF name of the parameter it shares storage with, or ""
  /// How a frozen parameter (the base of a LoRA run) is stored; none for one
  /// that trains, and for a tied one (stored as what it ties to is).
  std::optional<BaseStorage> frozen;
  /// Megatron's layout: column-parallel weights by their output features,
  /// row-parallel ones by their input features, embeddings and the head by
  /// the vocabulary. None for a tied parameter (divided as its owner is).
  TensorSplit split;
  int64_t numel() const;
};

struct ModelUnit {
  std::string name; // "embed", "layers.0", ..., "head"
  UnitKind kind;
  std::vector<ParamInfo> params; // a tied parameter appears where HF lists it
};

std::vector<ModelUnit> enumerateUnits(const ModelSpec &model);

/// The units of a LoRA run (`lora` with its base and targets resolved): the
/// model's parameters frozen, and after each targeted linear layer of a
/// block its adapters as PEFT names them in a saved adapter
/// (`<module>.lora_A.weight` [rank, in], `<module>.lora_B.weight` [out,
/// rank]). With `base = nf4` the blocks' linear weights are stored in NF4,
/// as bitsandbytes quantizes them for QLoRA, and every other frozen
/// parameter (norms, biases, embeddings, the head) in `dense`; otherwise
/// all of them in `base`.
std::vector<ModelUnit> enumerateUnits(const ModelSpec &model,
                                      const LoraSpec &lora, BaseStorage dense);

/// A plan's parameters as PEFT's print_trainable_parameters counts them,
/// each tied group once: all of them (adapters included), those that train,
/// and the bytes the frozen ones are stored in.
struct ParamCounts {
  int64_t total = 0;
  int64_t trainable = 0;
  int64_t frozenBytes = 0;
};
ParamCounts countParams(const std::vector<ModelUnit> &units);

/// The linear modules of a family's blocks, as PEFT's target_modules names
/// them relative to a block ("self_attn.q_proj"), in state_dict order.
std::vector<std::string> loraModules(ModelFamily family);

/// PEFT's target_modules when a LoraConfig gives none (its
/// TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
std::vector<std::string> defaultLoraTargets(ModelFamily family);

/// Whether PEFT's `target` selects `module`: the same name, or a suffix of
/// it after a '.'.
bool loraTargetMatches(llvm::StringRef module, llvm::StringRef target);

/// Trainable parameters, each tied group counted once (what HF's
/// `model.num_parameters()` prints).
int64_t countParams(const ModelSpec &model);

} // namespace plan

#endif // PLAN_FRONTEND_MODELS_H
