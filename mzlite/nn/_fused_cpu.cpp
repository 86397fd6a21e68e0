// Fused CPU kernels of mzlite (loaded by mzlite/nn/fused.py; Python reference there).
//
// add_norm: y = LayerNorm(x + a * keep) row by row, and its backward, in one pass over memory each.
// x, a and y are float32 or bfloat16 (any mix), LayerNorm weight and bias float32; the sum,
// the statistics and the gradients are computed in float32. Rows are grouped by token:
// x, a are (T, R, d) for T tokens of R rows (R = 1 for centres, n_g for generators), and the
// dropout mask keep (T, d) is shared by a token's rows (mzlite.nn choice 4). The mask is not
// stored: keep[t, j] = hash(seed, t d + j) >= p (scaled by 1 / (1 - p)), recomputed in backward.
//
// Why: eager PyTorch runs residual, dropout and LayerNorm as separate passes with float32 <->
// bfloat16 casts between them (autocast), and these passes cost more than the matrix products
// on the generator stream (benchmarks/fit_speed.py levers).

#include <torch/extension.h>

#include <ATen/Parallel.h>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#define MZLITE_SIMD  // vector code for some widths (with_simd); without it the generic loops only
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const c10::BFloat16* p, int64_t i) {
  uint16_t v;
  std::memcpy(&v, p + i, 2);
  uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline void store(float* p, int64_t i, float f) { p[i] = f; }
inline void store(c10::BFloat16* p, int64_t i, float f) {
  // round to nearest even, as torch's float -> bfloat16 cast
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  uint16_t v = (f != f) ? uint16_t(0x7FC0) : uint16_t(r);
  std::memcpy(p + i, &v, 2);
}

inline uint32_t mix32(uint32_t h) {  // murmur3's finaliser: a bijection with full avalanche
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// keep[t, :] of token t: scale where kept, 0 where dropped (all `scale` = 1 when p = 0)
inline void keep_row(float* m, int64_t t, int64_t d, double p, uint64_t seed) {
  if (p <= 0.0) {
    for (int64_t j = 0; j < d; ++j) m[j] = 1.0f;
    return;
  }
  const uint32_t s0 = uint32_t(seed), s1 = uint32_t(seed >> 32);
  const uint32_t threshold = uint32_t(std::llround(p * 16777216.0));  // p * 2^24
  const float scale = float(1.0 / (1.0 - p));
  const uint32_t base = uint32_t(t * d);
#pragma omp simd
  for (int64_t j = 0; j < d; ++j) {
    uint32_t h = mix32(mix32((base + uint32_t(j)) ^ s0) + s1);
    m[j] = (h >> 8) >= threshold ? scale : 0.0f;
  }
}

inline int64_t grain(int64_t R, int64_t d) { return std::max<int64_t>(1, 16384 / (R * d)); }

template <typename TX, typename TA, typename TY>
void forward_generic(const TX* x, const TA* a, const float* w, const float* b, TY* y, float* mean,
                     float* rstd, int64_t T, int64_t R, int64_t d, double p, uint64_t seed,
                     double eps) {
  at::parallel_for(0, T, grain(R, d), [&](int64_t begin, int64_t end) {
    std::vector<float> m(d), s(d);
    for (int64_t t = begin; t < end; ++t) {
      keep_row(m.data(), t, d, p, seed);
      for (int64_t r = 0; r < R; ++r) {
        const int64_t row = t * R + r, o = row * d;
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < d; ++j) {
          s[j] = load(x, o + j) + load(a, o + j) * m[j];
          sum += s[j];
        }
        const float mu = sum / float(d);
        float var = 0.f;
#pragma omp simd reduction(+ : var)
        for (int64_t j = 0; j < d; ++j) {
          const float c = s[j] - mu;
          var += c * c;
        }
        const float rs = 1.0f / std::sqrt(var / float(d) + float(eps));
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) store(y, o + j, (s[j] - mu) * rs * w[j] + b[j]);
        mean[row] = mu;
        rstd[row] = rs;
      }
    }
  });
}

// extra (T R, or null): added to mean(g xhat) of each row; the zonotope LayerNorm's generators
// depend on the centre's rstd, and their gradient reaches the centre through this term.
template <typename TX, typename TA, typename TY>
void backward_generic(const TY* gy, const TX* x, const TA* a, const float* w, const float* mean,
                      const float* rstd, TX* gx, TA* ga, float* gw_parts, float* gb_parts,
                      int64_t T, int64_t R, int64_t d, double p, uint64_t seed,
                      const float* extra) {
  at::parallel_for(0, T, grain(R, d), [&](int64_t begin, int64_t end) {
    // per-thread partial sums of the weight and bias gradients, added up by the caller
    float* gw = gw_parts + at::get_thread_num() * d;
    float* gb = gb_parts + at::get_thread_num() * d;
    std::vector<float> m(d), xh(d), g(d);
    for (int64_t t = begin; t < end; ++t) {
      keep_row(m.data(), t, d, p, seed);
      for (int64_t r = 0; r < R; ++r) {
        const int64_t row = t * R + r, o = row * d;
        const float mu = mean[row], rs = rstd[row];
        float c1 = 0.f, c2 = 0.f;
#pragma omp simd reduction(+ : c1, c2)
        for (int64_t j = 0; j < d; ++j) {
          const float dy = load(gy, o + j);
          xh[j] = (load(x, o + j) + load(a, o + j) * m[j] - mu) * rs;
          g[j] = dy * w[j];
          gw[j] += dy * xh[j];
          gb[j] += dy;
          c1 += g[j];
          c2 += g[j] * xh[j];
        }
        c1 /= float(d);
        c2 /= float(d);
        if (extra) c2 += extra[row];
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) {
          const float gs = rs * (g[j] - c1 - xh[j] * c2);
          store(gx, o + j, gs);
          store(ga, o + j, gs * m[j]);
        }
      }
    }
  });
}

