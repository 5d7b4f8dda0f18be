"""SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE=fused_input_norm.sglang_processors: the SGLang plugin's hook where
load_plugins never runs (the multi-tokenizer workers of `--tokenizer-worker-num > 1`).

SGLang imports this package, and each module in it, before it builds a model's multimodal processor, and
registers the BaseMultimodalProcessor subclasses it finds. Importing it installs the plugin's hook
(sglang_plugin.install); it holds no module and no processor class, so SGLang's processor for each
architecture, and the server identity checks that name it, stay SGLang's own.
"""

from ..sglang_plugin import install

install()
