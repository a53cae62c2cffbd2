// Megatron's tensor-parallel pieces (runtime/models/TensorParallel.h) on 2
// Gloo ranks against the undivided computation: each rank holds its slice of
// the same random weights in the plan's layout (frontend/Models.cpp's
// `split`), and the outputs, the loss and every gradient equal the full
// model's (a divided weight's gradient is the slice of the full one).

#include "TensorParallel.h"
#include "TensorParallelParts.h"

#include "TestSupport.h"

#include <gtest/gtest.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cmath>
#include <vector>

using namespace plan::rt;
using plan::rt::test::forEachRank;
namespace tp = plan::rt::tp;

// Megatron's f and g and their sequence-parallel forms as autograd
// functions on a tensor group: how Megatron joins the column- and
// row-parallel regions inside one graph. plan-run runs the same
// collectives as sched ops between a unit's parts instead; these build the
// undivided computation's reference blocks here.
namespace {

/// The tensor group the collectives run on; the Comm that owns the backend
/// outlives every autograd graph built on it.
using Group = c10::intrusive_ptr<c10d::Backend>;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// `t` summed over the group, in place.
void allReduce(at::Tensor &t, const Group &group) {
  std::vector<at::Tensor> tensors{t};
  group->allreduce(tensors)->wait();
}

/// The ranks' `x` concatenated along `dim` in rank order.
at::Tensor allGather(const at::Tensor &x, int64_t dim, const Group &group) {
  at::Tensor in = x.movedim(dim, 0).contiguous();
  std::vector<int64_t> shape = in.sizes().vec();
  shape[0] *= group->getSize();
  at::Tensor out = at::empty(shape, in.options());
  group->_allgather_base(out, in)->wait();
  return out.movedim(0, dim).contiguous();
}

/// The ranks' `x` summed, and this rank's slice of it along `dim`.
at::Tensor reduceScatter(const at::Tensor &x, int64_t dim, const Group &group) {
  at::Tensor in = x.movedim(dim, 0).contiguous();
  std::vector<int64_t> shape = in.sizes().vec();
  shape[0] /= group->getSize();
  at::Tensor out = at::empty(shape, in.options());
  group->_reduce_scatter_base(out, in)->wait();
  return out.movedim(0, dim).contiguous();
}

// The group rides in the autograd context as a capsule (c10d::Backend is a
// CustomClassHolder), so backward runs its collective on the same group.
c10::IValue capsule(const Group &group) {
  return c10::IValue::make_capsule(
      c10::static_intrusive_pointer_cast<torch::CustomClassHolder>(group));
}
Group groupOf(AutogradContext *ctx) {
  return c10::static_intrusive_pointer_cast<c10d::Backend>(
      ctx->saved_data["group"].toCapsule());
}

struct CopyToGroup : torch::autograd::Function<CopyToGroup> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x,
                            const Group &group) {
    ctx->saved_data["group"] = capsule(group);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    at::Tensor g = grads[0].contiguous().clone();
    allReduce(g, groupOf(ctx));
    return {g, at::Tensor()};
  }
};

struct ReduceFromGroup : torch::autograd::Function<ReduceFromGroup> {
  static at::Tensor forward(AutogradContext *, const at::Tensor &x,
                            const Group &group) {
    at::Tensor sum = x.contiguous().clone();
    allReduce(sum, group);
    return sum;
  }
  static variable_list backward(AutogradContext *, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

struct GatherSequence : torch::autograd::Function<GatherSequence> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x,
                            int64_t dim, const Group &group) {
    ctx->saved_data["group"] = capsule(group);
    ctx->saved_data["dim"] = dim;
    return allGather(x, dim, group);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    return {
        reduceScatter(grads[0], ctx->saved_data["dim"].toInt(), groupOf(ctx)),
        at::Tensor(), at::Tensor()};
  }
};

struct ReduceScatterSequence
    : torch::autograd::Function<ReduceScatterSequence> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x,
                            int64_t dim, const Group &group) {
    ctx->saved_data["group"] = capsule(group);
    ctx->saved_data["dim"] = dim;
    return reduceScatter(x, dim, group);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    return {allGather(grads[0], ctx->saved_data["dim"].toInt(), groupOf(ctx)),
            at::Tensor(), at::Tensor()};
  }
};

