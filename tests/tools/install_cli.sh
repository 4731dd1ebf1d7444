#!/usr/bin/env bash
# `cmake --install` after the demo's build (scripts/demo.sh): the install
# holds what was built and works.
#
# In a scratch folder, a fresh build tree is configured with the demo's own
# cmake options and only the demo's targets are built (both read from
# scripts/demo.sh's `cmake -S . -B build/release ...` and
# `cmake --build build/release ... --target ...` lines, so they cannot
# drift apart), with this build's compilers. Then `cmake --install` into a
# fresh prefix must succeed and give:
#   - the headers (include/tinyai/tinyai.h), the library, the CMake package
#     and tinyai.pc;
#   - in bin/, exactly the demo's tools (nothing unbuilt), each answering
#     --version with the package's version;
#   - a C program calling tinyaiVersionString(), compiled with
#     -Wall -Wextra -Werror against the prefix (the installed tinyai.pc's
#     flags), that links and prints the headers' TINYAI_VERSION_STRING.
# In a cross build (EMULATOR set) the test skips: the demo runs on the build
# machine. Everything is written under OUT (emptied first), never in the
# source tree; the scratch build tree is deleted when the test passes.
# TINYAI_INSTALL_CLI_JOBS: the build's parallel jobs (default 2).
#
# Run by ctest as tools_install_cli:
#   bash tests/tools/install_cli.sh SOURCE_DIR CMAKE CC CXX OUT [EMULATOR]
#   e.g. bash tests/tools/install_cli.sh $PWD cmake /usr/bin/cc /usr/bin/c++ /tmp/install-cli ""
set -uo pipefail

if [ $# -lt 5 ]; then
  echo "usage: $0 SOURCE_DIR CMAKE CC CXX OUT [EMULATOR]" >&2
  exit 2
fi
source_dir=$1 cmake=$2 cc=$3 cxx=$4 out=$5 emulator=${6:-}
skip() { echo "tinyai-test-skip: $*"; exit 0; }
die() { echo "install_cli: $*" >&2; exit 1; }
started=$SECONDS
step() { echo "install_cli: [$((SECONDS - started)) s] $*"; }

[ -z "$emulator" ] || skip "a cross build ($emulator): the demo builds and installs on the build machine"
case $out in
  "$source_dir"/build/*) ;;  # a build tree inside the repository (build/ is not source)
  "$source_dir"|"$source_dir"/*) die "OUT ($out) is inside the source tree" ;;
esac

# ---- The demo's cmake commands, from scripts/demo.sh -----------------------------------------
demo=$source_dir/scripts/demo.sh
[ -f "$demo" ] || die "no scripts/demo.sh in $source_dir"
configure_line=$(grep -E '^cmake -S \. -B build/release( |$)' "$demo")
build_line=$(grep -E '^cmake --build build/release( |$)' "$demo")
[ "$(printf '%s\n' "$configure_line" | grep -c .)" = 1 ] ||
  die "scripts/demo.sh has not exactly one 'cmake -S . -B build/release ...' line"
[ "$(printf '%s\n' "$build_line" | grep -c .)" = 1 ] ||
  die "scripts/demo.sh has not exactly one 'cmake --build build/release ...' line"
# Plain words only (no quotes or expansions): the options after the build
# folder up to a redirection, and the targets after --target.
read -ra words <<< "${configure_line#cmake -S . -B build/release}"
options=()
for w in "${words[@]}"; do
  case $w in
    '>'*|'2>'*|'&'*|'|'*|';'*) break ;;
    *[\"\'\$\`\\]*) die "cannot read the demo's configure option $w (scripts/demo.sh: $configure_line)" ;;
    *) options+=("$w") ;;
  esac
done
read -ra words <<< "${build_line#cmake --build build/release}"
targets=() in_targets=0
for w in "${words[@]}"; do
  case $w in
    '>'*|'2>'*|'&'*|'|'*|';'*) break ;;
    --target) in_targets=1 ;;
    -*) in_targets=0 ;;
    *) if [ $in_targets = 1 ]; then
         case $w in *[\"\'\$\`\\]*) die "cannot read the demo's target $w (scripts/demo.sh: $build_line)" ;; esac
         targets+=("$w")
       fi ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || die "scripts/demo.sh builds no --target (its line: $build_line)"
echo "install_cli: the demo's options: ${options[*]}; its targets: ${targets[*]}"

# ---- Configure and build like the demo, then install -----------------------------------------
rm -rf "$out"
build=$out/build prefix=$out/prefix
mkdir -p "$out" || die "cannot make $out"
step "configuring $build"
"$cmake" -S "$source_dir" -B "$build" "${options[@]}" "-DCMAKE_C_COMPILER=$cc" "-DCMAKE_CXX_COMPILER=$cxx" \
  > "$out/configure.log" 2>&1 || { cat "$out/configure.log"; die "configuring like the demo failed"; }
step "building ${targets[*]}"
"$cmake" --build "$build" -j "${TINYAI_INSTALL_CLI_JOBS:-2}" --target "${targets[@]}" > "$out/build.log" 2>&1 ||
  { tail -n 50 "$out/build.log"; die "building the demo's targets failed"; }
step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$out/install.log" 2>&1 ||
  { cat "$out/install.log"; die "cmake --install after the demo's build failed"; }

# ---- What was installed ------------------------------------------------------------------------
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -n 1; }
libdir=$(cache_value CMAKE_INSTALL_LIBDIR)
pkg_config=$(cache_value PKG_CONFIG_EXECUTABLE)
[ -n "$libdir" ] || die "no CMAKE_INSTALL_LIBDIR in $build/CMakeCache.txt"
for f in include/tinyai/tinyai.h include/tinyai/llm.h "$libdir/cmake/TinyAI/TinyAIConfig.cmake" \
         "$libdir/cmake/TinyAI/TinyAIConfigVersion.cmake" "$libdir/pkgconfig/tinyai.pc"; do
  [ -f "$prefix/$f" ] || die "the install lacks $f"
done
libs=("$prefix/$libdir"/libtinyai.*)
[ -e "${libs[0]}" ] || die "the install lacks the library ($libdir/libtinyai.*)"
version=$(sed -n 's/^set(PACKAGE_VERSION "\([^"]*\)").*/\1/p' "$prefix/$libdir/cmake/TinyAI/TinyAIConfigVersion.cmake")
[ -n "$version" ] || die "no PACKAGE_VERSION in the installed TinyAIConfigVersion.cmake"
# bin/ holds the tools the demo built, and nothing that was not built.
for tool in "$prefix"/bin/*; do
  [ -e "$tool" ] || continue
  name=${tool##*/} built=0
  for t in "${targets[@]}"; do [ "$name" = "$t" ] && built=1; done
  [ $built = 1 ] || die "the install holds bin/$name, which the demo did not build"
