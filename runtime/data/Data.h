//===- Data.h - Token batches for each rank and step -------------*- C++
//-*-===//
//
// Training data as token ids: nanoGPT / llm.c `.bin` token files (uint16 or
// uint32), or synthetic tokens from the seed. Every data-parallel rank takes
// its own slice of the global batch, deterministically, so a run's global
// batch at step k does not depend on the world size or strategy
// (docs/runtime.md, "Data").
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_DATA_DATA_H
#define PLAN_RUNTIME_DATA_DATA_H

#include "Model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace plan::rt {

class DataSource {
public:
  /// `spec` is "synthetic" or a token file path. Throws std::runtime_error
  /// with a one-line reason (missing file, bad header, too short, a token
  /// id >= vocab).
  static std::unique_ptr<DataSource> open(const std::string &spec,
                                          int64_t vocab, uint64_t seed);
  virtual ~DataSource() = default;

  /// This rank's micro-batches of step `step` (1-based): micro-batch i, row r
  /// is sequence ((i * dpSize) + dpRank) * microBatch + r of the step's global
  /// batch of microBatches * dpSize * microBatch sequences of seqLen tokens.
  virtual std::vector<MicroBatch> batches(int64_t step, int64_t microBatches,
                                          int64_t dpRank, int64_t dpSize,
                                          int64_t microBatch, int64_t seqLen,
                                          at::Device device) = 0;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_DATA_DATA_H