at::Tensor copyToGroup(const at::Tensor &x, const Group &group) {
  return CopyToGroup::apply(x, group);
}

at::Tensor reduceFromGroup(const at::Tensor &x, const Group &group) {
  return ReduceFromGroup::apply(x, group);
}

at::Tensor gatherSequence(const at::Tensor &x, int64_t dim,
                          const Group &group) {
  return GatherSequence::apply(x, dim, group);
}

at::Tensor reduceScatterSequence(const at::Tensor &x, int64_t dim,
                                 const Group &group) {
  return ReduceScatterSequence::apply(x, dim, group);
}

at::Tensor vocabParallelEmbedding(const at::Tensor &tokens,
                                  const at::Tensor &weight, int64_t start,
                                  const Group &group) {
  return reduceFromGroup(tp::vocabRows(tokens, weight, start), group);
}

constexpr int kRanks = 2;

/// A 1 x 2 mesh: its shard group stands for the tensor group.
Schedule twoRanks() {
  Schedule s;
  s.replicate = 1;
  s.shard = kRanks;
  return s;
}

Group tensorGroup(Comm &comm) {
  return c10::intrusive_ptr<c10d::Backend>::reclaim_copy(
      &comm.group(GroupAxis::Shard));
}

void expectClose(const at::Tensor &got, const at::Tensor &want,
                 const char *what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  double scale = want.abs().max().item<double>();
  double diff = (got - want).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5 * std::max(scale, 1.0))
      << what << ": max |diff| " << diff << " of " << scale;
}

at::Tensor leaf(const at::Tensor &t) {
  return t.detach().clone().set_requires_grad(true);
}

//===----------------------------------------------------------------------===//
// The layout
//===----------------------------------------------------------------------===//

TEST(TensorParallel, LocalSliceFollowsTheSplit) {
  at::Tensor w = at::arange(24, at::kFloat).reshape({4, 6});
  // Column-parallel (dim 0) and row-parallel (dim 1) halves.
  EXPECT_TRUE(at::equal(tp::localSlice(w, 0, 1, 1, 2), w.narrow(0, 2, 2)));
  EXPECT_TRUE(at::equal(tp::localSlice(w, 1, 1, 0, 2), w.narrow(1, 0, 3)));
  // GPT-2's c_attn: 3 parts of 2 columns, each halved: rank 1 holds
  // columns 1, 3 and 5.
  at::Tensor fused = tp::localSlice(w, 1, 3, 1, 2);
  EXPECT_TRUE(
      at::equal(fused, w.index_select(1, at::tensor({1, 3, 5}, at::kLong))));
  // A vocabulary of 5 rows over 2 ranks: 3 each, the last one padding.
  at::Tensor v = at::arange(5, at::kFloat).reshape({5, 1}) + 1;
  EXPECT_TRUE(at::equal(tp::localSlice(v, 0, 1, 1, 2).flatten(),
                        at::tensor({4.0f, 5.0f, 0.0f})));
  EXPECT_EQ(splitExtent(5, 1, 2), 3);
  EXPECT_EQ(splitExtent(192, 3, 2), 96);
}

//===----------------------------------------------------------------------===//
// A Llama block
//===----------------------------------------------------------------------===//

struct LlamaBlock {
  at::Tensor norm1, q, k, v, o, norm2, gate, up, down;
  std::vector<at::Tensor *> all() {
    return {&norm1, &q, &k, &v, &o, &norm2, &gate, &up, &down};
  }
};

constexpr int64_t kHidden = 16, kHeads = 4, kKvHeads = 2, kHeadDim = 4,
                  kInter = 24, kBatch = 2, kSeq = 8;

LlamaBlock randomLlamaBlock() {
  at::manual_seed(7);
  LlamaBlock w;
  w.norm1 = 1 + 0.1 * at::randn({kHidden});
  w.q = 0.2 * at::randn({kHeads * kHeadDim, kHidden});
  w.k = 0.2 * at::randn({kKvHeads * kHeadDim, kHidden});
  w.v = 0.2 * at::randn({kKvHeads * kHeadDim, kHidden});
  w.o = 0.2 * at::randn({kHidden, kHeads * kHeadDim});
  w.norm2 = 1 + 0.1 * at::randn({kHidden});
  w.gate = 0.2 * at::randn({kInter, kHidden});
  w.up = 0.2 * at::randn({kInter, kHidden});
  w.down = 0.2 * at::randn({kHidden, kInter});
  return w;
}

