"""A tiny ACT built from its config (no pretrained backbone, no download), saved as LeRobot does."""

from __future__ import annotations

from pathlib import Path

from harness.models.defaults import DEFAULT_START_POSE
from harness.models.protocol import JOINT_NAMES


def save_tiny_act(folder: Path, camera: str = "top", height: int = 96, width: int = 128,
                  action_mean: list[float] | None = None) -> Path:
    """The policy's action is centred on the start pose (or `action_mean`), so it holds the arm near it.

    LeRobot's policies are imported here, not at the top: 22 test modules import this one, and at the top the
    import (about 10 s: torchvision, transformers) ran in every pytest-xdist worker's collection, also where
    no selected test builds a policy."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    torch.manual_seed(0)
    image_key = f"observation.images.{camera}"
    config = ACTConfig(
        input_features={
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(6,)),
            image_key: PolicyFeature(type=FeatureType.VISUAL, shape=(3, height, width)),
        },
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(6,))},
        pretrained_backbone_weights=None,
        dim_model=32, n_heads=2, dim_feedforward=64, n_encoder_layers=1, n_decoder_layers=1,
        n_vae_encoder_layers=1, latent_dim=8, chunk_size=10, n_action_steps=10, device="cpu",
    )
    policy = ACTPolicy(config)
    pose = torch.tensor([DEFAULT_START_POSE[n] for n in JOINT_NAMES], dtype=torch.float32)
    stats = {
        "observation.state": {"mean": pose, "std": torch.full((6,), 20.0)},
        "action": {"mean": torch.tensor(action_mean) if action_mean is not None else pose,
                   "std": torch.full((6,), 1.0)},
        image_key: {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)},
    }
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    folder.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    return folder
