// plan-expand-presets: one plan.unit per block of the preset, HF names and
// shapes in fp32, tied parameters marked.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --plan-expand-presets | FileCheck %s --check-prefix=LLAMA
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model=gpt2_tiny --plan-expand-presets | FileCheck %s --check-prefix=GPT2
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model=llama3_405b --plan-expand-presets | FileCheck %s --check-prefix=BIG

// LLAMA:      plan.plan @tiny_llama_cpu
// LLAMA:        plan.unit @embed kind embedding {
// LLAMA-NEXT:     plan.param "model.embed_tokens.weight" : tensor<512x64xf32>
// LLAMA-NEXT:   }
// LLAMA-NEXT:   plan.unit @layers.0 kind llama_block {
// LLAMA-NEXT:     plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
// LLAMA-NEXT:     plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
// LLAMA-NEXT:     plan.param "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32>
// LLAMA-NEXT:     plan.param "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32>
// LLAMA-NEXT:     plan.param "model.layers.0.mlp.gate_proj.weight" : tensor<176x64xf32>
// LLAMA-NEXT:     plan.param "model.layers.0.mlp.up_proj.weight" : tensor<176x64xf32>
// LLAMA-NEXT:     plan.param "model.layers.0.mlp.down_proj.weight" : tensor<64x176xf32>
// LLAMA-NEXT:     plan.param "model.layers.0.input_layernorm.weight" : tensor<64xf32>
// LLAMA-NEXT:     plan.param "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
// LLAMA-NEXT:   }
// LLAMA-NEXT:   plan.unit @layers.1 kind llama_block {
// LLAMA-NEXT:     plan.param "model.layers.1.self_attn.q_proj.weight" : tensor<64x64xf32>
// LLAMA:        plan.unit @head kind llama_head {
// LLAMA-NEXT:     plan.param "model.norm.weight" : tensor<64xf32>
// llama_tiny does not tie its embeddings.
// LLAMA-NEXT:     plan.param "lm_head.weight" : tensor<512x64xf32>{{$}}
// LLAMA-NEXT:   }
// LLAMA-NEXT: }
// LLAMA-NOT:  plan.unit

// GPT2:        plan.unit @embed kind embedding {
// GPT2-NEXT:     plan.param "transformer.wte.weight" : tensor<512x64xf32>
// GPT2-NEXT:     plan.param "transformer.wpe.weight" : tensor<256x64xf32>
// GPT2-NEXT:   }
// GPT2-NEXT:   plan.unit @layers.0 kind gpt2_block {
// GPT2-NEXT:     plan.param "transformer.h.0.ln_1.weight" : tensor<64xf32>
// GPT2-NEXT:     plan.param "transformer.h.0.ln_1.bias" : tensor<64xf32>
// Conv1D stores [in, out].
// GPT2-NEXT:     plan.param "transformer.h.0.attn.c_attn.weight" : tensor<64x192xf32>
// GPT2-NEXT:     plan.param "transformer.h.0.attn.c_attn.bias" : tensor<192xf32>
// GPT2:          plan.param "transformer.h.0.mlp.c_proj.bias" : tensor<64xf32>
// GPT2-NEXT:   }
// GPT2-NEXT:   plan.unit @layers.1 kind gpt2_block {
// GPT2:        plan.unit @head kind gpt2_head {
// GPT2-NEXT:     plan.param "transformer.ln_f.weight" : tensor<64xf32>
// GPT2-NEXT:     plan.param "transformer.ln_f.bias" : tensor<64xf32>
// GPT2-NEXT:     plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "transformer.wte.weight"
// GPT2-NEXT:   }
// GPT2-NEXT: }

// Llama 3.1 405B: embedding, 126 blocks, head: 128 units.
// BIG:                plan.unit @embed kind embedding {
// BIG-NEXT:             plan.param "model.embed_tokens.weight" : tensor<128256x16384xf32>
// BIG-COUNT-125:      plan.unit @layers.{{[0-9]+}} kind llama_block {
// BIG:                plan.unit @layers.125 kind llama_block {
// BIG-NEXT:             plan.param "model.layers.125.self_attn.q_proj.weight" : tensor<16384x16384xf32>
// BIG-NEXT:             plan.param "model.layers.125.self_attn.k_proj.weight" : tensor<1024x16384xf32>
// BIG-NOT:            plan.unit @layers
// BIG:                plan.unit @head kind llama_head {
// BIG-NOT:            plan.unit
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model=llama3_405b --plan-expand-presets | grep -c "plan.unit @" | FileCheck %s --check-prefix=UNITS
// UNITS: {{^}}128{{$}}