/// Rank `r`'s part, in Models.cpp's layout: q, k, v, gate, up by rows; o,
/// down by columns; the norms whole.
LlamaBlock sliceOf(const LlamaBlock &full, int64_t r) {
  auto rows = [&](const at::Tensor &t) {
    return tp::localSlice(t, 0, 1, r, kRanks);
  };
  auto cols = [&](const at::Tensor &t) {
    return tp::localSlice(t, 1, 1, r, kRanks);
  };
  return {full.norm1.clone(), rows(full.q),  rows(full.k),
          rows(full.v),       cols(full.o),  full.norm2.clone(),
          rows(full.gate),    rows(full.up), cols(full.down)};
}

at::Tensor rmsNorm(const at::Tensor &x, const at::Tensor &w) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-5) * w;
}

at::Tensor rope(const at::Tensor &t) {
  const int64_t s = t.size(2), d = t.size(3);
  at::Tensor inv = at::pow(10000.0, -at::arange(0, d, 2, at::kFloat) / d);
  at::Tensor angles = at::outer(at::arange(s, at::kFloat), inv);
  at::Tensor emb = at::cat({angles, angles}, -1);
  at::Tensor rotated =
      at::cat({-t.narrow(-1, d / 2, d / 2), t.narrow(-1, 0, d / 2)}, -1);
  return t * emb.cos() + rotated * emb.sin();
}

/// The block on this rank's heads and columns. Without a group it is the
/// whole block; with one, `x` is replicated (or, with sequence parallelism,
/// this rank's slice of the sequence) and the regions are joined by the
/// group's collectives exactly where Megatron joins them.
at::Tensor llamaBlock(const at::Tensor &x, const LlamaBlock &w,
                      const Group *group, bool sequenceParallel) {
  const int64_t ranks = group ? kRanks : 1;
  const int64_t heads = kHeads / ranks, kvHeads = kKvHeads / ranks;
  auto enter = [&](const at::Tensor &t) {
    if (!group)
      return t;
    return sequenceParallel ? gatherSequence(t, 1, *group)
                            : copyToGroup(t, *group);
  };
  auto leave = [&](const at::Tensor &t) {
    if (!group)
      return t;
    return sequenceParallel ? reduceScatterSequence(t, 1, *group)
                            : reduceFromGroup(t, *group);
  };
  at::Tensor n = enter(rmsNorm(x, w.norm1));
  const int64_t b = n.size(0), s = n.size(1);
  at::Tensor q =
      at::linear(n, w.q).view({b, s, heads, kHeadDim}).transpose(1, 2);
  at::Tensor k =
      at::linear(n, w.k).view({b, s, kvHeads, kHeadDim}).transpose(1, 2);
  at::Tensor v =
      at::linear(n, w.v).view({b, s, kvHeads, kHeadDim}).transpose(1, 2);
  q = rope(q);
  k = rope(k).repeat_interleave(heads / kvHeads, 1);
  v = v.repeat_interleave(heads / kvHeads, 1);
  at::Tensor a = at::scaled_dot_product_attention(q, k, v, {}, 0.0,
                                                  /*is_causal=*/true)
                     .transpose(1, 2)
                     .reshape({b, s, heads * kHeadDim});
  at::Tensor h1 = x + leave(at::linear(a, w.o));
  at::Tensor n2 = enter(rmsNorm(h1, w.norm2));
  at::Tensor m = at::linear(
      at::silu(at::linear(n2, w.gate)) * at::linear(n2, w.up), w.down);
  return h1 + leave(m);
}

