//===- Calibrate.cpp - plan-run --calibrate: measure this host ------------===//
//
// Each measurement runs on every rank at once and for a fixed time rather
// than a fixed count, so that a slow kind (fp16 GEMMs without hardware
// support) costs seconds, not minutes. Ranks agree on the results with
// all-reduces over the same Gloo group the measurement of the link uses.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "Files.h"
#include "Json.h"
#include "Rank.h"
#include "analysis/Efficiencies.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <vector>

namespace plan::run {

namespace {

using Clock = std::chrono::steady_clock;

/// How long each measurement runs (seconds), after a warm-up.
constexpr double kMeasureSeconds = 0.3;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Runs `body` once to warm up, then repeatedly for kMeasureSeconds (at
/// least twice); returns the seconds of one run. Only for work of this rank
/// alone: the count of runs differs between ranks.
double timePerRun(const std::function<void()> &body) {
  body();
  int runs = 0;
  Clock::time_point start = Clock::now();
  do {
    body();
    ++runs;
  } while (runs < 2 || secondsSince(start) < kMeasureSeconds);
  return secondsSince(start) / runs;
}

/// The seconds of one of `runs` runs of a collective `body`, after one to
/// warm up: every rank runs the same count, or the ranks' collectives would
/// pair up wrongly.
double timeCollective(int runs, const std::function<void()> &body) {
  body();
  Clock::time_point start = Clock::now();
  for (int i = 0; i < runs; ++i)
    body();
  return secondsSince(start) / runs;
}

/// FLOP/s of an n x n x n GEMM in `dtype`, n = 1024 unless one takes more
/// than 0.1 s at 256 (a type the CPU has no fast kernels for), then 256.
double gemmFlops(at::ScalarType dtype) {
  auto rate = [&](int64_t n) {
    at::Tensor a = at::randn({n, n}).to(dtype);
    at::Tensor b = at::randn({n, n}).to(dtype);
    at::Tensor c = at::empty({n, n}, a.options());
    double seconds = timePerRun([&] { at::mm_out(c, a, b); });
    return 2.0 * static_cast<double>(n * n * n) / seconds;
  };
  double small = rate(256);
  if (2.0 * 1024 * 1024 * 1024 / small > 0.1)
    return small;
  return rate(1024);
}

/// Bytes/s a copy of 64 MiB reads and writes.
double copyBandwidth() {
  constexpr int64_t bytes = int64_t(64) << 20;
  at::Tensor src = at::ones({bytes / 4});
  at::Tensor dst = at::empty_like(src);
  double seconds = timePerRun([&] { dst.copy_(src); });
  return 2.0 * static_cast<double>(bytes) / seconds;
}

class Group {
public:
  Group(const c10::intrusive_ptr<c10d::Store> &store, const RankInfo &rank,
        std::chrono::milliseconds timeout)
      : world(rank.world) {
    if (world == 1)
      return;
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank.rank,
                                                       rank.world, options);
  }

  /// The sum of `value` over the ranks.
  double sum(double value) {
    if (world == 1)
      return value;
    std::vector<at::Tensor> t{at::full({1}, value, at::kDouble)};
    gloo->allreduce(t)->wait();
    return t[0].item<double>();
  }
  double mean(double value) { return sum(value) / world; }
  void barrier() { sum(0); }

  /// Seconds of one ring step: an all-reduce of one element is 2(n-1).
  double stepLatency() {
    std::vector<at::Tensor> t{at::zeros({1})};
    double seconds = timeCollective(200, [&] { gloo->allreduce(t)->wait(); });
    return seconds / (2.0 * (world - 1));
  }

  /// Bytes/s a rank sends in an all-gather of 8 MiB per rank (n-1 steps of
  /// 8 MiB each), its steps' latency taken out.
  double bandwidth(double latency) {
    constexpr int64_t bytes = int64_t(8) << 20;
    at::Tensor mine = at::ones({bytes / 4});
    at::Tensor all = at::empty({world * (bytes / 4)});
    double seconds =
        timeCollective(8, [&] { gloo->_allgather_base(all, mine)->wait(); });
    double sending = std::max(seconds - (world - 1) * latency, 1e-9);
    return static_cast<double>((world - 1) * bytes) / sending;
  }

  int world;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
};

double physicalMemory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<double>(pages) * size : 0;
}

/// `x` with 3 significant digits, as the plan language reads it.
std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", x);
  return text;
}