// The same two kernels with vector intrinsics for d = W NV (W lanes: 16 with AVX-512, 8 with
// AVX2 + FMA): a row lives in NV registers and the weight and bias gradients stay in registers
// across rows (the generic loops above reach a fraction of this speed: short rows, reductions
// and bf16 conversions defeat the compiler's vectoriser). One template per kernel, written
// against a vector type V (Avx512, Avx2) that supplies W lanes of float32 and these operations.
// Which V runs is decided at compile time (-march=native: the CPU that builds is the CPU that
// runs); a build for a CPU with neither has the generic loops only.

#ifdef __AVX512F__
struct Avx512 {
  using F = __m512;
  static constexpr int W = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load(const c10::BFloat16* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
  }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void store(c10::BFloat16* p, F v) {
    // round to nearest even; NaN stays NaN (as torch's cast)
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
  static F set1(float f) { return _mm512_set1_ps(f); }
  static F zero() { return _mm512_setzero_ps(); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }    // a b + c
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b
  static float sum(F v) { return _mm512_reduce_add_ps(v); }
  static __m512i mix(__m512i h) {  // mix32 lane by lane
    h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
    h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int(0x85EBCA6Bu)));
    h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 13));
    h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int(0xC2B2AE35u)));
    return _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
  }
  // keep_row's entries base .. base + 15
  static F keep(uint32_t base, uint32_t s0, uint32_t s1, uint32_t threshold, float scale) {
    const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(int(base)), lanes);
    const __m512i h = mix(_mm512_add_epi32(mix(_mm512_xor_si512(idx, _mm512_set1_epi32(int(s0)))),
                                           _mm512_set1_epi32(int(s1))));
    const __mmask16 kept = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(h, 8), _mm512_set1_epi32(int(threshold)));
    return _mm512_maskz_mov_ps(kept, _mm512_set1_ps(scale));
  }
};
#endif

#if defined(__AVX2__) && defined(__FMA__)
struct Avx2 {
  using F = __m256;
  static constexpr int W = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load(const c10::BFloat16* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void store(c10::BFloat16* p, F v) {
    // round to nearest even; NaN stays NaN (as torch's cast)
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    // 32 -> 16 bits per 128-bit half (no saturation: r < 2^16), then the two halves' low words
    // side by side: 64-bit chunks 0 and 2
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  static F set1(float f) { return _mm256_set1_ps(f); }
  static F zero() { return _mm256_setzero_ps(); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }    // a b + c
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b
  static float sum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static __m256i mix(__m256i h) {  // mix32 lane by lane
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32(int(0x85EBCA6Bu)));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 13));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32(int(0xC2B2AE35u)));
    return _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
  }
  // keep_row's entries base .. base + 7
  static F keep(uint32_t base, uint32_t s0, uint32_t s1, uint32_t threshold, float scale) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(int(base)), lanes);
    const __m256i h = mix(_mm256_add_epi32(mix(_mm256_xor_si256(idx, _mm256_set1_epi32(int(s0)))),
                                           _mm256_set1_epi32(int(s1))));
    // h >> 8 and the threshold are below 2^24: the signed comparison is the unsigned one
    const __m256i dropped = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(threshold)), _mm256_srli_epi32(h, 8));
    return _mm256_andnot_ps(_mm256_castsi256_ps(dropped), _mm256_set1_ps(scale));
  }
};
#endif

#ifdef MZLITE_SIMD
template <class V, int NV>
inline void keep_row_simd(typename V::F* m, int64_t t, double p, uint64_t seed) {
  if (p <= 0.0) {
    for (int v = 0; v < NV; ++v) m[v] = V::set1(1.0f);
    return;
  }
  const uint32_t threshold = uint32_t(std::llround(p * 16777216.0));  // as keep_row
  const float scale = float(1.0 / (1.0 - p));
  for (int v = 0; v < NV; ++v)
    m[v] = V::keep(uint32_t(t * V::W * NV + V::W * v), uint32_t(seed), uint32_t(seed >> 32),
                   threshold, scale);
}

