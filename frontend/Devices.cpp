//===- Devices.cpp - The table of known accelerators ----------------------===//
//
// Figures are NVIDIA's published peaks. Compute is the dense tensor-core rate
// with FP32 accumulate for bf16 / fp16 (datasheets print the 2:4-sparsity rate
// first; dense is half of it) and the non-tensor rate for fp32. Memory sizes
// are the datasheet's "GB", which for HBM and GDDR parts is binary (80 GB is
// 80 GiB of DRAM; nvidia-smi shows slightly less after driver reservations).
// Datasheets print interconnect bandwidths as the sum of both directions; the
// table keeps one direction, what a single transfer can use.
//
//===----------------------------------------------------------------------===//

#include "frontend/Models.h"

#include "llvm/ADT/STLExtras.h"

using namespace plan;

namespace {

constexpr int64_t GiB = int64_t(1) << 30;
constexpr double GBps = 1e9;
constexpr double TBps = 1e12;

// PCIe x16, per direction: Gen4 ~32 GB/s, Gen5 ~64 GB/s (NVIDIA datasheets:
// "PCIe Gen4: 64GB/s", "PCIe Gen5: 128GB/s", both directions).
constexpr double pcieGen4 = 32 * GBps;
constexpr double pcieGen5 = 64 * GBps;

} // namespace

// A function-local table is built on first use, so static initializers
// elsewhere may look devices up.
llvm::ArrayRef<DeviceSpec> plan::deviceTable() {
  static const DeviceSpec devices[] = {
      // NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: 80 GB HBM3 at
      // 3.35 TB/s; FP32 67 TFLOPS; BF16 / FP16 tensor 1,979 TFLOPS with
      // sparsity; NVLink 900 GB/s; PCIe Gen5 128 GB/s.
      {.name = "h100_sxm",
       .memoryBytes = 80 * GiB,
       .bf16Tflops = 989.5,
       .fp16Tflops = 989.5,
       .fp32Tflops = 67.0,
       .hbmBandwidth = 3.35 * TBps,
       .nvlinkBandwidth = 450 * GBps,
       .pcieBandwidth = pcieGen5},
      // Same datasheet, H100 PCIe: 80 GB HBM2e at 2 TB/s; FP32 51 TFLOPS;
      // BF16 / FP16 tensor 1,513 TFLOPS with sparsity; PCIe Gen5 128 GB/s. Its
      // NVLink bridge (600 GB/s) joins only pairs of cards, so a collective
      // over
      // more than two of them runs at PCIe speed: the table says no NVLink, and
      // a bridged pair can set `nvlink_bandwidth = 300GB/s`.
      {.name = "h100_pcie",
       .memoryBytes = 80 * GiB,
       .bf16Tflops = 756.5,
       .fp16Tflops = 756.5,
       .fp32Tflops = 51.0,
       .hbmBandwidth = 2.0 * TBps,
       .nvlinkBandwidth = 0,
       .pcieBandwidth = pcieGen5},
      // NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: 141 GB HBM3e at
      // 4.8 TB/s; FP32 67 TFLOPS; BF16 / FP16 tensor 1,979 TFLOPS with
      // sparsity; NVLink 900 GB/s; PCIe Gen5 128 GB/s.
      {.name = "h200",
       .memoryBytes = 141 * GiB,
       .bf16Tflops = 989.5,
       .fp16Tflops = 989.5,
       .fp32Tflops = 67.0,
       .hbmBandwidth = 4.8 * TBps,
       .nvlinkBandwidth = 450 * GBps,
       .pcieBandwidth = pcieGen5},
      // NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM: 80 GB HBM2e at
      // 2,039 GB/s; FP32 19.5 TFLOPS; BF16 / FP16 tensor 312 TFLOPS (624 with
      // sparsity); NVLink 600 GB/s; PCIe Gen4 64 GB/s.
      {.name = "a100_80g",
       .memoryBytes = 80 * GiB,
       .bf16Tflops = 312.0,
       .fp16Tflops = 312.0,
       .fp32Tflops = 19.5,
       .hbmBandwidth = 2039 * GBps,
       .nvlinkBandwidth = 300 * GBps,
       .pcieBandwidth = pcieGen4},
      // Same datasheet, A100 40GB SXM: 40 GB HBM2 at 1,555 GB/s; otherwise as
      // the 80 GB part.
      {.name = "a100_40g",
       .memoryBytes = 40 * GiB,
       .bf16Tflops = 312.0,
       .fp16Tflops = 312.0,
       .fp32Tflops = 19.5,
       .hbmBandwidth = 1555 * GBps,
       .nvlinkBandwidth = 300 * GBps,
       .pcieBandwidth = pcieGen4},
      // The 64 GB HBM2e A100 SXM4 built for CINECA's Leonardo (no public
      // datasheet; Leonardo's documentation: "NVIDIA custom Ampere A100 GPU
      // 64 GB HBM2", four per node, NVLink 3.0 at 200 GB/s between each pair).
      // The GA100 compute is the A100 datasheet's; four of the 80 GB part's
      // five
      // HBM2e stacks give 4/5 of 2,039 GB/s. Each GPU's 12 NVLink 3 links are
      // split over its three peers (4 links, 100 GB/s per direction to each),
      // so
      // all of them together carry the A100's 300 GB/s per direction.
      {.name = "a100_64g",
       .memoryBytes = 64 * GiB,
       .bf16Tflops = 312.0,
       .fp16Tflops = 312.0,
       .fp32Tflops = 19.5,
       .hbmBandwidth = 1631 * GBps,
       .nvlinkBandwidth = 300 * GBps,
       .pcieBandwidth = pcieGen4},
      // NVIDIA Ada GPU architecture whitepaper, GeForce RTX 4090: 24 GB GDDR6X
      // at 1,008 GB/s; FP32 82.6 TFLOPS; FP16 / BF16 tensor with FP32
      // accumulate 165.2 TFLOPS dense (GeForce runs FP32 accumulate at half
      // the FP16-accumulate rate of 330.3); no NVLink; PCIe Gen4 x16.
      {.name = "rtx4090",
       .memoryBytes = 24 * GiB,
       .bf16Tflops = 165.2,
       .fp16Tflops = 165.2,
       .fp32Tflops = 82.6,
       .hbmBandwidth = 1008 * GBps,
       .nvlinkBandwidth = 0,
       .pcieBandwidth = pcieGen4},
      // NVIDIA RTX 6000 Ada Generation datasheet and the Ada whitepaper: 48 GB
      // GDDR6 at 960 GB/s; FP32 91.1 TFLOPS; FP16 / BF16 tensor with FP32
      // accumulate 364.2 TFLOPS dense (728.5 with sparsity; professional cards
      // run FP32 accumulate at full rate); no NVLink; PCIe Gen4 x16.
      {.name = "a6000_ada",
       .memoryBytes = 48 * GiB,
       .bf16Tflops = 364.2,
       .fp16Tflops = 364.2,
       .fp32Tflops = 91.1,
       .hbmBandwidth = 960 * GBps,
       .nvlinkBandwidth = 0,
       .pcieBandwidth = pcieGen4},
      // NVIDIA L40S datasheet: 48 GB GDDR6 at 864 GB/s; FP32 91.6 TFLOPS;
      // BF16 / FP16 tensor 362.05 TFLOPS (733 with sparsity); no NVLink; PCIe
      // Gen4 x16 64 GB/s.
      {.name = "l40s",
       .memoryBytes = 48 * GiB,
       .bf16Tflops = 362.05,
       .fp16Tflops = 362.05,
       .fp32Tflops = 91.6,
       .hbmBandwidth = 864 * GBps,
       .nvlinkBandwidth = 0,
       .pcieBandwidth = pcieGen4},
      // One CPU process of `plan-run --backend cpu`. The ranks of a node
      // share its cores (`host_cores`) and memory bandwidth
      // (`host_bandwidth`), so compute and memory figures are ONE CORE's; a
      // rank gets host_cores / gpus_per_node of them. Round figures of a
      // current x86 core, measured with LibTorch at one thread (`plan-run
      // --calibrate` measures the host at hand):
      //  - memory: 16 GiB per rank;
      //  - compute: 0.1 TFLOP/s, one core at ~3 GHz with two 256-bit FMA
      //    units (96 GFLOP/s of fp32); a 1024^3 fp32 GEMM reached 110 GFLOP/s
      //    on an AVX-512 core. bf16 and fp16 are taken as no faster: without
      //    AMX the kernels convert to fp32;
      //  - "HBM": 10 GB/s, what one core streams (a copy reached 16 GB/s
      //    read + write);
      //  - peers ("NVLink"): Gloo over loopback TCP, 2 GB/s and 100 us per
      //    ring step (measured between 2 ranks: 1-1.4 GB/s and 250-350 us on
      //    a loaded 2-core host, far less latency with idle cores);
      //  - "PCIe": a host copy on the CPU backend is a memcpy, 10 GB/s.
      {.name = "cpu",
       .memoryBytes = 16 * GiB,
       .bf16Tflops = 0.1,
       .fp16Tflops = 0.1,
       .fp32Tflops = 0.1,
       .hbmBandwidth = 10 * GBps,
       .nvlinkBandwidth = 2 * GBps,
       .pcieBandwidth = 10 * GBps,
       .linkLatency = 100e-6},
  };
  return devices;
}

