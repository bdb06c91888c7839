// The two lookup tables of int16 SOFTMAX, `EXP_LUT` and `ONE_OVER_ONE_PLUS_X_LUT` of
// kernels/src/int8/softmax16.rs: TFLM's LUTPopulateInt16<float>
// (tensorflow/lite/kernels/internal/common.h, the transform calls inlined) run with the
// arguments micro/kernels/softmax_common.cc gives it. The tables depend on no tensor, so the
// kernel keeps them as constants instead of computing them at prepare (which would need
// `expf` in a no_std crate).
//
//   g++ -O2 -o /tmp/softmax16_luts tools/softmax16_luts.cc && /tmp/softmax16_luts
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <algorithm>
inline float TfLiteRound(const float x) { return std::round(x); }
template <typename FloatT, typename Func>
inline void LUTPopulateInt16(FloatT input_scale, int32_t input_zero_point,
                             FloatT output_scale, int32_t output_zero_point,
                             Func transform, int16_t* lut) {
  const FloatT input_min =
      input_scale * (std::numeric_limits<int16_t>::min() - input_zero_point);
  const FloatT input_max =
      input_scale * (std::numeric_limits<int16_t>::max() - input_zero_point);
  const FloatT output_min =
      output_scale * (std::numeric_limits<int16_t>::min() - output_zero_point);
  const FloatT output_max =
      output_scale * (std::numeric_limits<int16_t>::max() - output_zero_point);

  const int nb_steps = 512;
  const FloatT step = (input_max - input_min) / nb_steps;
  const FloatT half_step = step / 2;
  const FloatT output_scaling_inv =
      static_cast<FloatT>(std::numeric_limits<int16_t>::max() -
                          std::numeric_limits<int16_t>::min() + 1) /
      (output_max - output_min);
  const FloatT table_min =
      static_cast<FloatT>(std::numeric_limits<int16_t>::min());
  const FloatT table_max =
      static_cast<FloatT>(std::numeric_limits<int16_t>::max());

  for (int i = 0; i < nb_steps; i++) {
    const FloatT val = transform(input_min + i * step);
    const FloatT val_midpoint = transform(input_min + i * step + half_step);
    const FloatT val_next = transform(input_min + (i + 1) * step);

    const FloatT sample_val = TfLiteRound(val * output_scaling_inv);
    const FloatT midpoint_interp_val =
        TfLiteRound((val_next * output_scaling_inv +
                     TfLiteRound(val * output_scaling_inv)) /
                    2);
    const FloatT midpoint_val = TfLiteRound(val_midpoint * output_scaling_inv);
    const FloatT midpoint_err = midpoint_interp_val - midpoint_val;
    const FloatT bias = TfLiteRound(midpoint_err / 2);

    lut[i] = static_cast<int16_t>(std::min<FloatT>(
        std::max<FloatT>(sample_val - bias, table_min), table_max));
  }

  lut[nb_steps] = static_cast<int16_t>(std::min<FloatT>(
      std::max<FloatT>(TfLiteRound(transform(input_max) * output_scaling_inv),
                       table_min),
      table_max));
}
static void print(const char* name, const int16_t* lut) {
  printf("%s\n", name);
  for (int i = 0; i < 513; i++) printf("%d,%s", lut[i], (i % 16 == 15) ? "\n" : " ");
  printf("\n");
}
int main() {
  int16_t exp_lut[513], inv_lut[513];
  const int32_t range = std::numeric_limits<int16_t>::max() - std::numeric_limits<int16_t>::min();
  LUTPopulateInt16<float>(10.0f / range, std::numeric_limits<int16_t>::max(), 2.0f / range, 0,
      [](float value) { return std::exp(value); }, exp_lut);
  LUTPopulateInt16<float>(1.0f / range, std::numeric_limits<int16_t>::min(), 2.0f / range, 0,
      [](float value) { return 1.0f / (1.0f + value); }, inv_lut);
  print("EXP", exp_lut);
  print("INV", inv_lut);
}
