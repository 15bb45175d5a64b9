"""A small SmolVLM2-architecture backbone made on this machine, for SmolVLA's `vlm_model_name`.

SmolVLA builds its vision-language model from `vlm_model_name` (config, tokenizer and processor) every
time a policy is made or loaded: the real one, `HuggingFaceTB/SmolVLM2-500M-Video-Instruct`, comes from
the Hugging Face hub, which these machines cannot reach. The folder written here has the same
architecture (transformers' `SmolVLMForConditionalGeneration`: a SigLIP-style vision tower, pixel
shuffle, a Llama text model) with small dimensions and random weights, a word-level tokenizer made from
the task strings the project's protocols use (plus SmolVLM's image tokens), and SmolVLM's own processor.
It is saved with `save_pretrained`, so `--policy.vlm_model_name=FOLDER` works in `lerobot-train` and the
trained policy loads through LeRobot's factory with `HF_HUB_OFFLINE=1`. It learns nothing about
language or vision: it exercises the pipeline, not the model's quality.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessInputError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

# SmolVLM's special tokens, by the attribute names its processor and SmolVLA read from the tokenizer
IMAGE_TOKENS = {
    "fake_image_token": "<fake_token_around_image>",
    "global_image_token": "<global-img>",
    "image_token": "<image>",
    "end_of_utterance_token": "<end_of_utterance>",
}
PAD, UNK, BOS = "<pad>", "<unk>", "<|im_start|>"
MANIFEST = "harness_backbone.json"


@dataclass(frozen=True)
class BackboneSize:
    """The dimensions that matter for speed; SmolVLA's `num_vlm_layers` must not exceed `text_layers`.

    The image size is what SmolVLA resizes (with padding) each camera to: train the policy with
    `--policy.resize_imgs_with_padding=[image_size,image_size]`.
    """

    text_hidden: int = 64
    text_layers: int = 2
    text_heads: int = 4
    text_kv_heads: int = 2
    vision_hidden: int = 32
    vision_layers: int = 1
    vision_heads: int = 2
    image_size: int = 64
    patch_size: int = 16
    scale_factor: int = 2

    @property
    def image_seq_len(self) -> int:
        """Image tokens per image after the pixel shuffle (SmolVLM's formula)."""
        return (self.image_size // self.patch_size) ** 2 // self.scale_factor ** 2


def words(text: str) -> list[str]:
    """How the tokenizer splits text: lower-cased words and punctuation marks (its Whitespace pre-tokenizer)."""
    return re.findall(r"\w+|[^\w\s]", text.lower())


def build_tokenizer(tasks: list[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer whose vocabulary is the tasks' words; any other word becomes `<unk>`."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = [PAD, UNK, BOS, *IMAGE_TOKENS.values(), "<video>"]
    vocab = {token: i for i, token in enumerate(special)}
    for word in sorted({w for task in tasks for w in words(task)}):
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, unk_token=UNK, bos_token=BOS,
                                   eos_token=IMAGE_TOKENS["end_of_utterance_token"],
                                   extra_special_tokens=dict(IMAGE_TOKENS))


def build_backbone(output: Path, tasks: list[str], size: BackboneSize | None = None, seed: int = 0) -> Path:
    """Write the backbone folder (config, random weights, tokenizer, processor) and a manifest of its tasks.

    Refuses an existing non-empty folder, so a trained policy never loses the backbone it points at."""
    import torch
    from transformers import (
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
        SmolVLMVideoProcessor,
    )

    size = size or BackboneSize()
    tasks = [t.strip() for t in tasks if t.strip()]
    if not tasks:
        raise HarnessInputError(None, "--task", "the backbone needs at least one task instruction")
    if output.exists() and any(output.iterdir()):
        raise HarnessInputError(output, None, "already exists and is not empty (a policy may point at it)")
    if size.text_hidden % size.text_heads or size.text_heads % size.text_kv_heads:
        raise HarnessInputError(None, "size", "text_hidden must divide by text_heads, text_heads by text_kv_heads")
    tokenizer = build_tokenizer(tasks)
    vocab_size = len(tokenizer)
    config = SmolVLMConfig(
        vision_config={"hidden_size": size.vision_hidden, "intermediate_size": 2 * size.vision_hidden,
                       "num_hidden_layers": size.vision_layers, "num_attention_heads": size.vision_heads,
                       "image_size": size.image_size, "patch_size": size.patch_size},
        text_config={"model_type": "llama", "hidden_size": size.text_hidden,
                     "intermediate_size": 2 * size.text_hidden, "num_hidden_layers": size.text_layers,
                     "num_attention_heads": size.text_heads, "num_key_value_heads": size.text_kv_heads,
                     "head_dim": size.text_hidden // size.text_heads, "vocab_size": vocab_size,
                     "max_position_embeddings": 512, "pad_token_id": 0},
        scale_factor=size.scale_factor, image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKENS["image_token"]),
        vocab_size=vocab_size, pad_token_id=0,
    )
    torch.manual_seed(seed)
    model = SmolVLMForConditionalGeneration(config)
    edge = {"longest_edge": size.image_size}
    processor = SmolVLMProcessor(image_processor=SmolVLMImageProcessor(size=edge, max_image_size=edge),
                                 tokenizer=tokenizer, video_processor=SmolVLMVideoProcessor(),
                                 image_seq_len=size.image_seq_len)
    output.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output)
    processor.save_pretrained(output)
    manifest = {"made_by": "harness smolvla-backbone", "tasks": tasks, "seed": seed,
                "size": size.__dict__, "parameters": sum(p.numel() for p in model.parameters()),
                "vocabulary": vocab_size}
    (output / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return output


def unknown_words(backbone: Path, task: str) -> list[str]:
    """Words of `task` a backbone made here has no token for (empty for any other backbone)."""
    manifest = backbone / MANIFEST
    if not manifest.is_file():
        return []
    known = {w for t in json.loads(manifest.read_text())["tasks"] for w in words(t)}
    return [w for w in words(task) if w not in known]


SMOLVLA_BASE_CAMERAS = ("camera1", "camera2", "camera3")
JOINTS = 6


def build_tiny_smolvla_base(output: Path, backbone: Path, size: BackboneSize | None = None,
                            camera_size: tuple[int, int] = (640, 480), chunk_size: int = 10, num_steps: int = 4,
                            seed: int = 0) -> Path:
    """A SmolVLA policy folder shaped like `lerobot/smolvla_base` (state and action of 6 joints, cameras
    `camera1..camera3`), on `backbone`, with random weights and identity statistics.

    `lerobot-train` applies a `--rename_map` only when fine-tuning a pretrained policy (`--policy.path`), so
    the card's SmolVLA command needs a base to start from: this folder stands where `lerobot/smolvla_base`
    stands, and the command is otherwise the card's. `camera_size` (width, height) is the cameras' size in
    its config, which the harness renders the simulator's cameras at (the collected data's size); SmolVLA
    resizes every image to the backbone's `image_size` with padding either way."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    size = size or BackboneSize()
    if output.exists() and any(output.iterdir()):
        raise HarnessInputError(output, None, "already exists and is not empty")
    image = (3, camera_size[1], camera_size[0])
    config = SmolVLAConfig(
        input_features={"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(JOINTS,)),
                        **{f"observation.images.{cam}": PolicyFeature(type=FeatureType.VISUAL, shape=image)
                           for cam in SMOLVLA_BASE_CAMERAS}},
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(JOINTS,))},
        vlm_model_name=str(backbone.resolve()), load_vlm_weights=False, num_vlm_layers=size.text_layers,
        resize_imgs_with_padding=(size.image_size, size.image_size), chunk_size=chunk_size,
        n_action_steps=chunk_size, num_steps=num_steps, device="cpu",
    )
    torch.manual_seed(seed)
    policy = SmolVLAPolicy(config)
    stats = {"observation.state": {"mean": torch.zeros(JOINTS), "std": torch.ones(JOINTS)},
             "action": {"mean": torch.zeros(JOINTS), "std": torch.ones(JOINTS)}}
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    output.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(output)
    pre.save_pretrained(output)
    post.save_pretrained(output)
    return output
