// Decode attention over the paged KV cache, for the CPU (glmcot engine).
//
// One new token per sequence attends over that sequence's cached positions [first, length),
// read straight from the block pool through its block table: no gather, no padding. Work is
// split into pieces of a sequence (split-K), so a single long sequence still uses every thread;
// the pieces merge through their softmax max and sum. Returns the output and the log-sum-exp of
// each query head, so callers can merge it with attention over other keys (a shared prefix).
//
// Layout: cache [blocks, block_size, kv_heads, dim]; the query heads of KV head h are
// h * group .. h * group + group - 1 (grouped-query attention). float32 accumulation throughout.

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu_convert.h"

namespace {

constexpr int64_t TILE = 32;  // tokens whose K (or V) rows stay in L2 while every head reads them
constexpr int64_t MAX_HEAD_DIM = 256;

// 16 floats: one AVX-512 register, or two AVX2 ones, or four SSE ones (GCC/Clang vector types).
typedef float vec16 __attribute__((vector_size(64)));
typedef uint16_t half16 __attribute__((vector_size(32)));
typedef uint32_t word16 __attribute__((vector_size(64)));

inline vec16 load16(const float* p) {
  vec16 v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

inline vec16 load16(const at::BFloat16* p) {  // a bfloat16 is the top half of a float32
  half16 h;
  __builtin_memcpy(&h, p, sizeof(h));
  const word16 w = __builtin_convertvector(h, word16) << 16;
  vec16 v;
  __builtin_memcpy(&v, &w, sizeof(v));
  return v;
}

inline vec16 load16(const at::Half* p) {
  vec16 v;
  for (int i = 0; i < 16; ++i) v[i] = glmcot::widen(p[i]);
  return v;
}

// The first `count` (< 16) elements, zeros after: the last, partial vector of an odd head size.
template <typename T>
inline vec16 load_part(const T* p, int64_t count) {
  vec16 v = {};
  for (int64_t i = 0; i < count; ++i) v[i] = glmcot::widen(p[i]);
  return v;
}

inline void store_part(float* p, vec16 v, int64_t count) {
  for (int64_t i = 0; i < count; ++i) p[i] = v[i];
}

inline float sum16(vec16 v) {
  vec16 s = v + __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  s = s + __builtin_shufflevector(s, s, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  s = s + __builtin_shufflevector(s, s, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  return s[0] + s[1];
}

// exp(x) for x <= 0 without branches, so the softmax loop vectorizes (libm's expf is a scalar
// call): x = n ln2 + r with |r| <= ln2 / 2, exp(r) by a degree-7 minimax polynomial, 2^n through
// the exponent bits. Relative error about 2e-7; below -87 it returns about 1e-38 instead of 0.
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

template <typename T>
inline const T* row_address(const T* base, const int32_t* table, int64_t pos, int64_t block_size, int64_t row) {
  return base + (static_cast<int64_t>(table[pos / block_size]) * block_size + pos % block_size) * row;
}

// The query heads of one KV head share its K and V rows, so they are taken up to two at a time:
// each row slice is loaded (and, for 16-bit caches, widened) once for both.
constexpr int64_t HEADS_PER_PASS = 2;

// Scores of `PASS` query heads (q: their rows) against `size` K rows of one KV head.
template <int64_t PASS, int64_t MAX_VECTORS, typename T, typename Load>
inline void score_tile(const float* q_rows, const T* const* rows, int64_t size, int64_t offset, int64_t dim,
                       int64_t vectors, int64_t count, const Load& load, float* lines, float* top) {
  vec16 q[PASS][MAX_VECTORS];
  for (int64_t g = 0; g < PASS; ++g)
    for (int64_t j = 0; j < vectors; ++j) q[g][j] = load(q_rows + g * dim, j);
  for (int64_t t = 0; t < size; ++t) {
    const T* k = rows[t] + offset;
    vec16 a[PASS] = {};
    for (int64_t j = 0; j < vectors; ++j) {
      const vec16 kv = load(k, j);
      for (int64_t g = 0; g < PASS; ++g) a[g] += q[g][j] * kv;
    }
    for (int64_t g = 0; g < PASS; ++g) {
      const float score = sum16(a[g]);
      lines[g * count + t] = score;
      top[g] = std::max(top[g], score);
    }
  }
}

// Adds probability-weighted V rows of one KV head into `PASS` query heads' outputs.
template <int64_t PASS, int64_t MAX_VECTORS, typename T, typename Load>
inline void weigh_tile(const float* lines, const T* const* rows, int64_t size, int64_t offset, int64_t dim,
                       int64_t vectors, int64_t count, int64_t tail, const Load& load, float* out) {
  vec16 sum[PASS][MAX_VECTORS];  // the heads' output rows stay in registers across the tile
  for (int64_t g = 0; g < PASS; ++g)
    for (int64_t j = 0; j < vectors; ++j) sum[g][j] = load(out + g * dim, j);
  for (int64_t t = 0; t < size; ++t) {
    const T* v = rows[t] + offset;
    float p[PASS];
    for (int64_t g = 0; g < PASS; ++g) p[g] = lines[g * count + t];
    for (int64_t j = 0; j < vectors; ++j) {
      const vec16 vv = load(v, j);
      for (int64_t g = 0; g < PASS; ++g) sum[g][j] += p[g] * vv;
    }
  }
  for (int64_t g = 0; g < PASS; ++g) {
    float* o = out + g * dim;
    for (int64_t j = 0; j + 1 < vectors; ++j) __builtin_memcpy(o + 16 * j, &sum[g][j], sizeof(vec16));
    store_part(o + 16 * (vectors - 1), sum[g][vectors - 1], tail);
  }
}

// One piece: every query head of one sequence over its positions [first, last). KV rows are
// read tile by tile in position order (all heads of a token are one contiguous row, which the
// hardware prefetcher follows) and every head then works on the tile from L2. Writes the
// unnormalised outputs (acc [heads, dim]), each head's softmax max (top) and sum (total).
// FIXED > 0: the head size, known at compile time (fully unrolled); 0: `dim_arg`, up to 256.
template <typename T, int64_t FIXED>
void attend(const float* query, const T* keys, const T* values, const int32_t* table, int64_t first, int64_t last,
            int64_t block_size, int64_t kv_heads, int64_t group, int64_t dim_arg, float* scores, float* acc, float* top,
            float* total) {
  constexpr int64_t MAX_VECTORS = FIXED ? (FIXED + 15) / 16 : 16;
  const int64_t dim = FIXED ? FIXED : dim_arg;
  const int64_t vectors = (dim + 15) / 16, tail = dim - (vectors - 1) * 16;  // lanes used in the last vector
  const auto load = [&](const auto* p, int64_t j) {
    return j + 1 < vectors || tail == 16 ? load16(p + 16 * j) : load_part(p + 16 * j, tail);
  };
  const int64_t count = last - first, heads = kv_heads * group, row = kv_heads * dim;
  const T* rows[TILE];
  for (int64_t h = 0; h < heads; ++h) top[h] = -std::numeric_limits<float>::infinity();
  for (int64_t tile = first; tile < last; tile += TILE) {
    const int64_t size = std::min<int64_t>(TILE, last - tile);
    for (int64_t t = 0; t < size; ++t) rows[t] = row_address(keys, table, tile + t, block_size, row);
    for (int64_t h = 0; h < heads; h += HEADS_PER_PASS) {
      const int64_t pass = std::min<int64_t>(HEADS_PER_PASS, (h / group + 1) * group - h);  // within one KV head
      const int64_t offset = (h / group) * dim;
      float* lines = scores + h * count + (tile - first);
      if (pass == 2) {
        score_tile<2, MAX_VECTORS>(query + h * dim, rows, size, offset, dim, vectors, count, load, lines, top + h);
      } else {
        score_tile<1, MAX_VECTORS>(query + h * dim, rows, size, offset, dim, vectors, count, load, lines, top + h);
        h -= HEADS_PER_PASS - 1;
      }
    }
  }
  for (int64_t h = 0; h < heads; ++h) {
    float* line = scores + h * count;
    const float m = top[h];
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t t = 0; t < count; ++t) {
      line[t] = exp_nonpositive(line[t] - m);
      sum += line[t];
    }
    total[h] = sum;
  }
  std::fill(acc, acc + heads * dim, 0.f);
  for (int64_t tile = first; tile < last; tile += TILE) {
    const int64_t size = std::min<int64_t>(TILE, last - tile);
    for (int64_t t = 0; t < size; ++t) rows[t] = row_address(values, table, tile + t, block_size, row);
    for (int64_t h = 0; h < heads; h += HEADS_PER_PASS) {
      const int64_t pass = std::min<int64_t>(HEADS_PER_PASS, (h / group + 1) * group - h);
      const int64_t offset = (h / group) * dim;
      const float* lines = scores + h * count + (tile - first);
      if (pass == 2) {
        weigh_tile<2, MAX_VECTORS>(lines, rows, size, offset, dim, vectors, count, tail, load, acc + h * dim);
      } else {
        weigh_tile<1, MAX_VECTORS>(lines, rows, size, offset, dim, vectors, count, tail, load, acc + h * dim);
        h -= HEADS_PER_PASS - 1;
      }
    }
  }
}

struct Pieces {
  std::vector<int64_t> sequence, first, last;
  std::vector<int64_t> begin;  // [n + 1]: sequence i owns pieces begin[i] .. begin[i + 1] - 1
};

// Pieces of about equal size, so the threads' contiguous shares of them hold about equal work.
Pieces split(const int32_t* firsts, const int32_t* lengths, int64_t n, int64_t threads) {
  int64_t tokens = 0;
  for (int64_t i = 0; i < n; ++i) tokens += std::max<int64_t>(lengths[i] - firsts[i], 0);
  const int64_t piece = std::max<int64_t>(64, (tokens + 8 * threads - 1) / (8 * threads));
  Pieces p;
  p.begin.resize(n + 1);
  for (int64_t i = 0; i < n; ++i) {
    p.begin[i] = p.sequence.size();
    for (int64_t pos = firsts[i]; pos < lengths[i]; pos += piece) {
      p.sequence.push_back(i);
      p.first.push_back(pos);
      p.last.push_back(std::min<int64_t>(pos + piece, lengths[i]));
    }
  }
  p.begin[n] = p.sequence.size();
  return p;
}

template <typename T, int64_t FIXED>
void run_pieces(const Pieces& p, const float* query, const T* keys, const T* values, const int32_t* tables, int64_t width,
                int64_t block_size, int64_t kv_heads, int64_t group, int64_t dim, float* acc, float* stats) {
  const int64_t heads = kv_heads * group, count = p.sequence.size();
  at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t k = begin; k < end; ++k) {
      const int64_t i = p.sequence[k];
      scores.resize(heads * (p.last[k] - p.first[k]));
      attend<T, FIXED>(query + i * heads * dim, keys, values, tables + i * width, p.first[k], p.last[k], block_size,
                       kv_heads, group, dim, scores.data(), acc + k * heads * dim, stats + k * 2 * heads,
                       stats + k * 2 * heads + heads);
    }
  });
}

