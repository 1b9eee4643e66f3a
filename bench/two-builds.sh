# Sourced by the lab benchmarks: builds this tree and revision $base_ref of
# the `wafer` binary, as $work/wafer-this and $work/wafer-$base_commit (the
# baseline is built once per commit, in a worktree and target of its own).
# Sets root, work and base_commit.
root=$PWD
work=${CARGO_TARGET_DIR:-$root/target}/bench-lab
base_commit=$(git rev-parse --verify "$base_ref^{commit}")

cargo build --quiet --release -p wafer
mkdir -p "$work"
cp "${CARGO_TARGET_DIR:-$root/target}/release/wafer" "$work/wafer-this"

if [[ ! -x $work/wafer-$base_commit ]]; then
  rm -rf "$work/base-tree"
  git worktree prune
  git worktree add --detach "$work/base-tree" "$base_commit" >/dev/null
  (cd "$work/base-tree" && CARGO_TARGET_DIR=$work/base-target cargo build --quiet --release -p wafer)
  cp "$work/base-target/release/wafer" "$work/wafer-$base_commit"
  git worktree remove --force "$work/base-tree"
fi
