//===- SafeTensors.h - HF-named weights from .safetensors files ---*- C++
//-*-===//
//
// Reads and writes the safetensors format (an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and byte range, then
// the raw data), the format HuggingFace checkpoints are published in. A run
// started with --init PATH loads its weights through a TensorSource, and
// checkpoint export writes with writeSafeTensors.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_MODELS_SAFETENSORS_H
#define PLAN_RUNTIME_MODELS_SAFETENSORS_H

#include "Schedule.h"

#include <ATen/ATen.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace plan::rt {

/// A missing, malformed or mismatching weights file; the message is one line
/// and names the file and, where there is one, the tensor.
class WeightsError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// HF-named tensors, whatever file or shards they are stored in.
class TensorSource {
public:
  virtual ~TensorSource();
  /// The tensor `name` as a contiguous fp32 CPU tensor; throws WeightsError
  /// when it is absent, has another shape than `expectedShape`, or is stored
  /// in a dtype other than F32, BF16 or F16.
  virtual at::Tensor get(const std::string &name,
                         at::IntArrayRef expectedShape) const = 0;
  virtual bool contains(const std::string &name) const = 0;
};

/// `path` is a .safetensors file, or a HuggingFace model directory holding
/// model.safetensors or model.safetensors.index.json and its shards. A
/// directory's config.json, when present, must describe the same model as
/// `config` (hidden size, layers, heads, kv heads, vocab, intermediate).
std::unique_ptr<TensorSource> openTensorSource(const std::string &path,
                                               const ModelConfig &config);

/// Writes `tensors` (any device; F32, BF16 or F16, each kept in its dtype) to
/// `path` in the safetensors format, in the given order.
void writeSafeTensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors);

} // namespace plan::rt

#endif // PLAN_RUNTIME_MODELS_SAFETENSORS_H
