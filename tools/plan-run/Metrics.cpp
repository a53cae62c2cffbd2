//===- Metrics.cpp - One JSON object per step (--metrics FILE.jsonl) ------===//

#include "Metrics.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace plan::run {

std::string metricsJson(const StepMetrics &m) {
  // ordered_json keeps the documented field order, which people read.
  nlohmann::ordered_json json;
  json["step"] = m.step;
  json["loss"] = m.loss;
  json["lr"] = m.lr;
  json["grad_norm"] = m.gradNorm;
  json["tokens"] = m.tokens;
  json["step_time_s"] = m.stepTimeS;
  json["tokens_per_s"] = m.tokensPerSecond();
  json["peak_bytes"] = m.peakBytes;
  if (m.lossScale) {
    json["loss_scale"] = *m.lossScale;
    json["skipped"] = m.skipped;
  }
  return json.dump();
}

MetricsFile::MetricsFile(const std::string &path) : path_(path) {
  // A fresh file per run: a rerun of the same command must not leave two
  // runs' steps in one file.
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    throw std::runtime_error(
        path + ": cannot open the metrics file: " + std::strerror(errno));
}

MetricsFile::~MetricsFile() {
  if (file_)
    std::fclose(file_);
}

void MetricsFile::append(const StepMetrics &metrics) {
  std::string line = metricsJson(metrics) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0)
    throw std::runtime_error(
        path_ + ": cannot write the metrics file: " + std::strerror(errno));
}

} // namespace plan::run
