//===- SavedActivations.h - Saved tensors in a planned buffer -*- C++ -*-===//
//
// A unit's forward keeps, through LibTorch autograd, the tensors its backward
// needs. The schedule plans a buffer for them (the unit's `saves`, sized by
// the activation model of docs/sched.md). While a SaveInto scope is open on
// a thread, every tensor autograd saves on that thread is copied into that
// buffer (C++ saved-tensor hooks: the pack hook copies, the unpack hook
// returns a view of the copy), so the intermediate the op produced is freed
// as soon as the forward drops it, and the memory held between forward and
// backward is the planned buffer's.
//
// - A saved tensor is copied with its whole storage, once per storage and
//   version (the views autograd saves of one storage share the copy; a
//   storage changed in place after a save is copied again),
//   kSavesAlignment-aligned (Schedule.h).
// - adopt() moves a tensor that outlives the scope (a unit's output, which
//   the next unit reads and backward seeds) into the buffer too: the
//   storage is re-pointed at its copy and its own allocation freed.
// - Tensors whose storage is in `persistent` (the unit's parameters, cached
//   tables) are kept by reference: they outlive the graph anyway.
// - What does not fit is kept by reference and counted as overflow: memory
//   the plan did not foresee. A tensor on another device than the buffer's
//   is kept by reference and not counted (it is not that device's memory).
//
// The copies must stay valid until the graph's backward has run: the
// schedule frees the saves buffer after the unit's backward.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_MODELS_SAVEDACTIVATIONS_H
#define PLAN_RUNTIME_MODELS_SAVEDACTIVATIONS_H

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace plan::rt {

class SaveInto {
public:
  /// Opens the scope on this thread. `buffer` is a contiguous tensor (any
  /// dtype) whose bytes receive the copies; an undefined `buffer` keeps
  /// everything by reference (all of it overflow).
  SaveInto(const at::Tensor &buffer, std::set<const void *> persistent);
  ~SaveInto();
  SaveInto(const SaveInto &) = delete;
  SaveInto &operator=(const SaveInto &) = delete;

  /// Bytes of the buffer used so far (with alignment padding).
  int64_t usedBytes() const { return used_; }
  /// Bytes of saved storages kept outside the buffer (did not fit).
  int64_t overflowBytes() const { return overflow_; }

  /// Where a saved storage went: packs `tensor`'s storage (once per
  /// version) and returns the byte offset of its copy, or -1 when it is kept
  /// by reference.
  int64_t place(const at::Tensor &tensor);

  /// Places `tensor`'s storage and re-points the storage itself at the copy
  /// (every tensor sharing it then reads the buffer, and its allocation is
  /// freed). Returns false, leaving it as it is, when it is kept by
  /// reference (persistent, another device, or does not fit: counted).
  bool adopt(const at::Tensor &tensor);
  /// After the scope's ops: where `tensor`'s storage (as it is now) went,
  /// its offset in the buffer or -1 when kept by reference; none when
  /// nothing saved it.
  std::optional<int64_t> placedAt(const at::Tensor &tensor) const;
  char *base() const { return base_; }

private:
  char *base_ = nullptr;
  int64_t capacity_ = 0;
  int64_t used_ = 0;
  int64_t overflow_ = 0;
  at::Device device_;
  std::set<const void *> persistent_;
  // (StorageImpl, version) -> offset, or -1 when kept by reference.
  std::map<std::pair<const void *, uint32_t>, int64_t> placed_;
  // Weak references to the storages in `placed_`: a storage autograd no
  // longer holds frees its data, but the StorageImpl's address is not
  // reused for another storage while the scope knows it.
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> seen_;
  SaveInto *outer_;
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_MODELS_SAVEDACTIVATIONS_H
