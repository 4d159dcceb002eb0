// Prefetcher: steps are numbered when a worker takes them (under the lock, so example order is the Batcher's),
// built outside the lock, and handed out strictly by number.
// Invariant: at most depth_ batches exist beyond the one being consumed; a worker's failure reaches next().
#include "data/prefetcher.h"

#include "core/error.h"

namespace mt {

Prefetcher::Prefetcher(BatchSource& batcher, int64_t num_workers)
    : batcher_(batcher), depth_(num_workers), cursor_(batcher.cursor()) {
  MT_REQUIRE(num_workers >= 0, "dataset.num_workers must be >= 0, got {}", num_workers);
  for (int64_t w = 0; w < num_workers; ++w) workers_.emplace_back([this] { work(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void Prefetcher::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_ && !failure_) {
    if (planned_ >= consumed_ + depth_) {
      changed_.wait(lock);
      continue;
    }
    const int64_t step = planned_++;
    const std::vector<int64_t> indices = batcher_.next_indices();
    const DataCursor after = batcher_.cursor();
    lock.unlock();
    try {
      Batch batch = batcher_.batch(indices);
      lock.lock();
      ready_.emplace(step, Ready{std::move(batch), after});
    } catch (...) {
      lock.lock();
      failure_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

Batch Prefetcher::next() {
  if (workers_.empty()) {
    Batch batch = batcher_.next();
    cursor_ = batcher_.cursor();
    return batch;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return failure_ || ready_.count(consumed_) > 0; });
  auto it = ready_.find(consumed_);
  if (it == ready_.end()) std::rethrow_exception(failure_);
  Batch batch = std::move(it->second.batch);
  cursor_ = it->second.cursor_after;
  ready_.erase(it);
  ++consumed_;
  lock.unlock();
  changed_.notify_all();
  return batch;
}

DataCursor Prefetcher::cursor() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cursor_;
}

}  // namespace mt
