//===- FaultInjection.cpp - Test-only rank failures (PLAN_RUN_FAULT) ------===//

#include "FaultInjection.h"

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace plan::run {

namespace {

template <typename T>
T parseNumber(const std::string &key, const std::string &text, T min) {
  T value{};
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min)
    throw std::invalid_argument(
        "PLAN_RUN_FAULT: " + key + "='" + text +
        "' is not an integer >= " + std::to_string(min));
  return value;
}

} // namespace

FaultInjection parseFaultInjection(const std::string &spec) {
  FaultInjection fault;
  bool hasRank = false, hasStep = false, hasKind = false;
  std::stringstream stream(spec);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument(
          "PLAN_RUN_FAULT: expected key=value, got '" + item +
          "' (rank=R,step=K,kind=exit|abort|hang|error|save)");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "rank") {
      fault.rank = parseNumber<int>(key, value, 0);
      hasRank = true;
    } else if (key == "step") {
      fault.step = parseNumber<int64_t>(key, value, 1);
      hasStep = true;
    } else if (key == "kind") {
      if (value == "exit")
        fault.kind = FaultInjection::Kind::Exit;
      else if (value == "abort")
        fault.kind = FaultInjection::Kind::Abort;
      else if (value == "hang")
        fault.kind = FaultInjection::Kind::Hang;
      else if (value == "error")
        fault.kind = FaultInjection::Kind::Error;
      else if (value == "save")
        fault.kind = FaultInjection::Kind::Save;
      else
        throw std::invalid_argument(
            "PLAN_RUN_FAULT: kind='" + value +
            "' is not exit, abort, hang, error or save");
      hasKind = true;
    } else {
      throw std::invalid_argument(
          "PLAN_RUN_FAULT: unknown key '" + key +
          "' (rank=R,step=K,kind=exit|abort|hang|error|save)");
    }
  }
  if (!hasRank || !hasStep || !hasKind)
    throw std::invalid_argument(
        "PLAN_RUN_FAULT: needs rank, step and kind "
        "(rank=R,step=K,kind=exit|abort|hang|error|save)");
  return fault;
}

void injectFault(const std::optional<FaultInjection> &fault, int rank,
                 int64_t step) {
  if (!fault || fault->rank != rank || fault->step != step ||
      fault->kind == FaultInjection::Kind::Save)
    return;
  if (fault->kind == FaultInjection::Kind::Error)
    throw std::runtime_error("PLAN_RUN_FAULT: injected error at step " +
                             std::to_string(step));
  std::fprintf(stderr, "plan-run: rank %d: PLAN_RUN_FAULT at step %lld\n", rank,
               static_cast<long long>(step));
  std::fflush(stderr);
  switch (fault->kind) {
  case FaultInjection::Kind::Exit:
    // _exit: no destructors, like a process that dies.
    ::_exit(FaultInjection::kExitCode);
  case FaultInjection::Kind::Abort:
    std::abort();
  case FaultInjection::Kind::Hang:
    for (;;)
      ::pause();
  case FaultInjection::Kind::Error:
  case FaultInjection::Kind::Save:
    return; // thrown above; injectSaveFault
  }
}

void injectSaveFault(const std::optional<FaultInjection> &fault, int rank,
                     int64_t step, const std::string &tmpPath) {
  if (!fault || fault->kind != FaultInjection::Kind::Save ||
      fault->rank != rank || fault->step != step)
    return;
  struct stat st {};
  off_t half = ::stat(tmpPath.c_str(), &st) == 0 ? st.st_size / 2 : 0;
  bool truncated = ::truncate(tmpPath.c_str(), half) == 0;
  std::fprintf(stderr,
               "plan-run: rank %d: PLAN_RUN_FAULT in the checkpoint save after "
               "step %lld (%s %s)\n",
               rank, static_cast<long long>(step),
               truncated ? "truncated" : "could not truncate", tmpPath.c_str());
  std::fflush(stderr);
  ::_exit(FaultInjection::kExitCode);
}

} // namespace plan::run