done
for t in "${targets[@]}"; do
  case $t in tinyai-*) ;; *) continue ;; esac  # the tools (a library target installs no program)
  [ -x "$prefix/bin/$t" ] || die "the install lacks bin/$t, which the demo built"
  got=$("$prefix/bin/$t" --version 2> "$out/$t.err")
  rc=$?
  [ $rc = 0 ] || die "the installed $t --version exited with status $rc: $(cat "$out/$t.err")"
  case $got in
    "$t (TinyAI) $version"*) ;;
    *) die "the installed $t --version printed '$got', not '$t (TinyAI) $version...'" ;;
  esac
  echo "install_cli: bin/$t --version: $got"
done
[ -x "$prefix/bin/tinyai-generate" ] || die "the install lacks bin/tinyai-generate"

# ---- A C program against the prefix ------------------------------------------------------------
[ -n "$pkg_config" ] || die "no PKG_CONFIG_EXECUTABLE in $build/CMakeCache.txt"
cat > "$out/version.c" <<'EOF'
#include <stdio.h>
#include <string.h>

#include <tinyai/tinyai.h>

int main(void) {
  const char* version = tinyaiVersionString();
  if (version == NULL || strcmp(version, TINYAI_VERSION_STRING) != 0) {
    fprintf(stderr, "tinyaiVersionString() is '%s', the header says '%s'\n", version ? version : "(null)",
            TINYAI_VERSION_STRING);
    return 1;
  }
  printf("%s\n", version);
  return 0;
}
EOF
pc() { PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" "$pkg_config" "$@"; }
cflags=$(pc --cflags tinyai) || die "pkg-config --cflags tinyai failed on the installed tinyai.pc"
ldflags=$(pc --static --libs tinyai) || die "pkg-config --static --libs tinyai failed on the installed tinyai.pc"
# Its -I names the prefix's include/ (tinyai.pc is relocatable).
want=$(realpath "$prefix/include") found=0
for flag in $cflags; do
  case $flag in -I*) [ "$(realpath -m "${flag#-I}")" = "$want" ] && found=1 ;; esac
done
[ $found = 1 ] || die "the installed tinyai.pc gives '$cflags', with no -I for $prefix/include"
step "compiling version.c: $cc $cflags ... $ldflags"
# shellcheck disable=SC2086  # pkg-config's flags are words
"$cc" -std=c99 -Wall -Wextra -Werror -pedantic $cflags "$out/version.c" -o "$out/version" $ldflags ||
  die "a C program calling tinyaiVersionString() did not compile and link against $prefix"
got=$("$out/version") || die "the C program linked against $prefix failed"
[ "$got" = "$version" ] || die "the C program printed '$got', not the package's version $version"
echo "install_cli: a C program linked against the prefix prints tinyaiVersionString() = $got"

rm -rf "$build"
step "passed: $prefix holds the library, the headers and ${targets[*]}"
