// Gemma 3 (text): token embeddings scaled by sqrt(n_embd); per-head RMSNorm of q and k;
// pre- and post-norms around attention and FFN; GeGLU (tanh GELU); NEOX RoPE; sliding-window
// layers interleaved with global ones (every `attention.sliding_window_pattern`-th layer is
// global, default 6), the sliding ones with their own RoPE base (`rope.freq_base_swa`,
// default 10000, unscaled); softmax scale `attention.scale`, else 1 / sqrt(head_dim) (27B,
// 62 layers: 1 / sqrt(n_embd / n_heads), its query_pre_attn_scalar); optional
// `final_logit_softcapping`. GGUF norm weights already hold Gemma's (1 + w) (llama.cpp's
// converter adds the 1; model/hf_convert.cc does the same for HF folders).
#include <cmath>

#include "model/arch.h"
#include "model/layers.h"

namespace tachyon::model {

namespace gemma3 {

// For files that carry no tokenizer.chat_template: Gemma's turn format (no system role: a
// system message is prepended to the first user turn).
constexpr const char* kChatTemplate = R"JINJA({{- bos_token -}}
{%- set ns = namespace(prefix='', turns=messages) -%}
{%- if messages and messages[0]['role'] == 'system' -%}
{%- set c = messages[0]['content'] -%}
{%- set ns.prefix = (c if c is string else c | map(attribute='text') | join('')) + '\n\n' -%}
{%- set ns.turns = messages[1:] -%}
{%- endif -%}
{%- for m in ns.turns -%}
{%- if (m['role'] == 'user') != (loop.index0 % 2 == 0) -%}
{{- raise_exception('Gemma turns must alternate user/assistant, starting with user') -}}
{%- endif -%}
{%- set c = m['content'] -%}
{%- set text = c if c is string else c | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') -%}
{{- '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\n' -}}
{{- ((ns.prefix if loop.first else '') + text) | trim -}}
{{- '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%})JINJA";

Status Configure(const ArchKeys& keys, ModelConfig* c) {
  c->rope_style = kernels::RopeStyle::kNeox;
  c->qk_norm = true;
  c->post_norms = true;
  c->ffn_act = kernels::GatedAct::kGeluTanh;
  c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
  ASSIGN_OR_RETURN(int64_t period, keys.OptionalInt("attention.sliding_window_pattern", 6, 1024));
  if (period < 1) {
    return InvalidArgument(keys.file().path() + ": " +
                           keys.Key("attention.sliding_window_pattern") + " must be >= 1");
  }
  c->sliding_layers.assign(static_cast<size_t>(c->n_layers), 0);
  for (int64_t il = 0; il < c->n_layers; ++il) c->sliding_layers[il] = il % period < period - 1;
  ASSIGN_OR_RETURN(float base_swa, keys.OptionalFloat("rope.freq_base_swa", 10000.0f));
  if (!(base_swa > 0)) {
    return InvalidArgument(keys.file().path() + ": " + keys.Key("rope.freq_base_swa") +
                           " must be > 0");
  }
  if (c->sliding_window > 0) c->rope_inv_freq_swa = PlainRopeFrequencies(base_swa, c->rot_dim);
  const float qpas = c->n_layers == 62 ? static_cast<float>(c->n_embd / c->n_heads)
                                       : static_cast<float>(c->head_dim);
  ASSIGN_OR_RETURN(c->attn_scale, keys.OptionalFloat("attention.scale", 1.0f / std::sqrt(qpas)));
  ASSIGN_OR_RETURN(c->final_logit_softcap, keys.OptionalFloat("final_logit_softcapping", 0.0f));
  if (!(c->attn_scale > 0) || c->final_logit_softcap < 0) {
    return InvalidArgument(keys.file().path() + ": " + keys.Key("attention.scale") +
                           " must be > 0 and " + keys.Key("final_logit_softcapping") + " >= 0");
  }
  return OkStatus();
}

Status LoadLayer(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w) {
  RETURN_IF_ERROR(LoadAttention(src, c, il, w));
  return LoadDenseFfn(src, c, il, w);
}

}  // namespace gemma3

const ArchDef kGemma3Arch = {.name = "gemma3",
                             .configure = gemma3::Configure,
                             .load_layer = gemma3::LoadLayer,
                             .chat_template = gemma3::kChatTemplate};

}  // namespace tachyon::model