std::string gib(double bytes) {
  return std::to_string(std::max<int64_t>(
             1, static_cast<int64_t>(bytes / double(int64_t(1) << 30)))) +
         "GiB";
}

} // namespace

CalibratedDevice calibratedDevice(const HostMeasurements &m) {
  double ranks = std::max(1, m.ranksPerNode);
  double coresPerRank = static_cast<double>(m.cores) / ranks;
  auto peak = [](double achieved) { return achieved / kBandwidthEfficiency; };
  auto wholeGiB = [](double bytes) {
    constexpr int64_t GiB = int64_t(1) << 30;
    return std::max<int64_t>(1, static_cast<int64_t>(bytes / GiB)) * GiB;
  };
  CalibratedDevice d;
  d.ranksPerNode = m.ranksPerNode;
  d.threadsPerRank = m.threadsPerRank;
  d.memoryBytes = wholeGiB(m.memoryBytes / ranks);
  d.fp32Tflops = m.fp32Flops / coresPerRank / 1e12;
  d.bf16Tflops = m.bf16Flops / coresPerRank / 1e12;
  d.fp16Tflops = m.fp16Flops / coresPerRank / 1e12;
  d.hbmBandwidth = peak(m.copyBandwidth) / coresPerRank;
  // A host copy of the cpu backend is a memcpy: the model counts the bytes
  // copied once.
  d.pcieBandwidth = peak(m.copyBandwidth / 2);
  if (m.linkBandwidth)
    d.nvlinkBandwidth = peak(*m.linkBandwidth);
  d.linkLatency = m.linkLatency;
  d.hostMemoryBytes = wholeGiB(m.memoryBytes);
  d.hostCores = m.cores;
  d.hostBandwidth = peak(m.nodeCopyBandwidth);
  return d;
}

std::string calibratedCluster(const CalibratedDevice &d) {
  auto gbps = [](double bytesPerSecond) {
    return number(bytesPerSecond / 1e9) + "GB/s";
  };
  std::ostringstream out;
  out << "cluster {\n"
      << "  gpus_per_node = " << d.ranksPerNode << "\n"
      << "  gpu = cpu {\n"
      << "    memory = " << gib(static_cast<double>(d.memoryBytes)) << "\n"
      << "    fp32_tflops = " << number(d.fp32Tflops) << "\n"
      << "    bf16_tflops = " << number(d.bf16Tflops) << "\n"
      << "    fp16_tflops = " << number(d.fp16Tflops) << "\n"
      << "    hbm_bandwidth = " << gbps(d.hbmBandwidth) << "\n"
      << "    pcie_bandwidth = " << gbps(d.pcieBandwidth) << "\n";
  if (d.nvlinkBandwidth)
    out << "    nvlink_bandwidth = " << gbps(*d.nvlinkBandwidth) << "\n";
  if (d.linkLatency)
    out << "    link_latency = " << number(*d.linkLatency * 1e6) << "us\n";
  out << "  }\n"
      << "  host_memory = " << gib(static_cast<double>(d.hostMemoryBytes))
      << "\n"
      << "  host_cores = " << d.hostCores << "\n"
      << "  host_bandwidth = " << gbps(d.hostBandwidth) << "\n"
      << "}\n";
  return out.str();
}

