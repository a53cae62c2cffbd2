//===- ShareSlotBuffers.cpp - Boundary slots in one allocation ------------===//
//
// sched-share-slot-buffers: on a pipeline stage's sched.tasks, the one-slot
// buffers that hand a micro-batch's data from one task to a later one (a
// prefetched gather's pool and its staging pool, the slot of a reduction
// the next task completes) are each allocated for the whole loop, where the
// flat step holds each of their buffers only across one task boundary. The
// pass plays the table, each run's ops that can touch such a slot at their
// places in the step (sched::findSlotSpans), and takes, for each instance of
// each such buffer (the buffer and the micro-batch a run's sched.slot
// names), the span of the step from its first use to its last, or to the
// wait of an asynchronous op that uses it. Buffers of one element type,
// memory space and role none of whose spans meet become views at offset 0
// of one allocation of the largest size, first fit by decreasing size.
// Before that, the buffers whose micro-batches a run names and a later run
// names again (each chunk's saves and kept input, in as many slots as that
// chunk ever has in flight) go into one pool per kind whose slot each run
// picks (poolChunkSlots: the lowest slot free at each (chunk, micro-batch)'s
// start, so as many slots as the stage holds at once), where that takes
// fewer bytes. sched-verify-schedule proves the result: plan::RunSlots knows
// a slot by its allocation and first element (a picked slot by its pick's),
// so two of them in use at once are an error there. docs/sched.md
// ("sched-share-slot-buffers").
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/sched/SchedOpTable.h"
#include "dialects/sched/SlotSpans.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <set>
#include <tuple>

namespace plan {
#define GEN_PASS_DEF_SCHEDSHARESLOTBUFFERS
#include "passes/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace sched;

namespace {

/// A one-slot buffer of the program that only the bodies' sched.slots use.
struct Candidate {
  AllocOp alloc;
  FreeOp free;
  /// The spans [first, last] of the step (op positions in the order the
  /// step runs them) in which its instances are in use, in order of first.
  SmallVector<std::pair<int64_t, int64_t>> spans;
  /// The elements of one of its slots (set for a pool candidate).
  int64_t slotElements = 0;
};

/// The program's one-slot buffers of `tasks`: allocated in the program,
/// freed once there, and otherwise named only by one-slot sched.slots of
/// the whole buffer.
SmallVector<Candidate> collectCandidates(ProgramOp program, TasksOp tasks) {
  SmallVector<Candidate> candidates;
  for (auto alloc : program.getBody().front().getOps<AllocOp>()) {
    if (alloc.getPersistent())
      continue;
    Candidate candidate{alloc, nullptr, {}};
    bool slotted = false, other = false;
    for (Operation *user : alloc->getUsers()) {
      if (auto free = dyn_cast<FreeOp>(user);
          free && free->getBlock() == alloc->getBlock() && !candidate.free) {
        candidate.free = free;
      } else if (auto slot = dyn_cast<SlotOp>(user);
                 slot && tasks->isAncestor(slot) && !slot.isPicked() &&
                 slot.getSlots() == 1 && slot.getType() == alloc.getType()) {
        slotted = true;
      } else {
        other = true;
      }
    }
    if (slotted && !other && candidate.free)
      candidates.push_back(std::move(candidate));
  }
  return candidates;
}

/// An instance: a candidate's index and the micro-batch its slot holds.
using Instance = sched::SlotInstance;
using InstanceSpans = sched::SlotInstanceSpans;

/// Plays `tasks`' table and gives each instance of a candidate its span.
FailureOr<InstanceSpans> findSpans(TasksOp tasks,
                                   ArrayRef<Candidate> candidates) {
  llvm::DenseMap<Operation *, unsigned> indexOf;
  for (auto [index, candidate] : llvm::enumerate(candidates))
    indexOf[candidate.alloc] = static_cast<unsigned>(index);
  return sched::findSlotSpans(tasks, indexOf);
}

/// Whether some span of `a` meets some span of `b` (both in order).
bool meet(ArrayRef<std::pair<int64_t, int64_t>> a,
          ArrayRef<std::pair<int64_t, int64_t>> b) {
  // Spans of one buffer may overlap each other (instances of successive
  // micro-batches); the latest end so far stands for those before.
  size_t i = 0, j = 0;
  int64_t endA = -1, endB = -1;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first <= b[j].first)) {
      if (a[i].first <= endB)
        return true;
      endA = std::max(endA, a[i].second);
      ++i;
    } else {
      if (b[j].first <= endA)
        return true;
      endB = std::max(endB, b[j].second);
      ++j;
    }
  }
  return false;
}

