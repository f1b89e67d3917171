#!/usr/bin/env python3
"""Megatron-Core's own torch_dist checkpoints, written by its own code, for the reader's tests.

For each case Megatron-Core (the pinned megatron-core package: its GPTModel with the local layer
spec, its sharded_state_dict and dist_checkpointing.save) builds a small GPT-2- or Llama-shaped
model on CPU ranks (torch.distributed over gloo, one process per rank of the case's TP x PP
layout) and saves it as `--ckpt-format torch_dist` does: <case>/iter_0000010/ with the
distributed-checkpoint files and the common state (Megatron's `args` Namespace, checkpoint_version
3.0, iteration, the scheduler's state, the FLOP count), and <case>/latest_checkpointed_iteration.txt.
A second, single process then builds the same model in fp32 without model parallelism, loads that
checkpoint with dist_checkpointing.load (Megatron's own resharding) and records the per-token
losses of a fixed batch: <out>/megatron_reference.json holds them with each case's layout, so a
reader here can be held to Megatron's forward.

With --evaluate ITER_FOLDER --model NAME --out FILE it is the oracle the other way: Megatron-Core's
own load of a torch_dist folder written elsewhere (load_common_state_dict, then
dist_checkpointing.load into the unsplit fp32 model, as its load_checkpoint does), and FILE gets the
same batch's per-token losses, the iteration, the args' plain values and the scheduler's state.

The run-time patches (none changes the arithmetic or what is written) keep CUDA calls off a CPU
machine: the CUDA RNG calls use the CPU generator, `Tensor.cuda` is the identity, the attention scratch buffer and the save's
flag all-reduce use CPU tensors, and the save's writer runs in the calling process (megatron-core
0.12 forks a writer process and calls torch's private _write_item without the argument torch 2.11
added).
"""
import argparse
import json
import os
import queue
import socket
import sys
import warnings

warnings.filterwarnings("ignore")

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ITERATION = 10
SEQ = 16
BATCH = 2

# name -> (model settings, layouts [(tp, pp)], dtype)
MODELS = {
    "gpt2": dict(num_layers=4, hidden_size=64, num_attention_heads=4, ffn_hidden_size=256, vocab=128,
                 normalization="LayerNorm", swiglu=False, bias=True, position="learned_absolute", tied=True,
                 groups=None),
    "llama": dict(num_layers=4, hidden_size=64, num_attention_heads=4, ffn_hidden_size=96, vocab=128,
                  normalization="RMSNorm", swiglu=True, bias=False, position="rope", tied=False, groups=2),
}
CASES = [("gpt2", 1, 1, "fp32"), ("gpt2", 2, 1, "fp32"), ("gpt2", 1, 2, "fp32"), ("llama", 1, 1, "fp32"),
         ("llama", 2, 1, "fp32"), ("llama", 2, 2, "fp32"), ("llama", 2, 1, "bf16")]


def case_name(model, tp, pp, dtype):
    return f"{model}_tp{tp}_pp{pp}_{dtype}"


def patch_cuda():
    """Megatron's CUDA calls on a CPU machine."""
    torch.cuda.manual_seed = lambda *a, **k: None
    torch.cuda.manual_seed_all = lambda *a, **k: None
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    torch.Tensor.cuda = lambda self, *a, **k: self  # the tied output layer's copy under pipelining
    torch.cuda.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    import megatron.core.tensor_parallel.random as tpr
    tpr._set_cuda_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    tpr._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()


def patch_save():
    """megatron-core 0.12's save in the calling process, with torch 2.11's _write_item."""
    import megatron.core.dist_checkpointing.strategies.async_utils as au
    import megatron.core.dist_checkpointing.strategies.filesystem_async as fa
    from torch.distributed.checkpoint import filesystem as tfs
    from torch.distributed.checkpoint.filesystem import SerializationFormat

    original = tfs._write_item

    def write_item(*args, **kwargs):
        kwargs.setdefault("serialization_format", SerializationFormat.TORCH_SAVE)
        return original(*args, **kwargs)

    fa._write_item = write_item
    fa._get_write_results_queue = lambda: queue.Queue()

    class Counted:  # the worker's "done" signal, with nobody waiting for it
        def get(self):
            return None

        def task_done(self):
            pass

    def write_all(transform_list, rank, write_buckets, global_results_queue):
        results = {}
        for i, bucket in enumerate(write_buckets):
            local = queue.Queue()
            fa.FileSystemWriterAsync.write_preloaded_data(transform_list, i, bucket, local, Counted(), True)
            index, result = local.get()
            if isinstance(result, Exception):
                global_results_queue.put(result)
                return
            results[index] = result
        global_results_queue.put(results)

    fa.FileSystemWriterAsync.write_preloaded_data_multiproc = staticmethod(write_all)

    def call_now(self, request):
        if request.async_fn is None:
            return
        args = list(request.async_fn_args)
        if request.preload_fn:
            args[1] = request.preload_fn()
        request.async_fn(*args, **request.async_fn_kwargs)
        self.process = None

    au.TemporalAsyncCaller.schedule_async_call = call_now


