// The torch-free GPU check: the real kernels of csrc/ (no torch header, no libtorch) on the GPU, each output
// compared bit for bit with the host's, then timed against the copy floor. Built by tests/cuda/build.sh.
//   gpu_check [--group affine|big|resize|timing|all] [--json FILE] [--photos DIR] [--dump DIR]
//             [--pil-rule 13|12.2|12.1] [--reps N] [--deadline SECONDS] [--verbose]
// Prints the device, the measured copy bandwidth, a line per failing case, and "N passed, M failed".
// Exit status: 0 all passed, 1 a case failed, 2 bad arguments, 3 the CUDA context was lost (sticky error),
// 77 no CUDA device (the CPU machines that build it), 124 the watchdog's deadline passed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "check.h"

namespace gpu_check {

std::atomic<const char*> current_case{"start-up"};

void Context::run(const std::string& group, const std::string& name, const std::function<Outcome()>& body) {
  Outcome r{false, ""};
  if (context_lost) {
    r.detail = "not run: the CUDA context was lost in " + lost_in;
  } else {
    current_case.store(name.c_str());
    try {
      r = body();
      CHECK_CUDA(cudaDeviceSynchronize());
    } catch (const std::exception& e) {
      r = {false, std::string("error: ") + e.what()};
    }
    // A launch or memory error can be sticky: the context then refuses every later call.
    const cudaError_t sticky = cudaDeviceSynchronize();
    if (sticky != cudaSuccess && cudaGetLastError() != cudaSuccess && cudaDeviceSynchronize() != cudaSuccess) {
      context_lost = true;
      lost_in = name + " (" + cudaGetErrorName(sticky) + ")";
    }
    current_case.store("between cases");
  }
  (r.ok ? passed : failed)++;
  if (!r.ok || verbose)
    std::printf("%s [%s] %s: %s\n", r.ok ? "PASS" : "FAIL", group.c_str(), name.c_str(), r.detail.c_str());
  std::fflush(stdout);
  results.push_back(Json().str("group", group).str("case", name).boolean("ok", r.ok).str("detail", r.detail).text());
}

double time_us(Context& ctx, const std::function<void()>& fn, int reps) {
  if (reps <= 0) reps = ctx.reps;
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<double> us;
  try {
    for (int r = -2; r < reps; ++r) {  // two warm-up runs
      if (ctx.flush.bytes()) CHECK_CUDA(cudaMemsetAsync(ctx.flush.as(), r & 0xFF, ctx.flush.bytes()));
      CHECK_CUDA(cudaEventRecord(start));
      fn();
      CHECK_CUDA(cudaEventRecord(stop));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (r >= 0) us.push_back(ms * 1e3);
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

void report_timing(Context& ctx, const std::string& name, const std::string& kernel_desc, double read_bytes,
                   double written_bytes, const std::function<void()>& kernel, const std::string& extra_json) {
  ctx.run("timing", name, [&]() -> Outcome {
    const double us = time_us(ctx, kernel);
    const auto copy_bytes = static_cast<size_t>((read_bytes + written_bytes) / 2);
    DeviceBuffer a(copy_bytes), b(copy_bytes);
    const double copy_us =
        time_us(ctx, [&] { CHECK_CUDA(cudaMemcpyAsync(b.as(), a.as(), copy_bytes, cudaMemcpyDeviceToDevice)); });
    const double dram_us = (read_bytes + written_bytes) / (ctx.copy_gbps * 1e3);
    const double gbps = (read_bytes + written_bytes) / (us * 1e3);
    std::printf(
        "  %-58s %9.1f us %7.0f GB/s | copy of the same bytes %8.1f us, DRAM floor %8.1f us: %5.1f%% of "
        "copy rate\n",
        name.c_str(), us, gbps, copy_us, dram_us, 100.0 * copy_us / us);
    Json row;
    row.str("case", name).str("kernel", kernel_desc).num("us", us).num("read_bytes", read_bytes);
    row.num("written_bytes", written_bytes).num("gb_per_s", gbps).num("memcpy_same_bytes_us", copy_us);
    row.num("dram_floor_us", dram_us)
        .num("fraction_of_memcpy", copy_us / us)
        .num("fraction_of_dram_floor", dram_us / us);
    std::string text = row.text();
    if (!extra_json.empty()) text = text.substr(0, text.size() - 1) + ", " + extra_json + "}";
    ctx.timings.push_back(text);
    return {true, std::to_string(us) + " us"};
  });
}

namespace {

std::string device_report(Context& ctx, int device) {
  cudaDeviceProp p{};
  CHECK_CUDA(cudaGetDeviceProperties(&p, device));
  int clock_khz = 0, mem_khz = 0, bus = 0, driver = 0, runtime = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  CHECK_CUDA(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device));
  CHECK_CUDA(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, device));
  CHECK_CUDA(cudaDriverGetVersion(&driver));
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
  size_t free_bytes = 0, total = 0;
  CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  const double peak_gbps = 2.0 * mem_khz * 1e3 * (bus / 8) / 1e9;
  std::printf(
      "device %d: %s, sm_%d%d, %d SMs, SM clock %.0f MHz, memory clock %.0f MHz x %d bits (peak %.0f GB/s), "
      "L2 %d MiB, %.1f GiB (%.1f free)\n",
      device, p.name, p.major, p.minor, p.multiProcessorCount, clock_khz / 1e3, mem_khz / 1e3, bus, peak_gbps,
      p.l2CacheSize >> 20, total / 1073741824.0, free_bytes / 1073741824.0);
  std::printf("driver %d.%d, runtime %d.%d\n", driver / 1000, (driver % 1000) / 10, runtime / 1000,
              (runtime % 1000) / 10);
  (void)ctx;
  Json j;
  j.str("name", p.name).str("arch", "sm_" + std::to_string(p.major) + std::to_string(p.minor));
  j.integer("sms", p.multiProcessorCount).num("sm_clock_mhz", clock_khz / 1e3).num("mem_clock_mhz", mem_khz / 1e3);
  j.integer("bus_bits", bus).num("peak_gb_per_s", peak_gbps).integer("l2_bytes", p.l2CacheSize);
  j.integer("memory_bytes", static_cast<int64_t>(total));
  j.str("driver", std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10));
  j.str("runtime", std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10));
  return j.text();
}

// The device-to-device copy rate of 1 GiB (read + written bytes per second): every floor below is this.
void measure_copy(Context& ctx) {
  ctx.run("copy", "cudaMemcpy D2D 1 GiB", [&]() -> Outcome {
    const size_t n = size_t{1} << 30;
    DeviceBuffer a(n), b(n);
    CHECK_CUDA(cudaMemset(a.as(), 1, n));
    const double us = time_us(ctx, [&] { CHECK_CUDA(cudaMemcpyAsync(b.as(), a.as(), n, cudaMemcpyDeviceToDevice)); });
    ctx.copy_gbps = 2.0 * n / (us * 1e3);
    std::printf("device-to-device copy: 1 GiB in %.1f us = %.0f GB/s (read + written)\n", us, ctx.copy_gbps);
    return {true, std::to_string(ctx.copy_gbps) + " GB/s"};
  });
}

void watchdog(double seconds) {
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    std::fprintf(stderr, "watchdog: %.0f s passed, still in case '%s': exiting (124)\n", seconds, current_case.load());
    std::fflush(stdout);
    _exit(124);
  }).detach();
}

}  // namespace
}  // namespace gpu_check