template <class V, typename TX, typename TA, typename TY, int NV>
void forward_simd(const TX* x, const TA* a, const float* w, const float* b, TY* y, float* mean,
                  float* rstd, int64_t T, int64_t R, double p, uint64_t seed, double eps) {
  using F = typename V::F;
  constexpr int64_t d = V::W * NV;
  at::parallel_for(0, T, grain(R, d), [&](int64_t begin, int64_t end) {
    F m[NV], s[NV], wv[NV], bv[NV];
    for (int v = 0; v < NV; ++v) wv[v] = V::load(w + V::W * v), bv[v] = V::load(b + V::W * v);
    for (int64_t t = begin; t < end; ++t) {
      keep_row_simd<V, NV>(m, t, p, seed);
      for (int64_t r = 0; r < R; ++r) {
        const int64_t row = t * R + r, o = row * d;
        F acc = V::zero();
        for (int v = 0; v < NV; ++v) {
          s[v] = V::fmadd(V::load(a + o + V::W * v), m[v], V::load(x + o + V::W * v));
          acc = V::add(acc, s[v]);
        }
        const float mu = V::sum(acc) / float(d);
        const F muv = V::set1(mu);
        acc = V::zero();
        for (int v = 0; v < NV; ++v) {
          s[v] = V::sub(s[v], muv);
          acc = V::fmadd(s[v], s[v], acc);
        }
        const float rs = 1.0f / std::sqrt(V::sum(acc) / float(d) + float(eps));
        const F rsv = V::set1(rs);
        for (int v = 0; v < NV; ++v)
          V::store(y + o + V::W * v, V::fmadd(V::mul(s[v], rsv), wv[v], bv[v]));
        mean[row] = mu;
        rstd[row] = rs;
      }
    }
  });
}

template <class V, typename TX, typename TA, typename TY, int NV>
void backward_simd(const TY* gy, const TX* x, const TA* a, const float* w, const float* mean,
                   const float* rstd, TX* gx, TA* ga, float* gw_parts, float* gb_parts,
                   int64_t T, int64_t R, double p, uint64_t seed, const float* extra) {
  using F = typename V::F;
  constexpr int64_t d = V::W * NV;
  at::parallel_for(0, T, grain(R, d), [&](int64_t begin, int64_t end) {
    F m[NV], xh[NV], g[NV], wv[NV], gw[NV], gb[NV];
    for (int v = 0; v < NV; ++v) {
      wv[v] = V::load(w + V::W * v);
      gw[v] = gb[v] = V::zero();
    }
    for (int64_t t = begin; t < end; ++t) {
      keep_row_simd<V, NV>(m, t, p, seed);
      for (int64_t r = 0; r < R; ++r) {
        const int64_t row = t * R + r, o = row * d;
        const F muv = V::set1(mean[row]), rsv = V::set1(rstd[row]);
        F c1 = V::zero(), c2 = V::zero();
        for (int v = 0; v < NV; ++v) {
          const F dy = V::load(gy + o + V::W * v);
          const F sv = V::fmadd(V::load(a + o + V::W * v), m[v], V::load(x + o + V::W * v));
          xh[v] = V::mul(V::sub(sv, muv), rsv);
          g[v] = V::mul(dy, wv[v]);
          gw[v] = V::fmadd(dy, xh[v], gw[v]);
          gb[v] = V::add(gb[v], dy);
          c1 = V::add(c1, g[v]);
          c2 = V::fmadd(g[v], xh[v], c2);
        }
        const F c1v = V::set1(V::sum(c1) / float(d));
        const F c2v = V::set1(V::sum(c2) / float(d) + (extra ? extra[row] : 0.0f));
        for (int v = 0; v < NV; ++v) {
          // gs = rstd (g - mean(g) - xhat mean(g xhat))
          const F gs = V::mul(rsv, V::fnmadd(xh[v], c2v, V::sub(g[v], c1v)));
          V::store(gx + o + V::W * v, gs);
          V::store(ga + o + V::W * v, V::mul(gs, m[v]));
        }
      }
    }
    float* pw = gw_parts + at::get_thread_num() * d;
    float* pb = gb_parts + at::get_thread_num() * d;
    for (int v = 0; v < NV; ++v) {
      V::store(pw + V::W * v, V::add(V::load(pw + V::W * v), gw[v]));
      V::store(pb + V::W * v, V::add(V::load(pb + V::W * v), gb[v]));
    }
  });
}
#endif

#ifdef MZLITE_SIMD
// Calls f(V{}, std::integral_constant<int, NV>{}) with the vector code for width d = V::W NV and
// returns true; false where this build has none for d (the generic loops run). AVX-512 at
// d = 32, 64, 128, 256; AVX2 at 32, 48, 64, 96, 128, 256 where there is no AVX-512 and at 48, 96
// beside it (each width is instantiated for 8 dtype mixes and 4 kernels: the list is short).
template <typename Fn>
bool with_simd(int64_t d, Fn f) {
  using std::integral_constant;
#ifdef __AVX512F__
  switch (d) {
    case 32: return f(Avx512{}, integral_constant<int, 2>{}), true;
    case 64: return f(Avx512{}, integral_constant<int, 4>{}), true;
    case 128: return f(Avx512{}, integral_constant<int, 8>{}), true;
    case 256: return f(Avx512{}, integral_constant<int, 16>{}), true;
  }
#endif
#if defined(__AVX2__) && defined(__FMA__)
  switch (d) {
    case 48: return f(Avx2{}, integral_constant<int, 6>{}), true;
    case 96: return f(Avx2{}, integral_constant<int, 12>{}), true;
#ifndef __AVX512F__
    case 32: return f(Avx2{}, integral_constant<int, 4>{}), true;
    case 64: return f(Avx2{}, integral_constant<int, 8>{}), true;
    case 128: return f(Avx2{}, integral_constant<int, 16>{}), true;
    case 256: return f(Avx2{}, integral_constant<int, 32>{}), true;
#endif
  }
#endif
  (void)f;
  return false;
}
#endif

