#!/usr/bin/env bash
# The container path, checked here without a registry (a separate command, not part of every CI
# run: it downloads Debian packages and the PyTorch wheel into the image, ~10 GB of disk):
#   1. a Debian 12 base image made locally (mmdebstrap, podman import),
#   2. docker/Dockerfile built on it with podman (BASE_IMAGE=that base, the CPU configuration),
#   3. preprocess_data inside: the bytes of Megatron's dataset of the test corpus;
#      megatron_train inside: a few iterations on mock data, saved to a mounted folder,
#   4. when enroot and pyxis are installed (the cluster's tools; not part of this repository):
#      enroot import of the image, then both sbatch scripts with IMAGE=the .sqsh on a throw-away
#      Slurm with two fake nodes (tests/slurm/cluster.sh), training TP2 x DP2 on 2 x 2 tasks.
# Prints the time of each step. Usage: scripts/test_container.sh   (root; podman, mmdebstrap,
# squashfs-tools are installed when missing). KEEP_WORK=1 keeps the work folder.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/megatron-cpp
WORK=$(mktemp -d "${TMPDIR:-/tmp}/megatron-container.XXXXXX")
BASE=localhost/megatron-debian-base:bookworm
IMAGE=localhost/megatron-cpp:cpu
t0=$SECONDS
step() { echo "== [$((SECONDS - t0)) s] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
ENROOT_DROPIN=""
cleanup() {
  [[ -n ${SLURM_DIR:-} ]] && slurm_stop
  [[ -n $ENROOT_DROPIN ]] && rm -f "$ENROOT_DROPIN"
  if [[ ${KEEP_WORK:-0} == 1 ]]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

step "tools"
missing=()
for p in podman buildah mmdebstrap squashfs-tools uidmap runc zstd; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Measured on this kind of machine: crun fails (cgroups hybrid mode), and the sandbox cannot
# raise RLIMIT_NOFILE to podman's default; a private configuration, not the system's.
cat >"$WORK/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF=$WORK/containers.conf

step "1. base image $BASE (mmdebstrap --variant=minbase bookworm, cached in $CACHE)"
mkdir -p "$CACHE" "$CACHE/ccache"
if ! podman image exists "$BASE"; then
  [[ -s $CACHE/bookworm-minbase.tar ]] || {
    mmdebstrap --variant=minbase --format=tar --include=ca-certificates bookworm "$CACHE/bookworm-minbase.tar.tmp" &&
      mv "$CACHE/bookworm-minbase.tar.tmp" "$CACHE/bookworm-minbase.tar"
  }
  podman import --change 'CMD ["/bin/bash"]' "$CACHE/bookworm-minbase.tar" "$BASE" >/dev/null
fi
podman image exists "$BASE" || fail "no base image"

step "2. podman build -f docker/Dockerfile (CPU configuration on $BASE; ccache from $CACHE/ccache)"
start=$SECONDS
# This machine's pip settings travel into the build: a TLS proxy's CA bundle, a local wheel folder.
pip_args=()
if [[ -n ${PIP_CERT:-} && -f $PIP_CERT ]]; then
  pip_args+=(-v "$PIP_CERT:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
fi
if [[ -n ${PIP_FIND_LINKS:-} && -d $PIP_FIND_LINKS ]]; then
  pip_args+=(-v "$PIP_FIND_LINKS:/run/host-wheels:ro" --build-arg PIP_FIND_LINKS=/run/host-wheels)
fi
[[ -n ${PIP_INDEX_URL:-} ]] && pip_args+=(--build-arg PIP_INDEX_URL="$PIP_INDEX_URL")
podman build --pull=never -f "$ROOT/docker/Dockerfile" --build-arg BASE_IMAGE="$BASE" \
  --build-arg TORCH_PYTHON= --build-arg APT_SKIP= -v "$CACHE/ccache:/root/.cache/ccache" "${pip_args[@]}" \
  -t "$IMAGE" "$ROOT" >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; fail "the image did not build"; }
grep -E '^\[setup\]' "$WORK/build.log" | tail -5
echo "   built $IMAGE in $((SECONDS - start)) s: $(podman image inspect "$IMAGE" --format '{{.Size}}' | awk '{printf "%.1f GB", $1/1e9}')"

step "3. the tools inside the image"
zstd -qdc "$ROOT/tests/data/corpus.jsonl.zst" >"$WORK/corpus.jsonl"
zstd -qdc "$ROOT/tests/data/corpus_text_document.bin.zst" >"$WORK/golden.bin"
RUN=(podman run --rm --network=none -v "$WORK:$WORK" -w "$WORK" "$IMAGE")
"${RUN[@]}" preprocess_data --input "$WORK/corpus.jsonl" --output-prefix "$WORK/inside" \
  --tokenizer-type GPT2BPETokenizer --vocab-file /opt/megatron-cpp/tokenizers/gpt2/gpt2-vocab.json \
  --merge-file /opt/megatron-cpp/tokenizers/gpt2/gpt2-merges.txt --append-eod --workers 2 >"$WORK/pre.log" 2>&1 ||
  { cat "$WORK/pre.log"; fail "preprocess_data failed inside the image"; }
cmp "$WORK/inside_text_document.bin" "$WORK/golden.bin" || fail "the image's preprocess_data wrote other bytes"
cmp "$WORK/inside_text_document.idx" "$ROOT/tests/data/corpus_text_document.idx" || fail "the image's .idx differs"
echo "   preprocess_data: .bin/.idx byte-equal to Megatron's"
"${RUN[@]}" megatron_train --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 32 --micro-batch-size 2 --train-iters 4 --lr 1e-3 --mock-data --log-interval 1 \
  --eval-iters 0 --tokenizer-type GPT2BPETokenizer --vocab-file /opt/megatron-cpp/tokenizers/gpt2/gpt2-vocab.json \
  --merge-file /opt/megatron-cpp/tokenizers/gpt2/gpt2-merges.txt --data-cache-path "$WORK/cache" \
  --save "$WORK/ckpt" --save-interval 4 >"$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; fail "megatron_train failed inside the image"; }
if ! grep -q "iteration        4/       4" "$WORK/train.log" || [[ $(cat "$WORK/ckpt/latest_checkpointed_iteration.txt") != 4 ]]; then
  fail "no iteration 4 or no checkpoint from the image's megatron_train"
fi
echo "   megatron_train: 4 iterations, checkpoint saved to the mounted folder"

if ! command -v enroot >/dev/null || ! compgen -G "/usr/local/lib/slurm/spank_pyxis.so" >/dev/null; then
  step "4. skipped: enroot and pyxis are not installed (the cluster's tools)"
  exit 0
fi
step "4. enroot import, then both sbatch scripts with IMAGE on a throw-away Slurm"
start=$SECONDS
ENGINE=podman "$ROOT/docker/enroot-import.sh" "$IMAGE" "$WORK/megatron-cpp.sqsh" >"$WORK/import.log" 2>&1 ||
  { cat "$WORK/import.log"; fail "enroot import failed"; }
echo "   $(tail -1 "$WORK/import.log") in $((SECONDS - start)) s"
# Two fake nodes on one host would unpack the image into the same enroot folder (pyxis names it
# by job and step): for this run only, a drop-in gives each node its own (pyxis hands the task's
# SLURMD_NODENAME to enroot, whose configuration values are shell-expanded), under this run's
# work folder so that nothing of it outlives the test.
sysconf=$(enroot info 2>/dev/null | sed -nE 's/^Config file: (.*)\/enroot\.conf$/\1/p')
sysconf=${sysconf:-/usr/local/etc/enroot}
ENROOT_DROPIN=$sysconf/enroot.conf.d/40-megatron-fake-nodes.conf
cat >"$ENROOT_DROPIN" <<DROPIN
ENROOT_DATA_PATH $WORK/enroot/data\${SLURMD_NODENAME:+/\$SLURMD_NODENAME}
ENROOT_RUNTIME_PATH $WORK/enroot/run\${SLURMD_NODENAME:+/\$SLURMD_NODENAME}
DROPIN
# shellcheck source=../tests/slurm/cluster.sh
source "$ROOT/tests/slurm/cluster.sh"
SLURM_PLUGSTACK=/etc/slurm/plugstack.conf slurm_start "$WORK/cluster" || fail "Slurm did not start"
export IMAGE_SQSH=$WORK/megatron-cpp.sqsh CONTAINER_MOUNTS="$WORK:$WORK"
cd "$WORK"
plan=$(IMAGE=$IMAGE_SQSH INPUT="$WORK/corpus.jsonl" DATA_PATH="$WORK/data" OUTPUT_PREFIX="$WORK/data/corpus" WORKERS=2 \
  sbatch --parsable --cpus-per-task=2 --output="$WORK/pre_slurm.out" "$ROOT/slurm/1.data-preprocessing.sbatch")
slurm_wait "$plan" 300 || fail "the preprocessing job did not finish"
[[ $(slurm_state "$plan") == COMPLETED ]] || { cat "$WORK/pre_slurm.out"; fail "preprocessing in the container ended $(slurm_state "$plan")"; }
cmp "$WORK/data/corpus_text_document.bin" "$WORK/golden.bin" || fail "preprocessing in the container wrote other bytes"
echo "   1.data-preprocessing.sbatch with IMAGE: byte-equal to Megatron's"
job=$(IMAGE=$IMAGE_SQSH GPUS_PER_NODE=0 TASKS_PER_NODE=2 NUM_LAYERS=2 HIDDEN_SIZE=32 NUM_ATTENTION_HEADS=4 SEQ_LENGTH=32 \
  TENSOR_MODEL_PARALLEL_SIZE=2 PIPELINE_MODEL_PARALLEL_SIZE=1 MICRO_BATCH_SIZE=2 GLOBAL_BATCH_SIZE=8 NUMBER_OF_ITERATIONS=10 \
  LR=3e-3 LR_DECAY_ITERS=10 PRECISION=fp32 DATA_PATH="$WORK/data/corpus_text_document" CHECKPOINT_PATH="$WORK/run" \
  SAVE_INTERVAL=5 EVAL_INTERVAL=5 EVAL_ITERS=1 LOG_INTERVAL=1 \
  EXTRA_ARGS="--make-vocab-size-divisible-by 64 --data-cache-path $WORK/cache2" \
  sbatch --parsable --nodes=2 --output="$WORK/train_slurm.out" "$ROOT/slurm/2.distributed-training.sbatch")
slurm_wait "$job" 300 || fail "the training job did not finish"
[[ $(slurm_state "$job") == COMPLETED ]] || { tail -40 "$WORK/train_slurm.out"; fail "training in the container ended $(slurm_state "$job")"; }
[[ $(cat "$WORK/run/latest_checkpointed_iteration.txt") == 10 ]] || fail "no final checkpoint from the container run"
echo "   2.distributed-training.sbatch with IMAGE: TP2 x DP2 on 2 nodes x 2 tasks, 10 iterations, checkpoint saved"
step "done"