template <typename T>
void run_typed(const Pieces& p, const float* query, const torch::Tensor& key_cache, const torch::Tensor& value_cache,
               const int32_t* tables, int64_t width, int64_t kv_heads, int64_t group, int64_t dim, float* acc,
               float* stats) {
  const T* keys = key_cache.data_ptr<T>();
  const T* values = value_cache.data_ptr<T>();
  const int64_t block_size = key_cache.size(1);
  const auto run = [&](auto fixed) {
    run_pieces<T, decltype(fixed)::value>(p, query, keys, values, tables, width, block_size, kv_heads, group, dim, acc, stats);
  };
  switch (dim) {  // the common head sizes fully unrolled; any other size up to 256 through the generic path
    case 64: run(std::integral_constant<int64_t, 64>()); break;
    case 128: run(std::integral_constant<int64_t, 128>()); break;
    case 256: run(std::integral_constant<int64_t, 256>()); break;
    default: run(std::integral_constant<int64_t, 0>()); break;
  }
}

}  // namespace

// q [n, heads, dim]; key/value cache [blocks, block_size, kv_heads, dim] (contiguous);
// block_tables [n, width] int32; first, lengths [n] int32: sequence i attends over its
// positions [first[i], lengths[i]), which must not be empty. Returns (out [n, heads, dim] in q's
// dtype, log-sum-exp [n, heads] float32).
std::vector<torch::Tensor> paged_decode_attention(torch::Tensor q, torch::Tensor key_cache, torch::Tensor value_cache,
                                                  torch::Tensor block_tables, torch::Tensor first, torch::Tensor lengths,
                                                  double scale) {
  TORCH_CHECK(q.device().is_cpu() && key_cache.device().is_cpu(), "paged_decode_attention: CPU tensors only");
  TORCH_CHECK(q.dim() == 3 && key_cache.dim() == 4 && value_cache.dim() == 4 && block_tables.dim() == 2,
              "paged_decode_attention: q [n, heads, dim], caches [blocks, block_size, kv_heads, dim], tables [n, width]");
  TORCH_CHECK(key_cache.is_contiguous() && value_cache.is_contiguous() && block_tables.is_contiguous() &&
                  first.is_contiguous() && lengths.is_contiguous(),
              "paged_decode_attention: the caches, tables and lengths must be contiguous");
  TORCH_CHECK(block_tables.scalar_type() == torch::kInt32 && first.scalar_type() == torch::kInt32 &&
                  lengths.scalar_type() == torch::kInt32,
              "paged_decode_attention: block tables, first and lengths must be int32");
  TORCH_CHECK(key_cache.sizes() == value_cache.sizes() && key_cache.scalar_type() == value_cache.scalar_type(),
              "paged_decode_attention: key and value caches differ");
  const int64_t n = q.size(0), heads = q.size(1), dim = q.size(2), kv_heads = key_cache.size(2);
  TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0 && key_cache.size(3) == dim,
              "paged_decode_attention: query and cache head shapes disagree");
  TORCH_CHECK(0 < dim && dim <= MAX_HEAD_DIM, "paged_decode_attention: head_dim must be 1..256, got ", dim);
  TORCH_CHECK(block_tables.size(0) == n && first.numel() == n && lengths.numel() == n,
              "paged_decode_attention: one table, first and length per sequence");
  const int32_t* firsts = first.data_ptr<int32_t>();
  const int32_t* lens = lengths.data_ptr<int32_t>();
  const int64_t width = block_tables.size(1), block_size = key_cache.size(1);
  for (int64_t i = 0; i < n; ++i)
    TORCH_CHECK(0 <= firsts[i] && firsts[i] < lens[i] && lens[i] <= width * block_size,
                "paged_decode_attention: sequence ", i, " has an empty or out-of-table range");

  const Pieces p = split(firsts, lens, n, at::get_num_threads());
  const int64_t count = p.sequence.size();
  auto query = (q.to(torch::kFloat32) * scale).contiguous();
  auto acc = torch::empty({count, heads, dim}, query.options());
  auto stats = torch::empty({count, 2, heads}, query.options());  // per piece: max, then sum, per head
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  float* accp = acc.data_ptr<float>();
  float* statp = stats.data_ptr<float>();
  const float* qp = query.data_ptr<float>();
  const int64_t group = heads / kv_heads;
  switch (key_cache.scalar_type()) {
    case torch::kFloat: run_typed<float>(p, qp, key_cache, value_cache, tables, width, kv_heads, group, dim, accp, statp); break;
    case torch::kBFloat16: run_typed<at::BFloat16>(p, qp, key_cache, value_cache, tables, width, kv_heads, group, dim, accp, statp); break;
    case torch::kHalf: run_typed<at::Half>(p, qp, key_cache, value_cache, tables, width, kv_heads, group, dim, accp, statp); break;
    default: TORCH_CHECK(false, "paged_decode_attention: the cache must be float32, bfloat16 or float16");
  }

  // Merge each sequence's pieces: weights exp(max_piece - max_all), exact in float32.
  auto out = torch::empty({n, heads, dim}, query.options());
  auto lse = torch::empty({n, heads}, query.options());
  float* op = out.data_ptr<float>();
  float* lp = lse.data_ptr<float>();
  at::parallel_for(0, n * heads, 16, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t i = task / heads, h = task % heads;
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t k = p.begin[i]; k < p.begin[i + 1]; ++k) top = std::max(top, statp[k * 2 * heads + h]);
      float total = 0.f;
      float* o = op + task * dim;
      std::fill(o, o + dim, 0.f);
      for (int64_t k = p.begin[i]; k < p.begin[i + 1]; ++k) {
        const float w = std::exp(statp[k * 2 * heads + h] - top);
        total += w * statp[k * 2 * heads + heads + h];
        const float* a = accp + (k * heads + h) * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] += w * a[d];
      }
      const float inverse = 1.f / total;
      for (int64_t d = 0; d < dim; ++d) o[d] *= inverse;
      lp[task] = top + std::log(total);
    }
  });
  return {q.scalar_type() == torch::kFloat32 ? out : out.to(q.scalar_type()), lse};
}