void check(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& w,
           const torch::Tensor& b) {
  TORCH_CHECK(x.device().is_cpu() && a.device().is_cpu(), "add_norm: CPU tensors only");
  TORCH_CHECK(x.dim() == 3 && x.sizes() == a.sizes(), "add_norm: x and a must be (T, R, d), got ",
              x.sizes(), " and ", a.sizes());
  TORCH_CHECK(x.is_contiguous() && a.is_contiguous(), "add_norm: x and a must be contiguous");
  for (const auto& t : {x, a})
    TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16,
                "add_norm: x and a must be float32 or bfloat16, got ", t.scalar_type());
  TORCH_CHECK(w.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat &&
                  w.is_contiguous() && b.is_contiguous() && w.numel() == x.size(2) &&
                  b.numel() == x.size(2),
              "add_norm: weight and bias must be contiguous float32 of size d = ", x.size(2));
}

// Calls f with typed pointers for the dtypes of x, a and the output (2 x 2 x 2 instantiations).
template <typename F>
void dispatch3(at::ScalarType tx, at::ScalarType ta, at::ScalarType ty, F f) {
  auto with_y = [&](auto px, auto pa) {
    if (ty == at::kFloat)
      f(px, pa, static_cast<float*>(nullptr));
    else
      f(px, pa, static_cast<c10::BFloat16*>(nullptr));
  };
  auto with_a = [&](auto px) {
    if (ta == at::kFloat)
      with_y(px, static_cast<float*>(nullptr));
    else
      with_y(px, static_cast<c10::BFloat16*>(nullptr));
  };
  if (tx == at::kFloat)
    with_a(static_cast<float*>(nullptr));
  else
    with_a(static_cast<c10::BFloat16*>(nullptr));
}

std::vector<torch::Tensor> add_norm_forward(const torch::Tensor& x, const torch::Tensor& a,
                                            const torch::Tensor& w, const torch::Tensor& b,
                                            double p, int64_t seed, double eps,
                                            bool out_bf16) {
  check(x, a, w, b);
  const auto out_dtype = out_bf16 ? at::kBFloat16 : at::kFloat;
  const int64_t T = x.size(0), R = x.size(1), d = x.size(2);
  auto y = torch::empty(x.sizes(), x.options().dtype(out_dtype));
  auto mean = torch::empty({T * R}, x.options().dtype(at::kFloat));
  auto rstd = torch::empty({T * R}, x.options().dtype(at::kFloat));
  dispatch3(x.scalar_type(), a.scalar_type(), out_dtype, [&](auto px, auto pa, auto py) {
    using TX = std::remove_pointer_t<decltype(px)>;
    using TA = std::remove_pointer_t<decltype(pa)>;
    using TY = std::remove_pointer_t<decltype(py)>;
    auto px_ = static_cast<const TX*>(x.data_ptr());
    auto pa_ = static_cast<const TA*>(a.data_ptr());
    auto py_ = static_cast<TY*>(y.data_ptr());
    const float *pw = w.data_ptr<float>(), *pb = b.data_ptr<float>();
    float *pm = mean.data_ptr<float>(), *pr = rstd.data_ptr<float>();
#ifdef MZLITE_SIMD
    if (with_simd(d, [&](auto v, auto nv) {
          forward_simd<decltype(v), TX, TA, TY, decltype(nv)::value>(px_, pa_, pw, pb, py_, pm, pr, T, R, p, seed, eps);
        }))
      return;
#endif
        forward_generic<TX, TA, TY>(px_, pa_, pw, pb, py_, pm, pr, T, R, d, p, seed, eps);
  });
  return {y, mean, rstd};
}

