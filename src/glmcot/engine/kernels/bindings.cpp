// The Python module of the glmcot CPU kernels (built by kernels/__init__.py).

#include <torch/extension.h>

#include <vector>

std::vector<torch::Tensor> paged_decode_attention(torch::Tensor q, torch::Tensor key_cache, torch::Tensor value_cache,
                                                  torch::Tensor block_tables, torch::Tensor first, torch::Tensor lengths,
                                                  double scale);
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps);
void rotary_(torch::Tensor x, torch::Tensor cos, torch::Tensor sin);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("paged_decode_attention", &paged_decode_attention,
        "Decode attention of one query token per sequence over its paged KV cache; returns (out, lse)");
  m.def("rms_norm", &rms_norm, "RMSNorm over the last dimension (float32 inside)");
  m.def("rotary_", &rotary_, "Rotary embedding, neox half-split layout, in place");
}
