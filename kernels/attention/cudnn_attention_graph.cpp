// CudnnAttention's graphs (see cudnn_attention.h): one per shape and variant, found by its key or built on first use as
// cudnn_sdpa_frontend.h's graph and plan, with the device memory it holds itself; a graph cudnn_version_gap or
// cudnn_frontend_gap names is refused before it is built. Invariant: a graph that fails is remembered with its first
// failure and never retried.
#include "kernels/attention/cudnn_attention_graph.h"

#include <cudnn.h>

#include <chrono>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/log.h"

namespace mt::cuda {
namespace {

// The most plan workspace a ragged forward's graph holds itself (Graph::ragged_workspace); a larger one is refused.
constexpr int64_t kRaggedPlanBytes = int64_t{1} << 20;

}  // namespace

CudnnAttention::Graph& CudnnAttention::graph(bool backward, const AttnShape& s, bool padded, bool deterministic,
                                             bool causal, bool ragged) {
  MT_ASSERT(!ragged || padded, "a ragged graph has the padding mask");
  uint32_t scale_bits = 0, softcap_bits = 0;
  const float scale = sdpa_scale(s);
  std::memcpy(&scale_bits, &scale, sizeof scale);
  std::memcpy(&softcap_bits, &s.softcap, sizeof s.softcap);
  const bool sinks = !backward && s.sinks != nullptr;  // the backward's graph is the same with sinks or without
  const Key key{backward ? (deterministic ? 2 : 1) : 0,
                s.batch,
                s.seq,
                s.n_heads,
                s.n_kv_heads,
                s.head_dim,
                s.value_head_dim(),
                sdpa_window(s),
                scale_bits,
                softcap_bits,
                padded,
                causal,
                sinks,
                s.alibi_slopes != nullptr,
                ragged};
  for (const auto& g : graphs_)
    if (g->key == key) return *g;
  const auto started = std::chrono::steady_clock::now();
  graphs_.push_back(std::make_unique<Graph>());
  Graph& gr = *graphs_.back();
  gr.key = key;
  gr.release = free_;
  const std::string gap = cudnn_attention_gap(s, DType::bf16);
  const int64_t ver = version();
  if (!gap.empty()) {
    gr.info.error = "not covered: " + gap;
  } else if (ver == 0) {
    gr.info.error = handle_error_;
  } else if (const std::string too_old = cudnn_version_gap(s, backward, ver); !too_old.empty()) {
    gr.info.error = too_old;
  } else if (const std::string refused = cudnn_frontend_gap(s, backward, ragged, ver); !refused.empty()) {
    gr.info.error = refused;
  } else {
    gr.padding = padded;
    gr.alibi = s.alibi_slopes != nullptr;
    gr.sdpa = std::make_unique<SdpaGraph>(static_cast<cudnnHandle_t>(handle_), s,
                                          SdpaGraphSpec{backward, deterministic, padded, causal, ragged, sinks}, gr.info);
    if (gr.info.ok) {
      gr.plan_bytes = align_up(gr.info.workspace_bytes);
      gr.info.workspace_bytes = gr.plan_bytes;
      if (sinks) gr.sinks = static_cast<float*>(alloc_(s.n_heads * 4));
      if (ragged && !backward && gr.plan_bytes > kRaggedPlanBytes) {
        gr.info.ok = false;
        gr.info.error = MT_FORMAT("the ragged plan's workspace of {} B is past the {} B a ragged graph holds itself",
                                  gr.plan_bytes, kRaggedPlanBytes);
      } else if (ragged) {  // a backward's plan workspace is the shared one's start, as its unragged graph's
        const int64_t ints = align_up((3 * s.batch + 2) * 4);
        gr.ragged_ints = static_cast<int32_t*>(alloc_(ints + (backward ? 0 : gr.plan_bytes)));
        if (!backward) {
          gr.ragged_workspace = reinterpret_cast<char*>(gr.ragged_ints) + ints;
          gr.info.workspace_bytes = 0;
        }
      }
    }
  }
  gr.info.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  log::info("attention {} batch {} seq {} heads {}/{} head_dim {}{} window {}{}{}{}{}: {}",
            backward ? "backward" : "forward", s.batch, s.seq, s.n_heads, s.n_kv_heads, s.head_dim,
            s.value_head_dim() != s.head_dim ? fmt::format(" (value {})", s.value_head_dim()) : "", s.window,
            s.softcap > 0.f ? fmt::format(" soft-cap {}", s.softcap) : "",
            std::string(sinks ? " sinks" : "") + (s.alibi_slopes != nullptr ? " ALiBi" : ""),
            padded ? (ragged ? " ragged" : " padded") : "", causal ? "" : " unmasked (a tile below the diagonal)",
            gr.info.ok ? fmt::format("cuDNN {} engine {} {} ({:.1f} MiB workspace, built in {:.0f} ms{})", ver,
                                     gr.info.engine, gr.info.knobs, gr.info.workspace_bytes / 1048576.0,
                                     gr.info.build_ms, gr.info.notes.empty() ? "" : ", " + gr.info.notes)
                       : "our kernel (cuDNN: " + gr.info.error + ")");
  return gr;
}

}  // namespace mt::cuda
