"""Hipifies a source directory as torch's extension build does on a ROCm torch, into a fresh directory.

    python hipify_sources.py SRC_DIR OUT_DIR

Prints the hipified translation units (every *.cpp and *.cu of SRC_DIR, under their hipified names:
x.cpp -> x_hip.cpp, x_cuda.cu -> x_hip.hip), ';'-separated for CMake. The list comes from hipify itself,
never from a list of file names, so a new source file is picked up by the next configure.
"""

import contextlib
import shutil
import sys
from pathlib import Path

from torch.utils.hipify import hipify_python

src, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
shutil.rmtree(out, ignore_errors=True)  # no stale file of a source that has since been removed
with contextlib.redirect_stdout(sys.stderr):  # hipify prints a banner; stdout is the list
    results = hipify_python.hipify(
        project_directory=str(src),
        output_directory=str(out),
        includes=["*"],
        is_pytorch_extension=True,
        show_detailed=False,
        show_progress=False,
    )
units = []
for copied, result in results.items():
    if Path(copied).suffix in (".cpp", ".cu"):
        path = Path(result.hipified_path or copied)
        if not path.is_file():
            sys.exit(f"hipify gave no file for {copied}: {result.status}")
        units.append(path.as_posix())
if not units:
    sys.exit(f"no .cpp or .cu file under {src}")
print(";".join(sorted(units)), end="")