HostSpec plan::typicalHost(llvm::StringRef deviceName) {
  // Peak DRAM bandwidth: channels x transfers/s x 8 bytes.
  constexpr double ddr4_3200 = 25.6 * GBps, ddr5_4800 = 38.4 * GBps,
                   ddr5_5200 = 41.6 * GBps;
  // DGX H100 / H200: two Xeon Platinum 8480C (2 x 56 cores), 16 channels of
  // DDR5-4800; an H100 PCIe server is taken as the same two sockets.
  if (deviceName == "h100_sxm" || deviceName == "h200" ||
      deviceName == "h100_pcie")
    return {16 * ddr5_4800, 112};
  // DGX A100: two EPYC 7742 (2 x 64 cores), 16 channels of DDR4-3200.
  if (deviceName == "a100_80g" || deviceName == "a100_40g")
    return {16 * ddr4_3200, 128};
  // Four A100 64 GB per node (Leonardo's booster): one Xeon 8358, 32 cores,
  // 8 channels of DDR4-3200.
  if (deviceName == "a100_64g")
    return {8 * ddr4_3200, 32};
  // A desktop: 16 cores, two channels of DDR5-5200.
  if (deviceName == "rtx4090")
    return {2 * ddr5_5200, 16};
  // A workstation: one 32-core socket, 8 channels of DDR5-4800.
  if (deviceName == "a6000_ada")
    return {8 * ddr5_4800, 32};
  // The CPU backend: a laptop or CI machine, 4 cores and two channels of
  // DDR4-3200.
  if (deviceName == "cpu")
    return {2 * ddr4_3200, 4};
  // An L40S server, and any custom device: two sockets of 32 cores, 16
  // channels of DDR4-3200.
  return {16 * ddr4_3200, 64};
}

const DeviceSpec *plan::lookupDevice(llvm::StringRef name) {
  llvm::ArrayRef<DeviceSpec> devices = deviceTable();
  const auto *it = llvm::find_if(
      devices, [&](const DeviceSpec &device) { return device.name == name; });
  return it == devices.end() ? nullptr : it;
}
