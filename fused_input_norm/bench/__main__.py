"""python -m fused_input_norm.bench: see the package's docstring."""

from . import main

main()
