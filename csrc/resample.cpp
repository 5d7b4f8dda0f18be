// The resize op's glue (declared in resample.h): its checks, the plan the kernels follow, and the
// coefficient planner op.
#include "resample.h"

#include <torch/csrc/stable/library.h>

#include <cstring>
#include <utility>

namespace fused_input_norm {
namespace {

constexpr const char* kOp = "fused_input_norm.resize_affine_out";

ResampleFilter parse_filter(const char* op, const std::string& filter) {
  if (filter == "bilinear") return ResampleFilter::kBilinear;
  if (filter == "bicubic") return ResampleFilter::kBicubic;
  if (filter == "lanczos") return ResampleFilter::kLanczos;
  if (filter == "cv2_cubic") return ResampleFilter::kCv2Cubic;
  if (filter == "cv2_cubic_f32") return ResampleFilter::kCv2CubicFloat;
  if (filter == "bilinear_no_antialias") return ResampleFilter::kBilinearNoAntialias;
  if (filter == "bilinear_no_antialias_f32") return ResampleFilter::kBilinearFloat;
  if (filter == "bilinear_no_antialias_f32_cl") return ResampleFilter::kBilinearFloatChannelsLast;
  if (filter == "bilinear_f32") return ResampleFilter::kBilinearAntialiasFloat;
  if (filter == "bicubic_f32") return ResampleFilter::kBicubicAntialiasFloat;
  fail(ArgError::kValue, op,
       ": resample must be 'bilinear', 'bicubic', 'lanczos', 'cv2_cubic', 'cv2_cubic_f32', 'bilinear_no_antialias', "
       "'bilinear_no_antialias_f32', 'bilinear_no_antialias_f32_cl', 'bilinear_f32' or 'bicubic_f32', got '",
       filter, "'");
}

// A plan tensor for one axis: int32, 1-D, contiguous, on input's device, sized for (in_size, out_size,
// filter); on the CPU its header is read back too. A plan for other sizes would read out of bounds.
void check_plan(const char* name, const Tensor& plan, const torch::stable::Device& device, int64_t in_size,
                int64_t out_size, ResampleFilter filter) {
  if (const torch::stable::Device d = plan.device(); d != device) {
    fail(ArgError::kRuntime, kOp, ": ", name, " must be on input's device ", device_name(device), ", got ",
         device_name(d));
  }
  if (const ScalarType dtype = plan.scalar_type(); dtype != ScalarType::Int) {
    fail(ArgError::kType, kOp, ": ", name, " must be an int32 tensor from fused_input_norm.resample_plan, got ",
         py_dtype(dtype));
  }
  const int64_t taps = resample_geometry(in_size, out_size, filter).taps;
  const int64_t expected = PlanHeader::kSize + out_size * (2 + taps);
  if (plan.dim() != 1 || plan.numel() != expected || !plan.is_contiguous()) {
    fail(ArgError::kValue, kOp, ": ", name, " must be the contiguous 1-D plan of resample_plan(", in_size, ", ",
         out_size, ") (", expected, " values), got shape ", int_list(plan.sizes()));
  }
  if (device.type() == torch::headeronly::DeviceType::CPU) {
    // The CPU kernels index with the plan's windows directly: check every one (O(out_size)). Device plans
    // cannot be read without a sync; their kernels clamp instead (ResamplePass::at).
    const auto* header = static_cast<const int32_t*>(plan.const_data_ptr());
    if (header[PlanHeader::kInSize] != in_size || header[PlanHeader::kOutSize] != out_size ||
        header[PlanHeader::kTaps] != taps) {
      fail(ArgError::kValue, kOp, ": ", name, " was planned for ", header[PlanHeader::kInSize], " -> ",
           header[PlanHeader::kOutSize], ", the call resamples ", in_size, " -> ", out_size);
    }
    const int32_t precision = header[PlanHeader::kPrecision];
    const bool cv2 = is_cv2(filter), linear = is_linear_f32(filter);
    bool valid = cv2 || linear || is_aa_f32(filter)
                     ? precision == (filter == ResampleFilter::kCv2Cubic ? cv2_cubic::kCoefBits : 0)
                     : precision >= 1 && precision <= 22;
    const int32_t* bounds = header + PlanHeader::kSize;
    for (int64_t o = 0; valid && o < out_size; ++o) {
      const int64_t first = bounds[2 * o], count = bounds[2 * o + 1];
      // cv2: the taps sx - 1 .. sx + 2 with sx in [-1, in_size - 1], each clamped into the image by the kernels;
      // linear: i0 and i0 + 1, the second clamped.
      if (cv2) {
        valid = first >= -2 && first <= in_size - 2 && count == taps;
      } else if (linear) {
        valid = first >= 0 && first < in_size && count == taps;
      } else {
        valid = first >= 0 && count >= 0 && count <= taps && first + count <= in_size;
      }
    }
    if (!valid) fail(ArgError::kValue, kOp, ": ", name, " is not a plan made by resample_plan (corrupt windows)");
  }
}

// pad = [] (the canvas is the crop) or [canvas_h, canvas_w, top, left, fill]: the crop placed at (top, left)
// on a canvas of the byte `fill`.
void check_pad(ResizePlan& p, const std::vector<int64_t>& pad) {
  if (pad.empty()) {
    p.canvas_h = p.crop_h;
    p.canvas_w = p.crop_w;
    return;
  }
  if (pad.size() != 5) {
    fail(ArgError::kValue, kOp, ": pad must be empty or (canvas_height, canvas_width, top, left, fill), got ",
         int_list(pad));
  }
  const int64_t canvas_h = pad[0], canvas_w = pad[1], top = pad[2], left = pad[3], fill = pad[4];
  constexpr int64_t kMaxSide = int64_t{1} << 24;
  if (canvas_h < p.crop_h || canvas_w < p.crop_w || canvas_h >= kMaxSide || canvas_w >= kMaxSide) {
    fail(ArgError::kValue, kOp, ": pad's canvas ", canvas_h, "x", canvas_w, " must hold the cropped image ", p.crop_h,
         "x", p.crop_w, " and have sides below 2^24");
  }
  // Written so that no difference wraps: every value is below 2^24 once the first two tests pass.
  if (top < 0 || left < 0 || top > canvas_h - p.crop_h || left > canvas_w - p.crop_w) {
    fail(ArgError::kValue, kOp, ": pad's (top, left) = (", top, ", ", left, ") must put the cropped image ", p.crop_h,
         "x", p.crop_w, " inside the canvas ", canvas_h, "x", canvas_w);
  }
  if (fill < 0 || fill > 255) fail(ArgError::kValue, kOp, ": pad's fill must be a byte in [0, 255], got ", fill);
  p.canvas_h = canvas_h;
  p.canvas_w = canvas_w;
  p.pad_top = top;
  p.pad_left = left;
  p.fill = fill;
}

// `pitch` non-null (strips): out may also be a window of wider strips, its C * P rows *pitch values apart (strides
// (P * pitch, pitch, 1), pitch >= the row's length); *pitch is set.
void check_out(const Tensor& out, const Tensor& input, const std::vector<int64_t>& expected, int64_t* pitch) {
  if (const torch::stable::Device d = out.device(), in = input.device(); d != in) {
    fail(ArgError::kRuntime, kOp, ": out must be on input's device ", device_name(in), ", got ", device_name(d));
  }
  // uint8 too: the affine's result rounded and clamped, i.e. with weight 1 and bias 0 the resampled bytes.
  if (const ScalarType dtype = out.scalar_type(); dtype != ScalarType::Byte && !is_output_dtype(dtype)) {
    fail(ArgError::kType, kOp, ": out must have one of the dtypes torch.uint8, ", kOutputDtypes, ", got ",
         py_dtype(dtype));
  }
  if (!out.sizes().equals(torch::headeronly::IntHeaderOnlyArrayRef(expected))) {
    fail(ArgError::kValue, kOp, ": out must have shape ", int_list(expected), ", got ", int_list(out.sizes()));
  }
  if (pitch != nullptr && !out.is_contiguous()) {
    const int64_t length = expected[2], row = out.stride(1);
    if (out.stride(2) != 1 || row < length || out.stride(0) != expected[1] * row) {
      fail(ArgError::kValue, kOp, ": out must be contiguous, or for strips a window of wider strips (strides (",
           expected[1], " * pitch, pitch, 1), pitch >= ", length, "), got stride ", int_list(out.strides()));
    }
    *pitch = row;
    return;
  }
  if (!out.is_contiguous()) {
    fail(ArgError::kValue, kOp, ": out must be contiguous, got stride ", int_list(out.strides()));
  }
  if (pitch != nullptr) *pitch = expected[2];
}

}  // namespace

ResizePlan plan_resize(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const std::optional<Tensor>& row_plan, const std::optional<Tensor>& col_plan,
                       const std::vector<int64_t>& size, const std::vector<int64_t>& crop, const std::string& filter,
                       bool vertical_first, const std::vector<int64_t>& patches, bool clip,
                       const std::vector<int64_t>& pad) {
  ResizePlan p{};
  for (const auto& [name, t] :
       {std::pair<const char*, const Tensor&>{"out", out}, {"input", input}, {"weight", weight}, {"bias", bias}}) {
    check_defined("resize_affine_out", name, t);
  }
  p.filter = parse_filter(kOp, filter);
  // uint8 for every filter; float32 too for torch's float32 filters, which compute in float32 from either (torch's
  // F.interpolate on a float32 image, whatever its values).
  if (const ScalarType dtype = input.scalar_type(); dtype == ScalarType::Float && reads_float_input(p.filter)) {
    p.float_input = true;
  } else if (dtype != ScalarType::Byte) {
    fail(ArgError::kType, kOp, ": input must be a torch.uint8 image",
         reads_float_input(p.filter) ? " or a torch.float32 one"
                                     : " (torch.float32 only with the filters 'bilinear_no_antialias_f32', "
                                       "'bilinear_no_antialias_f32_cl', 'bilinear_f32', 'bicubic_f32')",
         ", got ", py_dtype(dtype));
  }
  if (input.dim() != 4) {
    fail(ArgError::kValue, kOp, ": input must be 4-D [B, C, H, W], got shape ", int_list(input.sizes()));
  }
  p.batch = input.size(0);
  p.channels = input.size(1);
  p.in_h = input.size(2);
  p.in_w = input.size(3);
  for (int d = 0; d < 4; ++d) p.strides[d] = input.stride(d);
  if (p.in_h < 1 || p.in_w < 1) {
    fail(ArgError::kValue, kOp, ": input must have H, W >= 1, got shape ", int_list(input.sizes()));
  }
  const torch::stable::Device device = input.device();
  check_channel_vector("resize_affine_out", "weight", weight, device, 1, p.channels);
  check_channel_vector("resize_affine_out", "bias", bias, device, 1, p.channels);
  if (size.size() != 2 || size[0] < 1 || size[1] < 1) {
    fail(ArgError::kValue, kOp, ": size must be (height, width) >= 1, got ", int_list(size));
  }
  p.out_h = size[0];
  p.out_w = size[1];
  constexpr int64_t kMaxSide = int64_t{1} << 24;  // the planner's doubles and int32 bounds stay exact
  if (p.in_h >= kMaxSide || p.in_w >= kMaxSide || p.out_h >= kMaxSide || p.out_w >= kMaxSide) {
    fail(ArgError::kValue, kOp, ": image sides must be below 2^24");
  }
  // A pass runs exactly when its axis changes size, as in both references: a plan for an axis that keeps
  // its size would be a different (if harmless) computation, and a missing one cannot be done.
  // OpenCV runs both passes whenever the image changes size (an axis that keeps its size rounds through
  // the coefficients (0, 1, 0, 0)): the cv2 filters take both plans, or neither for a copy.
  const bool cv2 = is_cv2(p.filter), resized = p.in_h != p.out_h || p.in_w != p.out_w;
  const auto axis = [&](const char* name, const std::optional<Tensor>& plan, int64_t in, int64_t out) {
    if (cv2) {
      if (resized && !plan) fail(ArgError::kValue, kOp, ": ", name, " is required: cv2 filters resample both axes");
      if (!resized && plan) fail(ArgError::kValue, kOp, ": ", name, " must be None: the image keeps its size");
      if (plan) check_plan(name, *plan, device, in, out, p.filter);
      return plan ? static_cast<const int32_t*>(plan->const_data_ptr()) : nullptr;
    }
    if (in != out && !plan) {
      fail(ArgError::kValue, kOp, ": ", name, " is required: the axis is resampled from ", in, " to ", out);
    }
    if (in == out && plan) fail(ArgError::kValue, kOp, ": ", name, " must be None: the axis keeps its size ", in);
    if (plan) check_plan(name, *plan, device, in, out, p.filter);
    return plan ? static_cast<const int32_t*>(plan->const_data_ptr()) : nullptr;
  };
  p.row_plan = axis("row_plan", row_plan, p.in_h, p.out_h);
  p.col_plan = axis("col_plan", col_plan, p.in_w, p.out_w);
  if (cv2 && vertical_first)
    fail(ArgError::kValue, kOp, ": vertical_first must be False: OpenCV resamples across first");
  if (is_linear_f32(p.filter) && vertical_first)
    fail(ArgError::kValue, kOp, ": vertical_first must be False: the float32 bilinear has one pass");
  if (is_aa_f32(p.filter) && vertical_first)
    fail(ArgError::kValue, kOp, ": vertical_first must be False: torch resamples across first");
  p.vertical_first = vertical_first;

  if (crop.size() != 4) fail(ArgError::kValue, kOp, ": crop must be (top, left, height, width), got ", int_list(crop));
  p.top = crop[0];
  p.left = crop[1];
  p.crop_h = crop[2];
  p.crop_w = crop[3];
  if (p.top < 0 || p.left < 0 || p.crop_h < 1 || p.crop_w < 1 || p.crop_h > p.out_h || p.crop_w > p.out_w ||
      p.top > p.out_h - p.crop_h || p.left > p.out_w - p.crop_w) {
    fail(ArgError::kValue, kOp, ": crop (top, left, height, width) = ", int_list(crop),
         " must lie inside the resampled image of size ", int_list(size));
  }

  check_pad(p, pad);

  if (!patches.empty()) {
    if ((patches.size() != 3 && patches.size() != 4) || patches[0] < 1 || patches[1] < 1 || patches[2] < 1 ||
        (patches.size() == 4 && (patches[3] < 0 || patches[3] > 2))) {
      fail(ArgError::kValue, kOp,
           ": patches must be empty or (temporal_patch_size, patch_size, merge_size) >= 1 and optionally a layout, "
           "0 (channels first), 1 (channels last) or 2 (strips), got ",
           int_list(patches));
    }
    p.temporal = patches[0];
    p.patch = patches[1];
    p.merge = patches[2];
    p.patch_layout = static_cast<PatchLayout>(patches.size() == 4 ? patches[3] : 0);
    if (p.patch_layout == PatchLayout::kStrips && (p.temporal != 1 || p.merge != 1 || clip)) {
      fail(ArgError::kValue, kOp, ": strips (layout 2) are of single patches: temporal_patch_size and merge_size ",
           "must be 1 and clip False, got patches ", int_list(patches), clip ? " and clip True" : "");
    }
    // Products that overflow int64 are no geometry a crop can have: refused before they wrap.
    int64_t factor = 0, row = 0;
    if (__builtin_mul_overflow(p.patch, p.merge, &factor) || __builtin_mul_overflow(p.channels, p.temporal, &row) ||
        __builtin_mul_overflow(row, p.patch, &row) || __builtin_mul_overflow(row, p.patch, &row)) {
      fail(ArgError::kValue, kOp, ": patches ", int_list(patches), " overflow the output's row length");
    }
    if (p.canvas_h % factor != 0 || p.canvas_w % factor != 0) {
      fail(ArgError::kValue, kOp, ": the ", pad.empty() ? "cropped image " : "padded canvas ", p.canvas_h, "x",
           p.canvas_w, " must be a multiple of patch_size * merge_size = ", factor, " on both sides");
    }
    if (clip && p.batch % p.temporal != 0) {
      fail(ArgError::kValue, kOp, ": clip: the ", p.batch, " input frames must be whole groups of temporal_patch_size ",
           p.temporal, " (pad the clip with its last frame)");
    }
    p.clip = clip;
  } else if (clip) {
    fail(ArgError::kValue, kOp, ": clip needs patches (temporal_patch_size, patch_size, merge_size): it groups frames ",
         "into temporal patches");
  }
  const std::vector<int64_t> out_shape = finish_resize_plan(p);
  std::vector<const Tensor*> read = {&input, &weight, &bias};
  if (row_plan) read.push_back(&*row_plan);
  if (col_plan) read.push_back(&*col_plan);
  check_out(out, input, out_shape, p.patch > 0 && p.patch_layout == PatchLayout::kStrips ? &p.out_pitch : nullptr);
  for (const Tensor* t : read) {
    if (may_overlap(out, *t)) {
      fail(ArgError::kValue, kOp,
           ": out overlaps an input of the call (input, weight, bias or a plan); pass a "
           "separate output buffer");
    }
  }

  return p;
}

namespace {

Tensor resample_plan(int64_t in_size, int64_t out_size, std::string filter, std::string reference) {
  if (in_size < 1 || out_size < 1 || in_size >= (int64_t{1} << 24) || out_size >= (int64_t{1} << 24)) {
    fail(ArgError::kValue, "fused_input_norm.resample_plan: in_size and out_size must be in [1, 2^24), got ", in_size,
         " and ", out_size);
  }
  ResampleReference ref = ResampleReference::kPil;
  if (reference == "torchvision") {
    ref = ResampleReference::kTorchvision;
  } else if (reference != "pil") {
    fail(ArgError::kValue, "fused_input_norm.resample_plan: reference must be 'pil' or 'torchvision', got '", reference,
         "'");
  }
  const ResampleFilter f = parse_filter("fused_input_norm.resample_plan", filter);
  const std::vector<int32_t> plan = make_resample_plan(in_size, out_size, f, ref);
  const int64_t n = static_cast<int64_t>(plan.size());
  Tensor t =
      new_contiguous(torch::headeronly::IntHeaderOnlyArrayRef(&n, 1), ScalarType::Int, aoti_torch_device_type_cpu(), 0);
  std::memcpy(t.mutable_data_ptr(), plan.data(), plan.size() * sizeof(int32_t));
  return t;
}

}  // namespace

// The planner takes no tensor: one kernel for every backend (the module moves its plans to the device).
STABLE_TORCH_LIBRARY_IMPL(fused_input_norm, CompositeExplicitAutograd, m) {
  m.impl("resample_plan", TORCH_BOX(&resample_plan));
}

}  // namespace fused_input_norm