def megatron_args(spec, tp, pp, dtype):
    """The Namespace Megatron's save_checkpoint stores as `args` (the settings a reader needs)."""
    groups = spec["groups"]
    return argparse.Namespace(
        num_layers=spec["num_layers"], hidden_size=spec["hidden_size"], ffn_hidden_size=spec["ffn_hidden_size"],
        num_attention_heads=spec["num_attention_heads"], kv_channels=spec["hidden_size"] // spec["num_attention_heads"],
        group_query_attention=groups is not None, num_query_groups=groups or spec["num_attention_heads"],
        seq_length=SEQ, max_position_embeddings=SEQ * 2, position_embedding_type=spec["position"],
        rotary_base=10000, rotary_percent=1.0, normalization=spec["normalization"], norm_epsilon=1e-5,
        swiglu=spec["swiglu"], bias_gelu_fusion=False, bias_swiglu_fusion=False, add_bias_linear=spec["bias"], add_qkv_bias=spec["bias"],
        untie_embeddings_and_output_weights=not spec["tied"], padded_vocab_size=spec["vocab"],
        vocab_size=spec["vocab"], make_vocab_size_divisible_by=16, tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp, bf16=dtype == "bf16", fp16=False,
        params_dtype=torch.bfloat16 if dtype == "bf16" else torch.float32,
        tokenizer_type="NullTokenizer", consumed_train_samples=ITERATION * 8, consumed_valid_samples=16,
        train_iters=100, micro_batch_size=BATCH, global_batch_size=8, lr=3e-4, min_lr=3e-5,
        use_distributed_optimizer=False, ckpt_format="torch_dist", iteration=ITERATION)


def build_model(spec, dtype, tp=1, pp=1, pre_process=True, post_process=True):
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    half = dtype == "bf16"
    config = TransformerConfig(
        num_layers=spec["num_layers"], hidden_size=spec["hidden_size"], ffn_hidden_size=spec["ffn_hidden_size"],
        num_attention_heads=spec["num_attention_heads"], num_query_groups=spec["groups"],
        normalization=spec["normalization"], layernorm_epsilon=1e-5, gated_linear_unit=spec["swiglu"],
        activation_func=torch.nn.functional.silu if spec["swiglu"] else torch.nn.functional.gelu,
        add_bias_linear=spec["bias"], hidden_dropout=0.0, attention_dropout=0.0, use_cpu_initialization=True,
        init_method_std=0.3, bf16=half, params_dtype=torch.bfloat16 if half else torch.float32,
        pipeline_dtype=torch.bfloat16 if half else torch.float32, tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp, bias_activation_fusion=False, masked_softmax_fusion=False,
        bias_dropout_fusion=False, apply_rope_fusion=False, gradient_accumulation_fusion=False,
        persist_layer_norm=False)
    return GPTModel(config, get_gpt_layer_local_spec(normalization=spec["normalization"]),
                    vocab_size=spec["vocab"], max_sequence_length=SEQ * 2, pre_process=pre_process,
                    post_process=post_process, share_embeddings_and_output_weights=spec["tied"],
                    position_embedding_type=spec["position"])


def init_world(rank, world, port, tp, pp):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    patch_cuda()
    patch_save()
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    parallel_state.initialize_model_parallel(tp, pp)
    torch.manual_seed(1234)  # the CPU initialization draws every full weight from this stream
    model_parallel_cuda_manual_seed(1234)
    return parallel_state


