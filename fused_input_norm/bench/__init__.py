"""The benchmark: `python -m fused_input_norm.bench` (the CLI, in __main__.py; its docstring says what is timed).

common.py: what every suite shares (timer, interleaved sampling, the CPU suites' skeleton, labels, tables,
bars); affine.py: the affine op on every layout an engine feeds it, and its torch.compile worker; resize.py:
the exact uint8 resize fused with normalize; jpeg.py: JPEG bytes to pixel_values end to end. Import the
submodules; this file re-exports nothing (importing __main__ here would run the CLI twice under -m).
"""
