//===- SavedActivations.cpp - Autograd's saved tensors in a planned buffer ===//
//
// LibTorch has saved-tensor hooks in C++ (SavedVariableHooks), but installs
// default ones only from Python. SavedVariable asks the default autograd
// engine for them (Engine::get_default_saved_variable_hooks), so the runtime
// installs, once, an engine that differs from LibTorch's only there: it
// hands out hooks into the SaveInto scope open on the calling thread.
//
//===----------------------------------------------------------------------===//

#include "SavedActivations.h"

#include "Schedule.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <mutex>
#include <utility>
#include <vector>

namespace plan::rt {
namespace {

thread_local SaveInto *openScope = nullptr;

/// The hooks of one saved tensor: a view of its copy in the buffer, or the
/// tensor itself.
class BufferHooks final : public torch::autograd::SavedVariableHooks {
public:
  explicit BufferHooks(SaveInto &scope) : scope_(&scope) {}

  void call_pack_hook(const at::Tensor &tensor) override {
    int64_t offset = scope_->place(tensor);
    if (offset < 0) {
      kept_ = tensor;
    } else {
      data_ = scope_->base() + offset +
              tensor.storage_offset() * tensor.element_size();
      sizes_ = tensor.sizes().vec();
      strides_ = tensor.strides().vec();
      options_ = tensor.options();
    }
    scope_ = nullptr; // the scope may close before backward
  }

  at::Tensor call_unpack_hook() override {
    if (kept_.defined())
      return kept_;
    // A fresh TensorImpl: its own version counter, not the arena's.
    return at::from_blob(data_, sizes_, strides_, options_);
  }

private:
  SaveInto *scope_;
  at::Tensor kept_;
  char *data_ = nullptr;
  std::vector<int64_t> sizes_, strides_;
  at::TensorOptions options_;
};

class HookingEngine final : public torch::autograd::Engine {
public:
  ~HookingEngine() override { stop(); }
  std::unique_ptr<torch::autograd::SavedVariableHooks>
  get_default_saved_variable_hooks() override {
    if (openScope)
      return std::make_unique<BufferHooks>(*openScope);
    return nullptr;
  }
};

torch::autograd::Engine &hookingEngine() {
  static HookingEngine engine;
  return engine;
}

void installEngine() {
  static std::once_flag once;
  std::call_once(
      once, [] { torch::autograd::set_default_engine_stub(&hookingEngine); });
}

} // namespace

SaveInto::SaveInto(const at::Tensor &buffer, std::set<const void *> persistent)
    : device_(at::kCPU), persistent_(std::move(persistent)), outer_(openScope) {
  installEngine();
  if (buffer.defined()) {
    if (!buffer.is_contiguous())
      throw std::invalid_argument("the saves buffer must be contiguous");
    base_ = static_cast<char *>(buffer.data_ptr());
    capacity_ = buffer.numel() * static_cast<int64_t>(buffer.element_size());
    device_ = buffer.device();
  }
  openScope = this;
}

SaveInto::~SaveInto() { openScope = outer_; }

int64_t SaveInto::place(const at::Tensor &tensor) {
  const void *storage = tensor.storage().unsafeGetStorageImpl();
  if (persistent_.count(storage))
    return -1;
  auto key = std::make_pair(storage, tensor._version());
  auto it = placed_.find(key);
  if (it != placed_.end())
    return it->second;
  seen_.emplace_back(tensor.storage().getWeakStorageImpl());
  int64_t bytes = static_cast<int64_t>(tensor.storage().nbytes());
  // Aligned in memory, whatever the buffer's own alignment.
  int64_t misalign = static_cast<int64_t>(
      reinterpret_cast<uintptr_t>(base_ + used_) % kSavesAlignment);
  int64_t offset = used_ + (misalign ? kSavesAlignment - misalign : 0);
  // A tensor on another device (the CUDA attention kernels' RNG seed and
  // offset may live on the host) is not memory of this buffer's device:
  // kept, not counted.
  if (base_ && tensor.device() != device_) {
    placed_[key] = -1;
    return -1;
  }
  if (!base_ || offset + bytes > capacity_) {
    overflow_ += bytes;
    placed_[key] = -1;
    return -1;
  }
  if (bytes > 0) {
    // Its own profiler range: a trace tells these copies from the op's own.
    RECORD_USER_SCOPE("plan::saves_copy");
    at::TensorOptions bytesOn =
        at::TensorOptions().dtype(at::kByte).device(device_);
    at::from_blob(base_ + offset, {bytes}, bytesOn)
        .copy_(at::from_blob(const_cast<void *>(tensor.storage().data()),
                             {bytes}, bytesOn));
  }
  used_ = offset + bytes;
  placed_[key] = offset;
  return offset;
}

std::optional<int64_t> SaveInto::placedAt(const at::Tensor &tensor) const {
  const void *storage = tensor.storage().unsafeGetStorageImpl();
  if (persistent_.count(storage))
    return -1;
  auto it = placed_.find(std::make_pair(storage, tensor._version()));
  if (it == placed_.end())
    return std::nullopt;
  return it->second;
}

bool SaveInto::adopt(const at::Tensor &tensor) {
  int64_t offset = place(tensor);
  if (offset < 0)
    return false;
  tensor.storage().unsafeGetStorageImpl()->set_data_ptr_noswap(
      at::DataPtr(base_ + offset, device_));
  return true;
}

} // namespace plan::rt
