// Host work split over the machine's cores (the GPU check's references run on a 16-core host).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace gpu_check {

// f(begin, end) over [0, n), in one chunk per core (in the calling thread when n is small).
inline void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& f) {
  const int64_t threads = std::max(1u, std::min(64u, std::thread::hardware_concurrency()));
  if (n < 4096 || threads == 1) return f(0, n);
  const int64_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t b = 0; b < n; b += chunk) pool.emplace_back(f, b, std::min(n, b + chunk));
  for (auto& t : pool) t.join();
}

}  // namespace gpu_check
