#!/usr/bin/env bash
# Megatron-Core's own torch_dist checkpoints (written by megatron-core's code: the
# megatron_reference fixture) used as a Megatron user would: megatron_train resumes one in another
# layout at its iteration, consumed samples and learning-rate schedule; convert_checkpoint turns
# one into a HuggingFace folder whose per-token losses, computed by transformers, are the losses
# Megatron's own forward gave; what is not read yet (the optimizer state) is refused by name.
# And back: the torch_dist checkpoints written here (by convert_checkpoint in other layouts, and by
# megatron_train --ckpt-format torch_dist under mpirun, async) are loaded by Megatron-Core's own
# code (load_common_state_dict, dist_checkpointing.load: megatron_reference.py --evaluate), which
# gives the losses Megatron gave before, or transformers gives on the same weights; and resumed here.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need_tools TRAIN CONVERT MPIEXEC
ORACLE=$(dirname "$0")/../unit/checkpoint/megatron_reference.py

# megatron_losses FOLDER MODEL OUT: Megatron-Core's load of an iter_XXXXXXX folder and its per-token losses.
megatron_losses() {
  "$PYTHON" "$ORACLE" --evaluate "$1" --model "$2" --out "$3" >"$WORK/oracle.txt" 2>&1 ||
    { show "$WORK/oracle.txt" "megatron_reference.py --evaluate"; fail "Megatron-Core's code could not load $1"; }
}
[[ -r $MEGATRON_REFERENCE/megatron_reference.json ]] || fail "no $MEGATRON_REFERENCE: run through ctest (fixture megatron_reference)"

LLAMA=$MEGATRON_REFERENCE/llama_tp2_pp2_fp32
RUN=("$TRAIN" --mock-data --tokenizer-type NullTokenizer --vocab-size 128 --make-vocab-size-divisible-by 16
     --num-layers 4 --hidden-size 64 --num-attention-heads 4 --group-query-attention --num-query-groups 2
     --ffn-hidden-size 96 --swiglu --normalization RMSNorm --disable-bias-linear --position-embedding-type rope
     --untie-embeddings-and-output-weights --seq-length 16 --max-position-embeddings 32 --micro-batch-size 2
     --global-batch-size 8 --lr 3e-4 --train-iters 12 --log-interval 1 --eval-iters 0)

step "a resume reads the model; Megatron's optimizer state is not read yet, and says so"
assert_fails_with "is Megatron-Core's torch_dist checkpoint: its model, counters and scheduler are read here, its optimizer state not yet; give --no-load-optim" \
  "${RUN[@]}" --load "$LLAMA"

step "the TP2 x PP2 checkpoint resumed in one process at iteration 11, 88 samples, on Megatron's schedule"
assert_succeeds "${RUN[@]}" --load "$LLAMA" --no-load-optim --use-checkpoint-opt-param-scheduler
assert_contains "$WORK/out.txt" "reading Megatron-Core's distributed checkpoint $LLAMA/iter_0000010 (saved at tensor-model-parallel size 2 x pipeline-model-parallel size 2) into 1 x 1"
# The saved schedule: cosine from 3e-4 to 3e-5, 2 warmup and 800 decay samples; at 88 samples
# 3e-5 + 2.7e-4 * (1 + cos(pi * 86 / 798)) / 2.
assert_eq "11 2.923362E-04" "$(iteration_values "$WORK/out.txt" "learning rate" | head -1)" "iteration 11's learning rate"
grep -Eq "iteration +11/ +12 \| consumed samples: +88 \|" "$WORK/out.txt" || fail "iteration 11 has not consumed 88 samples"
ok "iteration 11 after 88 samples"

step "convert_checkpoint: torch_dist to HuggingFace; transformers gives Megatron's per-token losses"
for name in llama_tp2_pp2_fp32 llama_tp2_pp1_bf16 gpt2_tp2_pp1_fp32 gpt2_tp1_pp2_fp32; do
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$MEGATRON_REFERENCE/$name" \
    --save-dir "$WORK/hf_$name"
done
"$PYTHON" - "$MEGATRON_REFERENCE/megatron_reference.json" "$WORK" <<'PY' || fail "transformers' losses differ from Megatron's"
import json, sys, torch, transformers
reference, work = sys.argv[1], sys.argv[2]
failed = False
for case in json.load(open(reference))["cases"]:
    if case["case"] not in ("llama_tp2_pp2_fp32", "llama_tp2_pp1_bf16", "gpt2_tp2_pp1_fp32", "gpt2_tp1_pp2_fp32"):
        continue
    model = transformers.AutoModelForCausalLM.from_pretrained(f"{work}/hf_{case['case']}", dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor(case["tokens"])).logits
    losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), torch.tensor(case["labels"]), reduction="none")
    diff = (losses - torch.tensor(case["losses"])).abs().max().item()
    print(f"   {case['case']}: transformers' losses within {diff:.2e} of Megatron's")
    failed |= not diff < 1e-4
sys.exit(1 if failed else 0)
PY
ok "transformers on the converted folders gives Megatron's losses"

