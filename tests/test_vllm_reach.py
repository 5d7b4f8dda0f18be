"""scripts/vllm_reach.py against the installed vLLM (`bash scripts/test_vllm.sh` runs it in .venv-vllm): every
architecture of vLLM's registry has a row, every row that says "served" names a family (or a vllm_* module) this
package has and whose vLLM on-vs-off test exists, or the generic path for exactly the architectures
tests/test_vllm_generic.py checks, the counts add up, and an architecture the table does not know is reported
as unknown."""

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file",
)


@pytest.fixture(scope="module")
def reach():
    import vllm_reach

    return vllm_reach


@pytest.fixture(scope="module")
def rows(reach):
    return reach.reach()


def test_every_architecture_of_the_registry_has_one_row(rows):
    from vllm.model_executor.models import registry

    assert [r["architecture"] for r in rows] == list(registry._MULTIMODAL_MODELS)


def test_the_table_names_only_architectures_of_the_registry(reach):
    from vllm.model_executor.models import registry

    assert sorted(set(reach.CHECKPOINTS) - set(registry._MULTIMODAL_MODELS)) == []


def on_off_tested() -> dict[str, set[str]]:
    """The families (and vllm_* modules) whose vLLM on-vs-off test runs, per modality: images from
    tests/test_vllm_families.py's models, videos from its video models (InternVL chat, LLaVA-OV, InternVL-hf)
    tests/test_vllm_processor.py's Qwen-VL models, tests/test_vllm_copies.py's (Ovis's videos too) and
    tests/test_vllm_gemma4.py's models (its images and videos), tests/test_vllm_moondream3.py's (Moondream 3), tests/test_vllm_own.py's (Step3-VL, DeepSeek-VL2, OpenVLA, Isaac, Muse Spark's images and videos),
    tests/test_vllm_kimi.py's (Kimi-K2.5 images and video chunks, K3, K3.1), tests/test_vllm_deepseek_v4.py's
    (DeepSeek-V4 / V4.1) and tests/test_vllm_mistral.py's (Mistral-format checkpoints)."""
    import test_vllm_families
    import test_vllm_processor

    from fused_input_norm import config

    run = test_vllm_families.RUN  # the models it runs here (not skipped)
    images, videos = set(), {"vllm_internvl"} if "internvl_chat_video" in run else set()
    for model in run:
        images.add(config.kind_of({"image_processor_type": test_vllm_families.MODELS[model][3]}))
    for model, name in test_vllm_families.HF_VIDEO_PROCESSORS.items():  # LLaVA-OV's and InternVL-hf's videos
        if model in run:
            videos.add(config.video_kind_of({"video_processor_type": name}))
    if "internvl_chat" in run:  # vLLM's own InternVL processor: served by vllm_internvl
        images.add("vllm_internvl")
    images.add("vllm_deepseek_ocr")  # tests/test_vllm_deepseek_ocr.py: vLLM's own DeepSeek-OCR processor
    images.add("vllm_deepseek_vl2")  # tests/test_vllm_own.py: vLLM's own DeepSeek-VL2 processor
    images.add("vllm_moondream3")  # tests/test_vllm_moondream3.py: vLLM's own Moondream 3 processor
    images.add("vllm_step3")  # tests/test_vllm_own.py: vLLM's own Step3-VL processor
    images.add("vllm_openvla")  # tests/test_vllm_own.py: vLLM's own OpenVLA processor
    images.add("vllm_isaac")  # tests/test_vllm_own.py: vLLM's own Isaac processor
    images.add("vllm_muse_spark")  # tests/test_vllm_own.py: Muse Spark's own preprocessing, images and videos
    videos.add("vllm_muse_spark")
    images.add("vllm_mimo")  # tests/test_vllm_own.py: MiMo-V2-Omni's own preprocessing, images and videos
    videos.add("vllm_mimo")
    images.add("vllm_kimi")  # tests/test_vllm_kimi.py: vLLM's own Kimi processor (K2.5's video chunks too)
    images.add("vllm_mistral")  # tests/test_vllm_mistral.py: Mistral-format checkpoints (mistral_common's encoder)
    videos.add("vllm_kimi")
    images.add("vllm_deepseek_v4")  # tests/test_vllm_deepseek_v4.py: vLLM's own DeepSeek-V4 / V4.1 processor
    images.add("qwen2_vl")  # tests/test_vllm_processor.py: Qwen2-VL, Qwen2.5-VL, Qwen3-VL
    import test_vllm_copies  # the copies (CohereCompass, GLM-OCR, PaddleOCR-VL) and OpenCUA's, BAGEL's

    for model, (_, _, name) in test_vllm_copies.MODELS.items():
        if model not in test_vllm_copies.GENERIC:  # GLM-4V-9B's: the generic path, no family
            images.add(config.kind_of({"image_processor_type": name}))
        if model in test_vllm_copies.VIDEOS:  # Ovis's videos: each frame through its image processor
            videos.add(config.kind_of({"image_processor_type": name}))
    for model in test_vllm_processor.MODELS:
        videos.add("qwen3_vl" if model == "qwen3_vl" else "qwen2_vl")
    import test_vllm_gemma4  # Gemma 4, Gemma 4 Unified, DiffusionGemma: the gemma4 and gemma4_unified families

    images |= set(test_vllm_gemma4.FAMILY.values())
    videos |= set(test_vllm_gemma4.FAMILY.values())  # their videos too (vLLM sends the frames as images)
    import test_vllm_generic  # its models whose image processor a family now serves (LFM2-VL, MiniCPM-V 4.6 / 4.7)

    for model in test_vllm_generic.MODELS:
        if family := test_vllm_generic.family_of(model):
            images.add(family)
            if model in test_vllm_generic.FRAMES_AS_IMAGES:  # and their videos' frames, where vLLM sends them so
                videos.add(family)
    return {"images": images, "videos": videos}