void checkLlamaBlock(bool sequenceParallel) {
  forEachRank(twoRanks(), [&](int rank, Comm &comm) {
    Group group = tensorGroup(comm);
    LlamaBlock full = randomLlamaBlock();
    at::Tensor xFull = at::randn({kBatch, kSeq, kHidden});
    at::Tensor dy = at::randn({kBatch, kSeq, kHidden});
    // The reference: the whole block on this rank.
    for (at::Tensor *t : full.all())
      *t = leaf(*t);
    at::Tensor xRef = leaf(xFull);
    at::Tensor yRef = llamaBlock(xRef, full, nullptr, false);
    yRef.backward(dy);

    LlamaBlock mine = sliceOf(full, rank);
    for (at::Tensor *t : mine.all())
      *t = leaf(*t);
    const int64_t part = kSeq / kRanks;
    at::Tensor x =
        leaf(sequenceParallel ? xFull.narrow(1, rank * part, part) : xFull);
    at::Tensor y = llamaBlock(x, mine, &group, sequenceParallel);
    y.backward(sequenceParallel ? dy.narrow(1, rank * part, part) : dy);

    if (sequenceParallel) {
      expectClose(y, yRef.narrow(1, rank * part, part), "output");
      expectClose(x.grad(), xRef.grad().narrow(1, rank * part, part),
                  "input gradient");
    } else {
      expectClose(y, yRef, "output");
      expectClose(x.grad(), xRef.grad(), "input gradient");
    }
    LlamaBlock want =
        sliceOf({full.norm1.grad(), full.q.grad(), full.k.grad(), full.v.grad(),
                 full.o.grad(), full.norm2.grad(), full.gate.grad(),
                 full.up.grad(), full.down.grad()},
                rank);
    const char *names[] = {"norm1", "q",    "k",  "v",   "o",
                           "norm2", "gate", "up", "down"};
    std::vector<at::Tensor *> got = mine.all(), expected = want.all();
    for (size_t i = 0; i < got.size(); ++i) {
      at::Tensor g = got[i]->grad();
      // Under sequence parallelism a norm sees this rank's tokens only:
      // Megatron all-reduces its gradient over the tensor group.
      if (sequenceParallel && (i == 0 || i == 5)) {
        g = g.clone();
        std::vector<at::Tensor> sum{g};
        group->allreduce(sum)->wait();
      }
      expectClose(g, *expected[i], names[i]);
    }
  });
}

TEST(TensorParallel, LlamaBlockEqualsTheWholeBlock) { checkLlamaBlock(false); }

TEST(TensorParallel, LlamaBlockWithSequenceParallelism) {
  checkLlamaBlock(true);
}

//===----------------------------------------------------------------------===//
// A GPT-2 block's attention: the fused c_attn in 3 parts
//===----------------------------------------------------------------------===//

TEST(TensorParallel, Gpt2FusedAttentionEqualsTheWholeAttention) {
  forEachRank(twoRanks(), [&](int rank, Comm &comm) {
    Group group = tensorGroup(comm);
    at::manual_seed(11);
    const int64_t h = kHidden, heads = kHeads, d = h / heads;
    at::Tensor attnW = leaf(0.2 * at::randn({h, 3 * h}));
    at::Tensor attnB = leaf(0.1 * at::randn({3 * h}));
    at::Tensor projW = leaf(0.2 * at::randn({h, h}));
    at::Tensor projB = leaf(0.1 * at::randn({h}));
    at::Tensor xFull = at::randn({kBatch, kSeq, h});
    at::Tensor dy = at::randn({kBatch, kSeq, h});

    // Conv1D: x @ W + b; q, k, v are the three parts of c_attn's output;
    // the row-parallel c_proj adds its whole bias after the reduction.
    auto attention = [&](const at::Tensor &x, const at::Tensor &wa,
                         const at::Tensor &ba, const at::Tensor &wp,
                         const Group *g) {
      const int64_t local = g ? heads / kRanks : heads;
      at::Tensor n = g ? copyToGroup(x, *g) : x;
      auto qkv = (at::matmul(n, wa) + ba).split(local * d, 2);
      auto split = [&](const at::Tensor &t) {
        return t.reshape({kBatch, kSeq, local, d}).transpose(1, 2);
      };
      at::Tensor a = at::scaled_dot_product_attention(
                         split(qkv[0]), split(qkv[1]), split(qkv[2]), {}, 0.0,
                         /*is_causal=*/true)
                         .transpose(1, 2)
                         .reshape({kBatch, kSeq, local * d});
      at::Tensor out = at::matmul(a, wp);
      return (g ? reduceFromGroup(out, *g) : out) + projB;
    };
    at::Tensor xRef = leaf(xFull);
    attention(xRef, attnW, attnB, projW, nullptr).backward(dy);

    at::Tensor wa = leaf(tp::localSlice(attnW, 1, 3, rank, kRanks));
    at::Tensor ba = leaf(tp::localSlice(attnB, 0, 3, rank, kRanks));
    at::Tensor wp = leaf(tp::localSlice(projW, 0, 1, rank, kRanks));
    at::Tensor x = leaf(xFull);
    at::Tensor y = attention(x, wa, ba, wp, &group);
    expectClose(y, attention(xFull, attnW, attnB, projW, nullptr).detach(),
                "output");
    y.backward(dy);
    expectClose(x.grad(), xRef.grad(), "input gradient");
    expectClose(wa.grad(), tp::localSlice(attnW.grad(), 1, 3, rank, kRanks),
                "c_attn");
    expectClose(ba.grad(), tp::localSlice(attnB.grad(), 0, 3, rank, kRanks),
                "c_attn bias");
    expectClose(wp.grad(), tp::localSlice(projW.grad(), 0, 1, rank, kRanks),
                "c_proj");
  });
}

