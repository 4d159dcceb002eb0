// Prefetcher (dataset.num_workers): background threads build the BatchSource's next batches while the step runs.
// Invariant: next() returns exactly BatchSource::next()'s batches in the same order for any number of workers; cursor()
// is the position after the last batch returned, not after those built ahead. Use the source only through it.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batch.h"
#include "data/batch_source.h"

namespace mt {

class Prefetcher {
 public:
  // num_workers = 0: no threads; next() builds each batch when asked. Otherwise each worker keeps one batch ready.
  Prefetcher(BatchSource& batcher, int64_t num_workers);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  Batch next();
  DataCursor cursor() const;

 private:
  struct Ready {
    Batch batch;
    DataCursor cursor_after;
  };
  void work();

  BatchSource& batcher_;
  const int64_t depth_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, Ready> ready_;   // step -> its batch, built ahead
  int64_t planned_ = 0;              // the next step a worker takes
  int64_t consumed_ = 0;             // the next step next() returns
  DataCursor cursor_;
  std::exception_ptr failure_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace mt
