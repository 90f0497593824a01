# Shared helper: fetch and unpack the pinned llama-cpp-python sdist (BRIEF §2), verifying its SHA-256.
# muser_fetch_sdist DIR  -> prints the unpacked source root (DIR/llama_cpp_python-0.3.36)
muser_fetch_sdist() {
  local dir="$1"
  local name="llama_cpp_python-0.3.36.tar.gz"
  local sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
  local url="https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/$name"
  mkdir -p "$dir"
  if [ ! -f "$dir/$name" ]; then
    curl -sSfL -o "$dir/$name.tmp" "$url" >&2
    mv "$dir/$name.tmp" "$dir/$name"
  fi
  local got
  got=$(sha256sum "$dir/$name" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    echo "refusing: $dir/$name has SHA-256 $got, expected $sha" >&2
    return 1
  fi
  if [ ! -d "$dir/llama_cpp_python-0.3.36/vendor/llama.cpp" ]; then
    tar xzf "$dir/$name" -C "$dir" >&2
  fi
  echo "$dir/llama_cpp_python-0.3.36"
}
