// plan-expand-presets with model.lora: the base frozen with its storage,
// adapters after each targeted linear layer of a block, named as PEFT saves
// them; QLoRA's nf4 on the blocks' linear weights only.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set 'model.lora.targets=[q_proj, mlp.down_proj]' --set model.lora.rank=4 --set model.base=nf4 --set train.precision=bf16_mixed --plan-expand-presets | FileCheck %s --check-prefix=QLORA
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model=gpt2_tiny --set model.lora.target_modules=c_proj --plan-expand-presets | FileCheck %s --check-prefix=GPT2
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model.lora.r=2 --set model.lora.targets=all_linear --plan-expand-presets | grep -c "lora_[AB].weight" | FileCheck %s --check-prefix=ALL
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model.lora.r=2 --plan-expand-presets | FileCheck %s --check-prefix=DEFAULT
// The IR reads back as it was printed, in the custom and the generic form.
// RUN: plan-opt %examples/tiny_llama_cpu.plan --set model.base=nf4 --set model.lora.dropout=0.1 --plan-expand-presets > %t.1.mlir
// RUN: plan-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: plan-opt %t.1.mlir -mlir-print-op-generic | plan-opt > %t.3.mlir
// RUN: diff %t.1.mlir %t.3.mlir

// QLORA:      lora = <rank = 4, alpha = 8.0, targets = ["q_proj", "mlp.down_proj"], base = nf4>
// QLORA:        plan.unit @embed kind embedding {
// QLORA-NEXT:     plan.param "model.embed_tokens.weight" : tensor<512x64xf32> frozen bf16
// QLORA-NEXT:   }
// QLORA-NEXT:   plan.unit @layers.0 kind llama_block {
// QLORA-NEXT:     plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32> frozen nf4
// QLORA-NEXT:     plan.param "model.layers.0.self_attn.q_proj.lora_A.weight" : tensor<4x64xf32>{{$}}
// QLORA-NEXT:     plan.param "model.layers.0.self_attn.q_proj.lora_B.weight" : tensor<64x4xf32>{{$}}
// QLORA-NEXT:     plan.param "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32> frozen nf4
// QLORA-NEXT:     plan.param "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32> frozen nf4
// QLORA-NEXT:     plan.param "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32> frozen nf4
// QLORA-NEXT:     plan.param "model.layers.0.mlp.gate_proj.weight" : tensor<176x64xf32> frozen nf4
// QLORA-NEXT:     plan.param "model.layers.0.mlp.up_proj.weight" : tensor<176x64xf32> frozen nf4
// QLORA-NEXT:     plan.param "model.layers.0.mlp.down_proj.weight" : tensor<64x176xf32> frozen nf4
// QLORA-NEXT:     plan.param "model.layers.0.mlp.down_proj.lora_A.weight" : tensor<4x176xf32>{{$}}
// QLORA-NEXT:     plan.param "model.layers.0.mlp.down_proj.lora_B.weight" : tensor<64x4xf32>{{$}}
// QLORA-NEXT:     plan.param "model.layers.0.input_layernorm.weight" : tensor<64xf32> frozen bf16
// QLORA-NEXT:     plan.param "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32> frozen bf16
// QLORA-NEXT:   }
// The head is not quantized (bitsandbytes leaves lm_head out).
// QLORA:        plan.unit @head kind llama_head {
// QLORA-NEXT:     plan.param "model.norm.weight" : tensor<64xf32> frozen bf16
// QLORA-NEXT:     plan.param "lm_head.weight" : tensor<512x64xf32> frozen bf16
// QLORA-NEXT:   }

// GPT-2's c_proj is two modules (attn.c_proj, mlp.c_proj); a PEFT name
// matches both. Conv1D stores [in, out]; its adapters are nn.Linear as
// PEFT's are. The tied lm_head is stored as wte is.
// GPT2:      lora = <rank = 8, alpha = 8.0, targets = ["c_proj"], base = fp32>
// GPT2:        plan.param "transformer.wte.weight" : tensor<512x64xf32> frozen fp32
// GPT2:        plan.param "transformer.h.0.attn.c_attn.weight" : tensor<64x192xf32> frozen fp32
// GPT2-NEXT:   plan.param "transformer.h.0.attn.c_attn.bias" : tensor<192xf32> frozen fp32
// GPT2-NEXT:   plan.param "transformer.h.0.attn.c_proj.weight" : tensor<64x64xf32> frozen fp32
// GPT2-NEXT:   plan.param "transformer.h.0.attn.c_proj.bias" : tensor<64xf32> frozen fp32
// GPT2-NEXT:   plan.param "transformer.h.0.attn.c_proj.lora_A.weight" : tensor<8x64xf32>{{$}}
// GPT2-NEXT:   plan.param "transformer.h.0.attn.c_proj.lora_B.weight" : tensor<64x8xf32>{{$}}
// GPT2:        plan.param "transformer.h.0.mlp.c_proj.weight" : tensor<256x64xf32> frozen fp32
// GPT2-NEXT:   plan.param "transformer.h.0.mlp.c_proj.bias" : tensor<64xf32> frozen fp32
// GPT2-NEXT:   plan.param "transformer.h.0.mlp.c_proj.lora_A.weight" : tensor<8x256xf32>{{$}}
// GPT2-NEXT:   plan.param "transformer.h.0.mlp.c_proj.lora_B.weight" : tensor<64x8xf32>{{$}}
// GPT2:        plan.param "lm_head.weight" : tensor<512x64xf32> tied_to "transformer.wte.weight"{{$}}

// all_linear: 7 linear layers x 2 adapters x 2 layers.
// ALL: 28

// PEFT's default targets for Llama, and the base kept in the working type.
// DEFAULT: lora = <rank = 2, alpha = 8.0, targets = ["q_proj", "v_proj"], base = fp32>
