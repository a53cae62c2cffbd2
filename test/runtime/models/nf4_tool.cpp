//===- nf4_tool.cpp - NF4 of raw fp32 values, for nf4_bitsandbytes.py -----===//
//
//   plan-nf4-tool IN.f32 OUT_DIR [bf16]
//
// Reads little-endian fp32 values (as bf16 first with `bf16`), quantizes
// them with quantizeNF4 and writes what it stores and what it gives back:
// packed.u8, absmax_codes.u8, absmax_scales.f32, offset.f32, absmax.f32
// (the dequantized absmax), out.f32 and out.bf16 (dequantized).
//
//===----------------------------------------------------------------------===//

#include "NF4.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

void write(const std::string &path, const at::Tensor &t) {
  at::Tensor c = t.contiguous();
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char *>(c.data_ptr()),
            static_cast<std::streamsize>(c.numel() * c.element_size()));
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && std::string(argv[3]) != "bf16")) {
    std::fprintf(stderr, "usage: plan-nf4-tool IN.f32 OUT_DIR [bf16]\n");
    return 1;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    std::vector<char> bytes;
    if (in)
      bytes.assign(std::istreambuf_iterator<char>(in),
                   std::istreambuf_iterator<char>());
    if (bytes.empty() || bytes.size() % 4)
      throw std::runtime_error(std::string("cannot read fp32 values from ") +
                               argv[1]);
    at::Tensor x =
        at::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size() / 4)},
                      at::kFloat)
            .clone();
    if (argc == 4)
      x = x.to(at::kBFloat16);
    plan::rt::NF4Tensor q = plan::rt::quantizeNF4(x);
    std::string dir = argv[2];
    write(dir + "/packed.u8", q.packed);
    write(dir + "/absmax_codes.u8", q.absmaxCodes);
    write(dir + "/absmax_scales.f32", q.absmaxScales);
    write(dir + "/offset.f32", at::scalar_tensor(q.absmaxOffset, at::kFloat));
    write(dir + "/absmax.f32", plan::rt::dequantizeNF4Absmax(q));
    write(dir + "/out.f32", plan::rt::dequantizeNF4(q, at::kFloat));
    write(dir + "/out.bf16", plan::rt::dequantizeNF4(q, at::kBFloat16));
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "plan-nf4-tool: %s\n", e.what());
    return 1;
  }
}
