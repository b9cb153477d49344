"""``python -m torch_tpu.info``: what backs the tpu device, its devices and the compile cache."""

from __future__ import annotations

import os
import sys

from torch_tpu import _C, _plugin
from torch_tpu._mode import ExecutionMode
from torch_tpu.precision import precision


def _directory_size(path: str) -> tuple[int, int]:
    files = total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(root, name))
                files += 1
            except OSError:
                pass  # removed while we walked
    return files, total


def describe() -> str:
    lines = []
    try:
        info = _C._platform()
    except RuntimeError as error:  # no usable plugin: say what was tried
        lines.append("platform: unavailable")
        lines.append(f"plugin candidates: {_plugin.candidates() or 'none found'}")
        lines.append(str(error))
        info = None
    if info is not None:
        lines.append(f"platform: {info['platform']} ({info['platform_version']})")
        lines.append(f"plugin: {info['plugin']} at {info['plugin_path']}")
        lines.append(f"PJRT API version: plugin {info['api_version']}, header {info['header_api_version']}")
        lines.append(
            f"cache key: plugin identity {info['plugin_identity']}, extension build {info['extension_identity']}"
        )
        lines.append(f"devices ({len(info['devices'])}):")
        lines += [f"  tpu:{index}  {kind}" for index, kind in enumerate(info["devices"])]
    cache = _C._cache_dir()
    files, size = _directory_size(cache) if os.path.isdir(cache) else (0, 0)
    lines.append(f"cache directory: {cache} ({files} files, {size / 2**20:.1f} MiB)")
    lines.append(f"execution mode: {ExecutionMode(_C._get_mode()).name.lower()}")
    lines.append(f"matmul/conv precision: {precision().name}")
    return "\n".join(lines)


def main() -> int:
    print(describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
