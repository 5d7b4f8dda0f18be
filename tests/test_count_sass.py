"""scripts/count_sass.py: its loop and path counting on a hand-made SASS listing whose answers are counted
by hand, and a run on the built extension where it has CUDA kernels."""

import glob
import importlib.util
import os
import re

import pytest

import fused_input_norm

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "count_sass.py")
spec = importlib.util.spec_from_file_location("count_sass", SCRIPT)
count_sass = importlib.util.module_from_spec(spec)
spec.loader.exec_module(count_sass)

# A grid-stride loop (0x30..0xb0) whose body branches: the short side (0x80) or the long side (0x50-0x70),
# then calls a subroutine (0x100..0x130) that itself branches; trailing EXIT, self-branch and NOP padding.
LISTING = """
\t\tFunction : _Z6kernelv
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
        /*0010*/                   ISETP.GE.U32.AND P0, PT, R0, UR5, PT ; /* 0x0000000500007c0c */
        /*0020*/               @P0 EXIT ;                                 /* 0x000000000000094d */
        /*0030*/                   LDG.E.128 R4, desc[UR4][R2.64] ;       /* 0x0000000402047981 */
        /*0040*/               @P2 BRA 0x80 ;                             /* 0x0000000000002947 */
        /*0050*/                   FFMA R4, R4, R8, R9 ;                  /* 0x0000000804047223 */
        /*0060*/                   FFMA R5, R5, R8, R9 ;                  /* 0x0000000805057223 */
        /*0070*/                   BRA 0x90 ;                             /* 0x0000000000007947 */
        /*0080*/                   FMUL R4, R4, R8 ;                      /* 0x0000000804047220 */
        /*0090*/                   CALL.REL.NOINC 0x100 ;                 /* 0x0000000000007944 */
        /*00a0*/                   STG.E.128 desc[UR4][R2.64], R4 ;       /* 0x0000000402007986 */
        /*00b0*/              @!P3 BRA 0x30 ;                             /* 0xffffffe00000b947 */
        /*00c0*/                   EXIT ;                                 /* 0x000000000000794d */
        /*00d0*/                   BRA 0xd0;                              /* 0xfffffffc00fc7947 */
        /*00e0*/                   NOP;                                   /* 0x0000000000007918 */
        /*0100*/                   IADD3 R0, R0, 0x1, RZ ;                /* 0x0000000100007810 */
        /*0110*/               @P4 BRA 0x130 ;                            /* 0x0000000000004947 */
        /*0120*/                   IMAD R0, R0, R1, RZ ;                  /* 0x0000000100007224 */
        /*0130*/                   RET.REL.NODEC R22 0x0 ;                /* 0xffffffdc16007950 */
"""


def test_hot_loop_static_size_and_paths():
    code = count_sass.parse_sass(LISTING)["_Z6kernelv"]
    assert len(code) == 18  # NOP dropped
    (loop,) = count_sass.hot_loops(code)
    assert (code[loop.first].addr, code[loop.last].addr) == (0x30, 0xB0)
    assert loop.static == 9 and loop.inner == 0
    # short side: 30 40 80 90 a0 b0 + the subroutine's short path 100 110 130
    assert loop.shortest == 6 + 3
    # long side: 30 40 50 60 70 90 a0 b0 + 100 110 120 130
    assert loop.longest == 8 + 4


def test_shorten_and_elements_per_iteration():
    short, base, args = count_sass.shorten(
        "void fused_input_norm::affine_contiguous_kernel<unsigned char, fused_input_norm::bfloat16_bits, "
        "unsigned int, 16>(unsigned char const*, fused_input_norm::bfloat16_bits*, float const*, float const*, "
        "unsigned int, unsigned int, unsigned int)"
    )
    assert short == "affine_contiguous_kernel<u8, bf16, u32, 16>"
    assert count_sass.ELEMENTS_PER_ITERATION[base](*args) == 32  # two vectors of 16 per grid-stride step
    assert count_sass.ELEMENTS_PER_ITERATION["affine_contiguous_kernel"]("f32", "f32", "u64", "1") == 2
    assert count_sass.ELEMENTS_PER_ITERATION["affine_pixels_kernel"]("u8", "bf16", "u32", "true") == 48  # C = 3
    assert count_sass.ELEMENTS_PER_ITERATION["affine_strided_kernel"]("f32", "f16", "u64") == 8


def test_res_usage():
    usage = count_sass.parse_res_usage(
        " Function _Z6kernelv:\n  REG:40 STACK:0 SHARED:0 LOCAL:8 CONSTANT[0]:572 TEXTURE:0 SURFACE:0 SAMPLER:0\n"
    )
    assert usage["_Z6kernelv"]["REG"] == 40 and usage["_Z6kernelv"]["LOCAL"] == 8


def _cuobjdump_or_none():
    try:
        return count_sass.find_cuobjdump()
    except SystemExit:
        return None


def _imported_extension() -> str | None:
    """The extension this test process imported (an installed wheel's too), not the source tree's."""
    found = sorted(glob.glob(os.path.join(os.path.dirname(fused_input_norm.__file__), "_C*.so")))
    return found[0] if found else None


@pytest.mark.skipif(
    "cuda" not in fused_input_norm.build_info()["backends"] or _cuobjdump_or_none() is None,
    reason="needs the CUDA build of the extension and a cuobjdump (the CUDA venv's triton ships one)",
)
def test_counts_the_built_extension(capsys):
    so = _imported_extension()
    if so is None:
        pytest.skip(f"no _C*.so beside {fused_input_norm.__file__} (a library loaded by FUSED_INPUT_NORM_LIBRARY)")
    count_sass.main([so, "--match", "u8, bf16"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| affine")]
    assert rows, "no kernel rows"
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert re.fullmatch(r"\d+", cells[1]), row  # registers
        assert float(cells[-1]) >= float(cells[-2]) > 0, row  # longest path >= shortest path, per element