def save_worker(rank, world, port, out, model, tp, pp, dtype):
    """One rank of the saving world: its stage of the model, saved as Megatron's save_checkpoint does."""
    ps = init_world(rank, world, port, tp, pp)
    from megatron.core import dist_checkpointing
    spec = MODELS[model]
    stage = ps.get_pipeline_model_parallel_rank()
    net = build_model(spec, dtype, tp, pp, stage == 0, stage == pp - 1)
    root = os.path.join(out, case_name(model, tp, pp, dtype))
    folder = os.path.join(root, f"iter_{ITERATION:07d}")
    if rank == 0:
        os.makedirs(folder, exist_ok=True)
    dist.barrier()
    # megatron/training/checkpointing.py's generate_state_dict for one model chunk.
    state = {
        "args": megatron_args(spec, tp, pp, dtype),
        "checkpoint_version": 3.0,
        "iteration": ITERATION,
        "model": net.sharded_state_dict(),
        "opt_param_scheduler": {"max_lr": 3e-4, "lr_warmup_steps": 2, "num_steps": ITERATION * 8,
                                "lr_decay_style": "cosine", "lr_decay_steps": 800, "min_lr": 3e-5,
                                "start_wd": 0.01, "end_wd": 0.01, "wd_incr_style": "constant", "wd_incr_steps": 800},
        "num_floating_point_operations_so_far": 123456789.0,
    }
    dist_checkpointing.save(state, folder)
    dist.barrier()
    if rank == 0:
        with open(os.path.join(root, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(ITERATION))
    dist.destroy_process_group()


def batch(vocab):
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, vocab, (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def batch_losses(net, spec):
    """The loaded model's per-token losses of the fixed batch (Megatron's forward, eval mode)."""
    net.eval()
    tokens, labels = batch(spec["vocab"])
    positions = torch.arange(SEQ).unsqueeze(0).expand(BATCH, SEQ).contiguous()
    mask = torch.tril(torch.ones(1, 1, SEQ, SEQ)) < 0.5
    with torch.no_grad():
        losses = net(tokens, positions, mask, labels=labels)
    return {"tokens": tokens.tolist(), "labels": labels.tolist(), "losses": losses.float().tolist()}


def evaluate_worker(rank, world, port, out, model, tp, pp, dtype, results):
    """Megatron's own load of the checkpoint into an unsplit model, and the batch's per-token losses."""
    init_world(rank, world, port, 1, 1)
    from megatron.core import dist_checkpointing
    spec = MODELS[model]
    net = build_model(spec, "fp32")  # a bf16 checkpoint's weights, computed in fp32
    root = os.path.join(out, case_name(model, tp, pp, dtype))
    loaded = dist_checkpointing.load({"model": net.sharded_state_dict()}, os.path.join(root, f"iter_{ITERATION:07d}"))
    net.load_state_dict(loaded["model"])
    results.put({"case": case_name(model, tp, pp, dtype), "model": model, "tp": tp, "pp": pp, "dtype": dtype,
                 **batch_losses(net, spec), "iteration": ITERATION})
    dist.destroy_process_group()


def evaluate_folder(rank, world, port, folder, model, results):
    """A checkpoint folder written elsewhere, loaded as Megatron's load_checkpoint reads a torch_dist one:
    its common state (load_common_state_dict) and the model through dist_checkpointing.load."""
    init_world(rank, world, port, 1, 1)
    from megatron.core import dist_checkpointing
    spec = MODELS[model]
    net = build_model(spec, "fp32")
    common = dist_checkpointing.load_common_state_dict(folder)
    loaded = dist_checkpointing.load({"model": net.sharded_state_dict()}, folder)
    net.load_state_dict(loaded["model"])
    args = common["args"]
    results.put({**batch_losses(net, spec), "iteration": common["iteration"], "checkpoint_version": common["checkpoint_version"],
                 "args": {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, bool, type(None)))},
                 "opt_param_scheduler": common.get("opt_param_scheduler")})
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for the cases; with --evaluate, the result's JSON file")
    parser.add_argument("--evaluate", metavar="ITER_FOLDER",
                        help="instead: load this torch_dist iter_XXXXXXX folder with Megatron's code and write its "
                             "per-token losses of the fixed batch, iteration and args to --out")
    parser.add_argument("--model", choices=sorted(MODELS), default="llama", help="with --evaluate: the model's shape")
    args = parser.parse_args()
    if args.evaluate:
        results = mp.get_context("fork").Queue()
        mp.start_processes(evaluate_folder, args=(1, free_port(), args.evaluate, args.model, results), nprocs=1,
                           start_method="fork")
        with open(args.out, "w") as f:
            json.dump(results.get(), f, indent=1)
        return 0
    os.makedirs(args.out, exist_ok=True)
    context = mp.get_context("fork")
    cases = []
    for model, tp, pp, dtype in CASES:
        mp.start_processes(save_worker, args=(tp * pp, free_port(), args.out, model, tp, pp, dtype),
                           nprocs=tp * pp, start_method="fork")
        results = context.Queue()
        mp.start_processes(evaluate_worker, args=(1, free_port(), args.out, model, tp, pp, dtype, results),
                           nprocs=1, start_method="fork")
        cases.append(results.get())
        print(f"megatron_reference: {cases[-1]['case']} saved and evaluated", flush=True)
    with open(os.path.join(args.out, "megatron_reference.json"), "w") as f:
        json.dump({"cases": cases, "models": MODELS}, f, indent=1)
    open(os.path.join(args.out, "done"), "w").close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