std::string calibratedDeviceFile(const CalibratedDevice &d) {
  using rt::support::Json;
  Json device = {{"format", "plan-device"},
                 {"version", 1},
                 {"base", "cpu"},
                 {"memory", d.memoryBytes},
                 {"fp32_tflops", d.fp32Tflops},
                 {"bf16_tflops", d.bf16Tflops},
                 {"fp16_tflops", d.fp16Tflops},
                 {"hbm_bandwidth", d.hbmBandwidth},
                 {"pcie_bandwidth", d.pcieBandwidth}};
  if (d.nvlinkBandwidth)
    device["nvlink_bandwidth"] = *d.nvlinkBandwidth;
  if (d.linkLatency)
    device["link_latency"] = *d.linkLatency;
  device["host"] = {{"memory", d.hostMemoryBytes},
                    {"cores", d.hostCores},
                    {"bandwidth", d.hostBandwidth}};
  device["measured"] = {{"ranks_per_node", d.ranksPerNode},
                        {"threads_per_rank", d.threadsPerRank}};
  return device.dump(2) + "\n";
}

int calibrateRank(const RunOptions &options, const RankInfo &rank) {
  std::string prefix = messagePrefix(rank);
  auto timeout =
      std::chrono::milliseconds(std::llround(options.timeoutSeconds * 1000.0));
  try {
    useIntraOpThreads(options.threads, rank);
    const bool reports = rank.rank == 0;
    c10::intrusive_ptr<c10d::Store> store = rendezvous(rank, timeout);
    Group group(store, rank, timeout);

    HostMeasurements m;
    m.ranksPerNode = rank.localWorld;
    m.threadsPerRank = at::get_num_threads();
    m.cores = usableCores();
    m.memoryBytes = physicalMemory();
    auto say = [&](const std::string &line) {
      if (reports && !options.quiet)
        std::fprintf(stderr, "%s%s\n", prefix.c_str(), line.c_str());
    };
    say("calibrating this host: " + std::to_string(rank.world) + " rank" +
        (rank.world == 1 ? "" : "s") + " x " +
        std::to_string(m.threadsPerRank) + " thread" +
        (m.threadsPerRank == 1 ? "" : "s") + ", " + std::to_string(m.cores) +
        " cores");

    struct Gemm {
      const char *name;
      at::ScalarType dtype;
      double *out;
    } gemms[] = {{"fp32", at::kFloat, &m.fp32Flops},
                 {"bf16", at::kBFloat16, &m.bf16Flops},
                 {"fp16", at::kHalf, &m.fp16Flops}};
    for (const Gemm &gemm : gemms) {
      group.barrier();
      *gemm.out = group.mean(gemmFlops(gemm.dtype));
      say(std::string("  ") + gemm.name + " GEMM: " + number(*gemm.out / 1e9) +
          " GFLOP/s per rank");
    }
    group.barrier();
    double copy = copyBandwidth();
    m.copyBandwidth = group.mean(copy);
    // All ranks of a multi-node run are averaged; a node holds localWorld.
    m.nodeCopyBandwidth = m.copyBandwidth * m.ranksPerNode;
    say("  copy: " + number(m.copyBandwidth / 1e9) + " GB/s per rank, " +
        number(m.nodeCopyBandwidth / 1e9) + " GB/s the node");
    if (rank.world > 1) {
      group.barrier();
      m.linkLatency = group.mean(group.stepLatency());
      m.linkBandwidth = group.mean(group.bandwidth(*m.linkLatency));
      say("  Gloo: " + number(*m.linkLatency * 1e6) + " us per ring step, " +
          number(*m.linkBandwidth / 1e9) + " GB/s per rank");
    } else {
      say("  Gloo: not measured with one rank (--nproc 2 or more measures "
          "it); the cpu device's link figures stay");
    }
    group.barrier();
    // Every rank is done before rank 0 writes: a file that cannot be
    // written fails rank 0 alone, with its reason.
    finish(*store, rank, timeout);
    if (reports) {
      CalibratedDevice device = calibratedDevice(m);
      if (options.deviceFile.empty()) {
        std::fputs(calibratedCluster(device).c_str(), stdout);
        std::fflush(stdout);
      } else {
        rt::support::writeFileAtomic(options.deviceFile,
                                     calibratedDeviceFile(device));
        say("wrote " + options.deviceFile +
            ": a plan names it as cluster { gpu = \"PATH\" }, the path "
            "taken from the plan's directory");
      }
    }
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), e.what());
    return 1;
  }
}

} // namespace plan::run