int64_t numel(AllocOp alloc) { return alloc.getType().getNumElements(); }

/// What buffers must share to lie in one allocation: element type, memory
/// space and role.
auto kindOf(AllocOp alloc) {
  MemRefType type = alloc.getType();
  return std::make_tuple(type.getElementType().getAsOpaquePointer(),
                         type.getMemorySpace().getAsOpaquePointer(),
                         static_cast<uint32_t>(alloc.getRole()));
}

/// Puts each pool of two or more candidates in one allocation, in place of
/// its first member's, freed where its first member was.
void sharePools(ArrayRef<SmallVector<Candidate *>> pools) {
  int64_t count = 0;
  for (ArrayRef<Candidate *> pool : pools) {
    if (pool.size() < 2)
      continue;
    Candidate *first = *llvm::min_element(pool, [](Candidate *a, Candidate *b) {
      return a->alloc->isBeforeInBlock(b->alloc);
    });
    Candidate *firstFree =
        *llvm::min_element(pool, [](Candidate *a, Candidate *b) {
          return a->free->isBeforeInBlock(b->free);
        });
    AllocOp largest = pool.front()->alloc; // the pools are by size
    MemRefType type = largest.getType();
    OpBuilder builder(first->alloc);
    std::string name = "slots." + stringifyBufferRole(largest.getRole()).str() +
                       "." + std::to_string(count++);
    auto shared = AllocOp::create(builder, largest.getLoc(), type, name,
                                  largest.getRole(), /*persistent=*/false,
                                  /*offset=*/IntegerAttr());
    builder.setInsertionPoint(firstFree->free);
    FreeOp::create(builder, firstFree->free.getLoc(), shared);
    for (Candidate *member : pool) {
      builder.setInsertionPoint(member->alloc);
      Value view = ViewOp::create(builder, member->alloc.getLoc(),
                                  member->alloc.getType(), shared,
                                  builder.getI64IntegerAttr(0));
      member->free->erase();
      member->alloc.getResult().replaceAllUsesWith(view);
      member->alloc->erase();
    }
  }
}

//===----------------------------------------------------------------------===//
// Picked slots: the chunks' slots of a stage in one pool
//===----------------------------------------------------------------------===//

/// The program's buffers of `tasks` whose micro-batches a run names as its
/// own and a later run names again (a chunk's saved activations and its
/// kept input, from its forward to its backward): saved activations or
/// exchanged tensors, allocated in the program, freed once there, and
/// otherwise named only by the bodies' sched.slots of shift 0 that cover
/// it.
SmallVector<Candidate> collectPoolCandidates(ProgramOp program, TasksOp tasks) {
  SmallVector<Candidate> candidates;
  for (auto alloc : program.getBody().front().getOps<AllocOp>()) {
    if (alloc.getPersistent() || (alloc.getRole() != BufferRole::Activations &&
                                  alloc.getRole() != BufferRole::Exchange))
      continue;
    Candidate candidate{alloc, nullptr, {}};
    bool other = false;
    int64_t slotElements = 0;
    for (Operation *user : alloc->getUsers()) {
      auto slot = dyn_cast<SlotOp>(user);
      if (auto free = dyn_cast<FreeOp>(user);
          free && free->getBlock() == alloc->getBlock() && !candidate.free) {
        candidate.free = free;
      } else if (slot && tasks->isAncestor(slot) && !slot.isPicked() &&
                 slot.getShift() == 0 &&
                 static_cast<int64_t>(slot.getSlots()) *
                         slot.getType().getNumElements() ==
                     alloc.getType().getNumElements() &&
                 (!slotElements ||
                  slotElements == slot.getType().getNumElements())) {
        slotElements = slot.getType().getNumElements();
      } else {
        other = true;
      }
    }
    candidate.slotElements = slotElements;
    if (slotElements > 0 && !other && candidate.free)
      candidates.push_back(std::move(candidate));
  }
  return candidates;
}