std::vector<torch::Tensor> add_norm_backward_impl(const torch::Tensor& gy, const torch::Tensor& x,
                                                  const torch::Tensor& a, const torch::Tensor& w,
                                                  const torch::Tensor& mean,
                                                  const torch::Tensor& rstd, double p,
                                                  int64_t seed, const float* extra) {
  check(x, a, w, w);
  TORCH_CHECK(gy.sizes() == x.sizes() && gy.is_contiguous(),
              "add_norm_backward: grad must be contiguous and of x's shape");
  const int64_t T = x.size(0), R = x.size(1), d = x.size(2);
  auto gx = torch::empty_like(x);
  auto ga = torch::empty_like(a);
  const int64_t threads = at::get_num_threads();
  auto gw_parts = torch::zeros({threads, d}, w.options());
  auto gb_parts = torch::zeros({threads, d}, w.options());
  dispatch3(x.scalar_type(), a.scalar_type(), gy.scalar_type(), [&](auto px, auto pa, auto py) {
    using TX = std::remove_pointer_t<decltype(px)>;
    using TA = std::remove_pointer_t<decltype(pa)>;
    using TY = std::remove_pointer_t<decltype(py)>;
    auto pgy = static_cast<const TY*>(gy.data_ptr());
    auto px_ = static_cast<const TX*>(x.data_ptr());
    auto pa_ = static_cast<const TA*>(a.data_ptr());
    auto pgx = static_cast<TX*>(gx.data_ptr());
    auto pga = static_cast<TA*>(ga.data_ptr());
    const float *pw = w.data_ptr<float>(), *pm = mean.data_ptr<float>(), *pr = rstd.data_ptr<float>();
    float *pgw = gw_parts.data_ptr<float>(), *pgb = gb_parts.data_ptr<float>();
#ifdef MZLITE_SIMD
    if (with_simd(d, [&](auto v, auto nv) {
          backward_simd<decltype(v), TX, TA, TY, decltype(nv)::value>(pgy, px_, pa_, pw, pm, pr, pgx, pga, pgw, pgb, T, R, p, seed, extra);
        }))
      return;
#endif
        backward_generic<TX, TA, TY>(pgy, px_, pa_, pw, pm, pr, pgx, pga, pgw, pgb, T, R, d, p, seed,
                                 extra);
  });
  return {gx, ga, gw_parts.sum(0), gb_parts.sum(0)};
}

std::vector<torch::Tensor> add_norm_backward(const torch::Tensor& gy, const torch::Tensor& x,
                                             const torch::Tensor& a, const torch::Tensor& w,
                                             const torch::Tensor& mean, const torch::Tensor& rstd,
                                             double p, int64_t seed) {
  return add_norm_backward_impl(gy, x, a, w, mean, rstd, p, seed, nullptr);
}

// ---------------------------------------------------------------------------- zonotope LayerNorm
// The default reading of the MZ blocks (mzlite.nn choice 7, attention.add_zonotope_norm): the
// centre c (T, d) gets LayerNorm(c + a_c * keep) (add_norm above, R = 1), and each of a token's
// generator rows G (T, R, d) the centre's affine map without its bias,
//   y = (s - mean(s)) * rstd_c * w,   s = G + a_G * keep,
// with the centre's rstd_c, the token's mask shared by centre and generators. Backward, per
// token, with u = (s - mean(s)) rstd_c and q = gy * w * rstd_c:
//   ds = q - mean(q),   dw += sum gy * u,   and the generators' pull on rstd_c reaches the
//   centre as  extra[t] = sum_{rows, j} gy * u * w / d,  added to mean(g xhat) in its backward.
// One pass over the generator stream each way, where eager PyTorch takes about five forward
// (promotion to float32 under autocast, residual, mean, centring, scaling, the cast back) and
// more backward.

template <typename TX, typename TA, typename TY>
void gen_forward_generic(const TX* x, const TA* a, const float* w, const float* rstd, TY* y,
                         int64_t T, int64_t R, int64_t d, double p, uint64_t seed) {
  at::parallel_for(0, T, grain(R, d), [&](int64_t begin, int64_t end) {
    std::vector<float> m(d), s(d), rw(d);
    for (int64_t t = begin; t < end; ++t) {
      keep_row(m.data(), t, d, p, seed);
      for (int64_t j = 0; j < d; ++j) rw[j] = rstd[t] * w[j];
      for (int64_t r = 0; r < R; ++r) {
        const int64_t o = (t * R + r) * d;
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < d; ++j) {
          s[j] = load(x, o + j) + load(a, o + j) * m[j];
          sum += s[j];
        }
        const float mu = sum / float(d);
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) store(y, o + j, (s[j] - mu) * rw[j]);
      }
    }
  });
}

template <typename TX, typename TA, typename TY>
void gen_backward_generic(const TY* gy, const TX* x, const TA* a, const float* w,
                          const float* rstd, TX* gx, TA* ga, float* gw_parts, float* extra,
                          int64_t T, int64_t R, int64_t d, double p, uint64_t seed) {
  at::parallel_for(0, T, grain(R, d), [&](int64_t begin, int64_t end) {
    float* gw = gw_parts + at::get_thread_num() * d;
    std::vector<float> m(d), q(d);
    for (int64_t t = begin; t < end; ++t) {
      keep_row(m.data(), t, d, p, seed);
      const float rs = rstd[t];
      float pull = 0.f;
      for (int64_t r = 0; r < R; ++r) {
        const int64_t o = (t * R + r) * d;
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < d; ++j) sum += load(x, o + j) + load(a, o + j) * m[j];
        const float mu = sum / float(d);
        float qsum = 0.f;
#pragma omp simd reduction(+ : qsum, pull)
        for (int64_t j = 0; j < d; ++j) {
          const float dy = load(gy, o + j);
          const float u = (load(x, o + j) + load(a, o + j) * m[j] - mu) * rs;
          gw[j] += dy * u;
          pull += dy * u * w[j];
          q[j] = dy * w[j] * rs;
          qsum += q[j];
        }
        const float qbar = qsum / float(d);
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) {
          store(gx, o + j, q[j] - qbar);
          store(ga, o + j, (q[j] - qbar) * m[j]);
        }
      }
      extra[t] = pull / float(d);
    }
  });
}