int main(int argc, char** argv) {
  using namespace gpu_check;
  Context ctx;
  std::string group = "all", json_path;
  double deadline = 280;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--group")
      group = value();
    else if (a == "--json")
      json_path = value();
    else if (a == "--photos")
      ctx.photos_dir = value();
    else if (a == "--dump")
      ctx.dump_dir = value();
    else if (a == "--pil-rule")
      ctx.pil_rule = value();
    else if (a == "--reps")
      ctx.reps = std::max(1, std::atoi(value().c_str()));
    else if (a == "--deadline")
      deadline = std::atof(value().c_str());
    else if (a == "--verbose")
      ctx.verbose = true;
    else {
      std::fprintf(stderr, "unknown argument %s (see the comment at the top of tests/cuda/main.cu)\n", a.c_str());
      return 2;
    }
  }
  const bool all = group == "all";
  if (!all && group != "affine" && group != "big" && group != "resize" && group != "timing") {
    std::fprintf(stderr, "--group must be affine, big, resize, timing or all; got %s\n", group.c_str());
    return 2;
  }
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf(
        "no CUDA device: cannot run here (cudaGetDeviceCount: %s). This check needs a GPU; on a CPU "
        "machine it is only built.\n",
        e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  watchdog(deadline);
  std::string device_json;
  try {
    CHECK_CUDA(cudaSetDevice(ctx.device));
    device_json = device_report(ctx, ctx.device);
    ctx.flush = DeviceBuffer(size_t{256} << 20);  // 256 MiB > the L2 of any current GPU
  } catch (const std::exception& ex) {
    std::printf("cannot start on the device: %s\n", ex.what());
    return 3;
  }
  const auto t0 = std::chrono::steady_clock::now();
  measure_copy(ctx);
  if (all || group == "affine") {
    affine_cases_in0(ctx);
    affine_cases_in1(ctx);
    affine_cases_in2(ctx);
    affine_cases_in3(ctx);
    affine_cases_in4(ctx);
  }
  if (all || group == "resize") resize_cases(ctx);
  if (all || group == "big") big_cases(ctx);
  if (all || group == "timing") {
    if (ctx.copy_gbps <= 0) ctx.copy_gbps = 1;  // the copy failed (reported): keep the ratios finite
    affine_timing(ctx);
    resize_timing(ctx);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("group %s: %d passed, %d failed (%.1f s)%s\n", group.c_str(), ctx.passed, ctx.failed, seconds,
              ctx.context_lost ? ("; the CUDA context was lost in " + ctx.lost_in).c_str() : "");
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"group\": \"" << group << "\", \"device\": " << device_json << ", \"copy_gb_per_s\": " << ctx.copy_gbps
        << ", \"passed\": " << ctx.passed << ", \"failed\": " << ctx.failed << ", \"seconds\": " << seconds
        << ",\n \"cases\": [\n  ";
    for (size_t i = 0; i < ctx.results.size(); ++i) out << (i ? ",\n  " : "") << ctx.results[i];
    out << "],\n \"timings\": [\n  ";
    for (size_t i = 0; i < ctx.timings.size(); ++i) out << (i ? ",\n  " : "") << ctx.timings[i];
    out << "]}\n";
  }
  std::fflush(stdout);
  if (ctx.context_lost) return 3;
  return ctx.failed == 0 ? 0 : 1;
}