# Served by the plugin but with no on-vs-off test inside vLLM yet: (modality, family). GLM-4.1V's and GLM-4.5V's
# videos (FusedHFVideoProcessor for Glm4vVideoProcessor) are tested against transformers (test_families_glm_gemma.py),
# not through vLLM's apply(). ERNIE-4.5-VL's images (Ernie4_5_VLMoeImageProcessor, tested against transformers in
# test_families_copies.py): vLLM 0.34.0's Ernie4_5_VL processing reads the checkpoints' remote-code processor
# (its "images" and "grid_thw" outputs, spatial_conv_size), which transformers' Ernie4_5_VLMoeProcessor does not
# give, so no directory in transformers' format runs through its apply() (its videos neither: tried with
# Ernie4_5_VLMoeVideoProcessor, stock vLLM fails on every request). dots3.note's (vllm_dots3_note, images and
# videos' frames): vLLM's CPU build cannot import its model package (CUDA-only FlashAttention imports), so
# tests/test_vllm_dots3_note.py compares vLLM's own Dots3NoteProcessor in-process, served and not. The test
# below fails when this set is not exactly the gaps, in either direction.
UNTESTED_IN_VLLM = {("videos", "glm4v"), ("images", "ernie4_5_vl")}
UNTESTED_IN_VLLM |= {("images", "vllm_dots3_note"), ("videos", "vllm_dots3_note")}


def test_every_served_row_names_a_family_with_its_vllm_on_off_test(rows, reach):
    from fused_input_norm import config, families

    modules = {module for served in reach.plugin_modules().values() for module in served.values()}
    tested = on_off_tested()
    served = [r for r in rows if r["status"] in ("served", "partly")]
    assert served, "no architecture served at all"
    gaps = set()
    for r in served:
        for medium in ("images", "videos"):
            server = r[medium]
            if server in ("-", "transformers", "vLLM", "mistral_common", "unknown"):
                continue
            if server == "generic":  # checked per architecture: test_generic_rows_are_the_architectures_it_tests
                continue
            # a video may be served frame by frame by an image family (Ovis's), or by a video family
            video_families = set(config.VIDEO_TYPES.values()) if medium == "videos" else set()
            exists = server in modules or server in families.FAMILIES or server in video_families
            assert exists, f"{r['architecture']}: {medium} served by {server!r}, which this package does not have"
            if server not in tested[medium]:
                gaps.add((medium, server))
    assert gaps == UNTESTED_IN_VLLM, f"served without a vLLM on-vs-off test: {sorted(gaps)}"


