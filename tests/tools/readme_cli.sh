#!/usr/bin/env bash
# The README's commands, run as a user would (docs/testing.md, "The README's
# commands"): every command of README.md's ```sh blocks must exit with status
# 0, and the ```c example must compile with -Wall -Wextra -Werror and run.
#
# Rules:
#   - The ```sh (or ```bash) blocks run in order, in one bash, in a scratch
#     folder laid out like the repository: build/release/bin/ holds the
#     build's tools, build/release/libtinyai.a is the build's library,
#     include/ is the repository's (linked), models/ holds copies of the
#     repository's models/ files, and ../shared is the shared data. Each
#     command line (a line ending in \ goes on to the next) is checked on its
#     own: the first that exits non-zero fails the test, naming its README
#     line. Empty lines and lines starting with # are not commands.
#   - A block right after the line <!-- readme-test: skip --> is not run. It
#     may hold only the set-up commands (bash scripts/..., cmake ...), which
#     install packages and build: anything else there fails the test.
#   - Every ```c block must come right after <!-- readme-test: file NAME -->;
#     it is written to NAME in the scratch folder before the blocks run.
#   - model.gguf (the quick start's GGUF file) is the default model written
#     as GGUF (Q8_0) by the tests' writer.
#   - Under a sanitizer, gcc links with the build's -fsanitize= flags (a
#     wrapper ahead on PATH). In a cross build (EMULATOR set) the test skips:
#     the README's commands are for the build machine.
#   - A command still running after README_CLI_LIMIT seconds (default 300;
#     each takes a few, under a sanitizer too) is a hang: the stacks of every
#     thread of the processes under the script go to stderr (gdb, where there
#     is one), they are killed, and the test fails naming the command.
#   - Without the shared data (stories260K) the test skips, or fails when
#     TINYAI_REQUIRE_SHARED is set (to anything but 0).
# Everything is written under OUT (emptied first), never in the source tree.
#
# Run by ctest as tools_readme_cli:
#   bash tests/tools/readme_cli.sh SOURCE_DIR BUILD_DIR BIN_DIR EXPORT SHARED_DIR CC SANITIZE OUT [EMULATOR]
#   e.g. bash tests/tools/readme_cli.sh $PWD $PWD/build/release $PWD/build/release/bin \
#          $PWD/build/release/tests/tinyai_test_export $PWD/../shared /usr/bin/cc "" /tmp/readme-cli ""
set -uo pipefail

