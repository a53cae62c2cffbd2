//===- Parallel.h - A loop over independent items on threads ----*- C++ -*-===//
//
// The schedule file's per-program work (expanding tasks, validating,
// serializing) done one program per thread. Plain std::thread: the runtime
// includes no LLVM, and the compiler's callers have no MLIR context here.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_SUPPORT_PARALLEL_H
#define PLAN_RUNTIME_SUPPORT_PARALLEL_H

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace plan::rt::support {

/// Calls `body(i)` for every `i` in [0, n), on up to as many threads as the
/// machine has cores (the calling thread one of them), each `i` once. Once
/// every call has returned, rethrows what the call of the lowest `i` that
/// threw threw, so the error is the one a sequential loop would meet first.
template <typename Body> void parallelFor(size_t n, Body &&body) {
  size_t threads = std::min<size_t>(
      n, std::max<unsigned>(1, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i)
      body(i);
    return;
  }
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        body(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t)
    helpers.emplace_back(work);
  work();
  for (std::thread &helper : helpers)
    helper.join();
  for (const std::exception_ptr &error : errors)
    if (error)
      std::rethrow_exception(error);
}

} // namespace plan::rt::support

#endif // PLAN_RUNTIME_SUPPORT_PARALLEL_H
