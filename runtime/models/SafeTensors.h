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

#include <map>
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
/// The same, with `metadata` added to the header's "__metadata__" map (next
/// to "format": "pt", which a "format" entry of `metadata` replaces).
void writeSafeTensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors,
    const std::map<std::string, std::string> &metadata);

/// One safetensors file, mapped read-only: its "__metadata__" and its
/// tensors in their stored dtype. Throws WeightsError (one line, naming the
/// file) for a file that cannot be read or has a malformed header.
class SafeTensorsFile {
public:
  explicit SafeTensorsFile(const std::string &path);
  ~SafeTensorsFile();
  SafeTensorsFile(const SafeTensorsFile &) = delete;
  SafeTensorsFile &operator=(const SafeTensorsFile &) = delete;

  const std::string &path() const;
  /// The header's "__metadata__" (string values only), empty when absent.
  const std::map<std::string, std::string> &metadata() const;
  /// Tensor names in sorted order.
  std::vector<std::string> names() const;
  bool contains(const std::string &name) const;
  std::vector<int64_t> shape(const std::string &name) const;
  /// "F32", "BF16", ... as stored.
  std::string dtype(const std::string &name) const;
  /// Elements [offset, offset + numel) of the flattened tensor `name` (all of
  /// it when numel < 0) as a 1-D CPU tensor in its stored dtype (F32, BF16 or
  /// F16; others throw).
  at::Tensor read(const std::string &name, int64_t offset = 0,
                  int64_t numel = -1) const;
  /// The whole tensor, shaped, as fp32.
  at::Tensor readFloat(const std::string &name) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_MODELS_SAFETENSORS_H
