// Shared pieces of the torch-free GPU check (tests/cuda/): checked CUDA calls, device buffers, the case
// registry (every case reports; an exception fails that case only), CUDA-event timing against the copy
// floor, a host thread pool, and the hash that fills large inputs on the device and is recomputed on the host.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "host_threads.h"

#define CHECK_CUDA(EXPR)                                                                                             \
  do {                                                                                                               \
    const cudaError_t check_error = (EXPR);                                                                          \
    if (check_error != cudaSuccess) {                                                                                \
      throw std::runtime_error(std::string(cudaGetErrorName(check_error)) + ": " + cudaGetErrorString(check_error) + \
                               " (" #EXPR ") at " __FILE__ ":" + std::to_string(__LINE__));                          \
    }                                                                                                                \
  } while (0)

namespace gpu_check {

// A plain cudaMalloc buffer (never managed memory), freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { CHECK_CUDA(cudaMalloc(&ptr_, bytes < 16 ? 16 : bytes)); }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  template <typename T = void>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Minimal JSON object writer (the values the check reports).
class Json {
 public:
  Json& num(const std::string& key, double v) {
    std::ostringstream s;
    s.precision(6);
    s << v;
    return raw(key, s.str());
  }
  Json& integer(const std::string& key, int64_t v) { return raw(key, std::to_string(v)); }
  Json& boolean(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  Json& str(const std::string& key, const std::string& v) {
    std::string e;
    for (const char ch : v) {
      if (ch == '"' || ch == '\\') e += '\\';
      if (ch == '\n') {
        e += "\\n";
        continue;
      }
      e += ch;
    }
    return raw(key, "\"" + e + "\"");
  }
  Json& raw(const std::string& key, const std::string& value) {
    body_ += (body_.empty() ? "" : ", ") + ("\"" + key + "\": ") + value;
    return *this;
  }
  std::string text() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

struct Outcome {
  bool ok;
  std::string detail;
};

struct Context {
  int device = 0;
  int passed = 0, failed = 0;
  bool context_lost = false;  // a sticky CUDA error: later cases cannot run in this process
  std::string lost_in;
  std::vector<std::string> results, timings;
  double copy_gbps = 0;  // measured device-to-device copy: (read + written) bytes per second / 1e9
  std::string photos_dir, dump_dir, pil_rule = "13";
  int reps = 20;
  DeviceBuffer flush;  // written before each timed rep so no rep starts with its data in L2

  // Runs one case: body() returns whether it passed and a detail (what ran; what differed). An exception
  // fails this case only; a sticky CUDA error marks the context lost and fails every later case with that
  // reason. Passing cases print one line only with `verbose`.
  bool verbose = false;
  void run(const std::string& group, const std::string& name, const std::function<Outcome()>& body);
};

extern std::atomic<const char*> current_case;  // for the watchdog's message

// The hash that fills large inputs on the device; the host recomputes it instead of copying inputs back.
__host__ __device__ inline uint32_t hash32(uint64_t i) {
  uint64_t z = (i + 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  return static_cast<uint32_t>(z >> 32);
}

// CUDA-event timing of fn on the default stream: median microseconds over ctx.reps reps, each preceded
// (outside the events) by an L2 flush.
double time_us(Context& ctx, const std::function<void()>& fn, int reps = 0);

// Times `kernel` and its floors and appends the JSON row: a device-to-device cudaMemcpy moving the same
// bytes ((read + written) / 2 copied), and the DRAM time of read + written at the measured copy rate.
void report_timing(Context& ctx, const std::string& name, const std::string& kernel_desc, double read_bytes,
                   double written_bytes, const std::function<void()>& kernel, const std::string& extra_json = "");

// Case groups (one translation unit each, built in parallel).
void affine_cases_in0(Context&);  // uint8 input
void affine_cases_in1(Context&);  // uint16
void affine_cases_in2(Context&);  // float16
void affine_cases_in3(Context&);  // bfloat16
void affine_cases_in4(Context&);  // float32
void big_cases(Context&);         // > 2^31 elements, 64-bit indexing
void affine_timing(Context&);
void resize_cases(Context&);
void resize_timing(Context&);

}  // namespace gpu_check
