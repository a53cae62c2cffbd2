//===- Calibrate.h - plan-run --calibrate: measure this host ----*- C++ -*-===//
//-*-===//
//
// What `gpu = cpu` means on the machine at hand (docs/launching.md,
// "Calibrating the CPU device"): every rank measures, at the same time as
// the others, what the time model's figures stand for (a large GEMM per
// precision, a large copy, Gloo's latency and bandwidth between the ranks),
// and rank 0 prints a `cluster { ... }` block whose figures make the time
// model predict what was measured.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUN_CALIBRATE_H
#define PLAN_RUN_CALIBRATE_H

#include "Launch.h"
#include "Options.h"

#include <cstdint>
#include <optional>
#include <string>

namespace plan::run {

/// What was measured, per rank unless said otherwise (all ranks measured
/// together, so they share the host as a run's ranks do).
struct HostMeasurements {
  int ranksPerNode = 1;
  int threadsPerRank = 1;
  int cores = 1;          // this process's CPUs (its affinity)
  double memoryBytes = 0; // the host's physical memory
  double fp32Flops = 0;   // FLOP/s of a large GEMM
  double bf16Flops = 0;
  double fp16Flops = 0;
  double copyBandwidth = 0;     // bytes/s read + written by a large copy
  double nodeCopyBandwidth = 0; // the same, all ranks of the node together
  /// Gloo between the ranks (none with one rank): seconds per ring step and
  /// bytes/s a rank sends.
  std::optional<double> linkLatency;
  std::optional<double> linkBandwidth;
};

/// The `cpu` device whose figures make the time model reproduce what was
/// measured: the GEMM rates as the peak of one of the rank's cores (forward
/// and backward reach 50% of a peak, as of any device), copy rates over the
/// 80% a transfer reaches (a host copy moves each byte once, the memory
/// model counts reads and writes), Gloo's measured latency. Without a link
/// measurement (one rank) the `cpu` table's link figures stay.
struct CalibratedDevice {
  int ranksPerNode = 1, threadsPerRank = 1;
  int64_t memoryBytes = 0; // a rank's share, whole GiB
  double fp32Tflops = 0, bf16Tflops = 0, fp16Tflops = 0; // one core
  double hbmBandwidth = 0, pcieBandwidth = 0;            // bytes/s
  std::optional<double> nvlinkBandwidth;                 // bytes/s
  std::optional<double> linkLatency;                     // seconds
  int64_t hostMemoryBytes = 0;                           // whole GiB
  int hostCores = 1;
  double hostBandwidth = 0; // bytes/s
};
CalibratedDevice calibratedDevice(const HostMeasurements &m);

/// The device as the `cluster { ... }` block of a plan (docs/language.md).
std::string calibratedCluster(const CalibratedDevice &device);
/// The device as a device file, `cluster { gpu = "FILE" }` (docs/language.md,
/// "Device files"; frontend/DeviceFile.h reads it).
std::string calibratedDeviceFile(const CalibratedDevice &device);

/// Runs this rank's part of `plan-run --calibrate` and returns the exit
/// code; rank 0 prints the measurements (stderr) and the block (stdout).
int calibrateRank(const RunOptions &options, const RankInfo &rank);

} // namespace plan::run

#endif // PLAN_RUN_CALIBRATE_H