#ifdef MZLITE_SIMD
template <class V, typename TX, typename TA, typename TY, int NV>
void gen_forward_simd(const TX* x, const TA* a, const float* w, const float* rstd, TY* y,
                      int64_t T, int64_t R, double p, uint64_t seed) {
  using F = typename V::F;
  constexpr int64_t d = V::W * NV;
  at::parallel_for(0, T, grain(R, d), [&](int64_t begin, int64_t end) {
    F m[NV], s[NV], rw[NV];
    for (int64_t t = begin; t < end; ++t) {
      keep_row_simd<V, NV>(m, t, p, seed);
      const F rsv = V::set1(rstd[t]);
      for (int v = 0; v < NV; ++v) rw[v] = V::mul(rsv, V::load(w + V::W * v));
      for (int64_t r = 0; r < R; ++r) {
        const int64_t o = (t * R + r) * d;
        F acc = V::zero();
        for (int v = 0; v < NV; ++v) {
          s[v] = V::fmadd(V::load(a + o + V::W * v), m[v], V::load(x + o + V::W * v));
          acc = V::add(acc, s[v]);
        }
        const F muv = V::set1(V::sum(acc) / float(d));
        for (int v = 0; v < NV; ++v)
          V::store(y + o + V::W * v, V::mul(V::sub(s[v], muv), rw[v]));
      }
    }
  });
}

template <class V, typename TX, typename TA, typename TY, int NV>
void gen_backward_simd(const TY* gy, const TX* x, const TA* a, const float* w,
                       const float* rstd, TX* gx, TA* ga, float* gw_parts, float* extra,
                       int64_t T, int64_t R, double p, uint64_t seed) {
  using F = typename V::F;
  constexpr int64_t d = V::W * NV;
  at::parallel_for(0, T, grain(R, d), [&](int64_t begin, int64_t end) {
    F m[NV], wv[NV], rw[NV], gw[NV], s[NV], q[NV];
    for (int v = 0; v < NV; ++v) {
      wv[v] = V::load(w + V::W * v);
      gw[v] = V::zero();
    }
    for (int64_t t = begin; t < end; ++t) {
      keep_row_simd<V, NV>(m, t, p, seed);
      const F rsv = V::set1(rstd[t]);
      for (int v = 0; v < NV; ++v) rw[v] = V::mul(rsv, wv[v]);
      // sum gy u w = sum gy (s - mu) rstd w: accumulated as gy (s - mu) against rw, lane-wise
      F pull = V::zero();
      for (int64_t r = 0; r < R; ++r) {
        const int64_t o = (t * R + r) * d;
        F acc = V::zero(), qacc = V::zero();
        for (int v = 0; v < NV; ++v) {
          s[v] = V::fmadd(V::load(a + o + V::W * v), m[v], V::load(x + o + V::W * v));
          acc = V::add(acc, s[v]);
        }
        const F muv = V::set1(V::sum(acc) / float(d));
        for (int v = 0; v < NV; ++v) {
          const F dy = V::load(gy + o + V::W * v);
          const F c = V::sub(s[v], muv);
          gw[v] = V::fmadd(V::mul(dy, c), rsv, gw[v]);
          q[v] = V::mul(dy, rw[v]);
          pull = V::fmadd(q[v], c, pull);
          qacc = V::add(qacc, q[v]);
        }
        const F qbar = V::set1(V::sum(qacc) / float(d));
        for (int v = 0; v < NV; ++v) {
          const F gs = V::sub(q[v], qbar);
          V::store(gx + o + V::W * v, gs);
          V::store(ga + o + V::W * v, V::mul(gs, m[v]));
        }
      }
      extra[t] = V::sum(pull) / float(d);
    }
    float* pw = gw_parts + at::get_thread_num() * d;
    for (int v = 0; v < NV; ++v)
      V::store(pw + V::W * v, V::add(V::load(pw + V::W * v), gw[v]));
  });
}
#endif

void check_zonotope(const torch::Tensor& c, const torch::Tensor& G, const torch::Tensor& a_G) {
  TORCH_CHECK(G.device().is_cpu() && a_G.device().is_cpu(), "zonotope_norm: CPU tensors only");
  TORCH_CHECK(G.dim() == 3 && G.sizes() == a_G.sizes() && c.dim() == 3 && c.size(1) == 1 &&
                  c.size(0) == G.size(0) && c.size(2) == G.size(2),
              "zonotope_norm: c must be (T, 1, d) and G, a_G (T, n_g, d), got ", c.sizes(), ", ",
              G.sizes(), " and ", a_G.sizes());
  TORCH_CHECK(G.is_contiguous() && a_G.is_contiguous(),
              "zonotope_norm: G and a_G must be contiguous");
  for (const auto& t : {G, a_G})
    TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16,
                "zonotope_norm: G and a_G must be float32 or bfloat16, got ", t.scalar_type());
}