/// What the pool of one kind (element type, memory space, role) holds: its
/// members' offsets in a slot and the slot's elements.
struct PoolKind {
  AllocOp first; // a member, for the kind
  SmallVector<unsigned> members;
  int64_t stride = 0;
};

int64_t elementBytes(AllocOp alloc) { return getElementBytes(alloc.getType()); }

/// The bundles of one signature (a set of candidates that the runs of one
/// micro-batch name together: a chunk's saves and input) and the span of
/// each.
struct Signature {
  SmallVector<unsigned> members; // candidate indices, in order
  /// Per micro-batch of the signature: its span in the step.
  std::map<int64_t, std::pair<int64_t, int64_t>> bundles;
};

/// The slot each bundle of `signatures` takes (signature, micro-batch) with
/// the lowest free slot at its start, freed after its end (the greedy
/// colouring of intervals, as few slots as are in use at once); the number
/// of slots in `count`.
std::map<std::pair<unsigned, int64_t>, int64_t>
pickSlots(ArrayRef<Signature> signatures, ArrayRef<unsigned> included,
          int64_t &count) {
  struct Bundle {
    int64_t first, last;
    unsigned signature;
    int64_t mb;
  };
  SmallVector<Bundle> bundles;
  for (unsigned s : included)
    for (auto &[mb, span] : signatures[s].bundles)
      bundles.push_back({span.first, span.second, s, mb});
  llvm::sort(bundles, [](const Bundle &a, const Bundle &b) {
    return std::tie(a.first, a.signature, a.mb) <
           std::tie(b.first, b.signature, b.mb);
  });
  std::map<std::pair<unsigned, int64_t>, int64_t> picks;
  // The bundles holding a slot, by end, and the free slots.
  std::multimap<int64_t, int64_t> held;
  std::set<int64_t> free;
  count = 0;
  for (const Bundle &bundle : bundles) {
    while (!held.empty() && held.begin()->first < bundle.first) {
      free.insert(held.begin()->second);
      held.erase(held.begin());
    }
    int64_t slot;
    if (free.empty()) {
      slot = count++;
    } else {
      slot = *free.begin();
      free.erase(free.begin());
    }
    held.insert({bundle.last, slot});
    picks[{bundle.signature, bundle.mb}] = slot;
  }
  return picks;
}

/// The signatures `included` as picked slots: each bundle's slot, each
/// kind's pool and its members' offsets in a slot, and the bytes the pools
/// take (`after`) against those their candidates take now (`before`).
struct PoolPlan {
  int64_t slots = 0, before = 0, after = 0;
  std::map<std::pair<unsigned, int64_t>, int64_t> picks;
  SmallVector<PoolKind> kinds;
  DenseMap<unsigned, int64_t> offsets;
};

PoolPlan planPool(ArrayRef<Candidate> candidates,
                  ArrayRef<Signature> signatures, ArrayRef<unsigned> included) {
  PoolPlan plan;
  plan.picks = pickSlots(signatures, included, plan.slots);
  for (unsigned s : included) {
    // Per kind, where the signature's next member goes in a slot.
    SmallVector<int64_t> next(plan.kinds.size(), 0);
    for (unsigned index : signatures[s].members) {
      AllocOp alloc = candidates[index].alloc;
      plan.before += numel(alloc) * elementBytes(alloc);
      auto kind = llvm::find_if(plan.kinds, [&](const PoolKind &k) {
        return kindOf(k.first) == kindOf(alloc);
      });
      if (kind == plan.kinds.end()) {
        plan.kinds.push_back({alloc, {}, 0});
        next.push_back(0);
        kind = std::prev(plan.kinds.end());
      }
      auto k = static_cast<size_t>(kind - plan.kinds.begin());
      // Each member on the arena's alignment, as its own allocation was.
      int64_t align = std::max<int64_t>(1, 256 / elementBytes(alloc));
      plan.offsets[index] = next[k];
      next[k] = llvm::alignTo(next[k] + candidates[index].slotElements, align);
      kind->members.push_back(index);
      kind->stride = std::max(kind->stride, next[k]);
    }
  }
  for (const PoolKind &kind : plan.kinds)
    plan.after += plan.slots * kind.stride * elementBytes(kind.first);
  return plan;
}

