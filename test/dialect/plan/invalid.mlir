// Every verifier of the plan dialect rejects what it must, with its message.
// RUN: plan-opt %s -split-input-file -verify-diagnostics

// expected-error @below {{hidden (100) must be divisible by heads (3)}}
#bad = #plan.model<family = llama, vocab = 8, hidden = 100, intermediate = 8, layers = 1, heads = 3, kv_heads = 3, max_seq_len = 8>

// -----

// expected-error @below {{heads (4) must be divisible by kv_heads (3)}}
#bad = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 1, heads = 4, kv_heads = 3, max_seq_len = 8>

// -----

// expected-error @below {{gpt2 has no grouped-query attention: kv_heads (2) must equal heads (4)}}
#bad = #plan.model<family = gpt2, vocab = 8, hidden = 8, intermediate = 32, layers = 1, heads = 4, kv_heads = 2, max_seq_len = 8, tie_embeddings = true>

// -----

// expected-error @below {{gpt2 always ties its output layer to the token embeddings}}
#bad = #plan.model<family = gpt2, vocab = 8, hidden = 8, intermediate = 32, layers = 1, heads = 4, kv_heads = 4, max_seq_len = 8>

// -----

// expected-error @below {{layers must be >= 1, got 0}}
#bad = #plan.model<family = llama, vocab = 8, hidden = 8, intermediate = 8, layers = 0, heads = 1, kv_heads = 1, max_seq_len = 8>

// -----

// expected-error @below {{high_freq_factor (1.0) must be greater than low_freq_factor (1.0)}}
#bad = #plan.rope_scaling<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 1.0, original_max_seq_len = 8192>

// -----

// expected-error @below {{device memory must be >= 1, got 0}}
#bad = #plan.device<name = "x", memory = 0, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0>

// -----

// expected-error @below {{link_latency must be >= 0, got -1.0e-6}}
#bad = #plan.device<name = "x", memory = 1, bf16_tflops = 1.0, fp16_tflops = 1.0, fp32_tflops = 1.0, hbm_bandwidth = 1.0, nvlink_bandwidth = 0.0, pcie_bandwidth = 1.0, link_latency = -1.0e-6>

// -----

// expected-error @below {{betas must be in [0, 1), got (0.9, 1.0)}}
#bad = #plan.optimizer<kind = adamw, lr = 1.0e-3, beta2 = 1.0>

// -----

// expected-error @below {{adamw has no momentum (use betas)}}
#bad = #plan.optimizer<kind = adamw, lr = 1.0e-3, momentum = 0.9>

// -----

// expected-error @below {{fp16_mixed needs loss scaling: fp16 gradients underflow without it}}
#bad = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = fp16_mixed, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>

// -----

// expected-error @below {{loss scaling is only for fp16_mixed, not bf16_mixed}}
#bad = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, precision = bf16_mixed, loss_scale = #plan.loss_scale<kind = dynamic>, lr_schedule = #plan.lr_schedule<kind = constant>>

// -----

// expected-error @below {{grad_dtype applies to mixed precision: fp32 training keeps fp32 gradients}}
#bad = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_dtype = fp32, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>

// -----

// expected-error @below {{grad_accum must be >= 1, got 0}}
#bad = #plan.train<optimizer = #plan.optimizer<kind = sgd, lr = 0.1>, micro_batch = 1, seq_len = 8, grad_accum = 0, loss_scale = #plan.loss_scale<kind = none>, lr_schedule = #plan.lr_schedule<kind = constant>>

// -----

// expected-error @below {{min_params must be >= 1, got 0}}
#bad = #plan.wrap<kind = min_params>

// -----

// expected-error @below {{the optimizer state is offloaded to the CPU, so the optimizer step must run there}}
#bad = #plan.parallel<sharding = full_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<optimizer = cpu>>

// -----

// expected-error @below {{gradients offloaded to the CPU must be sharded or stepped on the CPU}}
#bad = #plan.parallel<sharding = no_shard, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<grads = cpu>>

// -----

// expected-error @below {{zero1 keeps full parameters on the device; they cannot be offloaded}}
#bad = #plan.parallel<sharding = zero1, wrap = #plan.wrap<kind = transformer_block>, offload = #plan.offload<params = cpu>, optimizer_step = cpu>

// -----

// expected-error @below {{lora rank must be >= 1, got 0}}
#bad = #plan.lora<rank = 0, alpha = 8.0, targets = ["q_proj"], base = bf16>

// -----

// expected-error @below {{lora dropout must be in [0, 1), got 1}}
#bad = #plan.lora<rank = 8, alpha = 8.0, dropout = 1.0, targets = ["q_proj"], base = bf16>

// -----

// expected-error @below {{lora needs at least one target module}}
#bad = #plan.lora<rank = 8, alpha = 8.0, targets = [], base = nf4>

// -----

// expected-error @below {{lora targets must be module names (non-empty strings)}}
#bad = #plan.lora<rank = 8, alpha = 8.0, targets = [3], base = nf4>
