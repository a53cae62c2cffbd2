//===- Metrics.cpp - One JSON object per step (--metrics FILE.jsonl) ------===//

#include "Metrics.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace plan::run {

std::string metricsJson(const StepMetrics &m) {
  // ordered_json keeps the documented field order, which people read.
  nlohmann::ordered_json json;
  json["step"] = m.step;
  json["loss"] = m.loss;
  json["lr"] = m.lr;
  if (m.gradNorm)
    json["grad_norm"] = *m.gradNorm;
  json["tokens"] = m.tokens;
  json["step_time_s"] = m.stepTimeS;
  json["tokens_per_s"] = m.tokensPerSecond();
  json["peak_bytes"] = m.peakBytes;
  if (m.plannedBytes > 0)
    json["planned_bytes"] = m.plannedBytes;
  if (m.lossScale) {
    json["loss_scale"] = *m.lossScale;
    json["skipped"] = m.skipped;
  }
  if (!m.stagePeakBytes.empty()) {
    json["stage_peak_bytes"] = m.stagePeakBytes;
    json["stage_planned_bytes"] = m.stagePlannedBytes;
  }
  return json.dump();
}

namespace {

/// The lines of `path` whose "step" is at most `lastStep`, each with its
/// newline; "" when the file does not exist. Lines that are not a step's
/// object (a line cut short by a crash) are dropped.
std::string linesThrough(const std::string &path, int64_t lastStep,
                         const std::string &what) {
  std::FILE *in = std::fopen(path.c_str(), "r");
  if (!in) {
    if (errno == ENOENT)
      return "";
    throw std::runtime_error(path + ": cannot read the " + what + ": " +
                             std::strerror(errno));
  }
  std::string text;
  char buffer[65536];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), in)) > 0)
    text.append(buffer, n);
  bool failed = std::ferror(in);
  std::fclose(in);
  if (failed)
    throw std::runtime_error(path + ": cannot read the " + what);
  std::string kept;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos)
      break; // an unfinished last line
    std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    nlohmann::json object = nlohmann::json::parse(line, nullptr, false);
    if (object.is_discarded() || !object.is_object() ||
        !object.contains("step") || !object["step"].is_number_integer())
      continue;
    if (object["step"].get<int64_t>() <= lastStep) {
      kept.append(line);
      kept.push_back('\n');
    }
  }
  return kept;
}

} // namespace

MetricsFile::MetricsFile(const std::string &path,
                         std::optional<int64_t> resumedAfter, std::string what)
    : path_(path), what_(std::move(what)) {
  // A fresh file per run: a rerun of the same command must not leave two
  // runs' steps in one file. A resumed run continues the file of the run it
  // resumes, as if that run had not been interrupted.
  if (!resumedAfter) {
    file_ = std::fopen(path.c_str(), "w");
    if (!file_)
      throw std::runtime_error(path + ": cannot open the " + what_ + ": " +
                               std::strerror(errno));
    return;
  }
  // The kept lines go to a temporary file that replaces the old one, so a
  // crash here leaves the old file whole.
  std::string kept = linesThrough(path, *resumedAfter, what_);
  std::string temporary = path + ".tmp";
  file_ = std::fopen(temporary.c_str(), "w");
  if (!file_)
    throw std::runtime_error(temporary + ": cannot open the " + what_ + ": " +
                             std::strerror(errno));
  if ((!kept.empty() &&
       std::fwrite(kept.data(), 1, kept.size(), file_) != kept.size()) ||
      std::fflush(file_) != 0 || std::rename(temporary.c_str(), path.c_str())) {
    std::string why = std::strerror(errno);
    std::fclose(file_);
    file_ = nullptr;
    std::remove(temporary.c_str());
    throw std::runtime_error(path + ": cannot write the " + what_ + ": " + why);
  }
}

MetricsFile::~MetricsFile() {
  if (file_)
    std::fclose(file_);
}

void MetricsFile::append(const StepMetrics &metrics) {
  appendLine(metricsJson(metrics));
}

void MetricsFile::appendLine(const std::string &json) {
  std::string line = json + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0)
    throw std::runtime_error(path_ + ": cannot write the " + what_ + ": " +
                             std::strerror(errno));
}

} // namespace plan::run