def test_generic_rows_are_the_architectures_it_tests(rows):
    """A row's images (videos) are "generic" exactly where tests/test_vllm_generic.py compares that architecture's
    images (videos) in vLLM, plugin on vs off, and the generic path's resize runs there (not UNSERVED /
    VIDEO_UNSERVED), or where tests/test_vllm_copies.py does so for a vLLM-defined class (its GENERIC: GLM-4V-9B's
    images, MiniMax-M3's images and videos);
    those test_vllm_generic lists as UNSERVED, or whose videos it does not compare, are not served and say why."""
    import test_vllm_copies
    import test_vllm_generic as tested

    by_arch = {r["architecture"]: r for r in rows}
    generic = {medium: {r["architecture"] for r in rows if r[medium] == "generic"} for medium in ("images", "videos")}
    copies = {test_vllm_copies.MODELS[model][0] for model in test_vllm_copies.GENERIC}
    assert copies == {"GLM4VForCausalLM", "MiniMaxM3SparseForConditionalGeneration"}, copies
    assert generic["images"] == copies | {
        spec["arch"] for model, spec in tested.MODELS.items() if tested.generic_serves(model)
    }
    videos = {spec["arch"] for model, spec in tested.MODELS.items() if tested.generic_serves(model, video=True)}
    videos |= {
        test_vllm_copies.MODELS[model][0] for model in test_vllm_copies.GENERIC if model in test_vllm_copies.VIDEOS
    }
    assert "MiniMaxM3SparseForConditionalGeneration" in videos
    assert generic["videos"] == videos
    for model in tested.UNSERVED:  # images not served: the row is "not" (or "partly", where videos are served)
        r = by_arch[tested.MODELS[model]["arch"]]
        if not tested.family_of(model):  # (a family serves it once one lands: its row says so)
            assert r["images"] == "transformers" and "its resize never runs" in r["why"], r
    for model, why in test_vllm_copies.VIDEO_UNSERVED.items():
        r = by_arch[test_vllm_copies.MODELS[model][0]]
        assert (r["images"], r["videos"], r["status"]) == ("generic", "vLLM", "partly") and why in r["why"], r
    for model, why in tested.NO_VIDEOS.items():
        r = by_arch[tested.MODELS[model]["arch"]]
        if tested.family_of(model) or tested.family_of(model, video=True):
            continue
        assert r["status"] == "partly" and why in r["why"], r


def test_a_transformers_backend_class_without_a_vllm_test_is_not_served(reach):
    """The generic path would stand in for MuseGlimmer's image and video processors (TorchvisionBackend and the
    video backend), but a row counts them served only where test_vllm_generic checks the architecture: without
    that, "not", and why."""
    arch, module, cls = "MuseGlimmerForConditionalGeneration", "muse_glimmer", "MuseGlimmerForCausalLM"
    unchecked = reach.row(arch, module, cls, {})
    assert (unchecked["images"], unchecked["status"]) == ("transformers", "not")
    assert "the generic path stands in, with no vLLM test" in unchecked["why"], unchecked["why"]
    generic = {"images": {arch: ""}, "videos": {arch: ""}}
    checked = reach.row(arch, module, cls, {}, generic)
    assert (checked["images"], checked["videos"], checked["status"]) == ("generic", "generic", "served")


def test_known_rows(rows):
    """A few rows whose answer is known from the tests that run those models in vLLM."""
    by_arch = {r["architecture"]: r for r in rows}
    assert by_arch["Qwen2VLForConditionalGeneration"]["images"] == "qwen2_vl"
    assert by_arch["InternVLChatModel"]["images"] == "vllm_internvl"
    assert by_arch["PaliGemmaForConditionalGeneration"]["status"] == "served"
    # The Mistral format: served by vllm_mistral, with OpenCV's Intel IPP on or off (tests/test_vllm_mistral.py)
    assert by_arch["PixtralForConditionalGeneration"]["images"] == "vllm_mistral"
    assert by_arch["PixtralForConditionalGeneration"]["status"] == "served"
    assert by_arch["WhisperForConditionalGeneration"]["status"] == "no images"


def test_counts_add_up(rows, reach):
    c = reach.counts(rows)
    assert c["architectures"] == len(rows)
    image_capable = [r for r in rows if r["status"] != "no images"]
    assert c["image_capable"] == len(image_capable) == c["served"] + c["partly"] + c["not"] + c["unknown"]
    assert {r["status"] for r in image_capable} <= set(reach.STATUSES)
    for r in image_capable:
        assert {"image", "video"} & set(r["media"]), r
        assert r["status"] == "served" or r["why"], f"{r['architecture']}: {r['status']} without a reason"
    line = reach.summary_line(rows)
    for status in reach.STATUSES:
        assert f"{c[status]} {status}" in line, line