//===----------------------------------------------------------------------===//
// Vocab-parallel embedding and cross-entropy, with a padded vocabulary
//===----------------------------------------------------------------------===//

TEST(TensorParallel, VocabParallelEmbeddingAndLossEqualTheWholeOnes) {
  forEachRank(twoRanks(), [&](int rank, Comm &comm) {
    Group group = tensorGroup(comm);
    at::manual_seed(3);
    // 11 entries over 2 ranks: 6 rows each, rank 1's last one padding.
    const int64_t vocab = 11, local = splitExtent(vocab, 1, kRanks);
    at::Tensor table = at::randn({vocab, kHidden});
    at::Tensor head = 0.3 * at::randn({vocab, kHidden});
    at::Tensor tokens = at::randint(vocab, {kBatch, kSeq}, at::kLong);
    at::Tensor targets = at::randint(vocab, {kBatch * kSeq}, at::kLong);
    targets.index_fill_(0, at::tensor({0, 5, 9}, at::kLong), -100); // ignored

    at::Tensor tableRef = leaf(table), headRef = leaf(head);
    at::Tensor loss = at::cross_entropy_loss(
        at::linear(at::embedding(tableRef, tokens).reshape({-1, kHidden}),
                   headRef),
        targets, {}, at::Reduction::Mean, -100);
    loss.backward();

    at::Tensor myTable = leaf(tp::localSlice(table, 0, 1, rank, kRanks));
    at::Tensor myHead = leaf(tp::localSlice(head, 0, 1, rank, kRanks));
    const int64_t start = rank * local;
    at::Tensor h = vocabParallelEmbedding(tokens, myTable, start, group);
    expectClose(h, at::embedding(table, tokens), "embedding");
    at::Tensor logits =
        at::linear(copyToGroup(h.reshape({-1, kHidden}), group), myHead);
    // The schedule's form: each rank's statistics, all-gathered, give every
    // rank the loss and each token's log-sum-exp; backward is local.
    at::Tensor mine =
        tp::lossStatistics(logits.detach(), targets, start, vocab);
    ASSERT_EQ(mine.size(0), tp::kLossStatistics);
    at::Tensor all = at::empty({kRanks, mine.size(0), mine.size(1)});
    std::vector<std::vector<at::Tensor>> out = {
        {all.select(0, 0), all.select(0, 1)}};
    std::vector<at::Tensor> in = {mine};
    group->allgather(out, in)->wait();
    tp::VocabParallelLoss myLoss = tp::lossFromStatistics(all, targets, -100);
    expectClose(myLoss.loss, loss.detach(), "loss");
    logits.backward(tp::lossGradient(logits.detach(), targets, myLoss.logSumExp,
                                     start, vocab, -100, 1.0));
    expectClose(myHead.grad(),
                tp::localSlice(headRef.grad(), 0, 1, rank, kRanks),
                "head gradient");
    expectClose(myTable.grad(),
                tp::localSlice(tableRef.grad(), 0, 1, rank, kRanks),
                "embedding gradient");
  });
}

} // namespace
