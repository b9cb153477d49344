"""Builds the C++ extension with CMake when a wheel is built (`pip install .`).

`make` builds it incrementally with ninja instead and installs this package in editable mode,
so the editable install skips CMake (TORCH_TPU_SKIP_CMAKE=1).
"""

import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithCMake(build_py):
    def run(self):
        if os.environ.get("TORCH_TPU_SKIP_CMAKE") != "1" and not self.editable_mode:
            root = os.path.dirname(os.path.abspath(__file__))
            build = os.path.join(root, "build", "wheel")
            output = os.path.join(root, "src", "torch_tpu")
            subprocess.check_call(
                ["cmake", "-S", root, "-B", build, "-G", "Ninja", f"-DPython3_EXECUTABLE={sys.executable}",
                 f"-DTORCH_TPU_OUTPUT_DIR={output}", "-DTORCH_TPU_BUILD_TESTS=OFF"]
            )
            subprocess.check_call(["cmake", "--build", build])
        super().run()


setup(cmdclass={"build_py": BuildWithCMake})