// Forward of the zonotope LayerNorm: the centre as add_norm_forward (R = 1), then the
// generators with the centre's rstd. -> {y_c, y_G, mean, rstd}
std::vector<torch::Tensor> zonotope_norm_forward(const torch::Tensor& c, const torch::Tensor& G,
                                                 const torch::Tensor& a_c,
                                                 const torch::Tensor& a_G, const torch::Tensor& w,
                                                 const torch::Tensor& b, double p, int64_t seed,
                                                 double eps, bool c_bf16, bool G_bf16) {
  check_zonotope(c, G, a_G);
  auto centre = add_norm_forward(c, a_c, w, b, p, seed, eps, c_bf16);
  const torch::Tensor& rstd = centre[2];
  const int64_t T = G.size(0), R = G.size(1), d = G.size(2);
  auto y = torch::empty(G.sizes(), G.options().dtype(G_bf16 ? at::kBFloat16 : at::kFloat));
  dispatch3(G.scalar_type(), a_G.scalar_type(), y.scalar_type(), [&](auto px, auto pa, auto py) {
    using TX = std::remove_pointer_t<decltype(px)>;
    using TA = std::remove_pointer_t<decltype(pa)>;
    using TY = std::remove_pointer_t<decltype(py)>;
    auto px_ = static_cast<const TX*>(G.data_ptr());
    auto pa_ = static_cast<const TA*>(a_G.data_ptr());
    auto py_ = static_cast<TY*>(y.data_ptr());
    const float *pw = w.data_ptr<float>(), *pr = rstd.data_ptr<float>();
#ifdef MZLITE_SIMD
    if (with_simd(d, [&](auto v, auto nv) {
          gen_forward_simd<decltype(v), TX, TA, TY, decltype(nv)::value>(px_, pa_, pw, pr, py_, T, R, p, seed);
        }))
      return;
#endif
        gen_forward_generic<TX, TA, TY>(px_, pa_, pw, pr, py_, T, R, d, p, seed);
  });
  return {centre[0], y, centre[1], rstd};
}

// -> {g_c, g_a_c, g_G, g_a_G, g_w, g_b}
std::vector<torch::Tensor> zonotope_norm_backward(
    const torch::Tensor& gy_c, const torch::Tensor& gy_G, const torch::Tensor& c,
    const torch::Tensor& G, const torch::Tensor& a_c, const torch::Tensor& a_G,
    const torch::Tensor& w, const torch::Tensor& mean, const torch::Tensor& rstd, double p,
    int64_t seed) {
  check_zonotope(c, G, a_G);
  TORCH_CHECK(gy_G.sizes() == G.sizes() && gy_G.is_contiguous(),
              "zonotope_norm_backward: the generators' grad must be contiguous and of G's shape");
  const int64_t T = G.size(0), R = G.size(1), d = G.size(2);
  auto gG = torch::empty_like(G);
  auto gaG = torch::empty_like(a_G);
  auto extra = torch::empty({T}, w.options());
  auto gw_parts = torch::zeros({at::get_num_threads(), d}, w.options());
  dispatch3(G.scalar_type(), a_G.scalar_type(), gy_G.scalar_type(), [&](auto px, auto pa, auto py) {
    using TX = std::remove_pointer_t<decltype(px)>;
    using TA = std::remove_pointer_t<decltype(pa)>;
    using TY = std::remove_pointer_t<decltype(py)>;
    auto pgy = static_cast<const TY*>(gy_G.data_ptr());
    auto px_ = static_cast<const TX*>(G.data_ptr());
    auto pa_ = static_cast<const TA*>(a_G.data_ptr());
    auto pgx = static_cast<TX*>(gG.data_ptr());
    auto pga = static_cast<TA*>(gaG.data_ptr());
    const float *pw = w.data_ptr<float>(), *pr = rstd.data_ptr<float>();
    float *pgw = gw_parts.data_ptr<float>(), *pe = extra.data_ptr<float>();
#ifdef MZLITE_SIMD
    if (with_simd(d, [&](auto v, auto nv) {
          gen_backward_simd<decltype(v), TX, TA, TY, decltype(nv)::value>(pgy, px_, pa_, pw, pr, pgx, pga, pgw, pe, T, R, p, seed);
        }))
      return;
#endif
        gen_backward_generic<TX, TA, TY>(pgy, px_, pa_, pw, pr, pgx, pga, pgw, pe, T, R, d, p, seed);
  });
  auto centre = add_norm_backward_impl(gy_c, c, a_c, w, mean, rstd, p, seed,
                                       extra.data_ptr<float>());
  return {centre[0], centre[1], gG, gaG, centre[2] + gw_parts.sum(0), centre[3]};
}

torch::Tensor keep_mask(int64_t T, int64_t d, double p, int64_t seed) {
  auto m = torch::empty({T, d}, torch::dtype(at::kFloat));
  float* pm = m.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t) keep_row(pm + t * d, t, d, p, uint64_t(seed));
  return m;
}


// ---------------------------------------------------------------------------- head-major layout
// The generator values of a packed set stream (R, n_g, H d_k) are read by attention head-major
// and padded, (B, H, n, n_g, d_k). Eager PyTorch builds that in three passes (zero fill, row
// copy, permuting copy) and back in two; these do each direction in one, copying d_k-element
// runs. Any dtype (bytes are moved, never converted).