/// Under interleaving, each chunk's saves and kept input lie in slots of
/// its own buffers, as many as that chunk ever has micro-batches in flight,
/// though the stage's chunks do not reach their most at once. Puts them in
/// one pool per kind whose slots the table picks per run, when that takes
/// fewer bytes: the greedy colouring of their micro-batches' spans, the
/// slots the stage holds at once.
LogicalResult poolChunkSlots(ProgramOp program, TasksOp tasks, bool remark) {
  if (tasks.getPicks())
    return success(); // pooled already
  SmallVector<Candidate> candidates = collectPoolCandidates(program, tasks);
  if (candidates.empty())
    return success();
  FailureOr<InstanceSpans> spans = findSpans(tasks, candidates);
  if (failed(spans))
    return failure();
  DenseMap<Operation *, unsigned> indexOf;
  for (auto [index, candidate] : llvm::enumerate(candidates))
    indexOf[candidate.alloc] = static_cast<unsigned>(index);

  // Per run, the candidates its body names; per instance, the runs that
  // name it.
  SmallVector<TaskOp> bodies = tasks.getTasks();
  SmallVector<SmallVector<unsigned>> namedBy;
  for (TaskOp task : bodies) {
    SmallVector<unsigned> &named = namedBy.emplace_back();
    for (auto slot : task.getBody().front().getOps<SlotOp>())
      if (auto it = indexOf.find(slot.getSource().getDefiningOp());
          it != indexOf.end() && !llvm::is_contained(named, it->second))
        named.push_back(it->second);
    llvm::sort(named);
  }
  ArrayRef<int64_t> order = tasks.getOrder();
  auto runs = static_cast<int64_t>(order.size() / 2);
  std::map<Instance, int64_t> runsNaming;
  for (int64_t run = 0; run < runs; ++run)
    for (unsigned index : namedBy[static_cast<size_t>(order[2 * run])])
      ++runsNaming[{index, order[2 * run + 1]}];

  // What is pooled: a candidate each of whose micro-batches two runs name,
  // in one signature (the runs of a micro-batch that name it name the same
  // others); until what is left is so.
  llvm::BitVector active(candidates.size(), true);
  for (auto &[instance, count] : runsNaming)
    if (count < 2)
      active.reset(instance.first);
  SmallVector<Signature> signatures;
  for (bool changed = true; changed;) {
    changed = false;
    signatures.clear();
    // Per instance, what the runs of its micro-batch name with it.
    std::map<Instance, SmallVector<unsigned>> together;
    for (int64_t run = 0; run < runs; ++run) {
      SmallVector<unsigned> named;
      for (unsigned index : namedBy[static_cast<size_t>(order[2 * run])])
        if (active.test(index))
          named.push_back(index);
      for (unsigned index : named) {
        SmallVector<unsigned> &with = together[{index, order[2 * run + 1]}];
        for (unsigned other : named)
          if (!llvm::is_contained(with, other))
            with.push_back(other);
      }
    }
    // One signature a candidate: the same set for each of its
    // micro-batches, which each of its members has too.
    std::map<unsigned, SmallVector<unsigned>> signatureOf;
    for (auto &[instance, with] : together) {
      llvm::sort(with);
      auto [it, added] = signatureOf.try_emplace(instance.first, with);
      if (!added && it->second != with && active.test(instance.first)) {
        active.reset(instance.first);
        changed = true;
      }
    }
    for (auto &[index, with] : signatureOf)
      for (unsigned other : with)
        if (signatureOf[other] != with && active.test(index)) {
          active.reset(index);
          changed = true;
        }
    if (changed)
      continue;
    std::map<SmallVector<unsigned>, unsigned> indexOfSignature;
    for (auto &[instance, with] : together) {
      // A member's signature must list the same members as it (a member of
      // two sets was dropped above, and a set holds each of its members').
      auto [it, added] = indexOfSignature.try_emplace(
          with, static_cast<unsigned>(signatures.size()));
      if (added)
        signatures.push_back({with, {}});
      Signature &signature = signatures[it->second];
      auto [bundle, first] =
          signature.bundles.try_emplace(instance.second, (*spans)[instance]);
      if (!first) {
        bundle->second.first =
            std::min(bundle->second.first, (*spans)[instance].first);
        bundle->second.second =
            std::max(bundle->second.second, (*spans)[instance].second);
      }
    }
    // Each candidate has one set, which its members share: the sets
    // partition what is active.
  }
  if (signatures.empty())
    return success();

  // The signatures pooled: all, less those whose leaving takes the most
  // bytes off, while any does (a chunk of other size, the head's).
  auto saved = [](const PoolPlan &plan) { return plan.before - plan.after; };
  // What the groups of `plan` take picked, and in their own slots.
  auto describe = [&](InFlightDiagnostic &diag, const PoolPlan &plan,
                      size_t groups) {
    size_t buffers = 0;
    for (const PoolKind &kind : plan.kinds)
      buffers += kind.members.size();
    diag << buffers << " slot buffers of " << groups << " groups in "
         << plan.slots << " picked slots: " << plan.after << " bytes against "
         << plan.before << " in their own slots";
  };
  SmallVector<unsigned> included =
      llvm::to_vector(llvm::seq<unsigned>(0, signatures.size()));
  PoolPlan all = planPool(candidates, signatures, included);
  PoolPlan plan = all;
  while (included.size() > 1) {
    std::optional<std::pair<size_t, PoolPlan>> drop;
    for (size_t i = 0; i < included.size(); ++i) {
      SmallVector<unsigned> without(included);
      without.erase(without.begin() + static_cast<ptrdiff_t>(i));
      PoolPlan fewer = planPool(candidates, signatures, without);
      if (saved(fewer) > saved(drop ? drop->second : plan))
        drop.emplace(i, std::move(fewer));
    }
    if (!drop)
      break;
    included.erase(included.begin() + static_cast<ptrdiff_t>(drop->first));
    plan = std::move(drop->second);
  }
  if (saved(plan) <= 0) {
    if (remark) {
      InFlightDiagnostic diag = tasks.emitRemark("no picked slots: ");
      describe(diag, all, signatures.size());
    }
    return success();
  }
  if (remark) {
    InFlightDiagnostic diag = tasks.emitRemark("picked slots: ");
    describe(diag, plan, included.size());
    if (included.size() < signatures.size())
      diag << " (" << signatures.size() - included.size()
           << " groups keep their own, which would take more)";
  }
  // Each pooled candidate's group: its signature's place among those
  // included.
  DenseMap<unsigned, unsigned> groupOf;
  for (auto [group, s] : llvm::enumerate(included))
    for (unsigned index : signatures[s].members)
      groupOf[index] = static_cast<unsigned>(group);

  // Each kind's pool where its first member was allocated, freed where its
  // last was; its members' slots the picked slots of it.
  for (auto [k, kind] : llvm::enumerate(plan.kinds)) {
    auto members = llvm::map_to_vector(
        kind.members, [&](unsigned index) { return &candidates[index]; });
    Candidate *first = *llvm::min_element(members, [](auto *a, auto *b) {
      return a->alloc->isBeforeInBlock(b->alloc);
    });
    Candidate *last = *llvm::max_element(members, [](auto *a, auto *b) {
      return a->free->isBeforeInBlock(b->free);
    });
    MemRefType type = kind.first.getType();
    OpBuilder builder(first->alloc);
    auto pool = AllocOp::create(
        builder, first->alloc.getLoc(),
        getBufferType(builder.getContext(), plan.slots * kind.stride,
                      type.getElementType(), getMemorySpace(type)),
        "slots." + stringifyBufferRole(kind.first.getRole()).str() +
            ".picked." + std::to_string(k),
        kind.first.getRole(), /*persistent=*/false, /*offset=*/IntegerAttr());
    builder.setInsertionPointAfter(last->free);
    FreeOp::create(builder, last->free.getLoc(), pool);
    for (unsigned index : kind.members) {
      Candidate &member = candidates[index];
      for (Operation *user :
           llvm::make_early_inc_range(member.alloc->getUsers())) {
        auto slot = dyn_cast<SlotOp>(user);
        if (!slot)
          continue;
        builder.setInsertionPoint(slot);
        Value moved = SlotOp::create(
            builder, slot.getLoc(), slot.getType(), pool,
            builder.getI64IntegerAttr(0), builder.getI64IntegerAttr(plan.slots),
            builder.getI64IntegerAttr(groupOf.lookup(index)),
            builder.getI64IntegerAttr(kind.stride),
            builder.getI64IntegerAttr(plan.offsets.lookup(index)));
        slot.getResult().replaceAllUsesWith(moved);
        slot->erase();
      }
      member.free->erase();
      member.alloc->erase();
    }
  }
  // Each run's pick: its micro-batch's slot of the signature it names.
  SmallVector<int64_t> picks(static_cast<size_t>(runs), -1);
  for (int64_t run = 0; run < runs; ++run)
    for (unsigned index : namedBy[static_cast<size_t>(order[2 * run])])
      if (auto it = groupOf.find(index); it != groupOf.end()) {
        picks[static_cast<size_t>(run)] =
            plan.picks.at({included[it->second], order[2 * run + 1]});
        break;
      }
  tasks.setPicks(ArrayRef<int64_t>(picks));
  return success();
}