if [ $# -lt 8 ]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR BIN_DIR EXPORT SHARED_DIR CC SANITIZE OUT [EMULATOR]" >&2
  exit 2
fi
source_dir=$1 build_dir=$2 bin_dir=$3 export_tool=$4 shared_dir=$5 cc=$6 sanitize=$7 out=$8 emulator=${9:-}
readme=$source_dir/README.md
skip() { echo "tinyai-test-skip: $*"; exit 0; }
die() { echo "readme_cli: $*" >&2; exit 1; }

[ -z "$emulator" ] || skip "a cross build ($emulator): the README's commands run on the build machine"
for f in models/stories260K/stories260K.bin models/stories260K/tok512.bin; do
  if [ ! -f "$shared_dir/$f" ]; then
    if [ -n "${TINYAI_REQUIRE_SHARED:-}" ] && [ "${TINYAI_REQUIRE_SHARED}" != 0 ]; then
      die "TINYAI_REQUIRE_SHARED is set and the shared data is missing: $shared_dir/$f"
    fi
    skip "the shared data is missing ($shared_dir/$f; TINYAI_REQUIRE_SHARED=1 fails instead)"
  fi
done
[ -f "$readme" ] || die "no README.md in $source_dir"
[ -f "$build_dir/libtinyai.a" ] || skip "this build has no static libtinyai.a (BUILD_SHARED_LIBS?)"
[ -x "$export_tool" ] || die "the tests' writer $export_tool is not built"

# ---- The scratch folder, laid out like the repository ----------------------------------------
case $out in
  "$source_dir"/build/*) ;;  # a build tree inside the repository (build/ is not source)
  "$source_dir"|"$source_dir"/*) die "OUT ($out) is inside the source tree" ;;
esac
rm -rf "$out"
repo=$out/repo
mkdir -p "$repo/build/release/bin" "$repo/models" "$out/wrap" || die "cannot make $out"
for tool in "$bin_dir"/tinyai-*; do
  [ -x "$tool" ] && ln -s "$tool" "$repo/build/release/bin/"
done
[ -e "$repo/build/release/bin/tinyai-generate" ] || die "no tinyai-generate in $bin_dir"
ln -s "$build_dir/libtinyai.a" "$repo/build/release/libtinyai.a"
ln -s "$source_dir/include" "$repo/include"
for f in "$source_dir"/models/*; do
  [ -f "$f" ] && cp "$f" "$repo/models/"
done
ln -s "$shared_dir" "$out/shared"
"$export_tool" gguf "$source_dir/models/tinyai-fortunes.tmai" "$repo/model.gguf" --type q8_0 >/dev/null ||
  die "tinyai_test_export could not write model.gguf"
if [ -n "$sanitize" ]; then
  printf '#!/bin/sh\nexec "%s" -fsanitize=%s "$@"\n' "$cc" "$sanitize" > "$out/wrap/gcc"
  chmod +x "$out/wrap/gcc"
fi

# ---- README.md's blocks: the C files, and one script of its commands -------------------------
script=$out/readme.sh
cat > "$script" <<'EOF'
set -o pipefail
# A watchdog per command: one still running after readme_limit seconds (a
# hang: every command takes a few seconds, under a sanitizer too) gets the
# stacks of every thread of the processes under this shell printed (gdb,
# where there is one) and is killed, so the test fails at once and names the
# command, instead of at ctest's timeout with nothing said.
readme_limit=${README_CLI_LIMIT:-300}
readme_tree() {  # the processes under $1, children first
  local c
  for c in $(ps -o pid= --ppid "$1"); do readme_tree "$c"; echo "$c"; done
}
readme_watch() {
  (
    sleep "$readme_limit" < /dev/null > /dev/null 2>&1 &
    trap 'kill $! 2>/dev/null; exit 0' TERM  # the command ended: so does the sleep
    wait $!
    echo "readme_cli: README.md:$readme_line: still running after ${readme_limit}s: $readme_command" >&2
    for p in $(readme_tree "$1"); do
      [ "$p" = "$BASHPID" ] && continue
      echo "readme_cli: process $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)" >&2
      if command -v gdb > /dev/null; then
        gdb -p "$p" -batch -ex 'thread apply all bt' 2>/dev/null | grep -E '^(#|Thread)' >&2
      fi
    done
    for p in $(readme_tree "$1"); do [ "$p" = "$BASHPID" ] || kill -9 "$p" 2>/dev/null; done
  ) &
  readme_watchdog=$!
}
readme_check() {
  local status=$1
  kill "$readme_watchdog" 2>/dev/null
  wait "$readme_watchdog" 2>/dev/null
  if [ "$status" -ne 0 ]; then
    echo "readme_cli: README.md:$readme_line: exit status $status: $readme_command" >&2
    exit 1
  fi
}
EOF
marker='' fence='' block_file='' command='' command_line=0 n_run=0 n_skipped=0 n_c=0 line_no=0
quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
finish_command() {
  [ -n "$command" ] || return 0
  if [ "$fence" = skip ]; then
    case $command in
      "bash scripts/"*|"cmake "*) echo "README.md:$command_line: skipped (set-up): $command" ;;
      *) die "README.md:$command_line: only set-up commands (bash scripts/..., cmake ...) may be skipped: $command" ;;
    esac
    n_skipped=$((n_skipped + 1))
  else
    {
      echo "readme_line=$command_line readme_command=$(quote "$command")"
      echo "echo \"README.md:\$readme_line: \$ \$readme_command\""
      echo 'readme_watch $$'
      printf '%s\n' "$command"
      echo 'readme_check $?'
    } >> "$script"
    n_run=$((n_run + 1))
  fi
  command=''
}
while IFS= read -r line || [ -n "$line" ]; do
  line_no=$((line_no + 1))
  line=${line%$'\r'}
  if [ -z "$fence" ]; then
    case $line in
      '<!-- readme-test: skip -->') marker=skip; continue ;;
      '<!-- readme-test: file '*' -->') marker=${line#'<!-- readme-test: '}; marker=${marker%' -->'}; continue ;;
      '```sh'|'```bash')
        case $marker in
          skip) fence=skip ;;
          '') fence=sh ;;
          *) die "README.md:$line_no: a ${marker} marker before a shell block" ;;
        esac ;;
      '```c')
        case $marker in
          'file '*) block_file=${marker#file }
                    case $block_file in */*|.*|'') die "README.md:$line_no: a bad file name '$block_file'" ;; esac
                    : > "$repo/$block_file"; fence=c; n_c=$((n_c + 1)) ;;
          *) die "README.md:$line_no: a C block without <!-- readme-test: file NAME --> before it" ;;
        esac ;;
      '```'*) fence=other ;;
    esac
    [ -n "$line" ] && marker=''
    continue
  fi
  if [ "$line" = '```' ]; then
    [ "$fence" = sh ] || [ "$fence" = skip ] && { [ -z "$command" ] || die "README.md:$line_no: a block ends inside a command"; }
    fence=''
    continue
  fi
  case $fence in
    c) printf '%s\n' "$line" >> "$repo/$block_file" ;;
    sh|skip)
      if [ -z "$command" ]; then
        case $line in ''|'#'*) continue ;; esac
        command_line=$line_no
      fi
      if [ "${line%\\}" != "$line" ]; then
        command+="$line"$'\n'
      else
        command+="$line"
        finish_command
      fi ;;
  esac
done < "$readme"
[ -z "$fence" ] || die "README.md ends inside a \`\`\`$fence block"
[ "$n_run" -gt 0 ] || die "README.md has no command to run"
[ "$n_c" -gt 0 ] || die "README.md has no C example"

# ---- Run them ---------------------------------------------------------------------------------
echo "readme_cli: $n_run commands to run, $n_skipped set-up commands skipped, $n_c C file(s), in $repo"
(cd "$repo" && PATH="$out/wrap:$PATH" bash "$script") || exit 1
echo "readme_cli: every command of README.md exited with status 0"