// Calls f with a copy function for runs of `run` bytes: a fixed-size copy (inlined as one or
// two vector moves) for the common runs, memcpy otherwise.
template <int N>
struct FixedCopy {
  void operator()(char* dst, const char* src, int64_t) const { std::memcpy(dst, src, N); }
};
struct AnyCopy {
  void operator()(char* dst, const char* src, int64_t run) const { std::memcpy(dst, src, run); }
};
template <typename F>
void with_run(int64_t run, F f) {
  if (run == 32) return f(FixedCopy<32>{});
  if (run == 64) return f(FixedCopy<64>{});
  if (run == 16) return f(FixedCopy<16>{});
  if (run == 128) return f(FixedCopy<128>{});
  f(AnyCopy{});
}

// src (R, n_g, H dk) packed -> (B, H, n, n_g, dk); slot_row (B n): the packed row of each slot,
// -1 for padding (zeros).
torch::Tensor unpack_heads(const torch::Tensor& src, const torch::Tensor& slot_row, int64_t B,
                           int64_t n, int64_t H) {
  TORCH_CHECK(src.dim() == 3 && src.is_contiguous() && src.device().is_cpu(),
              "unpack_heads: src must be a contiguous CPU (R, n_g, d) tensor");
  TORCH_CHECK(slot_row.scalar_type() == at::kLong && slot_row.numel() == B * n,
              "unpack_heads: slot_row must be int64 of B n entries");
  const int64_t ng = src.size(1), d = src.size(2), dk = d / H, es = src.element_size();
  TORCH_CHECK(dk * H == d, "unpack_heads: d = ", d, " is not a multiple of H = ", H);
  auto out = torch::empty({B, H, n, ng, dk}, src.options());
  const char* in = static_cast<const char*>(src.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  const int64_t* rows = slot_row.data_ptr<int64_t>();
  const int64_t run = dk * es;
  with_run(run, [&](auto copy) {
    at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        for (int64_t i = 0; i < n; ++i) {
          char* dst = o + ((bh * n + i) * ng) * run;
          const int64_t row = rows[b * n + i];
          if (row < 0) {
            std::memset(dst, 0, ng * run);
            continue;
          }
          for (int64_t g = 0; g < ng; ++g)
            copy(dst + g * run, in + ((row * ng + g) * d + h * dk) * es, run);
        }
      }
    });
  });
  return out;
}

// x (B, H, n, n_g, dk) head-major -> (R, n_g, H dk): row r holds slot rows[r]; rows r >= zero_from
// are zeros.
torch::Tensor pack_heads(const torch::Tensor& x, const torch::Tensor& rows, int64_t zero_from) {
  TORCH_CHECK(x.dim() == 5 && x.is_contiguous() && x.device().is_cpu(),
              "pack_heads: x must be a contiguous CPU (B, H, n, n_g, dk) tensor");
  TORCH_CHECK(rows.scalar_type() == at::kLong && rows.dim() == 1, "pack_heads: rows must be int64");
  const int64_t H = x.size(1), n = x.size(2), ng = x.size(3), dk = x.size(4), d = H * dk;
  const int64_t R = rows.numel(), es = x.element_size(), run = dk * es;
  auto out = torch::empty({R, ng, d}, x.options());
  const char* in = static_cast<const char*>(x.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  const int64_t* slot = rows.data_ptr<int64_t>();
  with_run(run, [&](auto copy) {
    at::parallel_for(0, R, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        char* dst = o + r * ng * d * es;
        if (r >= zero_from) {
          std::memset(dst, 0, ng * d * es);
          continue;
        }
        const int64_t b = slot[r] / n, i = slot[r] % n;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t g = 0; g < ng; ++g)
            copy(dst + (g * d + h * dk) * es, in + (((b * H + h) * n + i) * ng + g) * run, run);
      }
    });
  });
  return out;
}

// Whether this build has the AVX-512 kernels (compiled with -march=native on a CPU with
// AVX-512F), and the instruction set of its vector code: "avx512", "avx2" (AVX2 + FMA) or
// "generic" (the loops alone). mzlite.nn.fused reports them; which path runs is chosen by
// measuring the kernels against eager PyTorch on this machine.
bool has_avx512() {
#ifdef __AVX512F__
  return true;
#else
  return false;
#endif
}

std::string simd() {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(MZLITE_SIMD)
  return "avx2";
#else
  return "generic";
#endif
}

// The widths d that have vector code in this build (with_simd); others run the generic loops.
std::vector<int64_t> simd_widths() {
  std::vector<int64_t> widths;
#ifdef MZLITE_SIMD
  for (int64_t d = 8; d <= 256; d += 8)
    if (with_simd(d, [](auto, auto) {})) widths.push_back(d);
#endif
  return widths;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.def("has_avx512", &has_avx512);
  module.def("simd", &simd);
  module.def("simd_widths", &simd_widths);
  module.def("add_norm_forward", &add_norm_forward);
  module.def("add_norm_backward", &add_norm_backward);
  module.def("zonotope_norm_forward", &zonotope_norm_forward);
  module.def("zonotope_norm_backward", &zonotope_norm_backward);
  module.def("keep_mask", &keep_mask);
  module.def("unpack_heads", &unpack_heads);
  module.def("pack_heads", &pack_heads);
}
