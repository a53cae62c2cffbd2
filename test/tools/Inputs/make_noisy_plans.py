"""Writes two plans that produce thousands of errors into DIR: dup.plan
(one key given 1,000 times) and long.plan (10,000 unknown keys on one
100 KB line).

usage: make_noisy_plans.py DIR"""
import os
import sys

head = ("model = llama_tiny\n"
        "cluster { gpus_per_node = 2  gpu = cpu  host_memory = 64GiB }\n")
with open(os.path.join(sys.argv[1], "dup.plan"), "w") as f:
    f.write(head)
    f.write("train { optimizer = adamw(lr = 1e-3)  micro_batch = 1  seq_len = 128 }\n")
    f.write("parallel { " + " ".join(["sharding = full_shard"] * 1000) + " }\n")
with open(os.path.join(sys.argv[1], "long.plan"), "w") as f:
    f.write(head)
    f.write("train { optimizer = adamw(lr = 1e-3)  micro_batch = 1  seq_len = 128 "
            + " ".join(f"x{i} = 1" for i in range(10000)) + " }\n")