struct SchedShareSlotBuffersPass
    : plan::impl::SchedShareSlotBuffersBase<SchedShareSlotBuffersPass> {
  using SchedShareSlotBuffersBase::SchedShareSlotBuffersBase;
  void runOnOperation() override {
    ProgramOp program = getOperation();
    auto loops = llvm::to_vector(program.getBody().getOps<TasksOp>());
    if (loops.size() != 1)
      return; // a flat step's buffers share the arena already
    if (failed(poolChunkSlots(program, loops.front(), remarkPools)))
      return signalPassFailure();
    SmallVector<Candidate> candidates =
        collectCandidates(program, loops.front());
    if (candidates.size() < 2)
      return;
    FailureOr<InstanceSpans> spans = findSpans(loops.front(), candidates);
    if (failed(spans))
      return signalPassFailure();
    for (auto &[instance, span] : *spans)
      candidates[instance.first].spans.push_back(span);
    for (Candidate &candidate : candidates)
      llvm::sort(candidate.spans);
    // By decreasing size (then program order), each into the first pool of
    // its kind none of whose members it meets.
    SmallVector<Candidate *> order =
        llvm::map_to_vector(candidates, [](Candidate &c) { return &c; });
    llvm::stable_sort(order, [](Candidate *a, Candidate *b) {
      return numel(a->alloc) > numel(b->alloc);
    });
    SmallVector<SmallVector<Candidate *>> pools;
    for (Candidate *candidate : order) {
      auto fits = [&](ArrayRef<Candidate *> pool) {
        return kindOf(pool.front()->alloc) == kindOf(candidate->alloc) &&
               llvm::none_of(pool, [&](Candidate *member) {
                 return meet(member->spans, candidate->spans);
               });
      };
      auto pool = llvm::find_if(pools, fits);
      if (pool == pools.end())
        pools.push_back({candidate});
      else
        pool->push_back(candidate);
    }
    sharePools(pools);
  }
};

} // namespace