def test_an_architecture_the_table_does_not_know_is_unknown(reach):
    fake = {"FakeVLForConditionalGeneration": ("qwen2_vl", "Qwen2VLForConditionalGeneration")}
    (r,) = reach.reach(fake)
    assert r["architecture"] == "FakeVLForConditionalGeneration"
    assert r["status"] == "unknown"
    assert r["why"] == "unknown (not in the table)"
    assert reach.counts([r])["unknown"] == 1


def test_a_new_family_shows_up_without_an_edit(reach, monkeypatch):
    """A family registered for LLaVA-NeXT's image processor (none is today) makes its architectures served."""
    from fused_input_norm import families

    monkeypatch.setitem(families.TYPES, "LlavaNextImageProcessor", "llava_next")
    (r,) = reach.reach({"LlavaNextForConditionalGeneration": ("llava_next", "LlavaNextForConditionalGeneration")})
    assert (r["images"], r["status"]) == ("llava_next", "served")


def test_a_processor_vllm_builds_itself_is_served_by_the_module_that_wraps_it(reach):
    """Processors vLLM builds outside cached_processor_from_config: OpenCUA's (vllm_plugin.BUILT_ELSEWHERE,
    run plugin on vs off by test_vllm_copies) is served by its family; LLaVA-OneVision-2's is reached the same
    way but has no vLLM test, so its row says not, and why; H2OVL's (vLLM's own class) by the vllm_* module
    that wraps it (served_in_place), and without one the row says why not; NanoNemotronVL's images and videos
    by vllm_internvl."""
    from vllm.model_executor.models import registry

    def row(architecture: str, served_in_place: dict) -> dict:
        return reach.row(architecture, *registry._MULTIMODAL_MODELS[architecture], served_in_place)

    opencua = row("OpenCUAForConditionalGeneration", {})
    assert (opencua["images"], opencua["status"]) == ("qwen2_vl", "served"), opencua
    ov2 = row("LlavaOnevision2ForConditionalGeneration", {})
    assert ov2["images"] == "transformers" and "BUILT_ELSEWHERE), with no vLLM test" in ov2["why"], ov2
    assert row("H2OVLChatModel", {})["status"] == "not"
    h2ovl = row("H2OVLChatModel", {"images": {"H2OVLImageProcessor": "vllm_internvl"}})
    # H2OVL's model class has InternVL's video placeholder, but its processing info takes images only
    assert h2ovl["media"] == ["image"], h2ovl
    assert (h2ovl["images"], h2ovl["videos"], h2ovl["status"]) == ("vllm_internvl", "-", "served"), h2ovl
    # NanoNemotronVLProcessor (built through init_processor): its images and videos by vllm_internvl's VIDEO_CLASSES
    for architecture in ("NemotronH_Nano_VL_V2", "NemotronH_Omni_Reasoning_V3"):
        nano = row(architecture, reach.plugin_modules())
        assert (nano["images"], nano["videos"], nano["status"]) == ("vllm_internvl",) * 2 + ("served",), nano


def test_a_vllm_class_on_a_transformers_backend_is_generic_only_with_its_vllm_test(reach, monkeypatch):
    """GLM-4V-9B's GLM4VImageProcessorFast (vLLM's own, on transformers' TorchvisionBackend, built outside the
    processor cache: BUILT_ELSEWHERE) is served by the generic path, run by test_vllm_copies; without that test
    the row says not, and why."""
    from vllm.model_executor.models import registry

    glm4v = reach.row("GLM4VForCausalLM", *registry._MULTIMODAL_MODELS["GLM4VForCausalLM"], {})
    assert (glm4v["images"], glm4v["built"], glm4v["status"]) == ("generic", "elsewhere", "served"), glm4v
    monkeypatch.setattr(reach, "generic_copies", dict)
    untested = reach.row("GLM4VForCausalLM", *registry._MULTIMODAL_MODELS["GLM4VForCausalLM"], {})
    assert (untested["images"], untested["status"]) == ("vLLM", "not"), untested
    assert "the generic path stands in (BUILT_ELSEWHERE), with no vLLM test" in untested["why"], untested