step "convert_checkpoint writes torch_dist in other layouts; Megatron-Core's own load gives its losses again"
for spec in "llama_tp2_pp2_fp32 1 1" "llama_tp2_pp2_fp32 2 4" "gpt2_tp1_pp2_fp32 2 1" "llama_tp2_pp1_bf16 1 2"; do
  read -r name tp pp <<<"$spec"
  out=$WORK/td_${name}_tp${tp}_pp${pp}
  assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver megatron --ckpt-format torch_dist \
    --target-tensor-parallel-size "$tp" --target-pipeline-parallel-size "$pp" --load-dir "$MEGATRON_REFERENCE/$name" \
    --save-dir "$out"
  megatron_losses "$out/iter_0000010" "${name%%_*}" "$out.json"
done
"$PYTHON" - "$MEGATRON_REFERENCE/megatron_reference.json" "$WORK" <<'PY' || fail "Megatron's losses on the converted checkpoints differ"
import glob, json, sys
reference, work = sys.argv[1], sys.argv[2]
cases = {c["case"]: c for c in json.load(open(reference))["cases"]}
failed = False
for path in sorted(glob.glob(f"{work}/td_*.json")):
    got = json.load(open(path))
    name = path.split("/td_")[1].rsplit("_tp", 1)[0]
    want = cases[name]
    diff = max(abs(a - b) for ga, wa in zip(got["losses"], want["losses"]) for a, b in zip(ga, wa))
    args = got["args"]
    print(f"   {path.split('/')[-1]}: Megatron's losses within {diff:.1e} of the original's; iteration "
          f"{got['iteration']}, consumed {args['consumed_train_samples']}, TP {args['tensor_model_parallel_size']}")
    failed |= not (diff <= 1e-6 and got["iteration"] == 10 and args["consumed_train_samples"] == 80
                   and got["opt_param_scheduler"]["num_steps"] == 80)
sys.exit(1 if failed else 0)
PY
ok "Megatron-Core loads the torch_dist checkpoints written here with the original's losses and counters"

step "megatron_train --ckpt-format torch_dist at TP2 x PP2 (async); Megatron-Core loads it, transformers agrees"
CKPT=$WORK/trained
assert_succeeds "$MPIEXEC" -n 4 --oversubscribe --bind-to none "${RUN[@]}" --load "$LLAMA" --no-load-optim \
  --use-checkpoint-opt-param-scheduler --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --save "$CKPT" --save-interval 12 --ckpt-format torch_dist --async-save
assert_contains "$WORK/out.txt" "saving checkpoint at iteration      12 to $CKPT in torch_dist format (async)"
assert_contains "$WORK/out.txt" "the optimizer and RNG states are not written in it yet"
assert_eq "12" "$(cat "$CKPT/latest_checkpointed_iteration.txt")" "the tracker"
megatron_losses "$CKPT/iter_0000012" llama "$WORK/trained.json"
assert_succeeds "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$CKPT" --save-dir "$WORK/trained_hf"
"$PYTHON" - "$WORK/trained.json" "$WORK/trained_hf" "$CKPT/iter_0000012/common.pt" <<'PY' || fail "Megatron's and transformers' losses differ"
import argparse, json, sys, torch, transformers
got = json.load(open(sys.argv[1]))
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[2], dtype=torch.float32)
with torch.no_grad():
    logits = model(torch.tensor(got["tokens"])).logits
losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), torch.tensor(got["labels"]), reduction="none")
diff = (losses - torch.tensor(got["losses"])).abs().max().item()
print(f"   Megatron-Core's losses on the trained checkpoint within {diff:.2e} of transformers'")
torch.serialization.add_safe_globals([argparse.Namespace])
common = torch.load(sys.argv[3], weights_only=True)  # as Megatron's safe load reads it
args = common["args"]
print(f"   common.pt (weights_only): iteration {common['iteration']}, consumed {args.consumed_train_samples}, "
      f"TP {args.tensor_model_parallel_size} x PP {args.pipeline_model_parallel_size}")
ok = (diff < 1e-4 and got["iteration"] == 12 and common["iteration"] == 12 and args.consumed_train_samples == 96
      and args.tensor_model_parallel_size == 2 and args.pipeline_model_parallel_size == 2 and args.num_layers == 4)
sys.exit(0 if ok else 1)
PY
ok "the checkpoint trained here loads in Megatron-Core with the losses transformers gives on its weights"

step "and resumes here, in another layout, at iteration 13 after 96 samples"
assert_succeeds "${RUN[@]}" --train-iters 13 --load "$CKPT" --no-load-optim --use-checkpoint-opt-param-scheduler
assert_contains "$WORK/out.txt" "reading Megatron-Core's distributed checkpoint $CKPT/iter_0000012 (saved at tensor-model-parallel size 2 x pipeline-model-parallel size 2) into 1 x 1"
grep -Eq "iteration +13/ +13 \| consumed samples: +104 \|" "$WORK/out.txt" || fail "iteration 13 has not consumed 104 samples"
ok "resumed from this build's own torch_dist checkpoint"
